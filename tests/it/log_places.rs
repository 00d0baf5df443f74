//! Access logs per site and location (nginx's `access_log` in `server` and `location`):
//! each request's line goes to the log of where it ended, in that log's format, and
//! `access = "off"` silences only the table that says it.

use crate::support;

use std::path::Path;

use support::*;

/// `[log]` to `main`; site a.test to `a` in its own format, with locations that change
/// one key each; site c.test to `c`; site b.test (the default) has no `log`.
fn config(up: std::net::SocketAddr, dir: &Path) -> String {
    let [main, a, c, json] =
        ["main.log", "a.log", "c.log", "a.json"].map(|name| dir.join(name).display().to_string());
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "{main}"
format = "main $host $request_uri $status"
[upstreams.app]
servers = ["{up}"]
[[site]]
names = ["a.test"]
log = {{ access = "{a}", format = "a $request_uri $http_x_a $location" }}
[[site.location]]
match = "/"
upstream = "app"
[[site.location]]
match = "/json"
return = {{ status = 200, body = "j" }}
log = {{ access = "{json}", format = "json" }}
[[site.location]]
match = "/quiet"
return = {{ status = 200, body = "q" }}
log = {{ access = "off" }}
[[site.location]]
match = "= /main"
return = {{ status = 200, body = "m" }}
log = {{ access = "{main}" }}
[[site]]
names = ["b.test"]
default = true
[[site.location]]
match = "/b/"
return = {{ status = 200, body = "b" }}
[[site]]
names = ["c.test"]
log = {{ access = "{c}" }}
[[site.location]]
match = "/c/"
return = {{ status = 200, body = "c" }}
"#
    )
}

async fn ask(gw: &tollgate::Gateway, host: &str, path: &str) {
    let req = http::Request::get(path)
        .header("host", host)
        .header("x-a", "1")
        .header("user-agent", "ua/1")
        .body(empty())
        .unwrap();
    within(5, send(addr(gw), req)).await;
}

#[tokio::test]
async fn each_line_goes_to_the_log_of_where_its_request_ended() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(up.addr, dir.path()));
    ask(&gw, "a.test", "/quiet").await;
    ask(&gw, "a.test", "/x").await;
    ask(&gw, "a.test", "/json").await;
    ask(&gw, "a.test", "/main").await;
    ask(&gw, "b.test", "/b/1").await;
    ask(&gw, "b.test", "/nope").await;
    ask(&gw, "c.test", "/zzz").await;
    ask(&gw, "c.test", "/c/1").await;
    let main = log_lines(&dir.path().join("main.log"), 3).await;
    assert_eq!(
        main,
        [
            "a /main 1 = /main",
            "main b.test /b/1 200",
            "main b.test /nope 404"
        ]
    );
    let a = log_lines(&dir.path().join("a.log"), 1).await;
    // The quiet request came first: had it been written, it would be here before /x.
    assert_eq!(a, ["a /x 1 /"]);
    let json = log_lines(&dir.path().join("a.json"), 1).await;
    let line: serde_json::Value = serde_json::from_str(&json[0]).unwrap();
    assert_eq!(
        (&line["uri"], &line["user_agent"]),
        (&"/json".into(), &"ua/1".into())
    );
    // The site's 404 for a path none of its locations match goes to the site's log.
    let c = log_lines(&dir.path().join("c.log"), 2).await;
    assert_eq!(c, ["main c.test /zzz 404", "main c.test /c/1 200"]);
}

#[tokio::test]
async fn a_reload_moves_a_location_to_its_new_log() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let before = config(up.addr, dir.path());
    let gw = gateway(&before);
    ask(&gw, "a.test", "/quiet").await;
    let after = before.replace(
        r#"log = { access = "off" }"#,
        &format!(
            r#"log = {{ access = "{}", format = "now $request_uri" }}"#,
            dir.path().join("now.log").display()
        ),
    );
    gw.reload(&parse(&after)).unwrap();
    ask(&gw, "a.test", "/quiet").await;
    ask(&gw, "a.test", "/x").await;
    assert_eq!(
        log_lines(&dir.path().join("now.log"), 1).await,
        ["now /quiet"]
    );
    assert_eq!(log_lines(&dir.path().join("a.log"), 1).await, ["a /x 1 /"]);
}
