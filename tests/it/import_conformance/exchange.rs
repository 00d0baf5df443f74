//! One request sent to a server, and what came of it as a comparable row: the answer's
//! status and headers (those that say something about the config), its body when it is
//! a success, and what the upstream received, if anything.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use rustls::pki_types::ServerName;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::super::support::accept_any::AcceptAny;
use super::super::support::{self, Seen, Upstream};
use super::corpus::Request;

/// The recording upstream's own `Server`, which neither server may show by default.
pub const STUB_SERVER: &str = "stub/1.0";

/// Answer headers that say nothing about the config (framing, the date), and tollgate's
/// `Retry-After` on a refusal, which nginx never sends: the import report says so on
/// every `limit_req` (`approx`), and the rest of the refusal is compared. A file's
/// validators are compared (both servers read the same tree), and `Expires` as its
/// distance from `Date`.
const UNCOMPARED: &[&str] = &[
    "retry-after",
    "date",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
];

/// The upstream every case proxies to. It answers by the path:
/// - `/status/NNN…`: that status;
/// - containing `redirect`: 302 with `Location` and `Refresh` on the Host it was sent;
/// - containing `cookie`: 200 with three `Set-Cookie`s (paths and domains to rewrite);
/// - else 200. Every answer has `Server`, `X-Powered-By`, `X-Pad` and `X-Accel-Buffering`.
pub async fn stub() -> Upstream {
    Upstream::start(|req| async move {
        let path = req.uri().path().to_owned();
        let host = req
            .headers()
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let status = path
            .strip_prefix("/status/")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse::<u16>().ok())
            .unwrap_or(if path.contains("redirect") { 302 } else { 200 });
        let body = format!("upstream saw {} {}\n", req.method(), req.uri());
        let mut answer = Response::builder()
            .status(status)
            .header("Server", STUB_SERVER)
            .header("X-Powered-By", "stub")
            .header("X-Pad", "avoid browser bug")
            .header("X-Accel-Buffering", "yes")
            .header("Content-Type", "text/plain");
        if path.contains("redirect") {
            answer = answer
                .header("Location", format!("http://{host}/v2/next"))
                .header("Refresh", format!("5; url=http://{host}/v2/refreshed"));
        }
        if path.contains("cookie") {
            answer = answer
                .header("Set-Cookie", "a=1; Path=/app/; Domain=app.internal")
                .header("Set-Cookie", "b=2; path=/app/deep/; HttpOnly")
                .header("Set-Cookie", "c=3; Domain=other.example; Path=/");
        }
        answer.body(support::full(body)).unwrap()
    })
    .await
}

/// What came of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub answer: String,
    pub upstream: String,
}

/// Sends `request` to `addr` and reads the answer to the end (the request asks the
/// server to close); `seen` is the upstream's record, drained of what this request
/// made it see.
pub async fn exchange(addr: SocketAddr, request: &Request, seen: &Arc<Mutex<Vec<Seen>>>) -> Row {
    seen.lock().unwrap().clear();
    if request.alpn {
        return Row {
            answer: format!("alpn {}", alpn(addr, &request.bytes).await),
            upstream: String::new(),
        };
    }
    let raw = support::within(10, async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let mut raw = Vec::new();
        if request.tls {
            let mut stream = tls(tcp, &request.bytes, &[b"http/1.1"]).await;
            stream.write_all(&request.bytes).await.unwrap();
            let _ = stream.read_to_end(&mut raw).await;
        } else {
            let mut stream = tcp;
            stream.write_all(&request.bytes).await.unwrap();
            let _ = stream.read_to_end(&mut raw).await;
        }
        raw
    })
    .await;
    // The upstream records a request before it answers; nothing more comes after the answer.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let seen: Vec<Seen> = std::mem::take(&mut *seen.lock().unwrap());
    // An auth service's question (it carries `X-Original-URI`) is not the answer's source.
    let proxied = seen
        .iter()
        .any(|s| !s.headers.contains_key("x-original-uri"));
    Row {
        answer: answer_row(&raw, proxied),
        upstream: seen
            .iter()
            .map(upstream_row)
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

/// A TLS client on `tcp` that accepts any certificate, offering `alpn`, with the request's
/// Host as SNI.
async fn tls(tcp: TcpStream, request: &[u8], alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let name = host_of(request).unwrap_or_else(|| "localhost".to_owned());
    let name = ServerName::try_from(name).unwrap();
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS handshake")
}

/// What a handshake offering `h2` and `http/1.1` chooses.
async fn alpn(addr: SocketAddr, request: &[u8]) -> String {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let stream = tls(tcp, request, &[b"h2", b"http/1.1"]).await;
    let chosen = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    chosen.map_or("none".to_owned(), |p| {
        String::from_utf8_lossy(&p).into_owned()
    })
}

/// The name of the request's `Host`, without a port.
fn host_of(request: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(request);
    let host = text.lines().find_map(|line| {
        line.strip_prefix("Host:")
            .or_else(|| line.strip_prefix("host:"))
    })?;
    let host = host.trim();
    Some(
        host.rsplit_once(':')
            .map_or(host, |(name, _)| name)
            .to_owned(),
    )
}

/// `STATUS; name: value; …` with the compared headers in name order (values of one name in
/// the order sent), then the body when the status is a success.
fn answer_row(raw: &[u8], proxied: bool) -> String {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if raw.is_empty() {
            "closed without an answer".to_owned()
        } else {
            format!("unreadable answer {:?}", String::from_utf8_lossy(raw))
        };
    };
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line.split(' ').nth(1).unwrap_or("?").to_owned();
    let fields: Vec<(String, String)> = (lines.filter_map(|line| line.split_once(':')))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let field = |wanted: &str| {
        fields
            .iter()
            .find(|(name, _)| name == wanted)
            .map(|(_, v)| v.as_str())
    };
    let mut headers: Vec<(String, String)> = Vec::new();
    for (name, value) in &fields {
        let file = field("etag").is_some();
        if UNCOMPARED.contains(&name.as_str()) || ignored_when_ours(name, proxied, file) {
            continue;
        }
        let value = match name.as_str() {
            // Whose Server it is, not its words: nginx says "nginx", tollgate "tollgate".
            "server" if value == STUB_SERVER => value.clone(),
            "server" => "(the proxy's own)".to_owned(),
            "expires" => after_date(value, field("date")),
            _ => value.clone(),
        };
        headers.push((name.clone(), value));
    }
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    let mut row = status.clone();
    for (name, value) in headers {
        row.push_str(&format!("; {name}: {value}"));
    }
    if status.starts_with('2') {
        let chunked =
            field("transfer-encoding").is_some_and(|te| te.eq_ignore_ascii_case("chunked"));
        let gzipped = field("content-encoding") == Some("gzip");
        let body = decoded(&raw[end + 4..], chunked, gzipped);
        row.push_str(&format!("; body {:?}", String::from_utf8_lossy(&body)));
    }
    row
}

/// `Expires` as its distance from `Date` (`Date+2592000s`), which the two servers
/// write at different seconds.
fn after_date(expires: &str, date: Option<&str>) -> String {
    let seconds = |text: &str| httpdate::parse_http_date(text).ok();
    let since = |at: std::time::SystemTime| {
        at.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    match (seconds(expires), date.and_then(seconds)) {
        (Some(expires), Some(date)) => {
            format!("Date{:+}s", since(expires) as i64 - since(date) as i64)
        }
        _ => expires.to_owned(),
    }
}

/// A body as the client reads it: its chunks joined, then gunzipped. The two servers
/// compress alike but not byte for byte, and cut their chunks where they please.
fn decoded(body: &[u8], chunked: bool, gzipped: bool) -> Vec<u8> {
    let mut body = body.to_vec();
    if chunked {
        let mut joined = Vec::new();
        let mut rest = &body[..];
        while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = std::str::from_utf8(&rest[..line_end]).ok();
            let size =
                size.and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok());
            let Some(size) = size.filter(|&size| size > 0 && line_end + 2 + size <= rest.len())
            else {
                break;
            };
            joined.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest = &rest[(line_end + 4 + size).min(rest.len())..];
        }
        body = joined;
    }
    if gzipped {
        let mut plain = Vec::new();
        let read =
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut plain);
        body = match read {
            Ok(_) => plain,
            Err(error) => format!("not gzip: {error}").into_bytes(),
        };
    }
    body
}

/// The type of an answer the proxy wrote itself: nginx's error pages are HTML, tollgate's
/// plain text, and a `return`'s text is `text/plain` to nginx, with `charset=utf-8` to
/// tollgate; what they say is not the config's. A file's type (an answer with an `ETag`)
/// is compared.
fn ignored_when_ours(name: &str, proxied: bool, file: bool) -> bool {
    !proxied && !file && name == "content-type"
}

/// `METHOD URI; name: value; …` of what the upstream received, the headers in name order
/// without those that frame the message between the proxy and it.
fn upstream_row(seen: &Seen) -> String {
    let mut row = format!("{} {}", seen.method, seen.uri);
    for (name, value) in sorted(&seen.headers) {
        row.push_str(&format!("; {name}: {value}"));
    }
    row
}

fn sorted(headers: &HeaderMap) -> Vec<(String, String)> {
    const FRAMING: &[&str] = &[
        "connection",
        "content-length",
        "transfer-encoding",
        "te",
        "keep-alive",
    ];
    let mut pairs: Vec<(String, String)> = headers
        .iter()
        .filter(|(name, _)| !FRAMING.contains(&name.as_str()))
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}
