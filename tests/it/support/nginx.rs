//! nginx as a child process for tests that compare tollgate with it: its own temporary
//! prefix, one worker, no master, no daemon, on free loopback ports; killed when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::free_port;

/// Debian's nginx.
pub const NGINX: &str = "/usr/sbin/nginx";

/// A running nginx, killed when dropped (also when the test panics).
pub struct Nginx {
    child: Child,
    /// The first of [`Nginx::addrs`].
    pub addr: SocketAddr,
    /// Every port it listens on, in the order the configuration was given them.
    pub addrs: Vec<SocketAddr>,
    /// Its prefix: where its error log is.
    prefix: PathBuf,
    /// The prefix's directory when nginx made it (removed when dropped).
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Starts nginx on a free loopback port with the configuration `config(prefix, port)`
    /// makes, and `files` (each holding `ok`) under `PREFIX/www`. A port taken between
    /// choosing and binding it makes nginx exit; then another port is tried.
    pub fn start(config: impl Fn(&Path, u16) -> String, files: &[String]) -> Nginx {
        Nginx::start_on(1, |root, ports| config(root, ports[0]), files)
    }

    /// [`Nginx::start`] on `count` free loopback ports: `config(prefix, ports)`. For
    /// tests of what differs between listening addresses (each `server {}`'s `listen`).
    pub fn start_on(
        count: usize,
        config: impl Fn(&Path, &[u16]) -> String,
        files: &[String],
    ) -> Nginx {
        let mut last_error = String::new();
        for _ in 0..3 {
            match Nginx::try_start(count, &config, files) {
                Ok(nginx) => return nginx,
                Err(error) => last_error = error,
            }
        }
        panic!("nginx did not start:\n{last_error}");
    }

    fn try_start(
        count: usize,
        config: &impl Fn(&Path, &[u16]) -> String,
        files: &[String],
    ) -> Result<Nginx, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
        let root = dir.path();
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        std::fs::create_dir_all(root.join("www")).unwrap();
        for file in files {
            std::fs::write(root.join("www").join(file), "ok\n").unwrap();
        }
        let conf = root.join("nginx.conf");
        std::fs::write(&conf, config(root, &ports)).unwrap();
        let mut nginx = Nginx::run(root, &conf, &ports)?;
        nginx._dir = Some(dir);
        Ok(nginx)
    }

    /// Runs nginx with the configuration file `conf` under the prefix `prefix` (which the
    /// caller keeps), and waits until it listens on every one of `ports` on loopback.
    pub fn run(prefix: &Path, conf: &Path, ports: &[u16]) -> Result<Nginx, String> {
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(prefix)
            .arg("-c")
            .arg(conf)
            // Errors before the config is read would go to the package's log path otherwise.
            .arg("-e")
            .arg(prefix.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot run {NGINX}: {error}"))?;
        let addrs: Vec<SocketAddr> = ports
            .iter()
            .map(|&port| SocketAddr::from(([127, 0, 0, 1], port)))
            .collect();
        let mut nginx = Nginx {
            child,
            addr: addrs[0],
            addrs,
            prefix: prefix.to_path_buf(),
            _dir: None,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                return Err(format!("nginx exited ({status}):\n{}", nginx.error_log()));
            }
            // nginx binds every port before it accepts on any, but the check is cheap.
            let listening = nginx
                .addrs
                .iter()
                .all(|addr| std::net::TcpStream::connect(addr).is_ok());
            if listening {
                return Ok(nginx);
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("nginx is not listening:\n{}", nginx.error_log()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default()
    }

    /// The error log without the line nginx writes for every rejected or delayed request.
    pub fn error_log_problems(&self) -> String {
        let log = self.error_log();
        let problems = log.lines().filter(|line| {
            !line.contains("limiting requests") && !line.contains("delaying request")
        });
        problems.collect::<Vec<_>>().join("\n")
    }
}

/// Whether nginx is there for `what`. Without it a test is skipped (saying so), except
/// under `CI`, where it fails: `.ci/run` installs nginx.
pub fn available(what: &str) -> bool {
    if Path::new(NGINX).exists() {
        return true;
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !in_ci,
        "{NGINX} not found: CI must install nginx (`apt-get install -y nginx` in .ci/run)"
    );
    super::skip_note(&format!("{NGINX} not found; skipping {what}"));
    false
}

/// A whole nginx configuration under `dir` (its prefix) around `servers`.
pub fn http(dir: &std::path::Path, servers: &str) -> String {
    let dir = dir.display();
    format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\n\
         error_log {dir}/error.log warn;\npid {dir}/nginx.pid;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n access_log off;\n client_body_temp_path {dir}/tmp/body;\n\
         proxy_temp_path {dir}/tmp/proxy;\n fastcgi_temp_path {dir}/tmp/fastcgi;\n\
         uwsgi_temp_path {dir}/tmp/uwsgi;\n scgi_temp_path {dir}/tmp/scgi;\n{servers}}}\n"
    )
}
