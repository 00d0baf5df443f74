//! The least a tokio proxy can do per request, for `benches/callgrind.sh` (`ONLY=floor`): what
//! the runtime and the four socket calls of a proxied request cost before any HTTP is done.
//!
//! ```text
//! cargo run --release --example bench_floor -- 127.0.0.1:8080 127.0.0.1:3000
//! ```
//!
//! Not a proxy anyone should run: one thread (a tokio current-thread runtime, as a tollgate
//! worker), one upstream connection per client connection, made when the client connects;
//! requests must be GETs without a body, and responses must carry `Content-Length`. A head is
//! found by its blank line and passed on as it came, not parsed, checked or rewritten: no
//! header map, no routing, no timeouts, no `X-Forwarded-For`, no log, no metrics. Whatever
//! does not fit closes the connection.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Room for one head and what may come with it.
const BUFFER: usize = 16 * 1024;

fn main() {
    let addrs: Vec<SocketAddr> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let [listen, upstream] = addrs[..] else {
        eprintln!("usage: bench_floor LISTEN_IP:PORT UPSTREAM_IP:PORT");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen).await.expect("the listen address");
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                if let Ok(server) = TcpStream::connect(upstream).await {
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    relay(client, server).await;
                }
            });
        }
    });
}

/// Passes each request head to `server` and each response back to `client`, until either
/// end closes or sends what this relay does not take.
async fn relay(mut client: TcpStream, mut server: TcpStream) {
    let mut request = Vec::with_capacity(BUFFER);
    let mut response = Vec::with_capacity(BUFFER);
    loop {
        let Some(head) = read_head(&mut client, &mut request).await else {
            return;
        };
        if server.write_all(&request[..head]).await.is_err() {
            return;
        }
        request.drain(..head);
        let Some(head) = read_head(&mut server, &mut response).await else {
            return;
        };
        let Some(length) = content_length(&response[..head]) else {
            return;
        };
        while response.len() < head + length {
            match server.read_buf(&mut response).await {
                Ok(1..) if response.len() <= BUFFER => {}
                _ => return,
            }
        }
        if client.write_all(&response[..head + length]).await.is_err() {
            return;
        }
        response.drain(..head + length);
    }
}

/// Reads into `buf` until it holds a whole head: its length, blank line included.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(end + 4);
        }
        if buf.len() >= BUFFER {
            return None;
        }
        match stream.read_buf(buf).await {
            Ok(1..) => {}
            _ => return None,
        }
    }
}

/// The `Content-Length` of a response head.
fn content_length(head: &[u8]) -> Option<usize> {
    head.split(|&b| b == b'\n').find_map(|line| {
        let (name, value) = line.split_at(line.iter().position(|&b| b == b':')?);
        if !name.eq_ignore_ascii_case(b"content-length") {
            return None;
        }
        std::str::from_utf8(&value[1..]).ok()?.trim().parse().ok()
    })
}
