//! nginx's variables in configured text ("Variables" in docs/config.md): a `return`'s
//! `location` and `body` written as `https://$host$request_uri` are parsed once, when
//! the file is read, into literal pieces and variables, and filled in per request from
//! a [`Request`].
//!
//! Pure: the caller gathers what a request says; nothing here reads a socket or a clock.
//! A crate of its own, below the limiter, so that nothing here can reach the gateway.

#![forbid(unsafe_code)]
// clippy.toml's clock reads (found from the workspace root): the caller passes the time.
#![deny(clippy::disallowed_methods)]

use std::borrow::Cow;
use std::io::Write as _;
use std::net::IpAddr;

use http::{HeaderMap, HeaderName};

/// One variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Var {
    /// `$scheme`: `http` or `https`.
    Scheme,
    /// `$host`: the request's host name, lower case, without port or trailing dot; the
    /// site's first name when the request names no host.
    Host,
    /// `$server_name`: the first name of the site that answers.
    ServerName,
    /// `$server_port`: the port the request arrived on.
    ServerPort,
    /// `$request_uri`: the path and query as the client sent them.
    RequestUri,
    /// `$uri`: the normalized path (decoded, `.` and `..` resolved, slashes merged).
    Uri,
    /// `$args`: the query, without `?`.
    Args,
    /// `$remote_addr`: the client's address (after `[real_ip]`).
    RemoteAddr,
    /// `$remote_port`: the port of the peer the request came from.
    RemotePort,
    /// `$request_id`: 32 hex digits, random, one per request.
    RequestId,
    /// `$http_NAME`: a request header (`_` for `-`); several lines are joined with `, `.
    Header(HeaderName),
    /// `$1` to `$9`: a capture of the location's regex.
    Capture(usize),
}

/// The variables, as `docs/config.md` lists them (for error messages).
pub const NAMES: &str =
    "$scheme, $host, $server_name, $server_port, $request_uri, $uri, $args, $remote_addr, $remote_port, \
     $request_id, $http_NAME, $1 to $9";

/// A piece of a [`VarText`]: literal text, or a variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(Box<str>),
    Var(Var),
}

/// Text with variables in it, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VarText {
    pieces: Box<[Piece]>,
}

/// A variable that is not one of [`NAMES`], or `$` at the end: the message, and the byte
/// offset of the `$` in the text.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownVar {
    pub at: usize,
    pub message: String,
}

impl VarText {
    /// Parses `text`: `$name` or `${name}` is a variable, `$$` is no escape (nginx has
    /// none either), every other byte is literal.
    pub fn parse(text: &str) -> Result<VarText, UnknownVar> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(dollar) = rest.find('$') {
            literal.push_str(&rest[..dollar]);
            let at = text.len() - rest.len() + dollar;
            let (name, after) = name_after(&rest[dollar + 1..]).ok_or_else(|| UnknownVar {
                at,
                message: format!("a variable needs a name after `$`: expected one of {NAMES}"),
            })?;
            let var = var(name).ok_or_else(|| UnknownVar {
                at,
                message: format!("unknown variable `${name}`: expected one of {NAMES}"),
            })?;
            if !literal.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut literal).into()));
            }
            pieces.push(Piece::Var(var));
            rest = after;
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal.into()));
        }
        Ok(VarText {
            pieces: pieces.into(),
        })
    }

    /// The text when it has no variable.
    pub fn as_literal(&self) -> Option<&str> {
        match &*self.pieces {
            [] => Some(""),
            [Piece::Text(text)] => Some(text),
            _ => None,
        }
    }

    /// The highest capture it uses (`$2`: 2), 0 for none.
    pub fn max_capture(&self) -> usize {
        self.vars()
            .filter_map(|var| match var {
                Var::Capture(n) => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Its pieces, in order, for a caller that writes each its own way.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The text before the first literal `c` and, when there is one, the text after it
    /// (a variable's value never splits it).
    pub fn split_once(&self, c: char) -> (VarText, Option<VarText>) {
        let mut before = Vec::new();
        let mut pieces = self.pieces.iter();
        for piece in pieces.by_ref() {
            let Piece::Text(text) = piece else {
                before.push(piece.clone());
                continue;
            };
            let Some((head, tail)) = text.split_once(c) else {
                before.push(piece.clone());
                continue;
            };
            if !head.is_empty() {
                before.push(Piece::Text(head.into()));
            }
            let mut after = Vec::new();
            if !tail.is_empty() {
                after.push(Piece::Text(tail.into()));
            }
            after.extend(pieces.cloned());
            let after = VarText {
                pieces: after.into(),
            };
            return (
                VarText {
                    pieces: before.into(),
                },
                Some(after),
            );
        }
        (self.clone(), None)
    }

    fn vars(&self) -> impl Iterator<Item = &Var> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Var(var) => Some(var),
            Piece::Text(_) => None,
        })
    }

    /// Appends the text with each variable filled in from `req` (an unset one is empty,
    /// as in nginx).
    pub fn render(&self, req: &Request<'_>, out: &mut Vec<u8>) {
        for piece in self.pieces.iter() {
            match piece {
                Piece::Text(text) => out.extend_from_slice(text.as_bytes()),
                Piece::Var(var) => req.append(var, out),
            }
        }
    }
}

impl std::fmt::Display for VarText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for piece in self.pieces.iter() {
            match piece {
                Piece::Text(text) => f.write_str(text)?,
                Piece::Var(Var::Header(name)) => {
                    write!(f, "${{http_{}}}", name.as_str().replace('-', "_"))?
                }
                Piece::Var(Var::Capture(n)) => write!(f, "${n}")?,
                Piece::Var(var) => write!(f, "${{{}}}", simple_name(var))?,
            }
        }
        Ok(())
    }
}

/// The name after a `$` and the text after it: `${name}` or the longest run of letters,
/// digits and `_` (a digit alone: a capture).
fn name_after(text: &str) -> Option<(&str, &str)> {
    if let Some(braced) = text.strip_prefix('{') {
        let end = braced.find('}')?;
        return (end > 0).then(|| (&braced[..end], &braced[end + 1..]));
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        return Some(text.split_at(1));
    }
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| text.split_at(end))
}

const SIMPLE: [(&str, Var); 10] = [
    ("scheme", Var::Scheme),
    ("host", Var::Host),
    ("server_name", Var::ServerName),
    ("server_port", Var::ServerPort),
    ("request_uri", Var::RequestUri),
    ("uri", Var::Uri),
    ("args", Var::Args),
    ("remote_addr", Var::RemoteAddr),
    ("remote_port", Var::RemotePort),
    ("request_id", Var::RequestId),
];

fn var(name: &str) -> Option<Var> {
    if let Some((_, var)) = SIMPLE.iter().find(|(known, _)| *known == name) {
        return Some(var.clone());
    }
    if let Some(header) = name.strip_prefix("http_") {
        let header = header.replace('_', "-").to_ascii_lowercase();
        return HeaderName::from_bytes(header.as_bytes())
            .ok()
            .map(Var::Header);
    }
    match name.as_bytes() {
        [digit @ b'1'..=b'9'] => Some(Var::Capture(usize::from(digit - b'0'))),
        _ => None,
    }
}

fn simple_name(var: &Var) -> &'static str {
    SIMPLE
        .iter()
        .find(|(_, known)| known == var)
        .map_or("", |(name, _)| name)
}

/// A host as `$host` and site names mean it: lower case, without a port (an IPv6 literal
/// keeps its brackets) and without a trailing dot. `Example.com.:8080` → `example.com`;
/// `[::1]:80` → `[::1]`.
pub fn host_key(host: &str) -> Cow<'_, str> {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.find(']').map_or(host, |end| &host[..end + 2]),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    }
}

/// What a request says, for filling in variables.
pub struct Request<'a> {
    pub https: bool,
    /// As sent: the absolute-form target's authority, else the `Host` header.
    pub host: Option<&'a str>,
    /// The first name of the site that answers (`""` without names).
    pub server_name: &'a str,
    pub server_port: u16,
    /// The target's path and query as sent.
    pub request_uri: &'a str,
    /// The normalized path.
    pub uri: &'a [u8],
    pub args: Option<&'a str>,
    pub remote_addr: IpAddr,
    pub remote_port: u16,
    /// The request's id (`$request_id`), made by the caller.
    pub request_id: &'a str,
    pub headers: &'a HeaderMap,
    /// The location regex's captures (`$1` is `captures[1]`), when it has any.
    pub captures: Option<&'a regex::bytes::Captures<'a>>,
}

impl Request<'_> {
    /// Appends `var`'s value (nothing for an unset one).
    pub fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::Scheme => out.extend_from_slice(if self.https { b"https" } else { b"http" }),
            Var::Host => match self.host {
                Some(host) => out.extend_from_slice(host_key(host).as_bytes()),
                None => out.extend_from_slice(self.server_name.as_bytes()),
            },
            Var::ServerName => out.extend_from_slice(self.server_name.as_bytes()),
            Var::ServerPort => push_number(out, self.server_port),
            Var::RequestUri => out.extend_from_slice(self.request_uri.as_bytes()),
            Var::Uri => out.extend_from_slice(self.uri),
            Var::Args => out.extend_from_slice(self.args.unwrap_or("").as_bytes()),
            Var::RemoteAddr => push_number(out, self.remote_addr),
            Var::RemotePort => push_number(out, self.remote_port),
            Var::RequestId => out.extend_from_slice(self.request_id.as_bytes()),
            Var::Header(name) => {
                for (i, value) in self.headers.get_all(name).iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b", ");
                    }
                    out.extend_from_slice(value.as_bytes());
                }
            }
            Var::Capture(n) => {
                let group = self.captures.and_then(|c| c.get(*n));
                out.extend_from_slice(group.map_or(&[][..], |m| m.as_bytes()));
            }
        }
    }
}

fn push_number(out: &mut Vec<u8>, value: impl std::fmt::Display) {
    // Writing to a `Vec` cannot fail.
    let _ = write!(out, "{value}");
}

/// `bytes` with every byte that `keep` refuses written as `%XX`.
pub fn percent_encode(bytes: &[u8], keep: impl Fn(u8) -> bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    percent_encode_into(&mut out, bytes, keep);
    out
}

/// [`percent_encode`], appended to `out`.
pub fn percent_encode_into(out: &mut Vec<u8>, bytes: &[u8], keep: impl Fn(u8) -> bool) {
    for &b in bytes {
        if keep(b) {
            out.push(b);
        } else {
            push_escaped(out, b);
        }
    }
}

/// Appends `b` as `%XX` (upper-case hex).
pub fn push_escaped(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
}

/// `bytes` made fit for a header value such as `Location`: every byte that is not
/// visible ASCII is percent-encoded, so a decoded `$uri` holding `%0d%0a` cannot add a
/// header line (nginx writes it raw).
pub fn escape_for_header(bytes: &[u8]) -> Vec<u8> {
    percent_encode(bytes, |b| (0x21..0x7f).contains(&b))
}

#[cfg(test)]
mod tests;
