//! The `tollgate` binary under a low `ulimit -n`: however many idle connections clients
//! hold, to the admin API or to the data plane, a new data-plane request is answered
//! (the admin API is capped, the data plane closes its oldest idle connections).

use crate::cli::{tollgate, wait_until_listening, write_config, Running};
use crate::support;

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use support::*;

/// The soft and hard limit of open files the gateway runs with.
const NOFILE: u32 = 256;
/// More idle connections than the gateway has descriptors.
const IDLE: usize = 300;

fn config(port: u16, admin_port: u16) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [admin]\nlisten = \"127.0.0.1:{admin_port}\"\n\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"served\" }}\n"
    )
}

/// `tollgate -c path` with `ulimit -n` [`NOFILE`].
fn start_limited(path: &Path) -> Running {
    let bin = tollgate().get_program().to_owned();
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {NOFILE} && exec \"$0\" -c \"$1\""))
        .arg(bin)
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running(child)
}

/// Up to [`IDLE`] connections to `addr` that send nothing; stops at the first that
/// cannot connect within a second (a listener that no longer accepts).
fn hold_idle(addr: SocketAddr) -> Vec<TcpStream> {
    let mut held = Vec::new();
    while held.len() < IDLE {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(stream) => held.push(stream),
            Err(_) => break,
        }
    }
    // Time for the gateway to accept them all (and close some).
    std::thread::sleep(Duration::from_millis(300));
    held
}

/// Whether the gateway has closed `stream` (or reset it).
fn closed(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Err(err) => err.kind() != ErrorKind::WouldBlock,
        Ok(_) => false,
    }
}

/// A data-plane request on a new connection, its answer within 5 s.
async fn served(port: u16) -> bool {
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        send(addr, get("/")).await
    })
    .await;
    answer.is_ok_and(|reply| reply.status == 200 && reply.body == "served")
}

#[tokio::test]
async fn idle_connections_to_the_admin_api_leave_the_data_plane_answering() {
    let _shared = support::shared();
    let (port, admin_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, "gateway.toml", &config(port, admin_port));
    let _running = start_limited(&path);
    wait_until_listening(port).await;
    wait_until_listening(admin_port).await;
    let admin: SocketAddr = ([127, 0, 0, 1], admin_port).into();
    let mut held = tokio::task::spawn_blocking(move || hold_idle(admin))
        .await
        .unwrap();
    assert!(served(port).await, "the data plane does not answer");
    let refused = held.iter_mut().map(closed).filter(|&closed| closed).count();
    let kept = held.len() - refused;
    assert!(
        refused > 0 && kept <= 64,
        "{} admin connections, {refused} refused",
        held.len()
    );
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let healthz = within(5, send(admin, get("/healthz"))).await;
    assert_eq!(healthz.status, 200);
}

#[tokio::test]
async fn idle_connections_to_the_data_plane_make_way_for_new_ones_oldest_first() {
    let _shared = support::shared();
    let (port, admin_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, "gateway.toml", &config(port, admin_port));
    let _running = start_limited(&path);
    wait_until_listening(port).await;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut held = tokio::task::spawn_blocking(move || hold_idle(addr))
        .await
        .unwrap();
    assert_eq!(held.len(), IDLE, "a connection was not accepted");
    assert!(served(port).await, "no answer beyond the descriptors");
    assert!(closed(&mut held[0]), "the oldest idle connection is open");
    let last = held.len() - 1;
    assert!(
        !closed(&mut held[last]),
        "the newest idle connection was closed"
    );
}
