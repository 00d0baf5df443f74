//! `tollgate reload` and `tollgate stop` against a real gateway process found by its
//! `pid_file`; the pid file's life; what the commands say when it cannot be used; and
//! `--help`, the completions and the man page.

use crate::cli::{tollgate, wait_until_listening, write_config, Running};
use crate::support;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// `[server]` on `port` with `pid_file = "gateway.pid"`, answering `body`; `extra` is
/// appended (an `[admin]`).
fn serving(port: u16, body: &str, extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\nworkers = 1\npid_file = \"gateway.pid\"\n\
         shutdown_timeout = \"5s\"\n[log]\naccess = \"off\"\n{extra}\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"{body}\" }}\n"
    )
}

/// `[admin]` on `port`, its views behind the token.
fn admin(port: u16) -> String {
    format!(
        "[admin]\nlisten = \"127.0.0.1:{port}\"\ntoken = \"{ADMIN_TOKEN}\"\nprotect_reads = true\n"
    )
}

fn spawn(path: &Path) -> Running {
    let child = tollgate()
        .arg("-c")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Running(child)
}

/// `tollgate ARGS -c path`, run off the test's runtime.
async fn run(args: &[&'static str], path: &Path) -> Output {
    let mut command = tollgate();
    command.args(args).arg("-c").arg(path);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The pid file's content once the gateway has written it (within 10 s).
async fn pid_written(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no pid file at {}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The gateway's exit status within 15 s, and its error log.
fn exited(running: &mut Running) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            let mut log = String::new();
            if let Some(mut pipe) = running.0.stderr.take() {
                std::io::Read::read_to_string(&mut pipe, &mut log).unwrap();
            }
            return (status.code(), log);
        }
        assert!(Instant::now() < deadline, "the gateway did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn stop_finds_the_gateway_by_its_pid_file_which_goes_with_it() {
    let _shared = support::shared();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(&dir, "gateway.toml", &serving(port, "one", ""));
    let mut running = spawn(&path);
    let pid_file = dir.path().join("gateway.pid");
    assert_eq!(
        pid_written(&pid_file).await,
        format!("{}\n", running.0.id())
    );
    wait_until_listening(port).await;

    // Without [admin], `reload` says where the outcome is.
    let out = run(&["reload"], &path).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let pid = running.0.id();
    assert!(
        text(&out.stdout).starts_with(&format!("SIGHUP sent to process {pid}; without [admin]")),
        "{}",
        text(&out.stdout)
    );

    // `stop` waits for the process; the test reaps it meanwhile, as its parent.
    let mut stop = tollgate();
    stop.args(["stop", "-c"]).arg(&path);
    let stopping = std::thread::spawn(move || stop.output().unwrap());
    let (code, log) = tokio::task::spawn_blocking(move || exited(&mut running))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{log}");
    let out = stopping.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("stopped: process {pid} has exited\n")
    );
    assert!(!pid_file.exists(), "the pid file outlived the gateway");
    let file = path.display();
    assert!(
        log.contains(&format!("reloaded {file}: generation 2\n")),
        "{log}"
    );
}

#[tokio::test]
async fn reload_prints_the_outcome_read_back_from_the_admin_api() {
    let _shared = support::shared();
    let (port, admin_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        &dir,
        "gateway.toml",
        &serving(port, "one", &admin(admin_port)),
    );
    let mut running = spawn(&path);
    wait_until_listening(admin_port).await;
    pid_written(&dir.path().join("gateway.pid")).await;
    let gw = ([127, 0, 0, 1], port).into();

    write_config(
        &dir,
        "gateway.toml",
        &serving(port, "two", &admin(admin_port)),
    );
    let out = run(&["reload"], &path).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "reloaded: generation 2\n");
    assert_eq!(within(5, get_text(gw, "/")).await.body, "two");

    // A file with a problem: reported as -t reports it, and no signal sent.
    let broken = serving(port, "three", &admin(admin_port)).replace("workers", "workerz");
    write_config(&dir, "gateway.toml", &broken);
    let out = run(&["reload"], &path).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let file = path.display().to_string();
    assert!(
        stderr.contains(&format!("{file}:3:1: unknown key `workerz`")),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("configuration test failed: nothing was sent\n"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    let status = status(admin_port).await;
    assert_eq!(status["reloads"]["failed"], 0, "{status}");
    assert_eq!(status["generation"], 2, "{status}");

    // A file that checks but fails in the gateway: an address another process holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap();
    let both = serving(port, "four", &admin(admin_port)).replacen(
        &format!("\"127.0.0.1:{port}\"]"),
        &format!("\"127.0.0.1:{port}\", \"{taken}\"]"),
        1,
    );
    write_config(&dir, "gateway.toml", &both);
    let out = run(&["reload"], &path).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    // Named where the file writes it (line 2).
    let want = format!(
        "tollgate: reload failed; generation 2 stays in force:\n{}:2:",
        path.display()
    );
    assert!(stderr.starts_with(&want), "{stderr}");
    let want = format!("cannot listen on {taken}: address already in use");
    assert!(stderr.contains(&want), "{stderr}");
    assert_eq!(within(5, get_text(gw, "/")).await.body, "two");

    // The gateway's own error log said each outcome in one line, no tracing fields after.
    let _ = running.0.kill();
    let (_, log) = tokio::task::spawn_blocking(move || exited(&mut running))
        .await
        .unwrap();
    assert!(
        log.contains(&format!("reloaded {file}: generation 2\n")),
        "{log}"
    );
    assert!(
        log.contains("reload failed; generation 2 stays in force:\n"),
        "{log}"
    );
    assert!(!log.contains("generation="), "{log}");
}

/// `/status` of the admin API on `port`, with the tests' token.
async fn status(port: u16) -> serde_json::Value {
    let request = http::Request::get("/status")
        .header("host", "localhost")
        .header("authorization", admin_authorization())
        .body(empty())
        .unwrap();
    let reply = within(5, send(([127, 0, 0, 1], port).into(), request)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    serde_json::from_str(&reply.body).unwrap()
}

#[tokio::test]
async fn reload_and_stop_send_nothing_without_a_usable_pid_file() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let unset = write_config(
        &dir,
        "unset.toml",
        &serving(port, "x", "").replace("pid_file", "#"),
    );
    let path = write_config(&dir, "gateway.toml", &serving(port, "x", ""));
    let pid_file = dir.path().join("gateway.pid");
    // A child that has exited and been reaped: its id names no process.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_id = gone.id();
    gone.wait().unwrap();
    let cases: [(&Path, Option<String>, String); 4] = [
        (
            &unset,
            None,
            format!("{} sets no pid_file", unset.display()),
        ),
        (
            &path,
            None,
            format!("no pid file at {}", pid_file.display()),
        ),
        (
            &path,
            Some("pid\n".into()),
            "holds no process id: \"pid\"".into(),
        ),
        (
            &path,
            Some(format!("{gone_id}\n")),
            format!("names process {gone_id}, which is not running: a stale file"),
        ),
    ];
    for (config, content, want) in cases {
        match &content {
            Some(content) => std::fs::write(&pid_file, content).unwrap(),
            None => {
                let _ = std::fs::remove_file(&pid_file);
            }
        }
        for command in ["reload", "stop"] {
            let out = run(&[command], config).await;
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
            assert!(stderr.starts_with("tollgate: "), "{command}: {stderr}");
            assert!(stderr.contains(&want), "{command}: {stderr}");
            assert!(out.stdout.is_empty(), "{command}");
        }
    }
}

#[test]
fn help_names_the_signals_rust_log_and_the_exit_statuses() {
    let _shared = support::shared();
    let out = tollgate().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = text(&out.stdout);
    for want in [
        "reload",
        "stop",
        "  HUP ",
        "  TERM, INT ",
        "  USR1 ",
        "RUST_LOG",
        "Exit status:",
        "  0 ",
        "  1 ",
        "  2 ",
    ] {
        assert!(help.contains(want), "no {want:?} in:\n{help}");
    }
}

#[test]
fn completions_and_the_man_page_name_the_subcommands() {
    let _shared = support::shared();
    for shell in ["bash", "zsh", "fish"] {
        let out = tollgate().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in ["reload", "stop", "import", "config"] {
            assert!(script.contains(word), "{shell}: no {word:?}");
        }
    }
    let out = tollgate().arg("man").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    for word in [
        ".TH tollgate 1",
        ".SH COMMANDS",
        "\\fBtollgate reload\\fR [\\fB\\-c\\fR \\fICONFIG\\fR]",
        "\\fBtollgate stop\\fR",
        ".SH SIGNALS",
        ".SH ENVIRONMENT",
        "RUST_LOG",
        ".SH EXIT STATUS",
    ] {
        assert!(page.contains(word), "no {word:?} in the man page:\n{page}");
    }
    // One page: none of the per-subcommand pages clap_mangen would point to.
    assert!(!page.contains("tollgate\\-reload(1)"), "{page}");
}
