//! A corpus of malformed and ambiguous HTTP/1.1 requests, sent as raw bytes to the real
//! gateway in front of an upstream that records every byte it receives. Each case is
//! either refused (a 4xx/5xx, the connection closed, the upstream sent nothing) or
//! forwarded as exactly one request in the one normalized form the case asserts: the
//! upstream never sees two requests where the client sent one.
//!
//! Where nginx answers the same, real nginx (proxying to an upstream of its own) gets the
//! same bytes and must give the same status; the cases where tollgate deliberately
//! differs say why. Without nginx the comparison is skipped, except under `CI`.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;

use support::nginx::Nginx;
use support::raw::{closes, read_response, RawUpstream};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// What tollgate must do with a case.
enum Expect {
    /// Answered with this status, then the connection closes; the upstream sees nothing.
    Refused(u16),
    /// Forwarded as one request containing each of these (lower-cased) fragments;
    /// answered 200.
    Forwarded(&'static [&'static str]),
    /// A good request, then a bad head pipelined behind it: the first is forwarded alone
    /// and answered 200, the second answered with this status, then the connection
    /// closes.
    ThenRefused(u16),
}

/// Whether nginx must answer the same status.
enum Oracle {
    Same,
    /// Why tollgate differs on purpose.
    Differs(&'static str),
}

struct Case {
    name: &'static str,
    raw: Vec<u8>,
    expect: Expect,
    nginx: Oracle,
}

fn case(name: &'static str, raw: &[u8], expect: Expect, nginx: Oracle) -> Case {
    Case {
        name,
        raw: raw.to_vec(),
        expect,
        nginx,
    }
}

fn post(extra_head: &str, body: &[u8]) -> Vec<u8> {
    let mut raw = format!("POST / HTTP/1.1\r\nHost: example.test\r\n{extra_head}\r\n").into_bytes();
    raw.extend_from_slice(body);
    raw
}

fn get(extra_head: &[u8]) -> Vec<u8> {
    let mut raw = b"GET / HTTP/1.1\r\nHost: example.test\r\n".to_vec();
    raw.extend_from_slice(extra_head);
    raw.extend_from_slice(b"\r\n");
    raw
}

fn corpus() -> Vec<Case> {
    use Expect::{Forwarded, Refused, ThenRefused};
    use Oracle::{Differs, Same};
    let chunked = "Transfer-Encoding: chunked\r\n";
    let smuggled = b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: example.test\r\n\r\n";
    vec![
        // Content-Length and Transfer-Encoding together, in both orders.
        case("cl_then_te", &post(&format!("Content-Length: 48\r\n{chunked}"), smuggled), Refused(400), Same),
        case("te_then_cl", &post(&format!("{chunked}Content-Length: 48\r\n"), smuggled), Refused(400), Same),
        case("te_cl_http10", b"POST / HTTP/1.0\r\nHost: example.test\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nab", Refused(400), Same),
        case(
            "cl_te_pipelined_behind_a_get",
            &[
                &get(b"")[..],
                &post(&format!("Content-Length: 48\r\n{chunked}"), smuggled)[..],
            ]
            .concat(),
            ThenRefused(400),
            Same,
        ),
        // Transfer-Encoding lists and obfuscations.
        case("te_gzip_chunked", &post("Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"), Refused(501), Same),
        case("te_identity_chunked", &post("Transfer-Encoding: identity, chunked\r\n", b"0\r\n\r\n"), Refused(501), Same),
        case("te_chunked_twice_in_a_list", &post("Transfer-Encoding: chunked, chunked\r\n", b"0\r\n\r\n"), Refused(501), Same),
        case("te_gzip_alone", &post("Transfer-Encoding: gzip\r\n", b""), Refused(501), Same),
        case("te_xchunked", &post("Transfer-Encoding: xchunked\r\n", b"0\r\n\r\n"), Refused(501), Same),
        case("te_with_a_parameter", &post("Transfer-Encoding: chunked;q=1\r\n", b"0\r\n\r\n"), Refused(501), Same),
        case("te_two_lines", &post(&format!("{chunked}{chunked}"), b"0\r\n\r\n"), Refused(400), Same),
        case("te_space_before_colon", &post("Transfer-Encoding : chunked\r\n", b"0\r\n\r\n"), Refused(400), Same),
        case("te_http10", b"POST / HTTP/1.0\r\nHost: example.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", Refused(400), Same),
        case(
            "te_tab_before_value",
            &post("Transfer-Encoding:\tchunked\r\n", b"2\r\nab\r\n0\r\n\r\n"),
            Forwarded(&["content-length: 2\r\n\r\nab"]),
            Differs("a tab is optional whitespace (RFC 9110 §5.6.3); nginx skips only spaces and answers 501"),
        ),
        case("te_upper_case", &post("TRANSFER-ENCODING: CHUNKED\r\n", b"2\r\nab\r\n0\r\n\r\n"), Forwarded(&["content-length: 2\r\n\r\nab"]), Same),
        // Content-Length: duplicate, signed, hex, lists, overflow.
        case("cl_twice_same", &post("Content-Length: 2\r\nContent-Length: 2\r\n", b"ab"), Refused(400), Same),
        case("cl_twice_different", &post("Content-Length: 2\r\nContent-Length: 3\r\n", b"abc"), Refused(400), Same),
        case("cl_list", &post("Content-Length: 2, 2\r\n", b"ab"), Refused(400), Same),
        case("cl_plus", &post("Content-Length: +2\r\n", b"ab"), Refused(400), Same),
        case("cl_minus", &post("Content-Length: -1\r\n", b""), Refused(400), Same),
        case("cl_hex", &post("Content-Length: 0x2\r\n", b"ab"), Refused(400), Same),
        case("cl_overflow", &post("Content-Length: 99999999999999999999\r\n", b""), Refused(400), Same),
        case("cl_leading_zeros", &post("Content-Length: 002\r\n", b"ab"), Forwarded(&["content-length: 2\r\n\r\nab"]), Same),
        // A body that holds a request: still one request, with that body.
        case(
            "cl_body_holding_a_request",
            &post("Content-Length: 48\r\n", smuggled),
            Forwarded(&["content-length: 48\r\n\r\n0\r\n\r\nget /smuggled"]),
            Same,
        ),
        // Chunk sizes and extensions.
        case("chunk_size_not_hex", &post(chunked, b"zz\r\nab\r\n0\r\n\r\n"), Refused(400), Same),
        case("chunk_size_overflow", &post(chunked, b"ffffffffffffffffff\r\nab\r\n0\r\n\r\n"), Refused(400), Same),
        case("chunk_data_without_crlf", &post(chunked, b"2\r\nabX0\r\n\r\n"), Refused(400), Same),
        case(
            "chunk_size_with_bare_lf",
            &post(chunked, b"2\nab\n0\n\n"),
            Refused(400),
            Differs("chunk lines end in CRLF (RFC 9112 §7.1); nginx also takes a bare LF there"),
        ),
        case("chunk_extension", &post(chunked, b"2;name=value\r\nab\r\n0\r\n\r\n"), Forwarded(&["content-length: 2\r\n\r\nab"]), Same),
        case("chunk_trailer", &post(chunked, b"2\r\nab\r\n0\r\nX-Trailer: 1\r\n\r\n"), Forwarded(&["content-length: 2\r\n\r\nab"]), Same),
        // Line endings, folding, control characters.
        case("bare_lf_head", b"GET / HTTP/1.1\nHost: example.test\nX-A: 1\n\n", Forwarded(&["get / http/1.1\r\n", "x-a: 1\r\n"]), Same),
        case("obs_fold", &get(b"X-A: b\r\n c\r\n"), Refused(400), Same),
        case("nul_in_value", &get(b"X-A: b\0c\r\n"), Refused(400), Same),
        case("control_in_name", &get(b"X\x01A: b\r\n"), Refused(400), Same),
        case("cr_inside_value", &get(b"X-A: b\rc\r\n"), Refused(400), Same),
        case("space_before_colon", &get(b"X-A : b\r\n"), Refused(400), Same),
        case("empty_name", &get(b": b\r\n"), Refused(400), Same),
        case(
            "del_in_value",
            &get(b"X-A: b\x7fc\r\n"),
            Refused(400),
            Differs("DEL is no field-vchar (RFC 9110 §5.5); nginx passes it on"),
        ),
        // Targets and methods.
        case("absolute_form", b"GET http://other.example/x HTTP/1.1\r\nHost: example.test\r\n\r\n", Forwarded(&["get /x http/1.1\r\n", "host: other.example\r\n"]), Same),
        case("options_star", b"OPTIONS * HTTP/1.1\r\nHost: example.test\r\n\r\n", Refused(400), Same),
        case(
            "connect",
            b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n",
            Refused(405),
            Differs("nginx cannot parse an authority-form target (400); tollgate refuses the method"),
        ),
        case("trace", b"TRACE / HTTP/1.1\r\nHost: example.test\r\n\r\n", Refused(405), Same),
        case("space_in_target", b"GET /a b HTTP/1.1\r\nHost: example.test\r\n\r\n", Refused(400), Same),
        case("dot_dot_above_root", b"GET /../etc/passwd HTTP/1.1\r\nHost: example.test\r\n\r\n", Refused(400), Same),
        case("encoded_nul", b"GET /a%00 HTTP/1.1\r\nHost: example.test\r\n\r\n", Refused(400), Same),
        case("two_hosts", &get(b"Host: other.example\r\n"), Refused(400), Same),
        case("no_host_on_http11", b"GET / HTTP/1.1\r\n\r\n", Refused(400), Same),
        case(
            "http2_version_in_http1",
            b"GET / HTTP/2.0\r\nHost: example.test\r\n\r\n",
            Refused(400),
            Differs("nginx says 505; either way nothing is forwarded"),
        ),
        case("h2c_upgrade", &get(b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n"), Forwarded(&["get / http/1.1\r\n"]), Same),
    ]
}

#[tokio::test]
async fn every_malformed_request_is_refused_or_forwarded_once_in_one_form() {
    let _shared = support::shared();
    let cases = corpus();
    assert!(cases.len() >= 30, "the corpus has {} cases", cases.len());
    let nginx = nginx_oracle().await;
    let mut wrong = Vec::new();
    for case in &cases {
        let up = RawUpstream::ok().await;
        let gw = support::gateway(&support::proxying(up.addr, ""));
        let status = match check(case, support::addr(&gw), &up).await {
            Ok(status) => status,
            Err(problem) => {
                wrong.push(format!("{}: {problem}", case.name));
                continue;
            }
        };
        let Some((nginx, nginx_up)) = &nginx else {
            continue;
        };
        let theirs = status_of(nginx.addr, &case.raw).await;
        match case.nginx {
            Oracle::Same if theirs != Some(status) => wrong.push(format!(
                "{}: tollgate {status}, nginx {theirs:?} (nginx's upstream has seen {} requests)",
                case.name,
                nginx_up.requests()
            )),
            // Keeps the stated differences true.
            Oracle::Differs(why) if theirs == Some(status) => wrong.push(format!(
                "{}: said to differ from nginx ({why}), but both answer {status}",
                case.name
            )),
            _ => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

/// Runs one case through tollgate; its status, or what was wrong.
async fn check(case: &Case, gateway: SocketAddr, up: &RawUpstream) -> Result<u16, String> {
    let mut client = TcpStream::connect(gateway).await.unwrap();
    // A refusal may come (and the connection close) before every byte is written.
    let _ = client.write_all(&case.raw).await;
    let reply = read_response(&mut client).await.ok_or("no response")?;
    match case.expect {
        Expect::Refused(status) => {
            if reply.status != status {
                return Err(format!(
                    "status {} ({}), wanted {status}",
                    reply.status,
                    reply.head.trim()
                ));
            }
            if !closes(&mut client).await {
                return Err("the connection stayed open".into());
            }
            if up.accepted() > 0 {
                return Err(format!(
                    "the upstream got {:?}",
                    String::from_utf8_lossy(&up.bytes())
                ));
            }
        }
        Expect::Forwarded(fragments) => {
            if reply.status != 200 {
                return Err(format!("status {}, wanted 200", reply.status));
            }
            // Anything smuggled would arrive right behind the request.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
            if up.requests() != 1 {
                return Err(format!(
                    "the upstream saw {} requests: {seen:?}",
                    up.requests()
                ));
            }
            if let Some(missing) = fragments.iter().find(|f| !seen.contains(**f)) {
                return Err(format!(
                    "{missing:?} not in what the upstream saw: {seen:?}"
                ));
            }
            if seen.contains("transfer-encoding") || seen.contains("upgrade") {
                return Err(format!("framing or upgrade headers forwarded: {seen:?}"));
            }
        }
        Expect::ThenRefused(status) => {
            let second = read_response(&mut client)
                .await
                .ok_or("no second response")?;
            if (reply.status, second.status) != (200, status) {
                return Err(format!(
                    "statuses {} then {}, wanted 200 then {status}",
                    reply.status, second.status
                ));
            }
            if !closes(&mut client).await {
                return Err("the connection stayed open".into());
            }
            if up.requests() != 1 {
                return Err(format!("the upstream saw {} requests", up.requests()));
            }
        }
    }
    Ok(reply.status)
}

async fn status_of(server: SocketAddr, raw: &[u8]) -> Option<u16> {
    let mut client = TcpStream::connect(server).await.ok()?;
    let _ = client.write_all(raw).await;
    read_response(&mut client).await.map(|reply| reply.status)
}

/// nginx proxying to an upstream of its own, when nginx is installed.
async fn nginx_oracle() -> Option<(Nginx, RawUpstream)> {
    if !support::nginx::available("the nginx comparison of the framing corpus") {
        return None;
    }
    let up = RawUpstream::ok().await;
    let addr = up.addr;
    let nginx = Nginx::start(
        move |dir: &Path, port: u16| {
            let tmp = dir.join("tmp");
            let tmp = tmp.display();
            format!(
                "worker_processes 1;\nmaster_process off;\ndaemon off;\npid {dir}/nginx.pid;\n\
                 events {{}}\n\
                 http {{\n  access_log off;\n  client_body_temp_path {tmp};\n  proxy_temp_path {tmp};\n\
                 fastcgi_temp_path {tmp};\n  uwsgi_temp_path {tmp};\n  scgi_temp_path {tmp};\n\
                 server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://{addr};\n\
                 proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }}\n  }}\n}}\n",
                dir = dir.display()
            )
        },
        &[],
    );
    Some((nginx, up))
}
