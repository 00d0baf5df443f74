//! nginx's variables ("Variables" in docs/config.md), the one language of `$…` in
//! configured text: a zone's `key`, header rules, a `return`'s `location` and `body`.
//! Text such as `https://$host$request_uri` is parsed once, when the file is read, into
//! literal pieces and [`Var`]s, and filled in per request from a [`Request`], the one view
//! of a request that every caller fills in. Each variable's meaning is one arm of
//! [`Request::append`], so `$host` is the same thing in a key as in a redirect.
//!
//! Pure: the caller gathers what a request says; nothing here reads a socket or a clock.
//! A crate of its own, below the limiter (whose key templates hold a [`VarText`]), so
//! that nothing here can reach the gateway.
//!
//! Layout: this file is the language (the variables, the parser, the text and its
//! printing, and the percent-encoding callers apply to values); `request.rs` is the
//! request view and the meaning of each variable; `map.rs` is nginx's `map`, the
//! variables a configuration defines.

#![forbid(unsafe_code)]
// clippy.toml's clock reads (found from the workspace root): the caller passes the time.
#![deny(clippy::disallowed_methods)]

mod claims;
mod credentials;
mod handshake;
mod map;
mod request;

pub use claims::Claims;
pub use credentials::{credentials, Credentials, MAX_DECODED as MAX_CREDENTIALS};
pub use handshake::Handshake;
pub use map::{Key, Map};
pub use request::{binary_addr, cookie, host_key, Request};

use std::sync::Arc;

use http::HeaderName;

/// One variable. Its value for a request is [`Request::append`]'s.
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
    /// `$request_method`: `GET`, `POST`, … as sent.
    RequestMethod,
    /// `$request_uri`: the path and query as the client sent them.
    RequestUri,
    /// `$uri`: the normalized path (decoded, `.` and `..` resolved, slashes merged).
    Uri,
    /// `$args`: the query, without `?`.
    Args,
    /// `$arg_NAME`: the first query argument called `NAME` (any case), as sent (not
    /// decoded).
    Arg(Box<str>),
    /// `$remote_addr`: the client's address (after `[real_ip]`), as text.
    RemoteAddr,
    /// `$binary_remote_addr`: the client's address as 4 or 16 bytes (a zone key masks
    /// it to the zone's prefix).
    BinaryRemoteAddr,
    /// `$remote_port`: the port of the peer the request came from.
    RemotePort,
    /// `$remote_user`: the user name of an `Authorization: Basic` header, whether or not
    /// its password was checked (nginx's meaning); empty without one.
    RemoteUser,
    /// `$request_id`: 32 hex digits, random, one per request.
    RequestId,
    /// `$http_NAME`: a request header (`_` for `-`); several lines are joined with `, `.
    Header(HeaderName),
    /// `$cookie_NAME`: the value of the first cookie called `NAME` (any case).
    Cookie(Box<str>),
    /// `$jwt_claim_NAME`: the claim `NAME` of the request's verified token ([`Claims`]);
    /// empty without one.
    JwtClaim(Box<str>),
    /// `$ssl_client_verify`: `NONE`, `SUCCESS` or `FAILED:reason` on a TLS connection
    /// ([`Handshake`]); empty on a plain one.
    SslClientVerify,
    /// `$ssl_client_s_dn`: the verified client certificate's subject (RFC 2253).
    SslClientSDn,
    /// `$ssl_client_fingerprint`: the verified client certificate's SHA-1, hex.
    SslClientFingerprint,
    /// `$ja4`: the JA4 fingerprint of the connection's TLS ClientHello.
    Ja4,
    /// `$1` to `$9`: a capture of the location's regex (in a map's value: of its regex
    /// key, whose named groups are captures too).
    Capture(usize),
    /// `$NAME` of a `[maps.NAME]`: the value it selects.
    Map(Arc<Map>),
}

/// The variables, as `docs/config.md` lists them (for error messages).
pub const NAMES: &str =
    "$scheme, $host, $server_name, $server_port, $request_method, $request_uri, $uri, $args, \
     $arg_NAME, $remote_addr, $binary_remote_addr, $remote_port, $remote_user, $request_id, $http_NAME, \
     $cookie_NAME, $jwt_claim_NAME, $ssl_client_verify, $ssl_client_s_dn, $ssl_client_fingerprint, \
     $ja4, $1 to $9";

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

/// A variable that is not one of [`NAMES`] (or one the place refuses), or `$` at the end:
/// the message, and the byte offset of the `$` in the text.
#[derive(Debug, PartialEq, Eq)]
pub struct UnknownVar {
    pub at: usize,
    pub message: String,
}

impl VarText {
    /// Parses `text`: `$name` or `${name}` is a variable, `$$` is no escape (nginx has
    /// none either), every other byte is literal.
    pub fn parse(text: &str) -> Result<VarText, UnknownVar> {
        VarText::parse_with(text, |_| None, |_| None)
    }

    /// [`VarText::parse`], where `refuse` says why a variable has no place in this text
    /// (`$request_id` in a zone key): that variable is then an error at its `$`.
    pub fn parse_refusing(
        text: &str,
        refuse: impl Fn(&Var) -> Option<String>,
    ) -> Result<VarText, UnknownVar> {
        VarText::parse_with(text, |_| None, refuse)
    }

    /// [`VarText::parse_refusing`], where `defined` gives the variables a configuration
    /// defines ([`Var::Map`], a regex key's named groups) by name: a name that is no
    /// built-in variable is looked up there. `refuse` sees every variable a map reads
    /// too, so a map cannot bring in what the place refuses.
    pub fn parse_with(
        text: &str,
        defined: impl Fn(&str) -> Option<Var>,
        refuse: impl Fn(&Var) -> Option<String>,
    ) -> Result<VarText, UnknownVar> {
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
            let var = var(name)
                .or_else(|| defined(name))
                .ok_or_else(|| UnknownVar {
                    at,
                    message: format!(
                        "unknown variable `${name}`: expected one of {NAMES}, or a `[maps.NAME]`"
                    ),
                })?;
            if let Some(message) = refused(&var, &refuse) {
                return Err(UnknownVar { at, message });
            }
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

    /// Text of these pieces, as they are (a caller that builds one without parsing).
    pub fn from_pieces(pieces: Vec<Piece>) -> VarText {
        VarText {
            pieces: pieces.into(),
        }
    }

    /// The text when it has no variable.
    pub fn as_literal(&self) -> Option<&str> {
        match &*self.pieces {
            [] => Some(""),
            [Piece::Text(text)] => Some(text),
            _ => None,
        }
    }

    /// Whether `f` holds for a variable it uses, or one a map it uses reads (a regex key's
    /// own captures aside): `$host` in a map's source is read by every text that uses it.
    pub fn uses(&self, f: impl Fn(&Var) -> bool) -> bool {
        let mut found = false;
        for var in self.vars() {
            match var {
                Var::Map(map) => map.visit_outer(&mut |var| found |= f(var)),
                var => found |= f(var),
            }
        }
        found
    }

    /// The highest capture it uses itself (`$2`: 2), 0 for none; a map's source may use
    /// the location's too ([`VarText::uses`]).
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
                Piece::Var(Var::Arg(name)) => write!(f, "${{arg_{name}}}")?,
                Piece::Var(Var::Cookie(name)) => write!(f, "${{cookie_{name}}}")?,
                Piece::Var(Var::JwtClaim(name)) => write!(f, "${{jwt_claim_{name}}}")?,
                Piece::Var(Var::Capture(n)) => write!(f, "${n}")?,
                Piece::Var(Var::Map(map)) => write!(f, "${{{}}}", map.name())?,
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

const SIMPLE: [(&str, Var); 17] = [
    ("scheme", Var::Scheme),
    ("host", Var::Host),
    ("server_name", Var::ServerName),
    ("server_port", Var::ServerPort),
    ("request_method", Var::RequestMethod),
    ("request_uri", Var::RequestUri),
    ("uri", Var::Uri),
    ("args", Var::Args),
    ("remote_addr", Var::RemoteAddr),
    ("binary_remote_addr", Var::BinaryRemoteAddr),
    ("remote_port", Var::RemotePort),
    ("remote_user", Var::RemoteUser),
    ("request_id", Var::RequestId),
    ("ssl_client_verify", Var::SslClientVerify),
    ("ssl_client_s_dn", Var::SslClientSDn),
    ("ssl_client_fingerprint", Var::SslClientFingerprint),
    ("ja4", Var::Ja4),
];

/// Why `var` (or a variable a map `var` reads) is refused, as `refuse` says.
fn refused(var: &Var, refuse: &impl Fn(&Var) -> Option<String>) -> Option<String> {
    let Var::Map(map) = var else {
        return refuse(var);
    };
    let mut why = refuse(var);
    map.visit_outer(&mut |inner| {
        if why.is_none() {
            why = refuse(inner).map(|why| format!("`${}` is a map that reads: {why}", map.name()));
        }
    });
    why
}

/// Whether `name` (without `$`) is a variable of this crate: a map may not take it.
pub fn is_builtin(name: &str) -> bool {
    var(name).is_some()
}

fn var(name: &str) -> Option<Var> {
    if let Some((_, var)) = SIMPLE.iter().find(|(known, _)| *known == name) {
        return Some(var.clone());
    }
    // A name after the prefix: `$arg_` alone is no variable.
    let named = |prefix: &str| name.strip_prefix(prefix).filter(|rest| !rest.is_empty());
    if let Some(header) = named("http_") {
        let header = header.replace('_', "-").to_ascii_lowercase();
        return HeaderName::from_bytes(header.as_bytes())
            .ok()
            .map(Var::Header);
    }
    if let Some(arg) = named("arg_") {
        return Some(Var::Arg(arg.into()));
    }
    if let Some(cookie) = named("cookie_") {
        return Some(Var::Cookie(cookie.into()));
    }
    if let Some(claim) = named("jwt_claim_") {
        return Some(Var::JwtClaim(claim.into()));
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
