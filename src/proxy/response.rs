//! Responses tollgate makes itself: `return` locations and error pages.

use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE, LOCATION};
use http::{HeaderValue, Response, StatusCode, Version};

use crate::config::ReturnStatus;
use crate::upstream::ResponseBody;
use crate::vars::{self, VarText};

const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");

/// A `return` location, prepared once per snapshot.
#[derive(Clone, Debug)]
pub struct Fixed {
    pub status: ReturnStatus,
    pub body: Filled<Bytes>,
    pub location: Option<Filled<HeaderValue>>,
}

/// A `return`'s body or `Location`: made once when it has no variable, else filled in
/// for each request.
#[derive(Clone, Debug)]
pub enum Filled<T> {
    Once(T),
    PerRequest(VarText),
}

impl Fixed {
    /// The answer; `req` fills in the variables (the pipeline gathers them only for
    /// locations whose texts have some).
    pub(crate) fn respond(&self, req: Option<&vars::Request<'_>>) -> Response<ResponseBody> {
        let (status, with_location) = match (&self.status, req) {
            (ReturnStatus::Fixed(status), _) => (*status, true),
            (ReturnStatus::Map(map), Some(req)) => {
                let status = map.status(req);
                (status, ReturnStatus::redirects(status))
            }
            // Not met: a status map makes the pipeline gather the variables.
            (ReturnStatus::Map(map), None) => {
                let status = map.default_status();
                (status, ReturnStatus::redirects(status))
            }
        };
        let body = match (&self.body, req) {
            (Filled::Once(body), _) => body.clone(),
            (Filled::PerRequest(text), Some(req)) => {
                let mut body = Vec::new();
                text.render(req, &mut body);
                Bytes::from(body)
            }
            (Filled::PerRequest(_), None) => Bytes::new(),
        };
        let location = match (&self.location, req) {
            _ if !with_location => None,
            (Some(Filled::Once(location)), _) => Some(location.clone()),
            (Some(Filled::PerRequest(text)), Some(req)) => {
                let mut target = Vec::new();
                text.render(req, &mut target);
                HeaderValue::from_bytes(&vars::escape_for_header(&target)).ok()
            }
            _ => None,
        };
        let mut response = Response::new(ResponseBody::full(body.clone()));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        if !body.is_empty() {
            headers.insert(CONTENT_TYPE, TEXT_PLAIN);
        }
        if let Some(location) = location {
            headers.insert(LOCATION, location);
        }
        if status.as_u16() == UNANSWERED {
            response.extensions_mut().insert(Unanswered);
        }
        response
    }
}

/// nginx's `return 444`: no answer at all (scanners hitting an unknown host get nothing).
const UNANSWERED: u16 = 444;

/// Marks the response of a `return = { status = 444 }`: the connection serving it drops
/// it and closes unanswered (an upstream's 444 is passed on like any status).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unanswered;

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("closed without an answer (444)")
    }
}

impl std::error::Error for Unanswered {}

/// The answer to a request that is itself wrong (bad Host or path, a method never
/// forwarded): an error page, and on HTTP/1.x the connection closes after it, as nginx
/// does, since what else the client sent on it cannot be trusted either.
pub(crate) fn refusal(status: StatusCode, version: Version) -> Response<ResponseBody> {
    let mut response = error(status);
    if version < Version::HTTP_2 {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The refusal a site's `client_certificates` make: a 400 saying why in nginx's words
/// (`400 Bad Request: No required SSL certificate was sent`), or a 421; the connection
/// closes after it, as nginx closes it.
pub(crate) fn client_certificate(why: crate::tls::Refusal, version: Version) -> Response<ResponseBody> {
    let status = match why {
        crate::tls::Refusal::Misdirected => StatusCode::MISDIRECTED_REQUEST,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut response = refusal(status, version);
    if status == StatusCode::BAD_REQUEST {
        *response.body_mut() = ResponseBody::full(format!("400 Bad Request: {}\n", why.reason()));
    }
    response
}

/// A short plain-text error page: `502 Bad Gateway\n`.
pub(crate) fn error(status: StatusCode) -> Response<ResponseBody> {
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
