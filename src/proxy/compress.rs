//! Compressing answers on the fly (`compress`; nginx `gzip`): which answers, with which
//! coding, and the headers that change with it.
// Interfaces only: issue 36's compression fills this in.
#![allow(dead_code)]

use http::{HeaderMap, HeaderValue, Method, Response, Version};

use crate::config::Compress;
use crate::upstream::ResponseBody;

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
            accept: headers
                .get_all(http::header::ACCEPT_ENCODING)
                .iter()
                .cloned()
                .collect(),
            version: Some(version),
            head: method == Method::HEAD,
        }
    }
}

/// Compresses `response` as `compress` says, if the answer and the client qualify: sets
/// `Content-Encoding` and `Vary`, weakens the `ETag`, drops `Content-Length` and
/// `Accept-Ranges`, and wraps the body.
pub(crate) fn apply(compress: &Compress, accepted: &Accepted, response: &mut Response<ResponseBody>) {
    let _ = (compress, accepted, response);
}
