//! The request as variables read it, and what each variable means: one arm of
//! [`Request::append`] per variable, the same for a zone key, a header rule and a
//! `return`.

use std::borrow::Cow;
use std::io::Write as _;
use std::net::IpAddr;

use http::{HeaderMap, Method};

use crate::Var;

/// What a request says, for filling in variables: borrowed, built by the caller once per
/// use (the limit phase for its keys, the answer for its texts). Nothing here costs more
/// than a borrow: a variable's value is worked out only when a text asks for it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub https: bool,
    pub method: &'a Method,
    /// As sent: the absolute-form target's authority, else the `Host` header. A caller
    /// whose texts never read `$host` may leave it out (a header-map search saved).
    pub host: Option<&'a str>,
    /// The first name of the site that answers (`""` without names).
    pub server_name: &'a str,
    pub server_port: u16,
    /// The target's path and query as sent.
    pub request_uri: &'a str,
    /// The normalized path.
    pub uri: &'a [u8],
    pub args: Option<&'a str>,
    /// The client: after realip, canonical (an IPv4-mapped IPv6 address as IPv4).
    pub remote_addr: IpAddr,
    pub remote_port: u16,
    /// The request's id (`$request_id`), made by the caller when a text reads it; `None`
    /// before it is made (the limit phase: a key never holds one).
    pub request_id: Option<&'a str>,
    pub headers: &'a HeaderMap,
    /// The location regex's captures (`$1` is `captures[1]`), when it has any.
    pub captures: Option<&'a regex::bytes::Captures<'a>>,
    /// The claims of the request's verified token, when `auth.jwt` verified one.
    pub claims: Option<&'a crate::Claims>,
    /// What the connection's TLS handshake told; `None` on a plain connection.
    pub tls: Option<&'a crate::Handshake>,
}

impl<'a> Request<'a> {
    /// A `GET /` from `remote_addr` over plain HTTP with `headers` and nothing else: no
    /// host, query, id or captures, ports 0. For tests and benches, which set what they
    /// need with struct update syntax.
    pub fn new(remote_addr: IpAddr, headers: &'a HeaderMap) -> Request<'a> {
        Request {
            https: false,
            method: &Method::GET,
            host: None,
            server_name: "",
            server_port: 0,
            request_uri: "/",
            uri: b"/",
            args: None,
            remote_addr,
            remote_port: 0,
            request_id: None,
            headers,
            captures: None,
            claims: None,
            tls: None,
        }
    }

    /// Appends `var`'s value (nothing for an unset one, as nginx).
    pub fn append(&self, var: &Var, out: &mut Vec<u8>) {
        match var {
            Var::Scheme => out.extend_from_slice(if self.https { b"https" } else { b"http" }),
            Var::Host => out.extend_from_slice(self.host().as_bytes()),
            Var::ServerName => out.extend_from_slice(self.server_name.as_bytes()),
            Var::ServerPort => push_number(out, self.server_port),
            Var::RequestMethod => out.extend_from_slice(self.method.as_str().as_bytes()),
            Var::RequestUri => out.extend_from_slice(self.request_uri.as_bytes()),
            Var::Uri => out.extend_from_slice(self.uri),
            Var::Args => out.extend_from_slice(self.args.unwrap_or("").as_bytes()),
            Var::Arg(name) => {
                let value = self.args.and_then(|args| arg(args, name));
                out.extend_from_slice(value.unwrap_or("").as_bytes());
            }
            Var::RemoteAddr => push_number(out, self.remote_addr),
            Var::BinaryRemoteAddr => binary_addr(self.remote_addr, 32, 128, out),
            Var::RemotePort => push_number(out, self.remote_port),
            Var::RemoteUser => {
                let sent = self.headers.get(http::header::AUTHORIZATION);
                if let Some(credentials) =
                    sent.and_then(|value| crate::credentials(value.as_bytes()))
                {
                    out.extend_from_slice(credentials.user());
                }
            }
            Var::RequestId => out.extend_from_slice(self.request_id.unwrap_or("").as_bytes()),
            Var::Header(name) => {
                // Repeated lines joined as nginx 1.23+ joins them.
                for (i, value) in self.headers.get_all(name).iter().enumerate() {
                    if i > 0 {
                        out.extend_from_slice(b", ");
                    }
                    out.extend_from_slice(value.as_bytes());
                }
            }
            Var::Cookie(name) => out.extend_from_slice(cookie(self.headers, name).unwrap_or(b"")),
            Var::JwtClaim(name) => {
                let claim = self.claims.and_then(|claims| claims.get(name));
                out.extend_from_slice(claim.unwrap_or(b""));
            }
            Var::SslClientVerify => match self.tls {
                Some(handshake) => out.extend_from_slice(handshake.client_verify.as_bytes()),
                // A TLS connection no site asked a certificate of.
                None if self.https => out.extend_from_slice(b"NONE"),
                None => {}
            },
            Var::SslClientSDn => out.extend_from_slice(self.handshake(|h| &h.client_s_dn)),
            Var::SslClientFingerprint => {
                out.extend_from_slice(self.handshake(|h| &h.client_fingerprint))
            }
            Var::Ja4 => out.extend_from_slice(self.handshake(|h| &h.ja4)),
            Var::Capture(n) => {
                let group = self.captures.and_then(|c| c.get(*n));
                out.extend_from_slice(group.map_or(&[][..], |m| m.as_bytes()));
            }
            Var::Map(map) => map.append(self, out),
        }
    }

    /// A field of the connection's [`Handshake`](crate::Handshake); empty on a plain one.
    fn handshake(&self, field: impl Fn(&'a crate::Handshake) -> &'a str) -> &'a [u8] {
        self.tls.map_or(b"", |h| field(h).as_bytes())
    }

    /// `$host`: the host sent, as [`host_key`] makes it; the site's first name when the
    /// request sends none or an empty one (nginx's `$host`). Borrowed unless the client
    /// wrote the host with capitals.
    pub fn host(&self) -> Cow<'a, str> {
        match self.host.map(host_key) {
            Some(key) if !key.is_empty() => key,
            _ => Cow::Borrowed(self.server_name),
        }
    }
}

/// A host as `$host` and site names mean it: lower case, without a port (an IPv6 literal
/// keeps its brackets) and without a trailing dot. `Example.com.:8080` → `example.com`;
/// `[::1]:80` → `[::1]`. Site choice compares names with it.
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

/// `$binary_remote_addr`: `addr` as 4 or 16 bytes (network order), keeping its leading
/// `ipv4_prefix` or `ipv6_prefix` bits and zeroing the rest (a zone key's prefixes; 32
/// and 128 keep it whole).
pub fn binary_addr(addr: IpAddr, ipv4_prefix: u8, ipv6_prefix: u8, out: &mut Vec<u8>) {
    match addr {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4) & mask32(ipv4_prefix);
            out.extend_from_slice(&bits.to_be_bytes());
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & mask128(ipv6_prefix);
            out.extend_from_slice(&bits.to_be_bytes());
        }
    }
}

fn mask32(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

fn mask128(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p.min(128))),
    }
}

/// `$arg_NAME`: the value of the first `name=value` of a query string (names compared in
/// any case, as nginx); `name` alone has the value `""`.
fn arg<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        key.eq_ignore_ascii_case(name).then_some(value)
    })
}

/// `$cookie_NAME`: the first cookie called `name` (any case, as nginx) in any `Cookie`
/// line, its value without the spaces around it.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h [u8]> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .flat_map(|line| line.as_bytes().split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let at = pair.iter().position(|&b| b == b'=')?;
            pair[..at]
                .trim_ascii()
                .eq_ignore_ascii_case(name.as_bytes())
                .then(|| pair[at + 1..].trim_ascii())
        })
}

fn push_number(out: &mut Vec<u8>, value: impl std::fmt::Display) {
    // Writing to a `Vec` cannot fail.
    let _ = write!(out, "{value}");
}

#[cfg(test)]
mod tests;
