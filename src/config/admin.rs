//! `[admin]`: where the admin API listens, how many connections it takes, and the bearer
//! token that its calls changing state (and, with `protect_reads`, its views) need
//! (docs/config.md, "`[admin]`"): inline, from a file, or from an environment variable.

use std::path::Path;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{RawAdmin, Span};
use super::{values, Admin, AdminToken};

/// The fewest characters a token may have.
const MIN_TOKEN: usize = 16;
/// The most: it travels in a request header.
const MAX_TOKEN: usize = 1024;
/// `max_connections`: a dashboard and a few scrapers need a handful; each one is a file
/// descriptor the data plane does not get (`server/descriptors.rs`).
const CONNECTIONS: std::ops::RangeInclusive<i64> = 1..=1024;
const DEFAULT_CONNECTIONS: usize = 64;

pub(super) fn admin(
    raw: RawAdmin,
    span: &Span,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Admin> {
    let listen = diag
        .required(raw.listen.as_ref(), span, "listen")
        .and_then(|listen| diag.check(listen.span(), values::listen_addr(listen.get_ref())));
    if let (Some(addr), Some(written)) = (listen, raw.listen.as_ref()) {
        diag.listed(&written.span(), addr);
    }
    let token = token(&raw, base, diag);
    let protect_reads = raw.protect_reads.as_ref().is_some_and(|p| *p.get_ref());
    if let (Some(protect), Some(None)) = (&raw.protect_reads, &token) {
        if *protect.get_ref() {
            let message = if raw.token_env.is_some() {
                "`protect_reads` needs a token, and `token_env` names a variable that is not set"
            } else {
                "`protect_reads` needs `token`, `token_file` or `token_env`"
            };
            diag.error(protect.span(), message);
            return None;
        }
    }
    let explain = raw.explain.as_ref().is_some_and(|e| *e.get_ref());
    if let (Some(at), Some(None)) = (&raw.explain, &token) {
        if explain {
            let message = "`explain` needs a token (`token`, `token_file`, or `token_env` naming a variable that is set): a request asks with it";
            diag.error(at.span(), message);
            return None;
        }
    }
    let max_connections = max_connections(raw.max_connections.as_ref(), diag);
    Some(Admin {
        listen: listen?,
        token: token?,
        protect_reads,
        max_connections: max_connections?,
        explain,
    })
}

/// The token from whichever of `token`, `token_file` and `token_env` is set (at most
/// one may be); `Some(None)` when there is none.
fn token(raw: &RawAdmin, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Option<AdminToken>> {
    let given = [&raw.token, &raw.token_file, &raw.token_env];
    let mut set = given.iter().filter_map(|key| key.as_ref());
    if let (Some(_), Some(second)) = (set.next(), set.next()) {
        diag.error(
            second.span(),
            "`token`, `token_file` and `token_env` exclude each other: set one",
        );
        return None;
    }
    if let Some(token) = &raw.token {
        return diag.check(token.span(), checked(token.get_ref())).map(Some);
    }
    if let Some(file) = &raw.token_file {
        return read(file, base, diag).map(Some);
    }
    let Some(name) = &raw.token_env else {
        return Some(None);
    };
    let value = std::env::var_os(name.get_ref());
    match from_env(name.get_ref(), value) {
        FromEnv::Token(token) => Some(Some(token)),
        FromEnv::Unset(warning) => {
            diag.warn(name.span(), warning);
            Some(None)
        }
        FromEnv::Invalid(error) => {
            diag.error(name.span(), error);
            None
        }
    }
}

/// What `token_env = "NAME"` gives, the variable's value being `value`.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FromEnv {
    Token(AdminToken),
    /// Unset or empty: no token, so the admin API serves its views and refuses every
    /// call that changes state (403), as without any token key. Said as a warning so
    /// that a file shipped with `token_env` starts on a machine that has not set it.
    Unset(String),
    Invalid(String),
}

pub(super) fn from_env(name: &str, value: Option<std::ffi::OsString>) -> FromEnv {
    let well_named = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !well_named {
        return FromEnv::Invalid(format!(
            "invalid token_env {name:?}: expected an environment variable's name (letters, digits and `_`, not starting with a digit)"
        ));
    }
    let Some(value) = value.filter(|value| !value.is_empty()) else {
        return FromEnv::Unset(format!(
            "`token_env`: {name} is not set, so the admin API has no token: it serves its views and refuses every call that changes state (403) until {name} is set and tollgate restarted"
        ));
    };
    let Some(text) = value.to_str() else {
        return FromEnv::Invalid(format!("{name}: an admin token must be ASCII"));
    };
    match checked(text) {
        Ok(token) => FromEnv::Token(token),
        Err(problem) => FromEnv::Invalid(format!("{name}: {problem}")),
    }
}

fn max_connections(value: Option<&Spanned<i64>>, diag: &mut Diagnostics<'_>) -> Option<usize> {
    let Some(value) = value else {
        return Some(DEFAULT_CONNECTIONS);
    };
    let n = *value.get_ref();
    if CONNECTIONS.contains(&n) {
        return usize::try_from(n).ok();
    }
    let (low, high) = (CONNECTIONS.start(), CONNECTIONS.end());
    let message =
        format!("invalid max_connections {n}: expected a whole number from {low} to {high}");
    diag.error(value.span(), message);
    None
}

/// The token of `token_file` (relative to `base`), one line; a trailing newline is
/// not part of it.
fn read(file: &Spanned<String>, base: &Path, diag: &mut Diagnostics<'_>) -> Option<AdminToken> {
    let path = base.join(file.get_ref());
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) => {
            let message = format!("cannot read the admin token file {}: {err}", path.display());
            diag.error(file.span(), message);
            return None;
        }
    };
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let token = checked(line).map_err(|problem| format!("{}: {problem}", path.display()));
    diag.check(file.span(), token)
}

/// A token: 16 to 1024 visible ASCII characters (no spaces), so that it fits a header
/// as written and is not guessed.
fn checked(text: &str) -> Result<AdminToken, String> {
    let visible = text.bytes().all(|b| b.is_ascii_graphic());
    if (MIN_TOKEN..=MAX_TOKEN).contains(&text.len()) && visible {
        return Ok(AdminToken(text.to_owned()));
    }
    Err(format!(
        "an admin token must be {MIN_TOKEN} to {MAX_TOKEN} visible ASCII characters without spaces (e.g. the output of `openssl rand -hex 32`)"
    ))
}
