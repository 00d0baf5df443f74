//! Responses tollgate makes itself: `return` locations and error pages.

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, LOCATION};
use http::{HeaderValue, Response, StatusCode, Version};

use crate::upstream::body::ResponseBody;

const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");

/// A `return` location, prepared once per snapshot.
#[derive(Clone, Debug)]
pub struct Fixed {
    pub status: StatusCode,
    pub body: Bytes,
    pub location: Option<HeaderValue>,
}

impl Fixed {
    pub fn respond(&self) -> Response<ResponseBody> {
        let mut response = Response::new(ResponseBody::full(self.body.clone()));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        if !self.body.is_empty() {
            headers.insert(CONTENT_TYPE, TEXT_PLAIN);
        }
        if let Some(location) = &self.location {
            headers.insert(LOCATION, location.clone());
        }
        response
    }
}

/// The answer to a request that is itself wrong (bad Host or path, a method never
/// forwarded): an error page, and on HTTP/1.x the connection closes after it, as nginx
/// does, since what else the client sent on it cannot be trusted either.
pub fn refusal(status: StatusCode, version: Version) -> Response<ResponseBody> {
    let mut response = error(status);
    if version < Version::HTTP_2 {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A short plain-text error page: `502 Bad Gateway\n`.
pub fn error(status: StatusCode) -> Response<ResponseBody> {
    let text = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error")
    );
    let mut response = Response::new(ResponseBody::full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, TEXT_PLAIN);
    response
}
