//! The admin page (`GET /` on the admin listener, docs/config.md "The admin page"): one
//! HTML file, its script and its style sheet, compiled into the binary. They hold no data
//! (the script polls `/status` and `/bans`), so they are served without the token even
//! with `protect_reads`. The Content-Security-Policy lets the page load nothing but these
//! files and call nothing but this listener: no inline script, no other origin.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::Full;

use super::reply;

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/style.css");

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// Whether `path` is one of the page's files.
pub(super) fn is_asset(path: &str) -> bool {
    matches!(path, "/" | "/app.js" | "/style.css")
}

/// The file at `path`, if it is one of the page's.
pub(super) fn asset(path: &str) -> Option<Response<Full<Bytes>>> {
    let (content_type, body) = match path {
        "/" => ("text/html; charset=utf-8", INDEX),
        "/app.js" => ("text/javascript; charset=utf-8", SCRIPT),
        "/style.css" => ("text/css; charset=utf-8", STYLE),
        _ => return None,
    };
    let mut response = reply(StatusCode::OK, content_type, body);
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    Some(response)
}
