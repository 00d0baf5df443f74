//! One test per variable: what it means, pinned. A zone key, a header rule and a `return`
//! all read a variable through [`Request::append`], so these hold for each of them.

use std::net::IpAddr;

use http::{HeaderMap, HeaderValue, Method};

use super::*;
use crate::VarText;

fn client() -> IpAddr {
    IpAddr::from([192, 0, 2, 7])
}

/// `text` (one variable, as written in a file) filled in from `req`.
fn value(text: &str, req: &Request<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    VarText::parse(text).expect("parses").render(req, &mut out);
    out
}

fn text(text: &str, req: &Request<'_>) -> String {
    String::from_utf8(value(text, req)).expect("utf-8")
}

#[test]
fn scheme_is_https_on_a_tls_listener_else_http() {
    let headers = HeaderMap::new();
    let plain = Request::new(client(), &headers);
    assert_eq!(text("$scheme", &plain), "http");
    let tls = Request {
        https: true,
        ..plain
    };
    assert_eq!(text("$scheme", &tls), "https");
}

#[test]
fn hosts_lose_their_port_and_trailing_dot_but_ipv6_keeps_its_brackets() {
    assert_eq!(host_key("a.example:80"), "a.example");
    assert_eq!(host_key("a.example.:80"), "a.example");
    assert_eq!(host_key("a.example."), "a.example");
    assert_eq!(host_key("[::1]:8080"), "[::1]");
    assert_eq!(host_key("[::1]"), "[::1]");
    assert_eq!(host_key("a.example"), "a.example");
    assert_eq!(host_key("A.Example.:80"), "a.example");
    assert!(matches!(host_key("a.example:80"), Cow::Borrowed(_)));
}

#[test]
fn host_is_the_host_sent_made_a_key_else_the_server_name() {
    let headers = HeaderMap::new();
    let req = Request {
        server_name: "site.test",
        ..Request::new(client(), &headers)
    };
    let sent = |host| Request {
        host: Some(host),
        ..req
    };
    assert_eq!(
        text("$host", &sent("WWW.Example.com.:8443")),
        "www.example.com"
    );
    assert_eq!(text("$host", &sent("[::1]:80")), "[::1]");
    // None sent (HTTP/1.0), or an empty one: the site's first name, as nginx.
    assert_eq!(text("$host", &req), "site.test");
    assert_eq!(text("$host", &sent("")), "site.test");
}

#[test]
fn server_name_is_the_sites_first_name_whatever_the_host() {
    let headers = HeaderMap::new();
    let req = Request {
        host: Some("other.test"),
        server_name: "site.test",
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$server_name", &req), "site.test");
}

#[test]
fn server_port_is_the_port_the_request_arrived_on() {
    let headers = HeaderMap::new();
    let req = Request {
        host: Some("site.test:1"),
        server_port: 8443,
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$server_port", &req), "8443");
}

#[test]
fn request_method_is_the_method_as_sent() {
    let headers = HeaderMap::new();
    let purge = Method::from_bytes(b"PURGE").expect("a method");
    let req = Request {
        method: &purge,
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$request_method", &req), "PURGE");
    assert_eq!(
        text("$request_method", &Request::new(client(), &headers)),
        "GET"
    );
}

#[test]
fn request_uri_is_the_target_as_sent() {
    let headers = HeaderMap::new();
    let req = Request {
        request_uri: "/a%20b/../c?x=%41",
        uri: b"/a b/c",
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$request_uri", &req), "/a%20b/../c?x=%41");
}

#[test]
fn uri_is_the_normalized_path_without_the_query() {
    let headers = HeaderMap::new();
    let req = Request {
        request_uri: "/a%20b/../c?x=1",
        uri: b"/a b/c",
        args: Some("x=1"),
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$uri", &req), "/a b/c");
}

#[test]
fn args_is_the_query_without_its_question_mark() {
    let headers = HeaderMap::new();
    let req = Request {
        args: Some("x=1&y=%20"),
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$args", &req), "x=1&y=%20");
    assert_eq!(text("[$args]", &Request::new(client(), &headers)), "[]");
}

#[test]
fn arg_name_is_the_first_argument_of_that_name_in_any_case_as_sent() {
    let headers = HeaderMap::new();
    let req = Request {
        args: Some("a=1&K=v%20w&k=2&flag"),
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$arg_k", &req), "v%20w");
    assert_eq!(text("${arg_K}", &req), "v%20w");
    assert_eq!(text("[$arg_flag]", &req), "[]");
    assert_eq!(text("[$arg_absent]", &req), "[]");
    assert_eq!(text("[$arg_k]", &Request::new(client(), &headers)), "[]");
}

#[test]
fn remote_addr_is_the_client_as_text() {
    let headers = HeaderMap::new();
    assert_eq!(
        text("$remote_addr", &Request::new(client(), &headers)),
        "192.0.2.7"
    );
    let v6 = Request::new("2001:db8::1".parse().expect("ip"), &headers);
    assert_eq!(text("$remote_addr", &v6), "2001:db8::1");
}

#[test]
fn binary_remote_addr_is_the_client_as_4_or_16_bytes() {
    let headers = HeaderMap::new();
    assert_eq!(
        value("$binary_remote_addr", &Request::new(client(), &headers)),
        [192, 0, 2, 7]
    );
    let v6 = Request::new("2001:db8::1".parse().expect("ip"), &headers);
    let bytes = value("$binary_remote_addr", &v6);
    assert_eq!(bytes.len(), 16);
    assert_eq!(&bytes[..4], &[0x20, 0x01, 0x0d, 0xb8]);
    assert_eq!(bytes[15], 1);
    // A zone key keeps the leading bits its prefixes say.
    let mut masked = Vec::new();
    binary_addr(client(), 24, 64, &mut masked);
    assert_eq!(masked, [192, 0, 2, 0]);
}

#[test]
fn remote_port_is_the_peers_port() {
    let headers = HeaderMap::new();
    let req = Request {
        remote_port: 51000,
        ..Request::new(client(), &headers)
    };
    assert_eq!(text("$remote_port", &req), "51000");
}

#[test]
fn request_id_is_the_callers_id_and_empty_before_one_is_made() {
    let headers = HeaderMap::new();
    let before = Request::new(client(), &headers);
    assert_eq!(text("[$request_id]", &before), "[]");
    let made = Request {
        request_id: Some("0123456789abcdef0123456789abcdef"),
        ..before
    };
    assert_eq!(
        text("$request_id", &made),
        "0123456789abcdef0123456789abcdef"
    );
}

#[test]
fn http_name_joins_repeated_lines_with_a_comma_and_a_space() {
    let mut headers = HeaderMap::new();
    headers.append("x-team", HeaderValue::from_static("a"));
    headers.append("x-team", HeaderValue::from_static("b"));
    headers.append("x-one", HeaderValue::from_static("only"));
    let req = Request::new(client(), &headers);
    assert_eq!(text("$http_x_team", &req), "a, b");
    assert_eq!(text("${http_X_One}", &req), "only");
    assert_eq!(text("[$http_absent]", &req), "[]");
}

#[test]
fn cookie_name_is_the_first_cookie_of_that_name_in_any_line_and_case() {
    let mut headers = HeaderMap::new();
    headers.append("cookie", HeaderValue::from_static("a=1; b"));
    headers.append(
        "cookie",
        HeaderValue::from_static(" Session = s2 ; session=s3"),
    );
    let req = Request::new(client(), &headers);
    assert_eq!(text("$cookie_session", &req), "s2");
    assert_eq!(text("$cookie_a", &req), "1");
    assert_eq!(text("[$cookie_b]", &req), "[]");
    assert_eq!(text("[$cookie_absent]", &req), "[]");
}

#[test]
fn captures_are_empty_without_a_location_regex() {
    let headers = HeaderMap::new();
    assert_eq!(text("[$1]", &Request::new(client(), &headers)), "[]");
}
