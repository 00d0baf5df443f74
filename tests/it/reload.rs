//! The operator's signals to a running gateway (the README, "Reload and signals"). SIGHUP
//! reloads: a new configuration is put in force without a restart; zones that keep their
//! name, key, algorithm and size keep every client's state (no fresh burst), while new rates and
//! bursts apply at once; a file that does not validate changes nothing. SIGUSR1 reopens
//! the access log after logrotate has moved it.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// A gateway config trusting loopback's `X-Forwarded-For`, with one zone `per_ip`
/// (`key`, 1r/m) limiting `/` at `burst`.
fn limited(key: &str, burst: u64) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[zones.per_ip]
key = "{key}"
rate = "1r/m"
[[location]]
match = "/"
limit = [{{ zone = "per_ip", burst = {burst}, nodelay = true }}]
return = {{ status = 200 }}
"#
    )
}

async fn status_of(gw: &tollgate::Gateway, client: &str) -> u16 {
    get_as(addr(gw), "/", client).await.status.as_u16()
}

#[tokio::test]
async fn a_reload_keeps_every_clients_state_and_applies_new_bursts_at_once() {
    let _shared = support::shared();
    let gw = gateway(&limited("$binary_remote_addr", 0));
    assert_eq!(status_of(&gw, "10.0.0.1").await, 200);
    assert_eq!(status_of(&gw, "10.0.0.1").await, 429);

    // The same zone again: the client gets no fresh burst.
    assert_eq!(
        gw.reload(&parse(&limited("$binary_remote_addr", 0)))
            .unwrap(),
        2
    );
    assert_eq!(status_of(&gw, "10.0.0.1").await, 429);
    assert_eq!(status_of(&gw, "10.0.0.2").await, 200);

    // A larger burst applies to the state as it is: one more request fits, not three.
    assert_eq!(
        gw.reload(&parse(&limited("$binary_remote_addr", 1)))
            .unwrap(),
        3
    );
    assert_eq!(status_of(&gw, "10.0.0.1").await, 200);
    assert_eq!(status_of(&gw, "10.0.0.1").await, 429);

    // Another key means other clients: the zone starts empty.
    assert_eq!(gw.reload(&parse(&limited("$remote_addr", 0))).unwrap(), 4);
    assert_eq!(status_of(&gw, "10.0.0.1").await, 200);
    assert_eq!(status_of(&gw, "10.0.0.1").await, 429);
    assert_eq!(gw.generation(), 4);
}

#[tokio::test]
async fn a_configuration_that_cannot_be_built_changes_nothing() {
    let _shared = support::shared();
    let gw = gateway(&limited("$binary_remote_addr", 0));
    assert_eq!(status_of(&gw, "10.0.0.1").await, 200);
    let unbuildable = limited("$binary_remote_addr", 5).replace(
        "access = \"off\"",
        "access = \"/nonexistent-tollgate-dir/access.log\"",
    );
    assert!(gw.reload(&parse(&unbuildable)).is_err());
    assert_eq!(gw.generation(), 1);
    // Still the old burst of 0, and the old state.
    assert_eq!(status_of(&gw, "10.0.0.1").await, 429);
}

/// The `tollgate` binary, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write(path: &Path, text: &str) {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
}

fn answering(port: u16, body: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"{body}\" }}\n"
    )
}

fn signal(child: &Child, which: &str) {
    let status = Command::new("kill")
        .args([which, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn spawn_tollgate(config: &Path, stderr: Stdio) -> Running {
    Running(
        Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .arg("-c")
            .arg(config)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap(),
    )
}

/// GETs `/` until the body is `want` (a reload is applied a moment after the signal).
async fn until_body(port: u16, want: &str) {
    until_body_at(port, "/", want).await
}

async fn until_body_at(port: u16, path: &str, want: &str) {
    let addr = ([127, 0, 0, 1], port).into();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        // `send` wants a listener: the first time, the process may still be starting.
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            if let Ok(reply) =
                tokio::time::timeout(Duration::from_secs(2), send(addr, get(path))).await
            {
                if reply.body == want {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "never answered {want:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn sighup_rereads_the_file_and_an_invalid_one_changes_nothing() {
    let _shared = support::shared();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    write(&path, &answering(port, "one"));
    let running = spawn_tollgate(&path, Stdio::piped());
    until_body(port, "one").await;

    write(&path, &answering(port, "two"));
    signal(&running.0, "-HUP");
    until_body(port, "two").await;

    // Invalid: the old configuration keeps answering, and the process lives on.
    write(
        &path,
        "[server]\nlisten = [\"127.0.0.1:1\"]\nbogus = 3\n[[location]]\n",
    );
    signal(&running.0, "-HUP");
    tokio::time::sleep(Duration::from_millis(300)).await;
    until_body(port, "two").await;

    write(&path, &answering(port, "three"));
    signal(&running.0, "-HUP");
    until_body(port, "three").await;

    // The invalid file's problems went to the error log, with file:line:col.
    let mut running = running;
    let _ = running.0.kill();
    let _ = running.0.wait();
    let mut out = String::new();
    if let Some(mut stderr) = running.0.stderr.take() {
        std::io::Read::read_to_string(&mut stderr, &mut out).unwrap();
    }
    let file = path.display().to_string();
    assert!(out.contains("reload failed"), "{out}");
    assert!(out.contains(&format!("{file}:3:1")), "{out}");
}

/// Config `which` (`"a"` or `"b"`): `/` proxied to `upstream`, limited by a roomy zone
/// whose rate differs between the two, and `/which` answered with the config's name.
fn proxying(port: u16, upstream: std::net::SocketAddr, which: &str) -> String {
    let rate = if which == "a" {
        "100000r/s"
    } else {
        "200000r/s"
    };
    format!(
        r#"
[server]
listen = ["127.0.0.1:{port}"]
workers = 2
[log]
access = "off"
[zones.all]
key = "$binary_remote_addr"
rate = "{rate}"
[upstreams.app]
servers = ["{upstream}"]
[[location]]
match = "= /which"
return = {{ status = 200, body = "{which}" }}
[[location]]
match = "/"
limit = [{{ zone = "all", burst = 100000, nodelay = true }}]
upstream = "app"
"#
    )
}

/// Requests over one keep-alive connection until `stop`; (answered 200, anything else).
async fn keep_busy(
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    seen: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
) -> (u64, Vec<String>) {
    use std::sync::atomic::Ordering;
    let (mut ok, mut failures) = (0, Vec::new());
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let path = if i.is_multiple_of(2) { "/which" } else { "/" };
        match sender.send_request(get(path)).await {
            Ok(response) => {
                let reply = read(response).await;
                if reply.status != 200 {
                    failures.push(format!("{path}: {}", reply.status));
                } else if path == "/which" {
                    seen.lock().unwrap().insert(reply.body);
                } else {
                    ok += 1;
                }
            }
            Err(err) => {
                failures.push(format!("{path}: {err}"));
                break;
            }
        }
    }
    (ok, failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_sighups_under_keep_alive_load_lose_no_request() {
    // Alone: four clients as fast as they go on every core for seconds, which would upset
    // other tests' timing.
    let _alone = support::alone();
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let up = Upstream::named("app").await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    write(&path, &proxying(port, up.addr, "a"));
    let running = spawn_tollgate(&path, Stdio::null());
    until_body_at(port, "/which", "a").await;

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let addr = ([127, 0, 0, 1], port).into();
    let clients: Vec<_> = (0..4)
        .map(|_| tokio::spawn(keep_busy(addr, stop.clone(), seen.clone())))
        .collect();
    // A valid config, the other valid one, an invalid one, in turn: 60 signals.
    for i in 0..60 {
        match i % 3 {
            0 => write(&path, &proxying(port, up.addr, "b")),
            1 => write(&path, &proxying(port, up.addr, "a")),
            _ => write(&path, "[server]\nlisten = 8080\n[[location]]\nmatch = 3\n"),
        }
        signal(&running.0, "-HUP");
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut proxied = 0;
    for client in clients {
        let (ok, failures) = within(10, client).await.unwrap();
        assert!(failures.is_empty(), "{failures:?}");
        proxied += ok;
    }
    assert!(proxied > 100, "only {proxied} requests went through");
    let seen = seen.lock().unwrap().clone();
    assert!(seen.contains("a") && seen.contains("b"), "{seen:?}");
}

#[tokio::test]
async fn sigusr1_reopens_the_access_log_after_it_was_moved() {
    let _shared = support::shared();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let (path, log) = (
        dir.path().join("gateway.toml"),
        dir.path().join("access.log"),
    );
    let config = answering(port, "hi").replace(
        "access = \"off\"",
        &format!("access = \"{}\"", log.display()),
    );
    write(&path, &config);
    let running = spawn_tollgate(&path, Stdio::null());
    until_body(port, "hi").await;
    assert_eq!(log_lines(&log, 1).await.len(), 1);

    // logrotate: move the file away, then signal.
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    signal(&running.0, "-USR1");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !log.exists() {
        assert!(Instant::now() < deadline, "the log was not opened again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let addr = ([127, 0, 0, 1], port).into();
    assert_eq!(within(5, send(addr, get("/second"))).await.body, "hi");
    let lines = log_lines(&log, 1).await;
    assert!(lines[0].contains("GET /second "), "{lines:?}");
    assert_eq!(
        std::fs::read_to_string(&rotated).unwrap().lines().count(),
        1
    );
}

/// A gateway answering `body` on every address of `listen`.
fn listening_on(listen: &[std::net::SocketAddr], body: &str) -> String {
    let listen: Vec<String> = listen.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "[server]\nlisten = [{}]\nworkers = 2\n[log]\naccess = \"off\"\n\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"{body}\" }}\n",
        listen.join(", ")
    )
}

fn loopback(port: u16) -> std::net::SocketAddr {
    ([127, 0, 0, 1], port).into()
}

#[tokio::test]
async fn a_reload_opens_added_addresses_and_drains_removed_ones() {
    let _shared = support::shared();
    let (a, b) = (loopback(free_port()), loopback(free_port()));
    let gw = gateway(&listening_on(&[a], "one"));
    assert_eq!(within(5, send(a, get("/"))).await.body, "one");

    // A keep-alive connection on `a`, idle between requests.
    let stream = tokio::net::TcpStream::connect(a).await.unwrap();
    let (mut idle, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let reply = read(idle.send_request(get("/")).await.unwrap()).await;
    assert_eq!(reply.body, "one");

    // Add `b`.
    assert_eq!(gw.reload(&parse(&listening_on(&[a, b], "two"))).unwrap(), 2);
    assert_eq!(within(5, send(b, get("/"))).await.body, "two");
    assert_eq!(within(5, send(a, get("/"))).await.body, "two");
    assert_eq!(gw.local_addrs(), [a, b]);

    // Drop `a`: it refuses new connections, and its idle connection is closed.
    assert_eq!(gw.reload(&parse(&listening_on(&[b], "three"))).unwrap(), 3);
    assert_eq!(gw.local_addrs(), [b]);
    // Each worker closes its socket a moment after the reload returns.
    let deadline = Instant::now() + Duration::from_secs(5);
    while tokio::net::TcpStream::connect(a).await.is_ok() {
        assert!(Instant::now() < deadline, "a still accepts");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    within(5, conn).await.unwrap().unwrap();
    assert_eq!(within(5, send(b, get("/"))).await.body, "three");

    // A port that cannot be bound fails the reload, and nothing changes.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap();
    assert!(gw
        .reload(&parse(&listening_on(&[b, taken], "four")))
        .is_err());
    assert_eq!(gw.generation(), 3);
    assert_eq!(gw.local_addrs(), [b]);
    assert_eq!(within(5, send(b, get("/"))).await.body, "three");
}

/// A reload from `0.0.0.0:P` to `127.0.0.1:P`: the added address is the gateway's own
/// wildcard's, not another process's, and is listened on.
#[tokio::test]
async fn a_reload_may_narrow_a_wildcard_address_to_one_it_covers() {
    let _shared = support::shared();
    let port = free_port();
    let wildcard: std::net::SocketAddr = ([0, 0, 0, 0], port).into();
    let gw = gateway(&listening_on(&[wildcard], "any"));
    assert_eq!(within(5, send(loopback(port), get("/"))).await.body, "any");
    let narrowed = parse(&listening_on(&[loopback(port)], "one"));
    assert_eq!(gw.reload(&narrowed).unwrap(), 2);
    assert_eq!(gw.local_addrs(), [loopback(port)]);
    assert_eq!(within(5, send(loopback(port), get("/"))).await.body, "one");
}
