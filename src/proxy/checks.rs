//! What a request must be before the pipeline takes it: the checks of the request line
//! and headers that nginx makes and hyper leaves to the application.
//!
//! - `TRACE` and `CONNECT` are never forwarded (405, as nginx): TRACE echoes the
//!   request, cookies and all, back to a script that should not see them; CONNECT would
//!   make the gateway an open tunnel.
//! - Exactly one `Host`, and a valid one (RFC 9110 §7.2, RFC 3986 §3.2.2): `a b/c`, a
//!   control character or a port that is not a number is a 400, not something for the
//!   application to trip over.
//! - An absolute-form target's authority wins over `Host` (RFC 9112 §3.2.2): the host
//!   that routing, limits and the upstream see is the one the target names.
//! - Header names with `_` are dropped (nginx `underscores_in_headers off`): CGI, WSGI,
//!   Rack and PHP read `X_Forwarded_For` and `X-Forwarded-For` as the same
//!   `HTTP_X_FORWARDED_FOR`, so a client could slip in a second, spoofed value. Names
//!   with characters nginx does not accept are dropped too (`ignore_invalid_headers`).

use crate::vars::host_key;
use http::header::{HeaderName, HOST};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Version};

/// Checks `req` and brings it to the one form the rest of the pipeline reads; the
/// status that refuses it otherwise.
pub(super) fn admit<B>(req: &mut Request<B>, underscores: bool) -> Result<(), StatusCode> {
    if req.method() == Method::TRACE || req.method() == Method::CONNECT {
        return Err(StatusCode::METHOD_NOT_ALLOWED);
    }
    check_host(req)?;
    if let Some(authority) = req.uri().authority() {
        let host =
            HeaderValue::from_str(authority.as_str()).map_err(|_| StatusCode::BAD_REQUEST)?;
        req.headers_mut().insert(HOST, host);
    }
    drop_unacceptable_names(req.headers_mut(), underscores);
    Ok(())
}

/// HTTP/1.1 requires exactly one `Host` (RFC 9112 §3.2); nginx answers 400 to a
/// request without one or with two, and so does tollgate (a second `Host` is a classic
/// way to make two servers disagree about the target). The authority of the target,
/// when it has one, must be a valid host as well.
fn check_host<B>(req: &Request<B>) -> Result<(), StatusCode> {
    let mut hosts = req.headers().get_all(HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(StatusCode::BAD_REQUEST);
    }
    let authority = req.uri().authority();
    if first.is_none() && req.version() == Version::HTTP_11 && authority.is_none() {
        return Err(StatusCode::BAD_REQUEST);
    }
    let valid = first.is_none_or(|host| valid_host(host.as_bytes()))
        && authority.is_none_or(|a| valid_host(a.as_str().as_bytes()));
    if !valid {
        return Err(StatusCode::BAD_REQUEST);
    }
    // HTTP/2: a `Host` naming another host than `:authority` is malformed (RFC 9113
    // §8.3.1), as nginx answers it; the two may not pick different sites. Compared as
    // hosts (case, port and a trailing dot aside), as site choice reads them.
    if let (Version::HTTP_2, Some(host), Some(authority)) = (req.version(), first, authority) {
        let host = host.to_str().map(host_key);
        if host.ok().as_deref() != Some(&*host_key(authority.as_str())) {
            return Err(StatusCode::BAD_REQUEST);
        }
    }
    Ok(())
}

/// `host [":" port]`, where host is a bracketed IPv6 literal or a registered name
/// (letters, digits, `-._~`, sub-delims, %-escapes) without empty labels, and port is
/// at most five digits. No user info: `user@host` is not a Host. One pass: this runs
/// for every request.
pub(super) fn valid_host(value: &[u8]) -> bool {
    let (host, port) = if value.first() == Some(&b'[') {
        let end = value
            .iter()
            .position(|&b| b == b']')
            .map_or(value.len(), |at| at + 1);
        let (literal, rest) = value.split_at(end);
        if !valid_ip_literal(literal) {
            return false;
        }
        (None, rest)
    } else {
        // A registered name has no `:`, so the first one starts the port.
        let end = value.iter().position(|&b| b == b':').unwrap_or(value.len());
        let (name, rest) = value.split_at(end);
        (Some(name), rest)
    };
    let port_ok = match port {
        [] => true,
        [b':', digits @ ..] => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    port_ok && host.is_none_or(valid_reg_name)
}

fn valid_ip_literal(host: &[u8]) -> bool {
    host.strip_prefix(b"[")
        .and_then(|h| h.strip_suffix(b"]"))
        .and_then(|inside| std::str::from_utf8(inside).ok())
        .is_some_and(|inside| inside.parse::<std::net::Ipv6Addr>().is_ok())
}

fn valid_reg_name(host: &[u8]) -> bool {
    let mut previous = b'.';
    for &b in host {
        // nginx refuses empty labels (`a..b`, a leading dot); a trailing dot is the root.
        if !REG_NAME[usize::from(b)] || (b == b'.' && previous == b'.') {
            return false;
        }
        previous = b;
    }
    !host.is_empty()
}

/// The bytes of a registered name (RFC 3986 §3.2.2): unreserved, sub-delims and `%`. A
/// table, since this runs for every request.
static REG_NAME: [bool; 256] = byte_set(b"-._~!$&'()*+,;=%");

/// The bytes of a header name nginx accepts: letters, digits and `-`.
static NAME: [bool; 256] = byte_set(b"-");

/// A table of the ASCII letters and digits plus `extra`.
const fn byte_set(extra: &[u8]) -> [bool; 256] {
    let mut set = [false; 256];
    let mut b = 0;
    while b < 256 {
        set[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        set[extra[i] as usize] = true;
        i += 1;
    }
    set
}

/// Removes every header whose name nginx would ignore: anything but letters, digits and
/// `-`, and `_` too unless `underscores` (hyper has already lower-cased the names).
fn drop_unacceptable_names(headers: &mut HeaderMap, underscores: bool) {
    let acceptable = |name: &HeaderName| {
        name.as_str()
            .bytes()
            .all(|b| NAME[usize::from(b)] || (underscores && b == b'_'))
    };
    // Almost every request has none: one pass over the names, no allocation.
    if headers.keys().all(acceptable) {
        return;
    }
    let unacceptable: Vec<HeaderName> =
        headers.keys().filter(|n| !acceptable(n)).cloned().collect();
    for name in unacceptable {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut req = Request::builder().uri(target);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        req.body(()).expect("test request")
    }

    #[test]
    fn hosts_nginx_accepts_are_valid() {
        for host in [
            "example.com",
            "example.com:8080",
            "EXAMPLE.com.",
            "127.0.0.1:80",
            "[::1]",
            "[2001:db8::1]:443",
            "xn--bcher-kva.example",
            "a_b.example",
            "localhost:",
        ] {
            assert!(valid_host(host.as_bytes()), "{host}");
        }
    }

    #[test]
    fn hosts_with_spaces_slashes_controls_or_bad_ports_are_invalid() {
        for host in [
            "a b/c", "a/c", "a\\c", "", "a..b", ".a", "a:8x", "a:123456", "user@a", "[::1",
            "[zz::1]", "a\u{1}b", "a\tb",
        ] {
            assert!(!valid_host(host.as_bytes()), "{host:?}");
        }
    }

    #[test]
    fn trace_and_connect_are_not_allowed() {
        let mut trace = request("/", &[("host", "a")]);
        *trace.method_mut() = Method::TRACE;
        assert_eq!(
            admit(&mut trace, false),
            Err(StatusCode::METHOD_NOT_ALLOWED)
        );
        let mut connect = request("a.example:443", &[("host", "a.example:443")]);
        *connect.method_mut() = Method::CONNECT;
        assert_eq!(
            admit(&mut connect, false),
            Err(StatusCode::METHOD_NOT_ALLOWED)
        );
    }

    #[test]
    fn the_absolute_target_authority_replaces_host() {
        let mut req = request("http://target.example:8080/x", &[("host", "other.example")]);
        assert_eq!(admit(&mut req, false), Ok(()));
        assert_eq!(req.headers()["host"], "target.example:8080");
        assert_eq!(req.headers().get_all("host").iter().count(), 1);
    }

    #[test]
    fn two_hosts_or_none_on_http11_are_refused() {
        let mut two = request("/", &[("host", "a"), ("host", "b")]);
        assert_eq!(admit(&mut two, false), Err(StatusCode::BAD_REQUEST));
        let mut none = request("/", &[]);
        assert_eq!(admit(&mut none, false), Err(StatusCode::BAD_REQUEST));
        let mut bad = request("/", &[("host", "a b")]);
        assert_eq!(admit(&mut bad, false), Err(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn names_with_underscores_are_dropped_unless_allowed() {
        let headers = [
            ("host", "a"),
            ("x_forwarded_for", "6.6.6.6"),
            ("x-forwarded-for", "1.2.3.4"),
            ("x.dotted", "1"),
            ("x-ok-2", "1"),
        ];
        let mut req = request("/", &headers);
        assert_eq!(admit(&mut req, false), Ok(()));
        let mut names: Vec<&str> = req.headers().keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["host", "x-forwarded-for", "x-ok-2"]);

        let mut req = request("/", &headers);
        assert_eq!(admit(&mut req, true), Ok(()));
        assert!(req.headers().contains_key("x_forwarded_for"));
        assert!(!req.headers().contains_key("x.dotted"));
    }
}
