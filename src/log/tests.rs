use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, StatusCode, Version};

use super::line::Line;
use super::{json, Captured, Record};
use crate::config::{Escape, LogTemplate, COMBINED};

/// 2026-11-21T21:41:36.045Z
fn at() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_297_296_045)
}

/// Captured header values, in order.
fn headers(values: &[Option<HeaderValue>]) -> Captured {
    Captured::Heap(values.into())
}

fn record() -> Record {
    Record {
        client: "192.0.2.7".parse().unwrap(),
        method: Method::GET,
        uri: "/a?b=c".parse().unwrap(),
        version: Version::HTTP_11,
        host: Some(HeaderValue::from_static("Example.test:8080")),
        https: false,
        headers: headers(&[]),
        authorization: None,
        subject: None,
        status: StatusCode::OK,
        body_bytes: 12,
        head_bytes: 100,
        request_time: Duration::from_millis(5),
        upstream_time: Some(Duration::from_millis(1)),
        upstream_began: Some(Duration::from_millis(2)),
        upstream_addr: Some("127.0.0.1:3000".parse().unwrap()),
        upstream_status: Some(StatusCode::CREATED),
        limit_status: "-",
        request_id: Some(*b"0123456789abcdef0123456789abcdef"),
        limit_zone: None,
        limit_remaining: None,
        limit_key: None,
        site: None,
        location: None,
        tls: None,
    }
}

/// `template`'s line for `r` (its captured headers given in the template's order).
fn line(template: &str, escape: Escape, r: &Record) -> String {
    let line = Line::new(&LogTemplate::parse(template, escape).unwrap(), &mut Vec::new());
    let mut out = Vec::new();
    line.write(&mut out, r, at());
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn combined_line_has_nginx_fields_then_limit_and_times() {
    let mut r = record();
    r.headers = headers(&[None, Some(HeaderValue::from_static("curl/8.0"))]);
    assert_eq!(
        line(COMBINED, Escape::Default, &r),
        "192.0.2.7 - - [21/Nov/2026:21:41:36 +0000] \"GET /a?b=c HTTP/1.1\" 200 12 \"-\" \"curl/8.0\" - 0.005 0.001"
    );
}

#[test]
fn the_basic_user_is_remote_user_and_its_password_is_never_written() {
    let mut r = record();
    // "al\"ice:hunter2"
    r.authorization = Some(HeaderValue::from_static("Basic YWwiaWNlOmh1bnRlcjI="));
    let plain = line("$remote_user", Escape::Default, &r);
    assert_eq!(plain, "al\\x22ice");
    let mut json = Vec::new();
    r.headers = headers(&[None, None]);
    json::write(&mut json, &r, at(), [0, 1]);
    let json = String::from_utf8(json).unwrap();
    assert!(json.contains("\"remote_user\":\"al\\\"ice\""), "{json}");
    assert!(!plain.contains("hunter2") && !json.contains("hunter2"));
    r.authorization = Some(HeaderValue::from_static("Bearer abc"));
    assert_eq!(line("$remote_user", Escape::Default, &r), "-");
}

#[test]
fn json_line_escapes_and_uses_null_for_missing() {
    let mut r = record();
    r.headers = headers(&[None, Some(HeaderValue::from_bytes(b"a\"b\\c\xff").unwrap())]);
    r.upstream_time = None;
    r.upstream_addr = None;
    r.request_id = None;
    let mut out = Vec::new();
    json::write(&mut out, &r, at(), [0, 1]);
    let line = String::from_utf8(out).unwrap();
    assert!(line.starts_with("{\"time\":\"2026-11-21T21:41:36.045Z\""), "{line}");
    assert!(line.contains("\"referer\":\"\",\"user_agent\":\"a\\\"b\\\\c\\u00FF\""), "{line}");
    assert!(line.contains("\"upstream_time\":null,\"upstream_addr\":null,\"request_id\":null}"), "{line}");
    assert!(line.contains("\"status\":200,\"body_bytes_sent\":12"), "{line}");
    assert!(serde_json::from_str::<serde_json::Value>(&line).is_ok(), "{line}");
}

#[test]
fn every_variable_writes_what_nginx_writes() {
    let r = record();
    let template = "$remote_addr|$time_local|$time_iso8601|$msec|$request|$request_method|$request_uri|\
                    $args|$server_protocol|$scheme|$host|$status|$body_bytes_sent|$request_time|\
                    $upstream_addr|$upstream_status|$upstream_response_time|$upstream_header_time|\
                    $limit_status|$request_id";
    assert_eq!(
        line(template, Escape::Default, &r),
        "192.0.2.7|21/Nov/2026:21:41:36 +0000|2026-11-21T21:41:36+00:00|1795297296.045|GET /a?b=c HTTP/1.1|GET|/a?b=c|\
         b=c|HTTP/1.1|http|example.test|200|12|0.005|\
         127.0.0.1:3000|201|0.003|0.001|\
         -|0123456789abcdef0123456789abcdef"
    );
}

#[test]
fn absent_values_are_a_dash_or_nothing_in_json() {
    let mut r = record();
    (r.upstream_addr, r.upstream_status, r.upstream_time, r.upstream_began) = (None, None, None, None);
    r.uri = "/a".parse().unwrap();
    r.host = None;
    r.headers = headers(&[None]);
    let template = "$upstream_addr $upstream_status $upstream_response_time $args $host $http_x_a $limit_status";
    assert_eq!(line(template, Escape::Default, &r), "- - - - - - -");
    assert_eq!(line(template, Escape::None, &r), "      ");
    assert_eq!(line(template, Escape::Json, &r), "      ");
}

#[test]
fn hostile_bytes_are_escaped_in_every_text_variable() {
    // A header may carry `"`, `\\`, tabs and bytes past ASCII; a basic-auth user name,
    // decoded from base64, any byte at all: `ev"il\\` LF ESC `[31m` DEL `é` 0xff.
    let mut r = record();
    r.headers = headers(&[Some(HeaderValue::from_bytes(b"a\"b\\c\t\xc3\xa9\xff").unwrap())]);
    r.host = Some(HeaderValue::from_static("x\"y"));
    r.authorization = Some(HeaderValue::from_static("Basic ZXYiaWxcChtbMzFtf8Op/zpwdw=="));
    let template = "$http_x_evil|$host|$remote_user";
    assert_eq!(
        line(template, Escape::Default, &r),
        "a\\x22b\\x5Cc\\x09\\xC3\\xA9\\xFF|x\\x22y|ev\\x22il\\x5C\\x0A\\x1B[31m\\x7F\\xC3\\xA9\\xFF"
    );
    // Not UTF-8: each byte past ASCII is written escaped, so the line stays JSON.
    let json = line(template, Escape::Json, &r);
    assert_eq!(
        json,
        "a\\\"b\\\\c\\t\\u00C3\\u00A9\\u00FF|x\\\"y|ev\\\"il\\\\\\n\\u001B[31m\u{7f}\\u00C3\\u00A9\\u00FF"
    );
    assert!(serde_json::from_str::<String>(&format!("\"{json}\"")).is_ok(), "{json}");
    r.headers = headers(&[Some(HeaderValue::from_bytes("é\t".as_bytes()).unwrap())]);
    assert_eq!(line("$http_x_evil", Escape::Json, &r), "é\\t");
    let mut controls = Vec::new();
    super::line::escape(&mut controls, b"\x08\x0c\x00", Escape::Json);
    assert_eq!(controls, b"\\b\\f\\u0000");
    r.headers = headers(&[Some(HeaderValue::from_static("a\"b"))]);
    assert_eq!(line("$http_x_evil", Escape::None, &r), "a\"b");
}

#[test]
fn hosts_lose_their_port_and_a_target_host_comes_first() {
    let mut r = record();
    assert_eq!(line("$host", Escape::Default, &r), "example.test");
    r.host = Some(HeaderValue::from_static("[2001:db8::1]:8443"));
    assert_eq!(line("$host", Escape::Default, &r), "[2001:db8::1]");
    r.uri = "https://b.test:9/x".parse().unwrap();
    assert_eq!(line("$host $request_uri", Escape::Default, &r), "b.test /x");
}

#[test]
fn bytes_sent_is_the_head_and_the_body() {
    assert_eq!(line("$bytes_sent $body_bytes_sent", Escape::Default, &record()), "112 12");
}
