//! The admin API's history and reload report over real sockets: `/history` holds the
//! gateway's own samples of its overall traffic (a page opened late gets them at once),
//! `/status` counts the traffic and marks a failed reload as past once a good one came
//! after it, and `token_env` (the shipped file's token): unset, the API shows its views and
//! refuses every call that changes state; set, it wants that token.

use crate::cli::{tollgate, wait_until_listening, write_config, Running};
use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::*;

fn config() -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
token = "{ADMIN_TOKEN}"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[upstreams.gone]
servers = ["{gone}"]
[[location]]
match = "/limited"
limit = [{{ zone = "per_ip", nodelay = true }}]
return = {{ status = 200 }}
[[location]]
match = "/gone"
upstream = "gone"
"#,
        gone = closed_port()
    )
}

async fn json(admin: std::net::SocketAddr, path: &str) -> Value {
    let reply = within(5, send(admin, get(path))).await;
    assert_eq!(reply.status, 200, "{path}: {reply:?}");
    assert_eq!(reply.headers["content-type"], "application/json");
    serde_json::from_str(&reply.body).expect("JSON")
}

#[tokio::test]
async fn the_gateway_keeps_its_traffic_history_for_a_page_opened_later() {
    let _shared = support::shared();
    let gw = gateway(&config());
    let (admin, at) = (gw.admin_addr().expect("admin"), addr(&gw));
    // 2 passes, 3 rejections (429), 2 upstream refusals (502), before any page is open.
    for client in ["10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.1", "10.0.0.2"] {
        get_as(at, "/limited", client).await;
    }
    for _ in 0..2 {
        assert_eq!(get_as(at, "/gone", "10.0.0.3").await.status, 502);
    }
    // A request is counted once its answer is written: the client may read the last one
    // before it is counted.
    let mut status = json(admin, "/status").await;
    for _ in 0..50 {
        if status["traffic"]["requests"]["5xx"] == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        status = json(admin, "/status").await;
    }
    let traffic = &status["traffic"];
    assert_eq!(traffic["requests"]["2xx"], 2, "{traffic}");
    assert_eq!(traffic["requests"]["4xx"], 3, "{traffic}");
    assert_eq!(traffic["requests"]["5xx"], 2, "{traffic}");
    assert_eq!(traffic["rejected"], 3, "{traffic}");
    assert_eq!(traffic["upstream_failures"]["refused"], 2, "{traffic}");

    // The gateway samples every 5 s from its start: the samples add up to the counts
    // (each is a rate over its interval, to 3 decimals), whichever took them.
    let mut history = json(admin, "/history").await;
    for _ in 0..200 {
        if counted(&history, &["requests", "2xx"]) >= 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        history = json(admin, "/history").await;
    }
    assert_eq!(history["interval_ms"], 5000);
    assert_eq!(history["capacity"], 180);
    for (series, count) in [
        (&["requests", "2xx"][..], 2.0),
        (&["requests", "4xx"], 3.0),
        (&["requests", "5xx"], 2.0),
        (&["requests", "1xx"], 0.0),
        (&["rejected"], 3.0),
        (&["upstream_failures", "refused"], 2.0),
    ] {
        assert_eq!(counted(&history, series), count, "{series:?}: {history}");
    }
    let sample = &history["samples"][0];
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    let at_ms = sample["at_ms"].as_f64().expect("at_ms");
    assert!(
        (now_ms - at_ms).abs() < 60_000.0,
        "{at_ms} against {now_ms}"
    );
    // Reading it changes nothing, and it is a view: no token needed, no other method.
    let again = json(admin, "/history").await;
    assert_eq!(again["samples"][0], history["samples"][0]);
    let post = http::Request::post("/history")
        .header("host", "admin")
        .body(empty())
        .unwrap();
    assert_eq!(within(5, send(admin, post)).await.status, 401);
}

/// The count a series of `/history` adds up to: each sample's rate times its seconds.
fn counted(history: &Value, series: &[&str]) -> f64 {
    let samples = history["samples"].as_array().expect("samples");
    let sum: f64 = samples
        .iter()
        .map(|sample| {
            let rate = series.iter().fold(sample, |value, key| &value[*key]);
            rate.as_f64().expect("a rate") * sample["seconds"].as_f64().expect("seconds")
        })
        .sum();
    sum.round()
}

#[tokio::test]
async fn a_good_reload_turns_the_last_failure_into_a_past_one() {
    let _shared = support::shared();
    let gw = gateway(&config());
    let admin = gw.admin_addr().expect("admin");
    let dir = tempfile::tempdir().unwrap();
    let broken = write_config(&dir, "gateway.toml", "[server]\nlisten = 3\n");
    assert!(gw.reload_file(&broken).is_err());
    let reloads = json(admin, "/status").await["reloads"].clone();
    assert_eq!((&reloads["ok"], &reloads["failed"]), (&0.into(), &1.into()));
    let failure = reloads["last_failure"].clone();
    assert_eq!(failure["past"], false, "{reloads}");
    assert!(failure["error"]
        .as_str()
        .unwrap()
        .contains("gateway.toml:2:10"));

    assert_eq!(gw.reload(&parse(&config())).unwrap(), 2);
    let reloads = json(admin, "/status").await["reloads"].clone();
    assert_eq!((&reloads["ok"], &reloads["failed"]), (&1.into(), &1.into()));
    // Still listed, with its time and error, as past.
    let past = &reloads["last_failure"];
    assert_eq!(past["past"], true, "{reloads}");
    assert_eq!(
        (&past["at"], &past["error"]),
        (&failure["at"], &failure["error"])
    );

    // A failure after that is the current one again.
    assert!(gw.reload_file(&broken).is_err());
    let reloads = json(admin, "/status").await["reloads"].clone();
    assert_eq!(reloads["last_failure"]["past"], false, "{reloads}");
}

const TOKEN_ENV: &str = "TOLLGATE_TEST_ADMIN_TOKEN";
const TOKEN: &str = "env-admin-token-0123456789abcdef";

/// A `tollgate` child on `examples`-like config with `[admin] token_env`, the variable
/// set to `token` (or not at all): the child and its admin port.
async fn with_token_env(dir: &tempfile::TempDir, token: Option<&str>) -> (Running, u16) {
    let (port, admin) = (free_port(), free_port());
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:{port}\"]\n[log]\naccess = \"off\"\n\
         [admin]\nlisten = \"127.0.0.1:{admin}\"\ntoken_env = \"{TOKEN_ENV}\"\n\
         [zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n\
         [[location]]\nmatch = \"/\"\nlimit = [{{ zone = \"per_ip\" }}]\n\
         return = {{ status = 200 }}\n"
    );
    let path = write_config(dir, "gateway.toml", &text);
    let mut command = tollgate();
    command.arg("-c").arg(&path).env_remove(TOKEN_ENV);
    if let Some(token) = token {
        command.env(TOKEN_ENV, token);
    }
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let running = Running(child);
    wait_until_listening(admin).await;
    (running, admin)
}

/// The status of `METHOD PATH` with `authorization`, in raw bytes on a new connection.
async fn raw_call(admin: u16, method: &str, path: &str, authorization: Option<&str>) -> u16 {
    let authorization = authorization.map_or(String::new(), |a| format!("authorization: {a}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: admin\r\n{authorization}connection: close\r\n\r\n"
    );
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", admin))
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, head.as_bytes())
        .await
        .unwrap();
    let response = within(5, raw::read_response(&mut stream)).await;
    response.expect("an answer").status
}

const CHANGES: [(&str, &str); 3] = [
    ("DELETE", "/zones/per_ip/keys/127.0.0.1"),
    ("DELETE", "/bans/per_ip/127.0.0.1"),
    ("POST", "/status"),
];

#[tokio::test]
async fn with_token_env_unset_views_answer_and_every_change_is_refused() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let out = tollgate()
        .args(["-t", "-c"])
        .arg(write_config(
            &dir,
            "check.toml",
            &format!(
                "[server]\nlisten = [\"127.0.0.1:8080\"]\n[admin]\nlisten = \"127.0.0.1:9090\"\n\
                 token_env = \"{TOKEN_ENV}\"\n"
            ),
        ))
        .env_remove(TOKEN_ENV)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: ") && stderr.contains(&format!("{TOKEN_ENV} is not set")),
        "{stderr}"
    );

    let (_child, admin) = with_token_env(&dir, None).await;
    for path in ["/status", "/history", "/metrics", "/bans", "/"] {
        assert_eq!(raw_call(admin, "GET", path, None).await, 200, "{path}");
    }
    let wrong = format!("Bearer {TOKEN}");
    for (method, path) in CHANGES {
        for authorization in [None, Some(wrong.as_str()), Some("Bearer")] {
            let status = raw_call(admin, method, path, authorization).await;
            assert_eq!(status, 403, "{method} {path} {authorization:?}");
        }
    }
}

#[tokio::test]
async fn with_token_env_set_changes_need_that_token() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (_child, admin) = with_token_env(&dir, Some(TOKEN)).await;
    assert_eq!(raw_call(admin, "GET", "/status", None).await, 200);
    let wrong = format!("Bearer {TOKEN}x");
    let (method, path) = CHANGES[0];
    for authorization in [None, Some(wrong.as_str()), Some(TOKEN), Some("Bearer ")] {
        let status = raw_call(admin, method, path, authorization).await;
        assert_eq!(status, 401, "{authorization:?}");
    }
    // The right token passes: the key is not stored, so 404 (it is as fresh).
    let right = format!("Bearer {TOKEN}");
    assert_eq!(raw_call(admin, method, path, Some(&right)).await, 404);
    assert_eq!(raw_call(admin, "POST", "/status", Some(&right)).await, 405);
}

/// The shipped `gateway.toml` opens the admin API on loopback, its token from the
/// environment (it starts without it: `cli::check_accepts_the_shipped_gateway_toml`).
#[test]
fn the_shipped_file_has_the_admin_api_on_loopback() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let admin = text
        .split("\n[admin]\n")
        .nth(1)
        .expect("an [admin] section");
    let admin = admin.split("\n[").next().unwrap();
    assert!(admin.contains("listen = \"127.0.0.1:9901\""), "{admin}");
    assert!(
        admin.contains("token_env = \"TOLLGATE_ADMIN_TOKEN\""),
        "{admin}"
    );
}

/// The demo's config (`examples/demo-traffic.py` runs tollgate on it) passes `-t`, with
/// the warning that its token variable is unset.
#[test]
fn check_accepts_the_demo_config() {
    let _shared = support::shared();
    let out = tollgate()
        .args(["-t", "-c"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo.toml"))
        .env_remove("TOLLGATE_ADMIN_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("TOLLGATE_ADMIN_TOKEN is not set"),
        "{stderr}"
    );
}
