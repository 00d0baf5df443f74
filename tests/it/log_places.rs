//! Access logs per site and location (nginx's `access_log` in `server` and `location`):
//! each request's line goes to the log of where it ended, in that log's format, and
//! `access = "off"` silences only the table that says it; the same requests through real
//! nginx with the same `access_log`s land in the same files, line for line.

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

#[tokio::test]
async fn lines_go_to_the_files_nginx_writes_them_to() {
    let _shared = support::shared();
    if !support::nginx::available("logs per server and location") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let [ours, theirs] = ["tollgate", "nginx"].map(|side| {
        let at = dir.path().join(side);
        std::fs::create_dir(&at).unwrap();
        at
    });
    let template = "$host $request_uri $status";
    // nginx: `access_log off` in http {} (support::nginx::http); a.test logs to a.log,
    // its /quiet nowhere, its /other to o.log, its /gone's error page to p.log; c.test's
    // 404s to c.log; b.test nowhere.
    let nginx = support::nginx::Nginx::start(
        |root, port| {
            let t = theirs.display();
            let servers = format!(
                "log_format t '{template}';\n\
                 server {{ listen 127.0.0.1:{port}; server_name a.test; access_log {t}/a.log t;\n\
                   location / {{ return 200 a; }}\n\
                   location /quiet {{ access_log off; return 200 q; }}\n\
                   location /other {{ access_log {t}/o.log t; return 200 o; }}\n\
                   location /gone {{ error_page 404 /missing.html; return 404; }}\n\
                   location = /missing.html {{ access_log {t}/p.log t; return 404 missing; }} }}\n\
                 server {{ listen 127.0.0.1:{port} default_server; server_name b.test;\n\
                   location /b/ {{ return 200 b; }} }}\n\
                 server {{ listen 127.0.0.1:{port}; server_name c.test; access_log {t}/c.log t;\n\
                   location /c/ {{ return 200 c; }} }}\n"
            );
            support::nginx::http(root, &servers)
        },
        &[],
    );
    let o = ours.display();
    let gw = gateway(&format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\naccess = \"off\"\n\
         [[site]]\nnames = [\"a.test\"]\nlog = {{ access = \"{o}/a.log\", format = \"{template}\" }}\n\
         [[site.location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"a\" }}\n\
         [[site.location]]\nmatch = \"/quiet\"\nreturn = {{ status = 200, body = \"q\" }}\nlog = {{ access = \"off\" }}\n\
         [[site.location]]\nmatch = \"/other\"\nreturn = {{ status = 200, body = \"o\" }}\nlog = {{ access = \"{o}/o.log\" }}\n\
         [[site.location]]\nmatch = \"/gone\"\nreturn = {{ status = 404 }}\nerror_pages = {{ \"404\" = \"/missing.html\" }}\n\
         [[site.location]]\nmatch = \"= /missing.html\"\nreturn = {{ status = 404, body = \"missing\" }}\nlog = {{ access = \"{o}/p.log\" }}\n\
         [[site]]\nnames = [\"b.test\"]\ndefault = true\n\
         [[site.location]]\nmatch = \"/b/\"\nreturn = {{ status = 200, body = \"b\" }}\n\
         [[site]]\nnames = [\"c.test\"]\nlog = {{ access = \"{o}/c.log\", format = \"{template}\" }}\n\
         [[site.location]]\nmatch = \"/c/\"\nreturn = {{ status = 200, body = \"c\" }}\n"
    ));
    let asked = [
        ("a.test", "/x"),
        ("a.test", "/quiet"),
        ("a.test", "/other/1"),
        ("a.test", "/gone/1"),
        ("b.test", "/b/1"),
        ("b.test", "/nope"),
        ("c.test", "/zzz"),
        ("c.test", "/c/1"),
        ("a.test", "/y"),
    ];
    for (host, path) in asked {
        let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        support::raw::exchange(addr(&gw), request.as_bytes()).await;
        support::raw::exchange(nginx.addr, request.as_bytes()).await;
    }
    // The error page's location writes the line of the request that ended there.
    for (file, count) in [("a.log", 2), ("o.log", 1), ("c.log", 2), ("p.log", 1)] {
        let theirs = log_lines(&theirs.join(file), count).await;
        assert_eq!(log_lines(&ours.join(file), count).await, theirs, "{file}");
    }
    // Wherever nginx writes nothing, tollgate writes nothing.
    let mut files: Vec<String> = std::fs::read_dir(&ours)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["a.log", "c.log", "o.log", "p.log"]);
}
