//! The request `auth.request` sends its service: a `GET` of the service's URL with the
//! client's end-to-end headers (its `Cookie` and `Authorization` are what the service
//! checks) and what the client asked for, in the headers nginx's `auth_request` guides
//! and Traefik's ForwardAuth use.
//!
//! Those headers are always tollgate's own: a client's `X-Forwarded-Uri`,
//! `X-Original-URL` or `X-Forwarded-For` is dropped, never passed on, since an auth
//! service that decides by path or address would otherwise decide on what the client
//! claims. No body goes (nginx sends none either), so the framing headers go too.

use http::header::{CONNECTION, COOKIE, HOST};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};

use crate::proxy::headers::ip_value;
use crate::proxy::own::Asked;
use crate::wire::body::RequestBody;
use crate::wire::h1;

const X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
const X_ORIGINAL_METHOD: HeaderName = HeaderName::from_static("x-original-method");
const X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
const X_ORIGINAL_URL: HeaderName = HeaderName::from_static("x-original-url");

/// The client's headers that never reach the service: hop-by-hop and framing (RFC 9110
/// §7.6.1), the Host (the service's own is sent), and those tollgate writes itself.
const DROPPED: [&str; 13] = [
    "connection",
    "content-length",
    "expect",
    "forwarded",
    "host",
    "http2-settings",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "x-real-ip",
];

/// Where the service is asked: its URL's path and query, and the `Host` it is sent.
pub(super) struct Target {
    pub uri: Uri,
    pub host: HeaderValue,
}

/// The `GET` that asks the service about `asked`.
pub(super) fn build(target: &Target, asked: &Asked<'_>) -> Request<RequestBody> {
    let client = asked.req;
    let mut headers = HeaderMap::with_capacity(client.headers().len() + 10);
    let connection = client.headers().get_all(CONNECTION);
    let named = |name: &HeaderName| {
        let name = name.as_str().as_bytes();
        connection.iter().any(|line| h1::tokens(line.as_bytes()).any(|t| t.eq_ignore_ascii_case(name)))
    };
    for (name, value) in client.headers() {
        if passes(name) && !named(name) {
            headers.append(name, value.clone());
        }
    }
    join_cookies(&mut headers);
    headers.insert(HOST, target.host.clone());
    for (name, value) in asked_for(asked) {
        headers.insert(name, value);
    }
    let mut request = Request::new(RequestBody::Empty);
    *request.method_mut() = Method::GET;
    *request.uri_mut() = target.uri.clone();
    *request.headers_mut() = headers;
    request
}

/// Whether the client's header `name` goes on to the service.
fn passes(name: &HeaderName) -> bool {
    let name = name.as_str();
    !(DROPPED.contains(&name) || name.starts_with("x-forwarded-") || name.starts_with("x-original-"))
}

/// What the client asked for, in the headers auth services read: the method, scheme,
/// host, URI and address, both in Traefik's `X-Forwarded-*` and nginx guides'
/// `X-Original-*` spelling.
fn asked_for(asked: &Asked<'_>) -> [(HeaderName, HeaderValue); 9] {
    let req = asked.req;
    let proto = if asked.conn.https { "https" } else { "http" };
    let host = req
        .headers()
        .get(HOST)
        .cloned()
        .or_else(|| req.uri().authority().and_then(|a| HeaderValue::from_str(a.as_str()).ok()))
        .unwrap_or(HeaderValue::from_static(""));
    let uri = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let uri = HeaderValue::from_str(uri).unwrap_or(HeaderValue::from_static("/"));
    let url = [proto.as_bytes(), b"://", host.as_bytes(), uri.as_bytes()].concat();
    let url = HeaderValue::from_bytes(&url).unwrap_or(HeaderValue::from_static(""));
    let method = HeaderValue::from_str(req.method().as_str()).unwrap_or(HeaderValue::from_static("GET"));
    let client = ip_value(asked.client);
    [
        (X_FORWARDED_METHOD, method.clone()),
        (X_FORWARDED_PROTO, HeaderValue::from_static(proto)),
        (X_FORWARDED_HOST, host),
        (X_FORWARDED_URI, uri.clone()),
        (X_FORWARDED_FOR, client.clone()),
        (X_REAL_IP, client),
        (X_ORIGINAL_METHOD, method),
        (X_ORIGINAL_URI, uri),
        (X_ORIGINAL_URL, url),
    ]
}

/// Several `Cookie` lines (HTTP/2 sends one a cookie) made one, as HTTP/1.1 wants it.
fn join_cookies(headers: &mut HeaderMap) {
    if headers.get_all(COOKIE).iter().nth(1).is_none() {
        return;
    }
    let joined: Vec<&[u8]> = headers.get_all(COOKIE).iter().map(HeaderValue::as_bytes).collect();
    if let Ok(value) = HeaderValue::from_bytes(&joined.join(&b"; "[..])) {
        headers.insert(COOKIE, value);
    }
}
