//! A tiny, fast HTTP/1.1 upstream for load benchmarks (`benches/proxy_vs_nginx.sh`).
//!
//! ```text
//! cargo run --release --example bench_upstream -- 127.0.0.1:3000
//! ```
//!
//! One thread (tokio current-thread runtime), so that the proxy under test and the upstream get the
//! same CPU budget. Every connection is HTTP/1.1 with keep-alive and `TCP_NODELAY`; every request is
//! answered `200 OK` with the fixed body `hello\n` (with `Content-Length`), except `/json`, answered
//! with 100,000 bytes of `application/json` (the `gzip_json` scenario: what a proxy's compression
//! costs). A request body is read and thrown away, so the connection stays reusable. A failing
//! connection is logged and dropped; it never stops the server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const DEFAULT_ADDR: &str = "127.0.0.1:3000";
const BODY: &[u8] = b"hello\n";

#[path = "../benches/shared/json.rs"]
mod shared_json;

/// `/json`'s body: 100,000 bytes of JSON records (benches/shared/json.rs).
static JSON: LazyLock<Bytes> = LazyLock::new(|| shared_json::json(100_000));

fn main() {
    let arg = std::env::args().nth(1);
    let text = arg.as_deref().unwrap_or(DEFAULT_ADDR);
    let addr: SocketAddr = match text.parse() {
        Ok(addr) => addr,
        Err(err) => {
            eprintln!(
                "bench_upstream: bad address {text:?}: {err} (usage: bench_upstream [IP:PORT])"
            );
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("bench_upstream: cannot build the runtime: {err}");
            std::process::exit(1);
        }
    };
    if let Err(err) = runtime.block_on(serve(addr)) {
        eprintln!("bench_upstream: cannot listen on {addr}: {err}");
        std::process::exit(1);
    }
}

async fn serve(addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    eprintln!("bench_upstream: listening on {}", listener.local_addr()?);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // EMFILE and friends: back off a little instead of spinning.
                eprintln!("bench_upstream: accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if let Err(err) = stream.set_nodelay(true) {
            eprintln!("bench_upstream: {peer}: cannot set TCP_NODELAY: {err}");
        }
        tokio::spawn(async move {
            let conn = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service_fn(answer));
            if let Err(err) = conn.await {
                if !err.is_incomplete_message() {
                    eprintln!("bench_upstream: {peer}: connection error: {err}");
                }
            }
        });
    }
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let json = req.uri().path() == "/json";
    // Drain the request body so the connection can carry the next request.
    let mut body = req.into_body();
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
    let (body, content_type) = match json {
        true => (JSON.clone(), "application/json"),
        false => (Bytes::from_static(BODY), "text/plain"),
    };
    let mut resp = Response::new(Full::new(body));
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    Ok(resp)
}
