//! redis-server as a child process for the Redis-backed zone tests: no persistence, on a
//! free loopback port; killed when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// Debian's redis-server.
pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// A running redis-server, killed when dropped (also when the test panics).
pub struct Redis {
    child: Child,
    pub addr: SocketAddr,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Redis {
    /// Starts redis-server on a free loopback port; a port taken between choosing and
    /// binding it makes it exit, and then another is tried.
    pub fn start() -> Redis {
        let mut last_error = String::new();
        for _ in 0..3 {
            match Redis::try_start(free_port()) {
                Ok(redis) => return redis,
                Err(error) => last_error = error,
            }
        }
        panic!("redis-server did not start: {last_error}");
    }

    /// Starts redis-server on `port` (to bring a killed one back where it was).
    pub fn try_start(port: u16) -> Result<Redis, String> {
        Redis::try_start_with(port, &[])
    }

    fn try_start_with(port: u16, extra: &[&str]) -> Result<Redis, String> {
        let child = Command::new(REDIS_SERVER)
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--port", &port.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot run {REDIS_SERVER}: {error}"))?;
        let mut redis = Redis {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = redis.child.try_wait() {
                return Err(format!("redis-server exited ({status})"));
            }
            if std::net::TcpStream::connect(redis.addr).is_ok() {
                // Ours, not another process's on the same port: ours is still running.
                std::thread::sleep(Duration::from_millis(20));
                if let Ok(Some(status)) = redis.child.try_wait() {
                    return Err(format!("redis-server exited ({status})"));
                }
                return Ok(redis);
            }
            if Instant::now() > deadline {
                return Err("redis-server is not listening".to_owned());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// Starts redis-server speaking only TLS (`--tls-port`), serving `cert`/`key`, on a
    /// free loopback port; clients need no certificate of their own.
    pub fn start_tls(cert: &Path, key: &Path) -> Redis {
        let mut last_error = String::new();
        for _ in 0..3 {
            let port = free_port();
            let extra = [
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--tls-cert-file",
                cert.to_str().expect("utf-8 path"),
                "--tls-key-file",
                key.to_str().expect("utf-8 path"),
                "--tls-auth-clients",
                "no",
            ];
            match Redis::try_start_with(port, &extra) {
                Ok(redis) => return redis,
                Err(error) => last_error = error,
            }
        }
        panic!("redis-server with TLS did not start: {last_error}");
    }

    /// Stops the server without closing its sockets (SIGSTOP): it accepts connections
    /// and answers nothing, as a Redis stuck or far away would.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(signal)
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }
}

/// Whether to run: redis-server is there. Without it the test is skipped (with a note
/// saying why), except in CI, where its absence fails the test.
pub fn available() -> bool {
    if Path::new(REDIS_SERVER).exists() {
        return true;
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !in_ci,
        "{REDIS_SERVER} not found: CI must install redis-server (`apt-get install -y redis-server` in .ci/run)"
    );
    super::skip_note(&format!(
        "{REDIS_SERVER} not found; skipping this Redis test (apt-get install redis-server)"
    ));
    false
}

/// A Redis Cluster of `n` primaries (no replicas) on free loopback ports, its nodes killed
/// when dropped.
pub struct Cluster {
    pub nodes: Vec<Redis>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut nodes = Vec::new();
        while nodes.len() < n {
            let port = free_port();
            let conf = dir.path().join(format!("nodes-{port}.conf"));
            let extra = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                conf.to_str().expect("utf-8 temp path"),
                "--dir",
                dir.path().to_str().expect("utf-8 temp path"),
            ];
            if let Ok(node) = Redis::try_start_with(port, &extra) {
                nodes.push(node);
            }
        }
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr.to_string()).collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed:\n{}",
            String::from_utf8_lossy(&created.stdout)
        );
        // Every node must see every slot served before a client can rely on it.
        let deadline = Instant::now() + Duration::from_secs(10);
        for node in &nodes {
            loop {
                let info = Command::new("redis-cli")
                    .args(["-p", &node.addr.port().to_string(), "cluster", "info"])
                    .output()
                    .expect("run redis-cli cluster info");
                if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster never became ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Cluster { nodes, _dir: dir }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Redis::url).collect()
    }
}
