//! The `tollgate` binary as an operator runs it: `-t` (with what it says of `[acme]` and
//! `client_body_temp_path`), `--version`, serving, SIGTERM.

use crate::support;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

pub(crate) fn tollgate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tollgate"))
}

pub(crate) fn write_config(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
    path
}

#[test]
fn check_reports_every_error_with_line_and_column() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "broken.toml",
        "[server]\nlisten = [\"127.0.0.1:8080\"]\nclient_header_timeout = \"10\"\n\n[[location]]\nmatch = \"/\"\nupstream = \"nowhere\"\n",
    );
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = path.display().to_string();
    assert!(stderr.contains(&format!("{file}:3:25: ")), "{stderr}");
    assert!(stderr.contains(&format!("{file}:7:12: ")), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn check_says_which_key_does_an_nginx_directives_job() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "nginx.toml",
        "[server]\nlisten = [\"127.0.0.1:8080\"]\n[[location]]\nmatch = \"/\"\n\
         proxy_pass = \"http://app\"\ngzip = \"on\"\n",
    );
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = path.display().to_string();
    let pass = format!(
        "{file}:5:1: unknown key `proxy_pass`: in nginx a directive; here a location's `upstream = \"NAME\"`"
    );
    assert!(stderr.contains(&pass), "{stderr}");
    let files = format!("{file}:6:1: unknown key `gzip`: in nginx a directive; here `compress = {{ encodings = [\"gzip\"] }}`");
    assert!(stderr.contains(&files), "{stderr}");
}

#[test]
fn check_warns_of_server_name_in_a_redirect_of_a_wildcard_site_and_passes() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "wildcard.toml",
        "[server]\nlisten = [\"127.0.0.1:8080\"]\n[[site]]\nnames = [\"*.example.com\"]\n\
         [[site.location]]\nmatch = \"/\"\n\
         return = { status = 301, location = \"https://$server_name$request_uri\" }\n",
    );
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let file = path.display().to_string();
    let warning = format!("warning: {file}:7:37: `$server_name` is this site's first name as written, \"*.example.com\"");
    assert!(stderr.contains(&warning), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "configuration ok\n");
}

#[test]
fn check_reports_an_unknown_variable_where_its_dollar_is() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "vars.toml",
        "[server]\nlisten = [\"127.0.0.1:8080\"]\n[[location]]\nmatch = \"/\"\n\
         return = { status = 301, location = \"https://$hostname$request_uri\" }\n",
    );
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = path.display().to_string();
    assert!(
        stderr.contains(&format!("{file}:5:46: unknown variable `$hostname`")),
        "{stderr}"
    );
}

#[test]
fn check_suggests_the_key_a_misspelling_meant_and_stops_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "gateway.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[upstreams.app]\nservers = [\"127.0.0.1:1\"]\n\
         [[location]]\nmatch = \"/\"\nupstrem = \"app\"\n",
    );
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = path.display();
    assert_eq!(
        stderr,
        format!(
            "{file}:7:1: unknown key `upstrem`: did you mean `upstream`?\n\
             configuration test failed\n"
        ),
        "one error, not the location's missing `upstream` after it"
    );
}

#[test]
fn the_version_names_the_commit_and_the_build_date() {
    let _shared = support::shared();
    let out = tollgate().arg("--version").output().unwrap();
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    let rest = version
        .trim_end()
        .strip_prefix(concat!("tollgate ", env!("CARGO_PKG_VERSION"), " ("))
        .unwrap_or_else(|| panic!("{version}"));
    let (commit, date) = rest
        .strip_suffix(')')
        .and_then(|rest| rest.split_once(", built "))
        .unwrap_or_else(|| panic!("{version}"));
    assert!(
        commit == "unknown" || commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
        "{version}"
    );
    let date: Vec<&str> = date.split('-').collect();
    assert!(
        date.len() == 3
            && date
                .iter()
                .all(|part| part.bytes().all(|b| b.is_ascii_digit())),
        "{version}"
    );
}

#[test]
fn check_accepts_the_shipped_gateway_toml() {
    let _shared = support::shared();
    let out = tollgate()
        .args(["-t", "-c"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "configuration ok\n");
}

/// The guide's complete example (docs/guide.md, "Moving from nginx": the same file as
/// `examples/nginx-migration.toml`), with certificates made for it: what an operator moving from nginx starts from must load.
#[test]
fn check_accepts_the_nginx_migration_example() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let example = include_str!("../../examples/nginx-migration.toml");
    let guide = include_str!("../../docs/guide.md");
    assert!(
        guide.contains(example.trim()),
        "docs/guide.md shows the example as it is"
    );
    crate::recipes::example_certificate(dir.path());
    let certs = dir.path().join("certs");
    std::fs::copy(certs.join("example.com.pem"), certs.join("internal-ca.pem")).unwrap();
    let path = write_config(&dir, "gateway.toml", example);
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// The guide's "Automatic HTTPS" example (docs/guide.md) (`examples/automatic-https.toml`) checks
/// without contacting the CA, and `-t` leaves its storage unmade.
#[test]
fn check_accepts_the_automatic_https_example() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let example = include_str!("../../examples/automatic-https.toml");
    let guide = include_str!("../../docs/guide.md");
    assert!(
        guide.contains(example.trim()),
        "docs/guide.md shows the example as it is"
    );
    let path = write_config(&dir, "gateway.toml", example);
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!dir.path().join("acme").exists(), "-t made the storage");
}

/// A file with `[acme]` and one `acme = true` site for `example.com` (which
/// `certs/example.pem` covers) and `new.example.org`, its storage at `storage`.
fn acme_config(dir: &tempfile::TempDir, storage: &str) -> std::path::PathBuf {
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["example.com".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(certs.join("example.pem"), cert.pem()).unwrap();
    std::fs::write(certs.join("example.key"), key.serialize_pem()).unwrap();
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:8080\"]\nlisten_tls = [\"127.0.0.1:8443\"]\n\
         [tls]\n[[tls.certificates]]\ncert = \"certs/example.pem\"\nkey = \"certs/example.key\"\n\
         [acme]\ndirectory = \"https://acme-v02.api.letsencrypt.org/directory\"\n\
         email = \"ops@example.com\"\nstorage = \"{storage}\"\n\
         [[site]]\nnames = [\"example.com\", \"new.example.org\"]\nacme = true\n\
         [[site.location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n"
    );
    write_config(dir, "gateway.toml", &text)
}

#[test]
fn check_notes_the_acme_names_a_static_certificate_covers() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = acme_config(&dir, "acme");
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "configuration ok\n");
    let cert = dir.path().join("certs/example.pem");
    let note = format!(
        "note: example.com is covered by the static certificate {}; no certificate is ordered for it\n",
        cert.display()
    );
    assert!(stderr.contains(&note), "{stderr}");
    assert!(!stderr.contains("new.example.org"), "{stderr}");
    assert!(!dir.path().join("acme").exists(), "-t made the storage");
}

#[test]
fn check_refuses_an_acme_storage_that_cannot_be_made() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    // Under a regular file: refused even to root, unlike a directory without write bits.
    std::fs::write(dir.path().join("somefile"), "").unwrap();
    let path = acme_config(&dir, "somefile/acme");
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "{}: cannot use {} as the [acme] storage: it does not exist and cannot be created: {} is not a directory",
        path.display(),
        dir.path().join("somefile/acme").display(),
        dir.path().join("somefile").display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(stderr.ends_with("configuration test failed\n"), "{stderr}");
}

/// nginx -t fails on a log it cannot open; so does `tollgate -t`, so that a unit's
/// `ExecStartPre=tollgate -t` catches what the start would fail on. A log that can be
/// opened is left as it was (not made by the check).
#[test]
fn check_refuses_an_access_log_that_cannot_be_opened() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("somefile"), "").unwrap();
    let config = |access: &str| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\naccess = \"{access}\"\n\
             [[location]]\nmatch = \"/\"\nreturn = {{ status = 200 }}\n"
        )
    };
    let path = write_config(&dir, "bad.toml", &config("somefile/access.log"));
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot open the access log"), "{stderr}");
    assert!(stderr.contains("somefile/access.log"), "{stderr}");
    assert!(stderr.ends_with("configuration test failed\n"), "{stderr}");

    let path = write_config(&dir, "good.toml", &config("access.log"));
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "configuration ok\n");
    assert!(
        !dir.path().join("access.log").exists(),
        "-t left a log behind"
    );
}

#[test]
fn check_refuses_a_body_temp_path_that_cannot_be_made_and_makes_none() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("somefile"), "").unwrap();
    let config = |temp: &str| {
        format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nclient_body_temp_path = \"{temp}\"\n\
             [[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n"
        )
    };
    let path = write_config(&dir, "ok.toml", &config("body"));
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!dir.path().join("body").exists(), "-t made the directory");
    let path = write_config(&dir, "bad.toml", &config("somefile/body"));
    let out = tollgate().arg("-t").arg("-c").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "{}: cannot use {} as client_body_temp_path: it does not exist and cannot be created: {} is not a directory",
        path.display(),
        dir.path().join("somefile/body").display(),
        dir.path().join("somefile").display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(stderr.ends_with("configuration test failed\n"), "{stderr}");
}

#[test]
fn missing_file_is_a_clear_error() {
    let _shared = support::shared();
    let out = tollgate()
        .args(["-t", "-c", "/nonexistent/gateway.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/gateway.toml"), "{stderr}");
}

/// A running `tollgate` process, killed if the test fails midway.
pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) async fn wait_until_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "tollgate did not start listening"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn sigterm_lets_in_flight_requests_finish_then_exits_zero() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        text(200, "slow but complete")
    })
    .await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "gateway.toml",
        &format!(
            "[server]\nlisten = [\"127.0.0.1:{port}\"]\nshutdown_timeout = \"5s\"\n[log]\naccess = \"off\"\n[upstreams.app]\nservers = [\"{}\"]\n[[location]]\nmatch = \"/\"\nupstream = \"app\"\n",
            up.addr
        ),
    );
    let child = tollgate()
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    wait_until_listening(port).await;
    let gw: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let in_flight = tokio::spawn(async move { get_text(gw, "/").await });
    // Signalled once the request is with the upstream.
    up.holds(1).await;
    signal(&running.0, "TERM");
    // The listener closes long before the request in flight finishes.
    let closed = async {
        while tokio::net::TcpStream::connect(gw).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(1), closed)
        .await
        .expect("still accepting 1 s after SIGTERM");
    assert!(
        !in_flight.is_finished(),
        "the listener closed only after the answer"
    );
    let reply = within(5, in_flight).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "slow but complete");
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "tollgate did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(0));
}

/// `[server]` on `port` only, answering `body`.
fn answering(port: u16, body: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 2\n[log]\naccess = \"off\"\n\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"{body}\" }}\n"
    )
}

/// The exit status of `running` within 5 s, with what it wrote to stderr; `None` if it
/// still runs.
fn exit_within_5s(running: &mut Running) -> Option<(Option<i32>, String)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(status) = running.0.try_wait().unwrap() {
            let mut stderr = String::new();
            if let Some(mut pipe) = running.0.stderr.take() {
                std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
            }
            return Some((status.code(), stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[tokio::test]
async fn a_second_tollgate_on_the_same_address_refuses_to_start() {
    let _shared = support::shared();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let first = write_config(&dir, "first.toml", &answering(port, "first"));
    let second = write_config(&dir, "second.toml", &answering(port, "second"));
    let spawn = |path: &std::path::Path, flags: &[&str]| {
        let child = tollgate()
            .args(flags)
            .arg("-c")
            .arg(path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Running(child)
    };
    let _first = spawn(&first, &[]);
    wait_until_listening(port).await;
    let mut refused = spawn(&second, &[]);
    let exited = tokio::task::spawn_blocking(move || exit_within_5s(&mut refused))
        .await
        .unwrap();
    let (code, stderr) = exited.expect("the second tollgate started beside the first");
    assert_eq!(code, Some(1), "{stderr}");
    // Named where the second file writes it: line 2, column 11.
    let want = format!(
        "tollgate: {}:2:11: cannot listen on 127.0.0.1:{port}: address already in use (is another tollgate running?)",
        second.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    let gw: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    for _ in 0..8 {
        assert_eq!(within(5, get_text(gw, "/")).await.body, "first");
    }

    // A binary upgrade says so: both serve until the old one is stopped.
    let mut upgrade = spawn(&second, &["--upgrade"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while within(5, get_text(gw, "/")).await.body != "second" {
        assert!(upgrade.0.try_wait().unwrap().is_none(), "--upgrade exited");
        assert!(Instant::now() < deadline, "--upgrade never answered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
