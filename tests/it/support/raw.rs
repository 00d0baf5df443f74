//! A raw-bytes upstream for the hardening tests: it records exactly what arrives on each
//! connection, frames requests itself (RFC 9112: `Content-Length` or chunked), and answers
//! each with what its handler returns for the request's head. And raw clients: one
//! response read at a time, or many requests pipelined.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the upstream has seen so far.
#[derive(Default, Debug)]
struct Record {
    /// Every byte received, per connection, in accept order.
    connections: Vec<Vec<u8>>,
    /// Complete requests framed, over all connections.
    requests: usize,
    /// Connections the gateway has closed (EOF or reset).
    closed: usize,
}

pub struct RawUpstream {
    pub addr: SocketAddr,
    record: Arc<Mutex<Record>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Handler = dyn Fn(&[u8]) -> Vec<u8> + Send + Sync;

impl RawUpstream {
    /// An upstream answering each request with `respond(head)` (the raw response bytes).
    pub async fn start(respond: impl Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static) -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let record: Arc<Mutex<Record>> = Arc::default();
        let respond: Arc<Handler> = Arc::new(respond);
        let rec = record.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let index = {
                    let mut rec = rec.lock().unwrap();
                    rec.connections.push(Vec::new());
                    rec.connections.len() - 1
                };
                tokio::spawn(serve(stream, index, rec.clone(), respond.clone()));
            }
        });
        RawUpstream { addr, record, task }
    }

    /// An upstream answering `200 ok` to everything.
    pub async fn ok() -> RawUpstream {
        RawUpstream::start(|_| ok_response("ok")).await
    }

    /// Complete requests received, over every connection.
    pub fn requests(&self) -> usize {
        self.record.lock().unwrap().requests
    }

    /// Connections accepted.
    pub fn accepted(&self) -> usize {
        self.record.lock().unwrap().connections.len()
    }

    /// Connections that have ended.
    pub fn closed(&self) -> usize {
        self.record.lock().unwrap().closed
    }

    /// Every byte received, connections one after the other.
    pub fn bytes(&self) -> Vec<u8> {
        self.record.lock().unwrap().connections.concat()
    }
}

/// `200 OK` with `body`.
pub fn ok_response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    index: usize,
    record: Arc<Mutex<Record>>,
    respond: Arc<Handler>,
) {
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        record.lock().unwrap().connections[index].extend_from_slice(&buf[..n]);
        pending.extend_from_slice(&buf[..n]);
        while let Some((head_len, total)) = frame(&pending) {
            let reply = respond(&pending[..head_len]);
            pending.drain(..total);
            record.lock().unwrap().requests += 1;
            if stream.write_all(&reply).await.is_err() {
                break;
            }
        }
    }
    record.lock().unwrap().closed += 1;
}

/// The head's length and the whole request's, once a request is complete in `buf`.
fn frame(buf: &[u8]) -> Option<(usize, usize)> {
    let mut headers = [httparse::EMPTY_HEADER; 1024];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        _ => return None,
    };
    let mut length = 0usize;
    let mut chunked = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(h.value).ok()?.trim().parse().ok()?;
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = true;
        }
    }
    if !chunked {
        let total = head_len + length;
        return (buf.len() >= total).then_some((head_len, total));
    }
    let body = chunked_len(&buf[head_len..])?;
    Some((head_len, head_len + body))
}

/// The length of a complete chunked body at the front of `buf` (no trailers expected).
fn chunked_len(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let line_end = at + buf[at..].windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&buf[at..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            return (buf.len() >= at + 2).then_some(at + 2);
        }
        at += size + 2;
        if buf.len() < at {
            return None;
        }
    }
}

/// One response read from a raw client connection: its status, head text and body.
/// `None` when the connection closed (or said nothing for 3 s) before a whole response.
///
/// Reads no byte past the response, so that a second call finds the next one: the head a
/// byte at a time, then exactly its `Content-Length`.
/// The raw answer to `request` on a new connection, read to the connection's end
/// (within 10 s).
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    )
    .await;
    read.expect("the answer within 10 s")
        .expect("read the answer");
    answer
}

pub async fn read_response(stream: &mut tokio::net::TcpStream) -> Option<RawResponse> {
    let wait = std::time::Duration::from_secs(3);
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(wait, stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => return None,
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    resp.parse(&head).ok()?;
    let length = resp
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
        .unwrap_or(0usize);
    let mut body = vec![0u8; length];
    match tokio::time::timeout(wait, stream.read_exact(&mut body)).await {
        Ok(Ok(_)) => Some(RawResponse {
            status: resp.code.unwrap_or(0),
            head: String::from_utf8_lossy(&head).into_owned(),
            body: String::from_utf8_lossy(&body).into_owned(),
        }),
        _ => None,
    }
}

#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Sends `bytes` (whole requests) down one connection to `addr`, pipelined, and reads
/// `answers` responses (each with a `Content-Length`, or none) back while they go: their
/// statuses. A spray of thousands of requests takes a fraction of a second.
pub async fn pipelined(addr: SocketAddr, bytes: Vec<u8>, answers: usize) -> Vec<u16> {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move { write.write_all(&bytes).await.map(|()| write) });
    let mut read = BufReader::new(read);
    let mut statuses = Vec::with_capacity(answers);
    let mut line = String::new();
    while statuses.len() < answers {
        line.clear();
        read.read_line(&mut line).await.unwrap();
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok());
        let status = status.unwrap_or_else(|| panic!("not a status line: {line:?}"));
        let mut length = 0;
        loop {
            line.clear();
            read.read_line(&mut line).await.unwrap();
            if line == "\r\n" {
                break;
            }
            let (name, value) = line.split_once(':').expect("a header line");
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        read.read_exact(&mut body).await.unwrap();
        statuses.push(status);
    }
    drop(writer.await.unwrap().unwrap());
    statuses
}

/// `count` requests of `GET /` with `X-Api-Key: key`, as raw bytes for [`pipelined`].
pub fn api_key_requests(key: &str, count: usize) -> Vec<u8> {
    format!("GET / HTTP/1.1\r\nhost: api\r\nx-api-key: {key}\r\n\r\n")
        .repeat(count)
        .into_bytes()
}

/// True when the gateway closes `stream` within 3 s, reading and dropping what comes first.
pub async fn closes(stream: &mut tokio::net::TcpStream) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// What an [`EarlyUpstream`] has seen: every byte, per connection, and how many ended.
#[derive(Default)]
struct Early {
    connections: Vec<Vec<u8>>,
    closed: usize,
}

/// An upstream that answers as soon as a request head is in, before reading its body:
/// `200` and the start of a chunked body (`early`) it never ends, as a streaming server
/// answering an upload as it goes. Then it reads on, keeping every byte, until the
/// gateway closes.
pub struct EarlyUpstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Early>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EarlyUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EarlyUpstream {
    pub async fn start() -> EarlyUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Early>> = Arc::default();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let index = {
                    let mut seen = record.lock().unwrap();
                    seen.connections.push(Vec::new());
                    seen.connections.len() - 1
                };
                tokio::spawn(answer_early(stream, index, record.clone()));
            }
        });
        EarlyUpstream { addr, seen, task }
    }

    /// Every byte received, per connection.
    pub fn connections(&self) -> Vec<Vec<u8>> {
        self.seen.lock().unwrap().connections.clone()
    }

    pub fn accepted(&self) -> usize {
        self.seen.lock().unwrap().connections.len()
    }

    pub fn closed(&self) -> usize {
        self.seen.lock().unwrap().closed
    }
}

async fn answer_early(mut stream: tokio::net::TcpStream, index: usize, seen: Arc<Mutex<Early>>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut answered = false;
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let head_in = {
            let mut seen = seen.lock().unwrap();
            let received = &mut seen.connections[index];
            received.extend_from_slice(&buf[..n]);
            received.windows(4).any(|w| w == b"\r\n\r\n")
        };
        if head_in && !answered {
            answered = true;
            let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nearly\r\n";
            if stream.write_all(head).await.is_err() {
                break;
            }
        }
    }
    seen.lock().unwrap().closed += 1;
}
