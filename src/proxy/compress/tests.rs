//! The gate, rule by rule, and the headers a compressed answer gets.

use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Version};

use super::*;
use crate::config::compress::MediaRange;
use crate::config::Encoding::{self, Br, Gzip, Zstd};

fn compress() -> Compress {
    Compress {
        encodings: vec![Zstd, Br, Gzip],
        types: vec![
            MediaRange::Family("text".into()),
            MediaRange::Exact("application/json".into()),
        ],
        min_length: 1024,
    }
}

fn asked(method: Method, version: Version, accept: &str) -> Accepted {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_str(accept).unwrap());
    Accepted::of(&method, version, &headers)
}

fn get(accept: &str) -> Accepted {
    asked(Method::GET, Version::HTTP_11, accept)
}

/// A 200 `application/json` answer of `len` bytes with `headers`.
fn answer(len: usize, headers: &[(&str, &str)]) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::full(vec![b'x'; len]));
    let map = response.headers_mut();
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    map.insert(CONTENT_LENGTH, HeaderValue::from(len));
    for (name, value) in headers {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    response
}

/// The coding the answer went out with, if any.
fn coding(response: &Response<ResponseBody>) -> Option<&str> {
    let encoded = matches!(response.body(), ResponseBody::Encoded(_));
    let header = response.headers().get(CONTENT_ENCODING);
    assert_eq!(encoded, header.is_some(), "the body is wrapped iff the header says so");
    header.map(|value| value.to_str().unwrap())
}

fn vary_lines(response: &Response<ResponseBody>) -> Vec<&str> {
    let lines = response.headers().get_all(VARY).iter();
    lines.map(|value| value.to_str().unwrap()).collect()
}

fn applied(mut response: Response<ResponseBody>, accepted: &Accepted) -> Response<ResponseBody> {
    apply(&compress(), accepted, &mut response);
    response
}

#[test]
fn a_qualifying_answer_gets_the_preferred_coding_and_its_headers() {
    let response = answer(2000, &[("etag", "\"5f5e1000-7d0\""), ("accept-ranges", "bytes")]);
    let response = applied(response, &get("gzip, br"));
    assert_eq!(coding(&response), Some("br"));
    let headers = response.headers();
    assert_eq!(vary_lines(&response), ["Accept-Encoding"]);
    assert_eq!(headers[ETAG], "W/\"5f5e1000-7d0\"");
    assert!(headers.get(CONTENT_LENGTH).is_none() && headers.get(ACCEPT_RANGES).is_none());
    assert_eq!(response.body().size_hint().exact(), None);
}

#[test]
fn only_200_403_and_404_are_compressed() {
    for status in [200, 403, 404] {
        let mut response = answer(2000, &[]);
        *response.status_mut() = StatusCode::from_u16(status).unwrap();
        assert_eq!(coding(&applied(response, &get("gzip"))), Some("gzip"), "{status}");
    }
    for status in [201, 206, 301, 304, 401, 500, 502] {
        let mut response = answer(2000, &[]);
        *response.status_mut() = StatusCode::from_u16(status).unwrap();
        let response = applied(response, &get("gzip"));
        assert_eq!(coding(&response), None, "{status}");
        assert!(vary_lines(&response).is_empty(), "{status}");
    }
}

#[test]
fn an_answer_already_encoded_is_never_encoded_twice() {
    let response = applied(answer(2000, &[("content-encoding", "gzip")]), &get("br"));
    let codings = response.headers().get_all(CONTENT_ENCODING).iter();
    assert_eq!(codings.collect::<Vec<_>>(), ["gzip"]);
    assert!(!matches!(response.body(), ResponseBody::Encoded(_)));
    // An empty Content-Encoding says nothing (nginx's test is on its length).
    let response = applied(answer(2000, &[("content-encoding", "")]), &get("br"));
    assert_eq!(response.headers()[CONTENT_ENCODING], "br");
}

#[test]
fn no_transform_forbids_compression() {
    let cache = [("cache-control", "public, No-Transform")];
    let response = applied(answer(2000, &cache), &get("gzip"));
    assert_eq!(coding(&response), None);
    assert!(vary_lines(&response).is_empty());
}

#[test]
fn a_known_length_below_min_length_is_left_alone_and_an_unknown_one_is_compressed() {
    let response = applied(answer(1023, &[]), &get("gzip"));
    assert_eq!((coding(&response), vary_lines(&response).len()), (None, 0));
    assert_eq!(coding(&applied(answer(1024, &[]), &get("gzip"))), Some("gzip"));
    // No Content-Length and a body of unknown length (an upstream's, chunked).
    let mut response = answer(0, &[]);
    response.headers_mut().remove(CONTENT_LENGTH);
    let body = Encoded::new(ResponseBody::full(vec![b'x'; 10]), Encoding::Gzip);
    *response.body_mut() = ResponseBody::Encoded(Box::new(body));
    assert_eq!(response.body().size_hint().exact(), None);
    apply(&compress(), &get("gzip"), &mut response);
    assert!(response.headers().get(CONTENT_ENCODING).is_some());
}

#[test]
fn the_body_length_counts_before_the_header_but_not_for_head() {
    // A GET: the body's own length (2000) is what goes out, whatever the header says.
    let mut response = answer(2000, &[]);
    response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(10));
    assert_eq!(coding(&applied(response, &get("gzip"))), Some("gzip"));
    // A HEAD's empty body says nothing; its Content-Length is the GET's.
    let mut response = answer(0, &[]);
    response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(5000));
    let head = asked(Method::HEAD, Version::HTTP_11, "gzip");
    assert_eq!(coding(&applied(response, &head)), Some("gzip"));
}

#[test]
fn a_head_gets_the_headers_of_a_get() {
    let etag = [("etag", "\"abc\"")];
    let head = applied(answer(0, &etag), &asked(Method::HEAD, Version::HTTP_11, "gzip"));
    let mut with_length = answer(0, &etag);
    with_length.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(2000));
    let head_with_length = applied(with_length, &asked(Method::HEAD, Version::HTTP_11, "gzip"));
    let get = applied(answer(2000, &etag), &get("gzip"));
    assert_eq!(head_with_length.headers(), get.headers());
    // A HEAD answer whose Content-Length is 0 is below min_length, as a GET's would be.
    assert_eq!(coding(&head), None);
}

#[test]
fn the_type_must_be_listed() {
    for (content_type, compressed) in [
        ("text/html; charset=utf-8", true),
        ("Application/JSON", true),
        ("image/png", false),
        ("application/octet-stream", false),
    ] {
        let mut response = answer(2000, &[]);
        let value = HeaderValue::from_static(content_type);
        response.headers_mut().insert(CONTENT_TYPE, value);
        let response = applied(response, &get("gzip"));
        assert_eq!(coding(&response).is_some(), compressed, "{content_type}");
        assert_eq!(vary_lines(&response).len(), compressed as usize, "{content_type}");
    }
    let mut untyped = answer(2000, &[]);
    untyped.headers_mut().remove(CONTENT_TYPE);
    assert_eq!(coding(&applied(untyped, &get("gzip"))), None);
}

#[test]
fn vary_is_sent_even_when_the_client_takes_no_coding() {
    for accept in ["identity", "gzip;q=0, br;q=0, zstd;q=0", "compress", ""] {
        let response = applied(answer(2000, &[("etag", "\"abc\"")]), &get(accept));
        assert_eq!(coding(&response), None, "{accept}");
        assert_eq!(vary_lines(&response), ["Accept-Encoding"], "{accept}");
        // Nothing else changes.
        assert_eq!(response.headers()[ETAG], "\"abc\"");
        assert_eq!(response.headers()[CONTENT_LENGTH], "2000");
    }
    let none = applied(answer(2000, &[]), &Accepted::default());
    assert_eq!((coding(&none), vary_lines(&none)), (None, vec!["Accept-Encoding"]));
}

#[test]
fn http10_gets_vary_but_no_coding() {
    let response = applied(answer(2000, &[]), &asked(Method::GET, Version::HTTP_10, "gzip"));
    assert_eq!(coding(&response), None);
    assert_eq!(vary_lines(&response), ["Accept-Encoding"]);
    let h2 = applied(answer(2000, &[]), &asked(Method::GET, Version::HTTP_2, "gzip"));
    assert_eq!(coding(&h2), Some("gzip"));
}

#[test]
fn vary_merges_into_the_existing_line_without_repeating() {
    let cases: [(&[&str], &[&str]); 6] = [
        (&["Origin"], &["Origin, Accept-Encoding"]),
        (&["Origin", "Cookie"], &["Origin, Cookie, Accept-Encoding"]),
        (&["origin, accept-encoding"], &["origin, accept-encoding"]),
        (&["Cookie", "ACCEPT-ENCODING"], &["Cookie", "ACCEPT-ENCODING"]),
        (&["*"], &["*"]),
        (&[""], &["Accept-Encoding"]),
    ];
    for (before, after) in cases {
        let lines: Vec<_> = before.iter().map(|line| ("vary", *line)).collect();
        let response = applied(answer(2000, &lines), &get("gzip"));
        assert_eq!(vary_lines(&response), after, "{before:?}");
    }
}

#[test]
fn a_strong_etag_is_weakened_a_weak_one_kept_and_a_malformed_one_dropped() {
    for (before, after) in [
        ("\"abc\"", Some("W/\"abc\"")),
        ("W/\"abc\"", Some("W/\"abc\"")),
        ("abc", None),
    ] {
        let response = applied(answer(2000, &[("etag", before)]), &get("gzip"));
        let etag = response.headers().get(ETAG).map(|v| v.to_str().unwrap());
        assert_eq!(etag, after, "{before}");
    }
}

#[test]
fn the_compressed_body_decodes_to_the_original() {
    use http_body_util::BodyExt;
    let data = "{\"a\":1}".repeat(500);
    let mut response = answer(data.len(), &[]);
    *response.body_mut() = ResponseBody::full(data.clone());
    let response = applied(response, &get("gzip"));
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let encoded = runtime
        .block_on(response.into_body().collect())
        .unwrap()
        .to_bytes();
    let mut decoded = String::new();
    let mut reader = flate2::read::GzDecoder::new(&encoded[..]);
    std::io::Read::read_to_string(&mut reader, &mut decoded).unwrap();
    assert_eq!(decoded, data);
}
