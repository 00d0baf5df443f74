//! A log line from a template (`[log] format`, and `combined`, which is one): the
//! template is compiled once per reload into literal bytes and variables (a request
//! header by its place among those the log captures), and a line is written into a
//! buffer the caller keeps, with no allocation of its own. Values are escaped as nginx
//! escapes them (`escape=default|json|none`); an absent value is `-`, or nothing in JSON.

use std::io::Write as _;
use std::time::SystemTime;

use http::HeaderName;

use super::digits::{address, decimal, seconds};
use super::{time, Record};
use crate::config::{Escape, LogPiece, LogTemplate, LogVar};

/// One piece of a compiled template.
enum Part {
    Text(Box<[u8]>),
    Var(LogVar),
    /// A request header: its place in [`Record::headers`].
    Header(usize),
}

/// A template, compiled.
pub(super) struct Line {
    parts: Box<[Part]>,
    escape: Escape,
}

/// Where `name` is in `captured`, added at the end if it is not there.
pub(super) fn place(captured: &mut Vec<HeaderName>, name: &HeaderName) -> usize {
    if let Some(at) = captured.iter().position(|known| known == name) {
        return at;
    }
    captured.push(name.clone());
    captured.len() - 1
}

impl Line {
    /// `template`, compiled: the request headers it reads are found in `captured` (the
    /// names every log of the generation captures), those not yet there added.
    pub(super) fn new(template: &LogTemplate, captured: &mut Vec<HeaderName>) -> Line {
        let parts = template
            .pieces
            .iter()
            .map(|piece| match piece {
                LogPiece::Text(text) => Part::Text(text.as_bytes().into()),
                LogPiece::Var(LogVar::Header(name)) => Part::Header(place(captured, name)),
                LogPiece::Var(var) => Part::Var(var.clone()),
            })
            .collect();
        Line {
            parts,
            escape: template.escape,
        }
    }

    /// Whether a line names `$request_id` (then each request gets one).
    pub(super) fn wants_request_id(&self) -> bool {
        self.names(&LogVar::RequestId)
    }

    /// Whether a line names `var`.
    pub(super) fn names(&self, var: &LogVar) -> bool {
        self.parts.iter().any(|part| matches!(part, Part::Var(named) if named == var))
    }

    /// Appends `record`'s line (without its newline) to `out`, written at `now`.
    pub(super) fn write(&self, out: &mut Vec<u8>, record: &Record, now: SystemTime) {
        for part in &*self.parts {
            match part {
                Part::Text(text) => out.extend_from_slice(text),
                Part::Header(at) => {
                    let value = record.headers.get(*at);
                    self.value(out, value.map(http::HeaderValue::as_bytes));
                }
                Part::Var(var) => self.var(out, var, record, now),
            }
        }
    }

    /// One variable's value. Numbers, addresses and times are written by hand
    /// ([`decimal`], [`address`]): `core::fmt` cost more than the rest of the line.
    fn var(&self, out: &mut Vec<u8>, var: &LogVar, r: &Record, now: SystemTime) {
        match var {
            LogVar::RemoteAddr => address(out, r.client),
            LogVar::RemoteUser => self.value(out, r.remote_user().as_deref()),
            LogVar::TimeLocal => time::local(out, now),
            LogVar::TimeIso8601 => time::iso8601(out, now),
            LogVar::Msec => time::msec(out, now),
            LogVar::Request => self.request_line(out, r),
            LogVar::RequestMethod => escape(out, r.method.as_str().as_bytes(), self.escape),
            LogVar::RequestUri => escape(out, r.target().as_bytes(), self.escape),
            LogVar::Args => self.value(out, r.uri.query().map(str::as_bytes)),
            LogVar::ServerProtocol => out.extend_from_slice(protocol(r.version)),
            LogVar::Scheme => out.extend_from_slice(if r.https { b"https" } else { b"http" }),
            // nginx's `$host` is lowercase.
            LogVar::Host => match r.host() {
                Some(host) => escape_cased(out, host, self.escape, true),
                None => self.absent(out),
            },
            LogVar::Status => decimal(out, u64::from(r.status.as_u16())),
            LogVar::BodyBytesSent => decimal(out, r.body_bytes),
            LogVar::BytesSent => decimal(out, r.head_bytes + r.body_bytes),
            LogVar::RequestTime => seconds(out, r.request_time),
            LogVar::UpstreamAddr => match r.upstream_addr {
                Some(addr) => {
                    let v6 = addr.is_ipv6();
                    if v6 {
                        out.push(b'[');
                    }
                    address(out, addr.ip());
                    out.extend_from_slice(if v6 { b"]:" } else { b":" });
                    decimal(out, u64::from(addr.port()));
                }
                None => self.absent(out),
            },
            LogVar::UpstreamStatus => match r.upstream_status {
                Some(status) => decimal(out, u64::from(status.as_u16())),
                None => self.absent(out),
            },
            LogVar::UpstreamResponseTime => match r.upstream_response_time() {
                Some(took) => seconds(out, took),
                None => self.absent(out),
            },
            LogVar::UpstreamHeaderTime => match r.upstream_time {
                Some(took) => seconds(out, took),
                None => self.absent(out),
            },
            LogVar::LimitStatus => match r.limit_status {
                "-" => self.absent(out),
                status => out.extend_from_slice(status.as_bytes()),
            },
            LogVar::RequestId => self.value(out, r.request_id.as_ref().map(|id| &id[..])),
            LogVar::LimitZone => self.value(out, r.limit_zone.as_deref().map(str::as_bytes)),
            LogVar::LimitKey => self.value(out, r.limit_key.as_deref().map(str::as_bytes)),
            LogVar::LimitRemaining => match r.limit_remaining {
                Some(remaining) => decimal(out, remaining),
                None => self.absent(out),
            },
            LogVar::Site => self.value(out, r.site.as_deref().map(str::as_bytes)),
            LogVar::Location => self.value(out, r.location.as_deref().map(str::as_bytes)),
            LogVar::SslProtocol => self.value(out, r.tls.map(|(protocol, _)| protocol.as_bytes())),
            LogVar::SslCipher => self.value(out, r.tls.and_then(|(_, cipher)| cipher).map(str::as_bytes)),
            LogVar::Http2 => match (r.version, r.https) {
                (http::Version::HTTP_2, true) => out.extend_from_slice(b"h2"),
                (http::Version::HTTP_2, false) => out.extend_from_slice(b"h2c"),
                // nginx's `$http2` is empty, not absent, for other requests.
                _ => {}
            },
            LogVar::Header(_) => {} // compiled into `Part::Header`
        }
    }

    /// `$request`: as the request line had it: an absolute URL sent over HTTP/1.x whole
    /// (HTTP/2 and HTTP/3 have no request line; nginx writes the path).
    fn request_line(&self, out: &mut Vec<u8>, r: &Record) {
        escape(out, r.method.as_str().as_bytes(), self.escape);
        out.push(b' ');
        if let (Some(scheme), Some(authority), false) = (r.uri.scheme_str(), r.uri.authority(), r.version >= http::Version::HTTP_2) {
            escape(out, scheme.as_bytes(), self.escape);
            out.extend_from_slice(b"://");
            escape(out, authority.as_str().as_bytes(), self.escape);
        }
        escape(out, r.target().as_bytes(), self.escape);
        out.push(b' ');
        out.extend_from_slice(protocol(r.version));
    }

    /// A value that may be absent, escaped.
    fn value(&self, out: &mut Vec<u8>, value: Option<&[u8]>) {
        match value {
            Some(value) => escape(out, value, self.escape),
            None => self.absent(out),
        }
    }

    /// nginx's mark for a variable without a value: `-`, or nothing with `json` and
    /// `none`.
    fn absent(&self, out: &mut Vec<u8>) {
        if self.escape == Escape::Default {
            out.push(b'-');
        }
    }
}

/// `bytes` escaped for a log line as nginx escapes them:
/// - `default`: `"`, `\`, control bytes and bytes from 0x7f as `\xHH`;
/// - `json`: `"` and `\` backslashed, `\n`, `\r`, `\t`, `\b`, `\f`, other control bytes
///   as `\u00HH`. Bytes past ASCII go as they are when the value is UTF-8 (as nginx's);
///   a value that is not has each such byte as `\u00HH`, so the line stays JSON (nginx
///   writes them raw, and its line is then no JSON);
/// - `none`: as they are.
pub(super) fn escape(out: &mut Vec<u8>, bytes: &[u8], escape: Escape) {
    escape_cased(out, bytes, escape, false);
}

/// [`escape`], with ASCII letters made lowercase first when `lower`.
fn escape_cased(out: &mut Vec<u8>, bytes: &[u8], escape: Escape, lower: bool) {
    let cased = bytes.iter().map(|&b| if lower { b.to_ascii_lowercase() } else { b });
    match escape {
        Escape::None => out.extend(cased),
        Escape::Default => {
            for b in cased {
                match b {
                    b'"' | b'\\' | 0..=0x1f | 0x7f..=0xff => {
                        let _ = write!(out, "\\x{b:02X}");
                    }
                    _ => out.push(b),
                }
            }
        }
        Escape::Json => {
            let utf8 = std::str::from_utf8(bytes).is_ok();
            for b in cased {
                match b {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' => out.extend_from_slice(b"\\t"),
                    0x08 => out.extend_from_slice(b"\\b"),
                    0x0c => out.extend_from_slice(b"\\f"),
                    0..=0x1f => {
                        let _ = write!(out, "\\u{b:04X}");
                    }
                    0x80..=0xff if !utf8 => {
                        let _ = write!(out, "\\u{b:04X}");
                    }
                    _ => out.push(b),
                }
            }
        }
    }
}

/// `$server_protocol`.
fn protocol(version: http::Version) -> &'static [u8] {
    match version {
        http::Version::HTTP_09 => b"HTTP/0.9",
        http::Version::HTTP_10 => b"HTTP/1.0",
        http::Version::HTTP_2 => b"HTTP/2.0",
        http::Version::HTTP_3 => b"HTTP/3.0",
        _ => b"HTTP/1.1",
    }
}
