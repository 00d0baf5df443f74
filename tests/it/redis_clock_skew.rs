//! Instances whose clocks disagree still share one limit: the Redis scripts read Redis's
//! clock, never the instance's. Two real `tollgate` processes share a zone; one runs two
//! hours ahead under libfaketime (Debian's `faketime`). A `fixed_window` zone shows it
//! best: were windows taken from the instances' clocks, each would count in its own hour.
//!
//! Without `faketime` or `redis-server` the test is skipped with a note, unless `CI` is
//! set: then it fails (`.ci/run` installs both).

use crate::support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http::Request;
use support::redis::{self as server, Redis};
use support::*;

const FAKETIME: &str = "/usr/bin/faketime";

/// A gateway child in a process group of its own: `faketime` runs tollgate as its own
/// child, so killing `faketime` alone would leave tollgate running; the whole group goes.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(config: &Path, ahead: Option<&str>) -> Running {
    let bin = env!("CARGO_BIN_EXE_tollgate");
    let mut command = match ahead {
        Some(offset) => {
            let mut c = Command::new(FAKETIME);
            c.arg("-f").arg(offset).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let child = std::os::unix::process::CommandExt::process_group(&mut command, 0)
        .arg("-c")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tollgate");
    Running(child)
}

fn config(port: u16, redis: &Redis) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:{port}"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[redis]
url = "{}"
timeout = "200ms"
on_error = "deny"
[zones.hourly]
key = "$binary_remote_addr"
rate = "3r/h"
algorithm = "fixed_window"
backend = "redis"
[[location]]
match = "/"
return = {{ status = 200 }}
limit = [{{ zone = "hourly", nodelay = true }}]
"#,
        redis.url()
    )
}

/// A gateway on a port of its own, listening: started on a free port, and started again on
/// another if it exits before it listens (another test may have taken the port meanwhile).
async fn listening(dir: &Path, name: &str, redis: &Redis, ahead: Option<&str>) -> (Running, u16) {
    for _ in 0..5 {
        let port = free_port();
        let file = dir.join(format!("{name}-{port}.toml"));
        std::fs::write(&file, config(port, redis)).unwrap();
        let mut running = spawn(&file, ahead);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return (running, port);
            }
            if let Ok(Some(status)) = running.0.try_wait() {
                skip_note(&format!(
                    "tollgate {name} exited ({status}) before listening on {port}; again"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    panic!("tollgate {name} never listened");
}

async fn status_from(port: u16, client: &str) -> u16 {
    let req = Request::get("/")
        .header("host", "example.test")
        .header("x-forwarded-for", client)
        .body(empty())
        .unwrap();
    within(5, send(([127, 0, 0, 1], port).into(), req))
        .await
        .status
        .as_u16()
}

fn faketime_available() -> bool {
    if Path::new(FAKETIME).exists() {
        return true;
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !in_ci,
        "{FAKETIME} not found: CI must install faketime (.ci/run)"
    );
    skip_note(&format!(
        "{FAKETIME} not found; skipping the clock skew test (apt-get install faketime)"
    ));
    false
}

#[tokio::test]
async fn instances_with_skewed_clocks_share_one_window() {
    let _shared = support::shared();
    if !server::available() || !faketime_available() {
        return;
    }
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    let (_a, port_a) = listening(dir.path(), "a", &redis, None).await;
    let (_b, port_b) = listening(dir.path(), "b", &redis, Some("+2h")).await;
    let mut statuses = Vec::new();
    for i in 0..8 {
        let port = if i % 2 == 0 { port_a } else { port_b };
        statuses.push(status_from(port, "198.51.100.33").await);
    }
    // 3 per hour between both, on Redis's clock (a window straddled by this run would
    // show as more; an hour-long window makes that next to impossible).
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429, 429, 429]);
}
