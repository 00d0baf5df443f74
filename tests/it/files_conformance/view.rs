//! One answer as the comparison sees it: the status, the headers that carry meaning, and
//! the body decoded (gunzipped; a multipart answer parsed into its parts), each written
//! as one line so that a difference reads at a glance.

use std::fmt::Write as _;
use std::io::Read as _;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, Request, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

/// What one request sends.
pub struct Ask {
    pub method: &'static str,
    pub target: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub version: Version,
}

/// A whole answer.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Sends `ask` over a new connection.
pub async fn fetch(at: SocketAddr, ask: &Ask) -> Answer {
    let stream = tokio::net::TcpStream::connect(at).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(ask.method)
        .uri(ask.target)
        .version(ask.version)
        .header("host", "files.test");
    for (name, value) in &ask.headers {
        req = req.header(*name, value.as_str());
    }
    let req = req.body(Empty::<Bytes>::new()).unwrap();
    let response = sender.send_request(req).await.expect("response");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("whole body").to_bytes();
    Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    }
}

/// Headers compared as they are.
const COMPARED: [&str; 9] = [
    "content-type",
    "content-length",
    "content-range",
    "content-encoding",
    "vary",
    "etag",
    "last-modified",
    "accept-ranges",
    "cache-control",
];

/// The answer as compared: `body` says whether its bytes count (not for the servers' own
/// error pages, which differ on purpose: nginx's are HTML, tollgate's plain text).
pub fn view(answer: &Answer, port: u16, body: bool) -> String {
    let mut out = format!("{}", answer.status);
    let headers = &answer.headers;
    let framing = match (
        headers.get("content-length"),
        headers.get("transfer-encoding"),
    ) {
        (Some(_), _) => "length",
        (None, Some(_)) => "chunked",
        (None, None) => "none",
    };
    let _ = write!(out, " framing={framing}");
    for name in COMPARED {
        if !body && (name == "content-type" || name == "content-length") {
            continue;
        }
        let values: Vec<_> = headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or("?"))
            // The boundary is each server's own.
            .map(|v| match v.starts_with("multipart/byteranges") {
                true => "multipart/byteranges; boundary=B",
                false => v,
            })
            .collect();
        if !values.is_empty() {
            let _ = write!(out, " {name}={:?}", values.join(", "));
        }
    }
    if let Some(location) = headers.get("location") {
        let location = location
            .to_str()
            .unwrap_or("?")
            .replace(&format!(":{port}"), ":PORT");
        let _ = write!(out, " location={location:?}");
    }
    if let Some(expires) = headers.get("expires") {
        let _ = write!(
            out,
            " expires={}",
            expires_from_now(expires.to_str().unwrap_or(""))
        );
    }
    if body {
        let _ = write!(out, " body={}", decoded(answer));
    }
    out
}

/// `Expires` as the days from now it says, rounded (both servers wrote it a moment ago).
fn expires_from_now(value: &str) -> String {
    let Ok(at) = httpdate::parse_http_date(value) else {
        return format!("{value:?}");
    };
    let now = SystemTime::now();
    let days = match at.duration_since(now) {
        Ok(ahead) => (ahead + Duration::from_secs(60)).as_secs() / 86_400,
        Err(_) => return "past".into(),
    };
    format!("+{days}d")
}

/// The body's bytes, decoded: a short digest (length and hash), or a multipart answer's
/// parts, each its `Content-Range` and digest.
fn decoded(answer: &Answer) -> String {
    let coding = answer
        .headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok());
    let bytes = match coding {
        Some("gzip") => {
            let mut out = Vec::new();
            match flate2::read::MultiGzDecoder::new(&answer.body[..]).read_to_end(&mut out) {
                Ok(_) => Bytes::from(out),
                Err(err) => return format!("bad-gzip({err})"),
            }
        }
        _ => answer.body.clone(),
    };
    let content_type = answer
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok());
    match content_type.and_then(|t| t.strip_prefix("multipart/byteranges; boundary=")) {
        Some(boundary) => parts(&bytes, boundary),
        None => digest(&bytes),
    }
}

fn digest(bytes: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    format!("{}:{:016x}", bytes.len(), hasher.finish())
}

/// A `multipart/byteranges` body as its parts (the boundary differs between servers).
fn parts(body: &[u8], boundary: &str) -> String {
    let text = String::from_utf8_lossy(body);
    let delimiter = format!("--{boundary}");
    let mut out = String::from("parts[");
    for part in text.split(&delimiter).skip(1) {
        if part.starts_with("--") {
            out.push_str("end");
            break;
        }
        let Some((head, data)) = part.split_once("\r\n\r\n") else {
            out.push_str("malformed ");
            continue;
        };
        let data = data.strip_suffix("\r\n").unwrap_or(data);
        let head = head.trim().replace("\r\n", "; ");
        let _ = write!(out, "{head} {} | ", digest(data.as_bytes()));
    }
    out.push(']');
    out
}
