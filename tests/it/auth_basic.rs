//! `auth = { basic = … }` through the real gateway, with htpasswd files written by Debian's
//! `htpasswd` (apache2-utils; skipped with a note where it is missing): a login per hash
//! kind, the 401 and its challenge, hostile `Authorization` headers as raw bytes, a file
//! changed under the running gateway, `satisfy = "any"`, and a brute force charged by
//! `count_status = [401]` until the penalty box bans it.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use support::*;

/// `htpasswd -b[FLAG] FILE USER PASSWORD`, creating FILE with `-c` when `create`.
fn htpasswd(file: &Path, flag: &str, user: &str, password: &str, create: bool) {
    let mut command = Command::new("htpasswd");
    command.arg(if create { "-cb" } else { "-b" });
    if !flag.is_empty() {
        command.arg(flag);
    }
    let out = command
        .arg(file)
        .arg(user)
        .arg(password)
        .output()
        .expect("htpasswd runs");
    assert!(
        out.status.success(),
        "htpasswd {flag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn available() -> bool {
    let found = Command::new("htpasswd")
        .arg("-nb")
        .arg("u")
        .arg("p")
        .output()
        .is_ok();
    if !found {
        skip_note("htpasswd (apache2-utils) is not installed: basic auth is tested by its unit tests only");
    }
    found
}

/// A users file with `alice` (by `flag`, password `password`) in a temporary directory,
/// and an upstream answering 200.
async fn alice(flag: &str, password: &str) -> (tempfile::TempDir, std::path::PathBuf, Upstream) {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    htpasswd(&users, flag, "alice", password, true);
    let up = Upstream::start(|_| async { text(200, "in") }).await;
    (dir, users, up)
}

fn config(up: SocketAddr, users: &Path, extra: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[zones.login]
key = "$binary_remote_addr"
rate = "600r/m"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/admin/"
upstream = "app"
auth = {{ basic = {{ realm = "Admin area", users = "{}" }} }}
{extra}
[[location]]
match = "/"
upstream = "app"
"#,
        users.display()
    )
}

/// Raw bytes to `addr`; the status and head of the answer.
async fn raw(addr: SocketAddr, request: &str) -> (u16, String) {
    let reply = raw_exchange(addr, request).await;
    (reply.status, reply.head)
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

async fn as_user(addr: SocketAddr, path: &str, user: &str, password: &str) -> (u16, String) {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Basic {}\r\nConnection: close\r\n\r\n",
        basic(user, password)
    );
    raw(addr, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_htpasswd_line_logs_in_and_a_wrong_password_does_not() {
    if !available() {
        return;
    }
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let kinds = [
        ("apr1", "-m"),
        ("bcrypt", "-B"),
        ("sha256", "-2"),
        ("sha512", "-5"),
        ("sha1", "-s"),
    ];
    for (i, (user, flag)) in kinds.iter().enumerate() {
        htpasswd(&users, flag, user, &format!("pa:ss wörd {user}"), i == 0);
    }
    let up = Upstream::start(|_| async { text(200, "in") }).await;
    let gateway = gateway(&config(up.addr, &users, ""));
    let addr = addr(&gateway);
    for (user, _) in kinds {
        let (status, _) = as_user(addr, "/admin/x", user, &format!("pa:ss wörd {user}")).await;
        assert_eq!(status, 200, "{user}");
        let (status, head) = as_user(addr, "/admin/x", user, "pa:ss wörd").await;
        assert_eq!(status, 401, "{user} with a wrong password");
        assert!(
            head.contains("www-authenticate: Basic realm=\"Admin area\""),
            "{head}"
        );
    }
    let (status, _) = as_user(addr, "/admin/x", "nobody", "x").await;
    assert_eq!(status, 401);
    assert_eq!(
        up.count(),
        kinds.len(),
        "only the good logins reached the upstream"
    );
    let (status, _) = raw(
        addr,
        "GET /open HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200, "a location without auth");
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_authorization_headers_get_401_or_400_and_never_pass() {
    if !available() {
        return;
    }
    let _shared = shared();
    let (_dir, users, up) = alice("-B", "secret").await;
    let gateway = gateway(&config(up.addr, &users, ""));
    let addr = addr(&gateway);
    let good = basic("alice", "secret");
    let long = "A".repeat(64 * 1024);
    let cases: Vec<(String, u16)> = vec![
        (String::new(), 401),
        ("Authorization: Basic\r\n".into(), 401),
        ("Authorization: Bearer abc\r\n".into(), 401),
        ("Authorization: Basic !!!!\r\n".into(), 401),
        (
            format!("Authorization: Basic {}\r\n", basic("alice", "secret\0")),
            401,
        ),
        (
            format!("Authorization: Basic {}\r\n", basic("", "secret")),
            401,
        ),
        (
            format!("Authorization: Basic {}\r\n", basic("alice:secret", "")),
            401,
        ),
        ("Authorization: Basic YWxpY2U=\r\n".into(), 401), // "alice", no colon
        (
            format!("Authorization: Basic {good}\r\nAuthorization: Basic {good}\r\n"),
            400,
        ),
        (format!("Authorization: Basic {long}\r\n"), 431),
        (format!("Authorization: basic    {good}\r\n"), 200),
        (
            format!("Authorization: Basic {}\r\n", good.trim_end_matches('=')),
            200,
        ),
    ];
    for (header, expected) in cases {
        let request =
            format!("GET /admin/ HTTP/1.1\r\nHost: t\r\n{header}Connection: close\r\n\r\n");
        let (status, _) = raw(addr, &request).await;
        let shown: String = header.chars().take(80).collect();
        assert_eq!(status, expected, "{shown:?}");
    }
    assert_eq!(up.count(), 2, "only the two good logins passed");
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_htpasswd_file_is_read_again_and_a_bad_one_is_not() {
    if !available() {
        return;
    }
    let _shared = shared();
    let (_dir, users, up) = alice("-m", "one").await;
    let gateway = gateway(&config(up.addr, &users, ""));
    let addr = addr(&gateway);
    assert_eq!(as_user(addr, "/admin/", "alice", "one").await.0, 200);
    htpasswd(&users, "-m", "alice", "two", false);
    htpasswd(&users, "-m", "bob", "three", false);
    let mut seen = false;
    for _ in 0..40 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if as_user(addr, "/admin/", "bob", "three").await.0 == 200 {
            seen = true;
            break;
        }
    }
    assert!(seen, "the new user passes within a second or so");
    assert_eq!(
        as_user(addr, "/admin/", "alice", "one").await.0,
        401,
        "the old password, remembered before, no longer passes"
    );
    assert_eq!(as_user(addr, "/admin/", "alice", "two").await.0, 200);
    // A line tollgate refuses (DES): the last good table stays.
    std::fs::write(&users, "alice:ZJpRNehYYCLuc\n").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(as_user(addr, "/admin/", "bob", "three").await.0, 200);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn satisfy_any_lets_an_allowed_client_in_and_asks_the_others_to_log_in() {
    if !available() {
        return;
    }
    let _shared = shared();
    let (_dir, users, up) = alice("-B", "secret").await;
    let any = "access = [\"allow 127.0.0.1\", \"deny all\"]\nsatisfy = \"any\"";
    let gateway = gateway(&config(up.addr, &users, any));
    let addr = addr(&gateway);
    let (status, _) = raw(
        addr,
        "GET /admin/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200, "127.0.0.1 is allowed: no login");
    gateway.stop().await;
    let outside = "access = [\"allow 10.0.0.0/8\", \"deny all\"]\nsatisfy = \"any\"";
    let gateway = support::gateway(&config(up.addr, &users, outside));
    let addr = support::addr(&gateway);
    let (status, head) = raw(
        addr,
        "GET /admin/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(
        status, 401,
        "denied, but a login would do: nginx's 401 over 403"
    );
    assert!(head.contains("www-authenticate"), "{head}");
    assert_eq!(as_user(addr, "/admin/", "alice", "secret").await.0, 200);
    gateway.stop().await;
    let all = "access = [\"allow 10.0.0.0/8\", \"deny all\"]";
    let gateway = support::gateway(&config(up.addr, &users, all));
    let addr = support::addr(&gateway);
    assert_eq!(
        as_user(addr, "/admin/", "alice", "secret").await.0,
        403,
        "satisfy all: both must pass"
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_charged_and_a_brute_force_is_banned() {
    if !available() {
        return;
    }
    let _shared = shared();
    let (_dir, users, up) = alice("-m", "secret").await;
    let limit = "limit = [{ zone = \"login\", burst = 2, nodelay = true, count_status = [401], \
                 ban = { after = 2, within = \"1m\", for = \"1m\" } }]";
    let gateway = gateway(&config(up.addr, &users, limit).replace("600r/m", "1r/m"));
    let addr = addr(&gateway);
    // Good logins are not charged: many pass.
    for _ in 0..5 {
        assert_eq!(as_user(addr, "/admin/", "alice", "secret").await.0, 200);
    }
    let mut statuses = Vec::new();
    for attempt in 0..8 {
        statuses.push(
            as_user(addr, "/admin/", "alice", &format!("guess{attempt}"))
                .await
                .0,
        );
    }
    assert_eq!(
        &statuses[..3],
        &[401, 401, 401],
        "the burst's failures: {statuses:?}"
    );
    assert!(
        statuses[3..].iter().all(|&s| s == 429 || s == 403),
        "then refused: {statuses:?}"
    );
    let (status, _) = as_user(addr, "/admin/", "alice", "secret").await;
    assert_ne!(
        status, 200,
        "banned: even the right password waits out the ban"
    );
    gateway.stop().await;
}

/// An internal redirect (`try_files`' last item) into a location with `auth` asks for its
/// login there, as nginx runs its access phase again for the new location.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_into_a_location_with_auth_asks_for_its_login() {
    if !available() {
        return;
    }
    let _shared = shared();
    let (dir, users, _up) = alice("-B", "secret").await;
    std::fs::create_dir(dir.path().join("private")).unwrap();
    std::fs::write(dir.path().join("private/page.html"), "private page\n").unwrap();
    std::fs::write(dir.path().join("open.html"), "open page\n").unwrap();
    let toml = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[location]]\nmatch = \"/\"\nroot = \"{0}\"\ntry_files = [\"$uri\", \"/private/page.html\"]\n\
         [[location]]\nmatch = \"/private/\"\nroot = \"{0}\"\n\
         auth = {{ basic = {{ realm = \"Private\", users = \"{1}\" }} }}\n",
        dir.path().display(),
        users.display()
    );
    let gateway = gateway(&toml);
    let addr = addr(&gateway);
    let open = raw(
        addr,
        "GET /open.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(open.0, 200, "a file of the open location");
    let (status, head) = raw(
        addr,
        "GET /missing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 401, "redirected into /private/ without a login");
    assert!(
        head.contains("www-authenticate: Basic realm=\"Private\""),
        "{head}"
    );
    assert_eq!(as_user(addr, "/missing", "alice", "secret").await.0, 200);
    assert_eq!(as_user(addr, "/missing", "alice", "wrong").await.0, 401);
    gateway.stop().await;
}
