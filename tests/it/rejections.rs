//! A rejection's head and body as the client gets them. A location writes most of its
//! 429 beforehand and HTTP/1.1 sends those lines as they are, while HTTP/2 has them put
//! into a header map: the two must say the same, in every `ratelimit_headers` style, and
//! a `HEAD` must get the head alone, framed as the `GET` was.

use crate::support;

use std::collections::BTreeMap;

use http::{Method, Request};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One zone of 1r/m by client address, burst 0: a client's second request is rejected.
fn config(style: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
ratelimit_headers = "{style}"
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[[location]]
match = "/"
limit = [{{ zone = "per_ip", nodelay = true }}]
return = {{ status = 200, body = "ok\n" }}
"#
    )
}

fn request(method: Method, client: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri("http://example.test/")
        .header("host", "example.test")
        .header("x-forwarded-for", client)
        .body(empty())
        .unwrap()
}

/// The headers an answer's texts decide (not `date`, nor the framing).
fn said(headers: &http::HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        // What the connection writes on every answer.
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "content-length" | "server"))
        .map(|(name, value)| {
            let value = value.to_str().expect("a text value");
            (name.as_str().to_owned(), value.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_rejection_says_the_same_over_http1_and_http2_in_every_style() {
    let _shared = support::shared();
    for style in ["draft", "legacy", "both", "none"] {
        let gw = gateway(&config(style));
        let addr = addr(&gw);
        let (h1, h2) = within(10, async {
            assert_eq!(
                send(addr, request(Method::GET, "10.0.0.1")).await.status,
                200
            );
            let h1 = send(addr, request(Method::GET, "10.0.0.1")).await;
            let h2 = send_h2(addr, request(Method::GET, "10.0.0.1")).await;
            (h1, h2)
        })
        .await;
        assert_eq!(
            (h1.status.as_u16(), h2.status.as_u16()),
            (429, 429),
            "{style}"
        );
        assert_eq!(h2.version, http::Version::HTTP_2);
        let headers = said(&h1.headers);
        assert_eq!(headers, said(&h2.headers), "{style}");
        assert_eq!(h1.body, h2.body, "{style}");
        assert_eq!(
            headers["content-type"], "application/problem+json",
            "{style}"
        );
        let retry: u64 = headers["retry-after"].parse().expect("seconds");
        assert!((59..=60).contains(&retry), "{style}: {retry}");
        assert!(
            h1.body.ends_with(&format!(
                r#""zone":"per_ip","retry_after":{retry}}}{}"#,
                "\n"
            )),
            "{style}: {}",
            h1.body
        );
        let json: serde_json::Value = serde_json::from_str(&h1.body).expect("JSON");
        assert_eq!(json["status"], 429);
        assert_eq!(json["detail"], "rate limit of 1r/m exceeded");
        assert_eq!(h1.headers["content-length"], h1.body.len().to_string());
        let draft = matches!(style, "draft" | "both");
        let legacy = matches!(style, "legacy" | "both");
        if draft {
            assert_eq!(headers["ratelimit-policy"], r#""per_ip";q=1;w=60"#);
            assert_eq!(headers["ratelimit"], format!(r#""per_ip";r=0;t={retry}"#));
        }
        if legacy {
            assert_eq!(headers["x-ratelimit-limit"], "1");
            assert_eq!(headers["x-ratelimit-remaining"], "0");
            assert_eq!(headers["x-ratelimit-reset"], retry.to_string());
        }
        let expected = 2 + 2 * usize::from(draft) + 3 * usize::from(legacy);
        assert_eq!(headers.len(), expected, "{style}: {headers:?}");
        // Each once: the map above would hide a second value.
        for reply in [&h1, &h2] {
            let values = reply
                .headers
                .iter()
                .filter(|(name, _)| headers.contains_key(name.as_str()));
            assert_eq!(values.count(), expected, "{style}: {:?}", reply.headers);
        }
    }
}

/// Raw bytes: pipelined rejections, a `GET`, a `HEAD` and a `GET`, each head whole and
/// once, the `HEAD`'s with the `GET`'s length and no body, and the connection kept for
/// the next request.
#[tokio::test]
async fn pipelined_rejections_are_framed_one_after_another() {
    let _shared = support::shared();
    let gw = gateway(&config("both"));
    let addr = addr(&gw);
    let bytes = within(10, async {
        assert_eq!(
            send(addr, request(Method::GET, "10.0.0.2")).await.status,
            200
        );
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let one = "GET / HTTP/1.1\r\nHost: example.test\r\nX-Forwarded-For: 10.0.0.2\r\n\r\n";
        let head = one.replace("GET", "HEAD");
        let close = one.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
        stream
            .write_all(format!("{one}{head}{close}").as_bytes())
            .await
            .unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        bytes
    })
    .await;
    let mut rest = &bytes[..];
    let mut answers = Vec::new();
    for bodied in [true, false, true] {
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let mut answer = httparse::Response::new(&mut fields);
        let httparse::Status::Complete(len) = answer.parse(rest).expect("a head") else {
            panic!("a whole head in {:?}", String::from_utf8_lossy(rest));
        };
        assert_eq!(answer.code, Some(429));
        let names: Vec<String> = answer
            .headers
            .iter()
            .map(|h| h.name.to_ascii_lowercase())
            .collect();
        let mut once = names.clone();
        once.sort();
        once.dedup();
        assert_eq!(once.len(), names.len(), "a header twice: {names:?}");
        let length: usize = answer
            .headers
            .iter()
            .find(|h| h.name == "content-length")
            .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
            .expect("a length");
        let body_len = if bodied { length } else { 0 };
        let body = &rest[len..len + body_len];
        answers.push((length, String::from_utf8_lossy(body).into_owned()));
        rest = &rest[len + body_len..];
    }
    assert!(rest.is_empty(), "more: {:?}", String::from_utf8_lossy(rest));
    let (get, headed, last) = (&answers[0], &answers[1], &answers[2]);
    assert!(
        get.1.starts_with('{') && get.1.ends_with("}\n"),
        "{}",
        get.1
    );
    assert_eq!(get.0, get.1.len());
    assert_eq!(headed.0, get.0);
    assert_eq!(last, get);
}

/// Zones `a` (1r/m), `b` (5r/m, burst 5) and, with `three`, `c` (10r/m, burst 5), all
/// by client address, `both` header styles: a client's second request is refused by `a`
/// alone. Two zones' 429 is written from the location's form (nine
/// numbers), three zones' through a header map (too many numbers for a form): each says
/// what `ratelimit_headers` documents.
fn zones(three: bool) -> String {
    let (c, limit) = match three {
        true => (
            "[zones.c]\nkey = \"$binary_remote_addr\"\nrate = \"10r/m\"\n",
            r#", { zone = "c", burst = 5, nodelay = true }"#,
        ),
        false => ("", ""),
    };
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
ratelimit_headers = "both"
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[zones.a]
key = "$binary_remote_addr"
rate = "1r/m"
[zones.b]
key = "$binary_remote_addr"
rate = "5r/m"
{c}
[[location]]
match = "/"
limit = [{{ zone = "a", nodelay = true }}, {{ zone = "b", burst = 5, nodelay = true }}{limit}]
return = {{ status = 200, body = "ok\n" }}
"#
    )
}

#[tokio::test]
async fn a_rejection_by_one_of_several_zones_announces_each_of_them() {
    let _shared = support::shared();
    for three in [false, true] {
        let gw = gateway(&zones(three));
        let addr = addr(&gw);
        let (h1, h2) = within(10, async {
            assert_eq!(
                send(addr, request(Method::GET, "10.0.0.3")).await.status,
                200
            );
            let h1 = send(addr, request(Method::GET, "10.0.0.3")).await;
            let h2 = send_h2(addr, request(Method::GET, "10.0.0.3")).await;
            (h1, h2)
        })
        .await;
        assert_eq!((h1.status.as_u16(), h2.status.as_u16()), (429, 429));
        let headers = said(&h1.headers);
        assert_eq!(headers, said(&h2.headers), "three: {three}");
        assert_eq!(h1.body, h2.body);
        assert_eq!(h1.headers["content-length"], h1.body.len().to_string());
        let retry: u64 = headers["retry-after"].parse().expect("seconds");
        let mut policy = r#""a";q=1;w=60, "b";q=5;w=60"#.to_owned();
        if three {
            policy.push_str(r#", "c";q=10;w=60"#);
        }
        assert_eq!(headers["ratelimit-policy"], policy);
        // Each zone's item: its name, requests left and seconds to reset, in list order.
        let items: Vec<&str> = headers["ratelimit"].split(", ").collect();
        assert_eq!(items.len(), 2 + usize::from(three), "{items:?}");
        assert_eq!(items[0], format!(r#""a";r=0;t={retry}"#));
        assert!(items[1].starts_with(r#""b";r="#), "{items:?}");
        assert!(!items[1].starts_with(r#""b";r=0;"#), "{items:?}");
        // The most restrictive zone: `a`, none left and the longest wait.
        assert_eq!(headers["x-ratelimit-limit"], "1");
        assert_eq!(headers["x-ratelimit-remaining"], "0");
        assert_eq!(headers["x-ratelimit-reset"], retry.to_string());
        assert!(
            h1.body.ends_with(&format!(
                r#""detail":"rate limit of 1r/m exceeded","zone":"a","retry_after":{retry}}}{}"#,
                "\n"
            )),
            "{}",
            h1.body
        );
    }
}
