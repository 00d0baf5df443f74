//! ACME http-01 (RFC 8555 §8.3): on a plain listener, `GET
//! /.well-known/acme-challenge/TOKEN` for a token under way is answered with its key
//! authorization before routing, access rules and limits, so a site that denies or
//! redirects everything can still prove its name. Any other path there goes on as
//! usual (an application may answer its own challenges).

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request, Response};

use crate::acme::{Published, HTTP01_PREFIX};
use crate::upstream::ResponseBody;

/// The answer to `req` if it asks for a token under way.
pub(super) fn answer<B>(published: &Published, req: &Request<B>) -> Option<Response<ResponseBody>> {
    let token = req.uri().path().strip_prefix(HTTP01_PREFIX)?;
    if !matches!(*req.method(), Method::GET | Method::HEAD) || token.is_empty() {
        return None;
    }
    let key_authorization = published.http01(token)?;
    let body = Bytes::copy_from_slice(key_authorization.as_bytes());
    let mut response = Response::new(ResponseBody::full(body));
    let content_type = HeaderValue::from_static("application/octet-stream");
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    Some(response)
}
