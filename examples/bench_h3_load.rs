//! A load client for `benches/http3.sh`: the same requests over HTTP/2 (TLS, hyper) or
//! HTTP/3 (QUIC, quinn and h3), with the same concurrency, for a fixed time. No wrk or
//! h2load here speaks HTTP/3, so both sides of the comparison use this one client.
//!
//! ```text
//! cargo run --release --example bench_h3_load -- h3 127.0.0.1:8443 a.test 4 16 10 /
//! ```
//!
//! Arguments: protocol (`h2` or `h3`), address, SNI and host, connections, requests in
//! flight per connection, seconds, path. One thread (a current-thread runtime), so the
//! server under test keeps the other core. Prints one line: `requests errors p50_us p99_us
//! bytes seconds` (`bytes`: of the answers' bodies, and `seconds` the run took to the end
//! of the last answer: the download scenario's throughput).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;

// The tests' verifier that takes any certificate: the benchmark's is self-signed.
#[path = "../tests/it/support/accept_any.rs"]
mod accept_any;
use accept_any::AcceptAny;

/// What each worker task records.
#[derive(Default)]
struct Tally {
    errors: u64,
    /// Body bytes of the answers read whole.
    bytes: u64,
    latencies_us: Vec<u32>,
}

struct Args {
    proto: String,
    addr: SocketAddr,
    host: String,
    connections: usize,
    streams: usize,
    duration: Duration,
    path: String,
}

fn args() -> Args {
    let a: Vec<String> = std::env::args().skip(1).collect();
    assert!(
        a.len() == 7,
        "usage: bench_h3_load h2|h3 ADDR HOST CONNECTIONS STREAMS SECONDS PATH"
    );
    Args {
        proto: a[0].clone(),
        addr: a[1].parse().expect("an address"),
        host: a[2].clone(),
        connections: a[3].parse().expect("connections"),
        streams: a[4].parse().expect("streams"),
        duration: Duration::from_secs(a[5].parse().expect("seconds")),
        path: a[6].clone(),
    }
}

fn main() {
    let args = args();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    runtime.block_on(async {
        let deadline = Instant::now() + args.duration;
        let mut tasks = Vec::new();
        let endpoint = (args.proto == "h3").then(quic_endpoint);
        for _ in 0..args.connections {
            match args.proto.as_str() {
                "h2" => tasks.extend(h2_connection(&args, deadline, &tally).await),
                "h3" => tasks.extend(
                    h3_connection(endpoint.as_ref().unwrap(), &args, deadline, &tally).await,
                ),
                other => panic!("unknown protocol {other}"),
            }
        }
        for task in tasks {
            let _ = task.await;
        }
    });
    let took = started.elapsed().as_secs_f64();
    let mut tally = tally.lock().unwrap();
    tally.latencies_us.sort_unstable();
    let pick = |q: f64| {
        let n = tally.latencies_us.len();
        if n == 0 {
            0
        } else {
            tally.latencies_us[((n as f64 * q) as usize).min(n - 1)]
        }
    };
    println!(
        "{} {} {} {} {} {took:.3}",
        tally.latencies_us.len(),
        tally.errors,
        pick(0.5),
        pick(0.99),
        tally.bytes
    );
}

type Task = tokio::task::JoinHandle<()>;

fn tls_config(alpn: &[u8]) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    config
}

/// One HTTP/2 connection over TLS, with `streams` tasks sending on it until `deadline`.
async fn h2_connection(args: &Args, deadline: Instant, tally: &Arc<Mutex<Tally>>) -> Vec<Task> {
    let tcp = tokio::net::TcpStream::connect(args.addr)
        .await
        .expect("connect");
    tcp.set_nodelay(true).unwrap();
    let name = ServerName::try_from(args.host.clone()).unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(tls_config(b"h2")))
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    streams(sender, args, deadline, tally)
}

/// `args.streams` tasks each sending requests on `sender` one after another until
/// `deadline`, then adding what they saw to `tally`.
fn streams<S: Sender>(
    sender: S,
    args: &Args,
    deadline: Instant,
    tally: &Arc<Mutex<Tally>>,
) -> Vec<Task> {
    let uri = format!("https://{}{}", args.host, args.path);
    (0..args.streams)
        .map(|_| {
            let (mut sender, uri, tally) = (sender.clone(), uri.clone(), tally.clone());
            tokio::spawn(async move {
                let mut mine = Tally::default();
                while Instant::now() < deadline {
                    let began = Instant::now();
                    let answered = sender.get(&uri).await;
                    record(&mut mine, answered, began);
                }
                merge(&tally, mine);
            })
        })
        .collect()
}

/// One protocol's way of sending a `GET` and reading its whole answer.
trait Sender: Clone + Send + 'static {
    /// The length of `uri`'s answer's body, read to the end, when it was a 2xx.
    fn get(&mut self, uri: &str) -> impl std::future::Future<Output = Option<u64>> + Send;
}

impl Sender for hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
    async fn get(&mut self, uri: &str) -> Option<u64> {
        let req = Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
        let response = self.send_request(req).await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let mut body = response.into_body();
        let mut bytes = 0;
        while let Some(frame) = body.frame().await {
            bytes += frame.ok()?.data_ref().map_or(0, |data| data.len() as u64);
        }
        Some(bytes)
    }
}

impl Sender for h3::client::SendRequest<h3_quinn::OpenStreams, Bytes> {
    async fn get(&mut self, uri: &str) -> Option<u64> {
        h3_request(self, uri).await.ok()
    }
}

fn quic_endpoint() -> quinn::Endpoint {
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls_config(b"h3")).unwrap();
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    endpoint
}

/// One HTTP/3 connection, with `streams` tasks sending on it until `deadline`.
async fn h3_connection(
    endpoint: &quinn::Endpoint,
    args: &Args,
    deadline: Instant,
    tally: &Arc<Mutex<Tally>>,
) -> Vec<Task> {
    let connection = endpoint
        .connect(args.addr, &args.host)
        .unwrap()
        .await
        .expect("QUIC handshake");
    let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(connection))
        .await
        .expect("h3");
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    streams(sender, args, deadline, tally)
}

async fn h3_request(
    sender: &mut h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    uri: &str,
) -> Result<u64, String> {
    let req = Request::get(uri).body(()).unwrap();
    let mut stream = sender.send_request(req).await.map_err(|e| e.to_string())?;
    stream.finish().await.map_err(|e| e.to_string())?;
    let response = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut bytes = 0;
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        bytes += chunk.remaining() as u64;
        chunk.advance(chunk.remaining());
    }
    match response.status().is_success() {
        true => Ok(bytes),
        false => Err(response.status().to_string()),
    }
}

fn record(tally: &mut Tally, answered: Option<u64>, began: Instant) {
    match answered {
        Some(bytes) => {
            let took = began.elapsed().as_micros().min(u32::MAX as u128) as u32;
            tally.latencies_us.push(took);
            tally.bytes += bytes;
        }
        None => tally.errors += 1,
    }
}

fn merge(tally: &Mutex<Tally>, mine: Tally) {
    let mut tally = tally.lock().unwrap();
    tally.errors += mine.errors;
    tally.bytes += mine.bytes;
    tally.latencies_us.extend(mine.latencies_us);
}
