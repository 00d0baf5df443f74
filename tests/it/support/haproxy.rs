//! Debian's HAProxy as a child process in front of tollgate, sending the PROXY protocol
//! (`send-proxy`, `send-proxy-v2`) the way load balancers do: TCP mode, one frontend per
//! version on free loopback ports; killed when dropped.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::free_port;

/// A running HAProxy, killed when dropped (also when the test panics).
pub struct Haproxy {
    child: Child,
    /// The frontend that sends a v1 header to the backend.
    pub v1: SocketAddr,
    /// The frontend that sends a v2 header.
    pub v2: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Debian's haproxy, in /usr/sbin (which a non-root PATH may leave out), else on PATH.
fn haproxy() -> &'static str {
    match std::path::Path::new("/usr/sbin/haproxy").exists() {
        true => "/usr/sbin/haproxy",
        false => "haproxy",
    }
}

/// Whether `haproxy` is installed; a note when it is not.
pub fn available(what: &str) -> bool {
    let found = Command::new(haproxy())
        .arg("-v")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        super::skip_note(&format!(
            "haproxy is not installed: {what} is not tested against it"
        ));
    }
    found
}

impl Haproxy {
    /// HAProxy in front of `backend`, in TCP mode.
    pub fn start(backend: SocketAddr) -> Haproxy {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v2) = (free_port(), free_port());
        let config = format!(
            "global\n    maxconn 100\n\
             defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
             frontend v1\n    bind 127.0.0.1:{v1}\n    default_backend v1\n\
             backend v1\n    server tollgate {backend} send-proxy\n\
             frontend v2\n    bind 127.0.0.1:{v2}\n    default_backend v2\n\
             backend v2\n    server tollgate {backend} send-proxy-v2\n"
        );
        let conf = dir.path().join("haproxy.cfg");
        std::fs::write(&conf, config).unwrap();
        let child = Command::new(haproxy())
            .arg("-f")
            .arg(&conf)
            .arg("-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts");
        let haproxy = Haproxy {
            child,
            v1: SocketAddr::from(([127, 0, 0, 1], v1)),
            v2: SocketAddr::from(([127, 0, 0, 1], v2)),
            _dir: dir,
        };
        for _ in 0..100 {
            let up = |addr| std::net::TcpStream::connect(addr).is_ok();
            if up(haproxy.v1) && up(haproxy.v2) {
                return haproxy;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("haproxy does not listen");
    }
}
