//! The answer carrying an opened file, as nginx's static module and the filters after
//! it make it: validators, then the conditions (412, 304), then `Range` (206, 416),
//! then the body (none for HEAD, whose head says what GET's would).

use http::header::{
    ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG,
    IF_RANGE, LAST_MODIFIED, RANGE,
};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, Version};

use super::conditional::{self, Verdict};
use super::open::Opened;
use super::range::{self, Ranges, Span};
use super::{etag, mime, multipart, response, Ask, OpenFiles};
use crate::config::Encoding;
use crate::upstream::ResponseBody;
use crate::wire::body::file::{FileBody, Parts};

/// The answer for `opened`, the file of `uri` (a sidecar in `coding` if set).
pub(super) fn file(
    open: &OpenFiles,
    ask: &Ask<'_>,
    uri: &[u8],
    opened: Opened,
    coding: Option<Encoding>,
) -> Response<ResponseBody> {
    let Opened { file, meta } = opened;
    let etag = etag::strong(meta.mtime, meta.size);
    let mut headers = HeaderMap::new();
    headers.insert(ETAG, etag.clone());
    headers.insert(LAST_MODIFIED, etag::http_date(meta.mtime));
    match conditional::check(ask.headers, etag.as_bytes(), meta.mtime) {
        Verdict::Proceed => {}
        Verdict::PreconditionFailed => return response::error(StatusCode::PRECONDITION_FAILED),
        Verdict::NotModified => return with(StatusCode::NOT_MODIFIED, headers, ResponseBody::Empty),
    }
    let content_type = mime::content_type(uri);
    if let Some(coding) = coding {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
    }
    let compressed = coding.is_none()
        && (ask.compress).is_some_and(|compress| {
            let asked = (ask.version, ask.headers);
            let content_type = content_type.to_str().unwrap_or("");
            crate::proxy::compress::takes(compress, asked, content_type, meta.size)
        });
    let ranges = match compressed {
        true => Ranges::Full,
        false => ranges(ask, etag.as_bytes(), meta.mtime, meta.size),
    };
    let (status, body) = match ranges {
        Ranges::Unsatisfiable => return unsatisfiable(meta.size),
        Ranges::Full => {
            headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            headers.insert(CONTENT_TYPE, content_type);
            let span = Span { start: 0, end: meta.size };
            (StatusCode::OK, Body::Span(span))
        }
        Ranges::Single(span) => {
            let line = format!("bytes {}-{}/{}", span.start, span.end - 1, meta.size);
            headers.insert(CONTENT_TYPE, content_type);
            if let Ok(line) = HeaderValue::from_str(&line) {
                headers.insert(CONTENT_RANGE, line);
            }
            (StatusCode::PARTIAL_CONTENT, Body::Span(span))
        }
        Ranges::Multi(spans) => {
            let boundary = multipart::boundary();
            headers.insert(CONTENT_TYPE, multipart::content_type(&boundary));
            let spans = spans.iter().map(|s| (s.start, s.end)).collect();
            let parts = Parts::new(boundary, Some(content_type.as_bytes()), meta.size, spans);
            (StatusCode::PARTIAL_CONTENT, Body::Parts(parts))
        }
    };
    let length = body.len();
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    if *ask.method == Method::HEAD || length == 0 {
        return with(status, headers, ResponseBody::Empty);
    }
    let Some(permit) = open.take() else {
        return response::error(StatusCode::SERVICE_UNAVAILABLE);
    };
    let body = match body {
        Body::Span(span) => FileBody::new(file, span.start, span.end, permit),
        Body::Parts(parts) => FileBody::multipart(file, parts, permit),
    };
    with(status, headers, ResponseBody::File(body))
}

/// What of the file goes out.
enum Body {
    Span(Span),
    Parts(Parts),
}

impl Body {
    fn len(&self) -> u64 {
        match self {
            Body::Span(span) => span.end - span.start,
            Body::Parts(parts) => parts.len(),
        }
    }
}

/// What `Range` asks, if `If-Range` lets it (nginx: HTTP/1.0 and later only).
fn ranges(ask: &Ask<'_>, etag: &[u8], mtime: i64, size: u64) -> Ranges {
    let Some(range) = ask.headers.get(RANGE) else {
        return Ranges::Full;
    };
    if ask.version < Version::HTTP_10 {
        return Ranges::Full;
    }
    if let Some(if_range) = ask.headers.get(IF_RANGE) {
        if !conditional::if_range(if_range.as_bytes(), etag, mtime) {
            return Ranges::Full;
        }
    }
    range::parse(range.as_bytes(), size)
}

/// 416, saying how long the file is.
fn unsatisfiable(size: u64) -> Response<ResponseBody> {
    let mut answer = response::error(StatusCode::RANGE_NOT_SATISFIABLE);
    if let Ok(line) = HeaderValue::from_str(&format!("bytes */{size}")) {
        answer.headers_mut().insert(CONTENT_RANGE, line);
    }
    answer
}

fn with(status: StatusCode, headers: HeaderMap, body: ResponseBody) -> Response<ResponseBody> {
    let mut answer = Response::new(body);
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    answer
}
