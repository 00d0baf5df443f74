//! A 1 GiB upload streams through the real `tollgate` binary with memory that does
//! not grow with the body.

use crate::support;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use support::*;

const GIB: u64 = 1 << 30;
const CHUNK: usize = 256 * 1024;

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Peak resident memory of a process, in KiB (Linux).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gib_upload_streams_with_flat_memory() {
    // Alone: 1 GiB through the gateway keeps every core busy, which would upset other
    // tests' timing. (The memory measured is the `tollgate` child's, no other test's.)
    let _alone = support::alone();
    let up = Upstream::start(|req| async move {
        let mut body = req.into_body();
        let mut total = 0u64;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => total += frame.data_ref().map_or(0, |d| d.len() as u64),
                Err(_) => return text(400, "broken"),
            }
        }
        text(200, &total.to_string())
    })
    .await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(
            format!(
                "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\nclient_max_body_size = \"0\"\nrequest_buffering = \"off\"\n[log]\naccess = \"off\"\n[upstreams.app]\nservers = [\"{}\"]\n[[location]]\nmatch = \"/\"\nupstream = \"app\"\n",
                up.addr
            )
            .as_bytes(),
        )
        .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running(child);
    let gw: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(gw).await.is_err() {
        assert!(Instant::now() < deadline, "tollgate did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = peak_rss_kib(running.0.id());

    let chunk = Bytes::from(vec![0x5a; CHUNK]);
    let chunks = (GIB / CHUNK as u64) as usize;
    let stream = futures_util::stream::iter(
        (0..chunks).map(move |_| Ok::<_, hyper::Error>(hyper::body::Frame::data(chunk.clone()))),
    );
    let body = StreamBody::new(stream).boxed();
    let req = http::Request::post("/upload")
        .header("host", "example.test")
        .header("content-length", GIB.to_string())
        .body(body)
        .unwrap();
    let reply = within(240, send(gw, req)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, GIB.to_string());

    let after = peak_rss_kib(running.0.id());
    eprintln!("tollgate peak RSS: {before} KiB before, {after} KiB after a 1 GiB upload");
    assert!(
        after < before + 48 * 1024,
        "memory grew with the body: {before} KiB -> {after} KiB"
    );
}
