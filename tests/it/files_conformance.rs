//! Serving files beside real nginx (Debian's 1.22.1): the same tree, the same requests,
//! to nginx (`root`, `index`, `try_files`, `alias`, `error_page`, `expires`, `gzip on`,
//! `gzip_static on`, `proxy_intercept_errors`) and to tollgate with the same in its own
//! keys. Compared: the status, the framing, the headers that carry meaning and the
//! decoded body. Where tollgate differs on purpose the case says why, and the test checks
//! that it still differs (a change that made it agree would be noticed).
//!
//! `cargo test --test it files_conformance -- --nocapture` prints every row.

mod tree;
mod view;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use http::Version;

use crate::support::nginx::{self, Nginx};
use crate::support::{self, addr, gateway, within, Upstream};
use view::{fetch, view, Ask};

/// One compared request; `differs`: why tollgate answers otherwise, on purpose.
struct Case {
    ask: Ask,
    /// Compare the body (and its type and length): not for the servers' own error pages.
    body: bool,
    differs: Option<&'static str>,
}

fn case(method: &'static str, target: &'static str, headers: &[(&'static str, &str)]) -> Case {
    Case {
        ask: Ask {
            method,
            target,
            headers: headers.iter().map(|(n, v)| (*n, (*v).to_owned())).collect(),
            version: Version::HTTP_11,
        },
        body: true,
        differs: None,
    }
}

impl Case {
    fn own_page(mut self) -> Case {
        self.body = false;
        self
    }

    fn differs(mut self, why: &'static str) -> Case {
        self.differs = Some(why);
        self
    }

    fn http10(mut self) -> Case {
        self.ask.version = Version::HTTP_10;
        self
    }
}

/// The ETag and Last-Modified every file of [`tree`] has, for `size` bytes.
fn etag(size: usize) -> String {
    format!("\"{:x}-{size:x}\"", tree::MTIME)
}

fn last_modified() -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(tree::MTIME);
    httpdate::fmt_http_date(at)
}

fn cases() -> Vec<Case> {
    let big = etag(tree::BIG);
    let lm = last_modified();
    let a_day_later = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(tree::MTIME + 86_400),
    );
    let a_second_before = httpdate::fmt_http_date(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(tree::MTIME - 1),
    );
    let gz = [("accept-encoding", "gzip")];
    vec![
        case("GET", "/", &[]),
        case("GET", "/about", &[]),
        case("GET", "/docs", &[]).own_page(),
        case("GET", "/docs/", &[]),
        case("GET", "/dir/", &[]).own_page(),
        case("GET", "/files/missing", &[]),
        case("GET", "/soft/missing", &[]),
        case("GET", "/big.bin", &[("range", "bytes=0-99")]),
        case("GET", "/big.bin", &[("range", "bytes=-100")]),
        case("GET", "/big.bin", &[("range", "bytes=1048500-")]),
        case("GET", "/big.bin", &[("range", "bytes=0-9,20-29")]),
        case(
            "GET",
            "/big.bin",
            &[("range", "bytes=0-599999,500000-1048575")],
        ),
        case("GET", "/big.bin", &[("range", "bytes=2000000-")]).own_page(),
        case("GET", "/big.bin", &[("range", "bytes=abc")]).own_page(),
        case("GET", "/big.bin", &[("range", "items=0-1")]),
        case("GET", "/empty.txt", &[("range", "bytes=0-")]),
        case(
            "GET",
            "/big.bin",
            &[("range", "bytes=0-9"), ("if-range", &big)],
        ),
        case(
            "GET",
            "/big.bin",
            &[("range", "bytes=0-9"), ("if-range", "\"x\"")],
        ),
        case(
            "GET",
            "/big.bin",
            &[("range", "bytes=0-9"), ("if-range", &lm)],
        ),
        case("GET", "/big.bin", &[("if-none-match", &big)]),
        case("GET", "/big.bin", &[("if-none-match", &format!("W/{big}"))]),
        case("GET", "/big.bin", &[("if-none-match", "*")]),
        case(
            "GET",
            "/big.bin",
            &[
                ("if-none-match", &big),
                ("if-modified-since", &a_second_before),
            ],
        ),
        case("GET", "/big.bin", &[("if-modified-since", &lm)]),
        case("GET", "/big.bin", &[("if-modified-since", &a_day_later)]),
        case("GET", "/big.bin", &[("if-match", "\"x\"")]).own_page(),
        case(
            "GET",
            "/big.bin",
            &[("if-unmodified-since", &a_second_before)],
        )
        .own_page(),
        case("HEAD", "/big.bin", &[]),
        case("HEAD", "/big.bin", &[("range", "bytes=0-9")]),
        case("POST", "/index.html", &[]).own_page(),
        case("DELETE", "/index.html", &[]).own_page(),
        case("GET", "/app.js", &gz).differs(
            "type: tollgate says text/javascript (RFC 9239, mime_guess), \
             Debian's mime.types application/javascript",
        ),
        case("GET", "/app.js", &[]).differs("type: text/javascript, as above"),
        case(
            "GET",
            "/app.js",
            &[("accept-encoding", "gzip"), ("range", "bytes=0-9")],
        )
        .differs(
            "ranges over a precompressed file: tollgate 206, as nginx 1.31; 1.22.1 sends it whole",
        ),
        case("GET", "/data.json", &[("accept-encoding", "gzip, br")]),
        case("GET", "/data.json", &[("accept-encoding", "gzip;q=0")]),
        case(
            "GET",
            "/data.json",
            &[("accept-encoding", "gzip"), ("range", "bytes=0-9")],
        ),
        case("GET", "/style.css", &gz),
        case("GET", "/big.bin", &gz),
        case("GET", "/data.json", &gz).http10(),
        case("HEAD", "/data.json", &gz),
        case("GET", "/static/x.css", &[]),
        case("GET", "/assets/logo.svg", &[]),
        case("GET", "/api/status/404", &[]),
        case("GET", "/api/status/500", &[]),
        case("GET", "/api/status/418", &[]),
        case("GET", "/.env", &[])
            .differs("dotfiles: tollgate 404 unless `dotfiles = true`; nginx serves them"),
    ]
}

fn nginx_config(dir: &Path, port: u16, www: &Path, up: SocketAddr) -> String {
    let www = www.display();
    let servers = format!(
        " include /etc/nginx/mime.types;\n default_type application/octet-stream;\n\
         upstream app {{ server {up}; }}\n\
         server {{\n  listen 127.0.0.1:{port};\n  root {www};\n  index index.html;\n\
         gzip on;\n  gzip_vary on;\n  gzip_min_length 1000;\n\
         gzip_types text/css application/javascript application/json image/svg+xml;\n\
         gzip_static on;\n  error_page 404 /404.html;\n  error_page 500 502 503 504 /50x.html;\n\
         location / {{ try_files $uri $uri/ /index.html; }}\n\
         location /files/ {{ try_files $uri $uri/ =404; }}\n\
         location /static/ {{ expires 30d; }}\n\
         location /assets/ {{ alias {www}/assets-v2/; }}\n\
         location /api/ {{ proxy_pass http://app; proxy_intercept_errors on; }}\n\
         location /soft/ {{ error_page 404 =200 /index.html; try_files $uri =404; }}\n }}\n"
    );
    nginx::http(dir, &servers)
}

fn tollgate_config(www: &Path, up: SocketAddr) -> String {
    let www = www.display();
    format!(
        r#"[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[upstreams.app]
servers = ["{up}"]
[[site]]
default = true
error_pages = {{ "404" = "/404.html", "500 502 503 504" = "/50x.html" }}
compress = {{ encodings = ["gzip"], min_length = "1000", types = ["text/html", "text/css", "text/javascript", "application/javascript", "application/json", "image/svg+xml"] }}
[[site.location]]
match = "/"
root = "{www}"
precompressed = ["gzip"]
try_files = ["$uri", "$uri/", "/index.html"]
[[site.location]]
match = "/files/"
root = "{www}"
precompressed = ["gzip"]
try_files = ["$uri", "$uri/", "=404"]
[[site.location]]
match = "/static/"
root = "{www}"
precompressed = ["gzip"]
expires = "30d"
[[site.location]]
match = "/assets/"
alias = "{www}/assets-v2/"
precompressed = ["gzip"]
[[site.location]]
match = "/api/"
upstream = "app"
intercept_errors = true
[[site.location]]
match = "/soft/"
root = "{www}"
precompressed = ["gzip"]
try_files = ["$uri", "=404"]
error_pages = {{ "404" = "=200 /index.html" }}
"#
    )
}

#[tokio::test]
async fn files_are_served_as_nginx_serves_them() {
    if !nginx::available("the files conformance test") {
        return;
    }
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    tree::write(&www);
    let up = Upstream::start(|req| async move {
        let status = req
            .uri()
            .path()
            .rsplit('/')
            .next()
            .and_then(|s| s.parse().ok());
        support::text(status.unwrap_or(200), "from the upstream\n")
    })
    .await;
    let nginx = Nginx::start(
        |prefix, port| nginx_config(prefix, port, &www, up.addr),
        &[],
    );
    let gw = gateway(&tollgate_config(&www, up.addr));
    let (mut compared, mut matched, mut report, mut wrong) = (0, 0, String::new(), String::new());
    for case in cases() {
        let theirs = within(10, fetch(nginx.addr, &case.ask)).await;
        let mine = within(10, fetch(addr(&gw), &case.ask)).await;
        let theirs = view(&theirs, nginx.addr.port(), case.body);
        let mine = view(&mine, addr(&gw).port(), case.body);
        let ask = &case.ask;
        let headers: Vec<String> = ask
            .headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        let row = format!(
            "{} {} {:?} [{}]",
            ask.method,
            ask.target,
            ask.version,
            headers.join("; ")
        );
        compared += 1;
        let same = theirs == mine;
        matched += usize::from(same);
        let _ = writeln!(report, "{row}\n  nginx    {theirs}\n  tollgate {mine}");
        match (same, case.differs) {
            (true, None) | (false, Some(_)) => {}
            (false, None) => {
                let _ = writeln!(wrong, "{row}\n  nginx    {theirs}\n  tollgate {mine}");
            }
            (true, Some(why)) => {
                let _ = writeln!(
                    wrong,
                    "{row}: expected to differ ({why}), but agrees: {mine}"
                );
            }
        }
    }
    println!("{report}\n{matched} of {compared} answered as nginx answered");
    assert!(
        wrong.is_empty(),
        "{wrong}\nnginx's error log:\n{}",
        nginx.error_log_problems()
    );
}
