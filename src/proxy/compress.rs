//! Compressing answers on the fly (`compress`; nginx `gzip`): which answers, with which
//! coding, and the headers that change with it.
//!
//! The gate is nginx's (`ngx_http_gzip_header_filter`, `ngx_http_gzip_ok`), in its order:
//! status 200, 403 or 404; no `Content-Encoding` already (never twice); a length unknown or
//! at least `min_length`; a type in `types`. An answer that passes varies with
//! `Accept-Encoding` whether or not this client takes a coding, so it says so (`Vary`, as
//! nginx with `gzip_vary on`). Then an HTTP/1.0 client gets it as it is (nginx's
//! `gzip_http_version 1.1`), and otherwise the coding the client prefers among
//! `encodings`. Ours: an answer with `Cache-Control: no-transform` is never compressed
//! (RFC 9110 §7.7; nginx ignores it). Like nginx, an upstream's answers are compressed
//! too (`gzip_proxied` only concerns requests that came through another proxy, with
//! `Via`).

use http::header::{
    ACCEPT_ENCODING, ACCEPT_RANGES, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE,
    ETAG, VARY,
};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Version};
use http_body::Body;

use super::encoding;
use crate::config::Compress;
use crate::upstream::ResponseBody;
use crate::wire::body::encode::Encoded;
use crate::wire::h1::{has_token, tokens};

#[cfg(test)]
mod tests;

/// What the request said about compression, kept from its head (which forwarding
/// consumes) until its answer is known.
#[derive(Debug, Default)]
pub(crate) struct Accepted {
    /// Its `Accept-Encoding` lines.
    pub accept: Vec<HeaderValue>,
    pub version: Option<Version>,
    /// A HEAD request: the answer gets a GET's headers, and no body.
    pub head: bool,
}

impl Accepted {
    pub(crate) fn of(method: &Method, version: Version, headers: &HeaderMap) -> Accepted {
        Accepted {
            accept: headers.get_all(ACCEPT_ENCODING).iter().cloned().collect(),
            version: Some(version),
            head: method == Method::HEAD,
        }
    }
}

/// Compresses `response` as `compress` says, if the answer and the client qualify: sets
/// `Content-Encoding` and `Vary`, weakens the `ETag`, drops `Content-Length` and
/// `Accept-Ranges`, and wraps the body. A HEAD's answer gets the same headers as a GET's
/// (nginx's too); its body, never read, is wrapped all the same and costs no coder.
pub(crate) fn apply(compress: &Compress, accepted: &Accepted, response: &mut Response<ResponseBody>) {
    if !qualifies(compress, accepted, response) {
        return;
    }
    let headers = response.headers_mut();
    vary(headers);
    if accepted.version.is_some_and(|version| version < Version::HTTP_11) {
        return;
    }
    let Some(coding) = encoding::choose(accepted.accept.iter(), &compress.encodings) else {
        return;
    };
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
    headers.remove(CONTENT_LENGTH);
    // A range of the compressed stream is not worth offering: nginx drops it too.
    headers.remove(ACCEPT_RANGES);
    weaken_etag(headers);
    let body = std::mem::replace(response.body_mut(), ResponseBody::Empty);
    *response.body_mut() = ResponseBody::Encoded(Box::new(Encoded::new(body, coding)));
}

/// Whether a 200 of `content_type` and `length` to this request would be compressed:
/// then, as in nginx (whose gzip filter runs before its range filter), a file answer
/// ignores `Range` and is sent whole, compressed.
pub(crate) fn takes(
    compress: &Compress,
    (version, headers): (Version, &HeaderMap),
    content_type: &str,
    length: u64,
) -> bool {
    if version < Version::HTTP_11 || length < compress.min_length || !compress.covers(content_type) {
        return false;
    }
    let accept: Vec<&HeaderValue> = headers.get_all(ACCEPT_ENCODING).iter().collect();
    encoding::choose(accept.iter().copied(), &compress.encodings).is_some()
}

/// Whether the answer itself is one `compress` compresses: status, coding, cache rules,
/// length and type. (The client's side comes after.)
fn qualifies(compress: &Compress, accepted: &Accepted, response: &Response<ResponseBody>) -> bool {
    let status = response.status();
    if !matches!(
        status,
        StatusCode::OK | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND
    ) {
        return false;
    }
    // A 429 written beforehand carries its header lines outside the map changed here.
    if matches!(response.body(), ResponseBody::Rendered(_)) {
        return false;
    }
    let headers = response.headers();
    let encoded = (headers.get_all(CONTENT_ENCODING).iter()).any(|value| !value.is_empty());
    let no_transform = (headers.get_all(CACHE_CONTROL).iter())
        .any(|value| has_token(value.as_bytes(), b"no-transform"));
    if encoded || no_transform {
        return false;
    }
    if length(accepted, response).is_some_and(|length| length < compress.min_length) {
        return false;
    }
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    content_type.is_some_and(|content_type| compress.covers(content_type))
}

/// The body's length if known: its own exact size, as the writer sends it, else the
/// `Content-Length` it came with (all a HEAD's empty body has to say).
fn length(accepted: &Accepted, response: &Response<ResponseBody>) -> Option<u64> {
    let own = (!accepted.head).then(|| response.body().size_hint().exact());
    own.flatten().or_else(|| {
        let value = response.headers().get(CONTENT_LENGTH)?;
        value.to_str().ok()?.trim().parse().ok()
    })
}

/// Adds `Accept-Encoding` to `Vary`, into the one line, unless it is listed already or the
/// answer varies with everything (`*`).
fn vary(headers: &mut HeaderMap) {
    let mut listed: Vec<&[u8]> = Vec::new();
    for value in headers.get_all(VARY) {
        for token in tokens(value.as_bytes()) {
            if token == b"*" || token.eq_ignore_ascii_case(b"accept-encoding") {
                return;
            }
            listed.push(token);
        }
    }
    const OURS: &str = "Accept-Encoding";
    if listed.is_empty() {
        headers.insert(VARY, HeaderValue::from_static(OURS));
        return;
    }
    let mut line = listed.join(&b", "[..]);
    line.extend_from_slice(b", ");
    line.extend_from_slice(OURS.as_bytes());
    match HeaderValue::from_bytes(&line) {
        Ok(merged) => {
            headers.insert(VARY, merged);
        }
        Err(_) => {
            headers.append(VARY, HeaderValue::from_static(OURS));
        }
    }
}

/// A strong `ETag` becomes weak (`W/"…"`): the encoded bytes differ from those it named,
/// but mean the same. One that is not a quoted tag at all is dropped (nginx's
/// `ngx_http_weak_etag`).
fn weaken_etag(headers: &mut HeaderMap) {
    let Some(etag) = headers.get(ETAG) else {
        return;
    };
    let tag = etag.as_bytes();
    if tag.len() > 2 && tag.starts_with(b"W/") {
        return;
    }
    let weak = tag.starts_with(b"\"").then(|| {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(tag);
        HeaderValue::from_bytes(&weak)
    });
    match weak {
        Some(Ok(weak)) => {
            headers.insert(ETAG, weak);
        }
        _ => {
            headers.remove(ETAG);
        }
    }
}
