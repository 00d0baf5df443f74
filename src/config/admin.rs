//! `[admin]`: where the admin API listens, how many connections it takes, and the bearer
//! token that its calls changing state (and, with `protect_reads`, its views) need
//! (docs/config.md, "`[admin]`").

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
    let token = match (&raw.token, &raw.token_file) {
        (Some(_), Some(file)) => {
            diag.error(
                file.span(),
                "`token` and `token_file` exclude each other: set one",
            );
            None
        }
        (Some(token), None) => diag.check(token.span(), checked(token.get_ref())).map(Some),
        (None, Some(file)) => read(file, base, diag).map(Some),
        (None, None) => Some(None),
    };
    let protect_reads = raw.protect_reads.as_ref().is_some_and(|p| *p.get_ref());
    if let (Some(protect), Some(None)) = (&raw.protect_reads, &token) {
        if *protect.get_ref() {
            diag.error(
                protect.span(),
                "`protect_reads` needs `token` or `token_file`",
            );
            return None;
        }
    }
    let max_connections = max_connections(raw.max_connections.as_ref(), diag);
    Some(Admin {
        listen: listen?,
        token: token?,
        protect_reads,
        max_connections: max_connections?,
    })
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
