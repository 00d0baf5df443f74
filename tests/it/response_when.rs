//! `response_headers` with `when` ("Header rules" in docs/config.md): a plain value on
//! what the upstream or the `return` answers, `success` on nginx's list of statuses only,
//! `always` on every answer of the site or location, tollgate's own (403, 404, 413, 429,
//! 502) too, over raw HTTP/1.1 and HTTP/2; and the same presence as nginx's `add_header`
//! without and with `always`.

use crate::support;

use std::net::SocketAddr;

use support::nginx::{self, Nginx};
use support::raw::read_response;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// An upstream answering `/up/ok` 200, `/up/moved` 301, everything else 404.
async fn upstream() -> Upstream {
    Upstream::start(|req| async move {
        match req.uri().path() {
            "/up/ok" | "/limited" => text(200, "ok"),
            "/up/moved" => {
                let mut response = text(301, "");
                let location = "http://a.example/up/ok".parse().unwrap();
                response.headers_mut().insert("location", location);
                response
            }
            _ => text(404, "no"),
        }
    })
    .await
}

const RULES: &str =
    "response_headers = { \"X-Frame-Options\" = { value = \"DENY\", when = \"success\" }, \
     \"Strict-Transport-Security\" = { value = \"max-age=1\", when = \"always\" }, \
     \"X-Plain\" = \"p\", \"X-Uri\" = { value = \"$uri\", when = \"always\" } }";

fn config(up: SocketAddr) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [zones.one]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n\
         [upstreams.down]\nservers = [\"{down}\"]\n\
         [[site]]\nnames = [\"a.example\"]\n{RULES}\n\
         [[site.location]]\nmatch = \"/up/\"\nupstream = \"app\"\n\
         [[site.location]]\nmatch = \"/deny\"\nupstream = \"app\"\naccess = [\"deny all\"]\n\
         [[site.location]]\nmatch = \"/limited\"\nupstream = \"app\"\n\
         limit = [{{ zone = \"one\" }}]\n\
         [[site.location]]\nmatch = \"/small\"\nupstream = \"app\"\nclient_max_body_size = \"1\"\n\
         [[site.location]]\nmatch = \"/down\"\nupstream = \"down\"\n\
         [[site.location]]\nmatch = \"/ret\"\nreturn = {{ status = 200, body = \"r\" }}\n\
         [[site.location]]\nmatch = \"/gone\"\nreturn = {{ status = 410, body = \"g\" }}\n",
        down = support::closed_port(),
    )
}

/// One request: its method and path, the status it gets, and which of the four rules'
/// headers it carries (`X-Frame-Options`, `Strict-Transport-Security`, `X-Plain`,
/// `X-Uri`).
struct Case {
    post: bool,
    path: &'static str,
    status: u16,
    carries: [bool; 4],
}

const fn case(post: bool, path: &'static str, status: u16, carries: [bool; 4]) -> Case {
    Case {
        post,
        path,
        status,
        carries,
    }
}

const NAMES: [&str; 4] = [
    "x-frame-options",
    "strict-transport-security",
    "x-plain",
    "x-uri",
];

/// In order: the second `/limited` is rejected.
const CASES: [Case; 10] = [
    case(false, "/up/ok", 200, [true, true, true, true]),
    case(false, "/up/moved", 301, [true, true, true, true]),
    case(false, "/up/missing", 404, [false, true, true, true]),
    case(false, "/deny", 403, [false, true, false, true]),
    case(false, "/limited", 200, [true, true, true, true]),
    case(false, "/limited", 429, [false, true, false, true]),
    case(true, "/small", 413, [false, true, false, true]),
    case(false, "/down", 502, [false, true, false, true]),
    case(false, "/nowhere", 404, [false, true, false, true]),
    case(false, "/gone", 410, [false, true, true, true]),
];

/// Each header's values in `head` (`name: value` lines, any case).
fn values(head: &str, name: &str) -> Vec<String> {
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_owned())
        .collect()
}

/// The four rules' headers of `head` and whether each came exactly once with its value.
fn carried(head: &str, path: &str) -> [bool; 4] {
    let expected = ["DENY", "max-age=1", "p", path];
    let mut carried = [false; 4];
    for (i, name) in NAMES.iter().enumerate() {
        let got = values(head, name);
        assert!(got.len() <= 1, "{name} twice: {head}");
        if let Some(value) = got.first() {
            assert_eq!(value, expected[i], "{name}: {head}");
            carried[i] = true;
        }
    }
    carried
}

async fn raw_h1(addr: SocketAddr, case: &Case) -> (u16, String) {
    let mut client = TcpStream::connect(addr).await.unwrap();
    let request = match case.post {
        true => format!(
            "POST {} HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\nhello",
            case.path
        ),
        false => format!("GET {} HTTP/1.1\r\nHost: a.example\r\n\r\n", case.path),
    };
    client.write_all(request.as_bytes()).await.unwrap();
    let reply = within(5, read_response(&mut client))
        .await
        .expect("a response");
    (reply.status, reply.head)
}

async fn h2(addr: SocketAddr, case: &Case) -> (u16, String) {
    let uri = format!("http://a.example{}", case.path);
    let request = match case.post {
        true => http::Request::post(uri).header("content-length", "5"),
        false => http::Request::get(uri),
    };
    let body = if case.post { full("hello") } else { empty() };
    let reply = within(5, send_h2(addr, request.body(body).unwrap())).await;
    let head = reply
        .headers
        .iter()
        .map(|(n, v)| format!("{n}: {}\r\n", v.to_str().unwrap()))
        .collect();
    (reply.status.as_u16(), head)
}

#[tokio::test]
async fn each_rule_goes_on_the_answers_its_when_names_over_both_protocols() {
    let _shared = support::shared();
    let up = upstream().await;
    for protocol in ["http/1.1", "h2"] {
        let gw = gateway(&config(up.addr));
        for case in &CASES {
            let (status, head) = match protocol {
                "h2" => h2(addr(&gw), case).await,
                _ => raw_h1(addr(&gw), case).await,
            };
            let what = format!("{protocol} {} {}", case.path, case.status);
            assert_eq!(status, case.status, "{what}: {head}");
            assert_eq!(carried(&head, case.path), case.carries, "{what}: {head}");
        }
    }
}

#[test]
fn a_table_needs_a_value_and_a_known_when() {
    let up = support::closed_port();
    for rules in [
        "response_headers = { \"X-A\" = { when = \"always\" } }",
        "response_headers = { \"X-A\" = { value = \"1\", when = \"sometimes\" } }",
        "response_headers = { \"X-A\" = { value = \"1\", nope = 1 } }",
        "response_headers = { \"X-A\" = { value = \"\", when = \"always\" } }",
    ] {
        let toml = format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n[upstreams.app]\nservers = [\"{up}\"]\n\
             [[location]]\nmatch = \"/\"\nupstream = \"app\"\n{rules}\n"
        );
        let result = tollgate::config::from_str(&toml, std::path::Path::new("t.toml"));
        assert!(result.is_err(), "accepted: {rules}");
    }
}

/// nginx with `add_header X-A a;` and `add_header X-B b always;` on each location.
fn nginx_config(dir: &std::path::Path, port: u16, up: SocketAddr) -> String {
    let headers = "add_header X-A a; add_header X-B b always;";
    nginx::http(
        dir,
        &format!(
            "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\
             server {{\n listen 127.0.0.1:{port};\n\
             location /up/ {{ proxy_pass http://{up}; {headers} }}\n\
             location /deny {{ deny all; proxy_pass http://{up}; {headers} }}\n\
             location /limited {{ limit_req zone=one; proxy_pass http://{up}; {headers} }}\n\
             }}\n"
        ),
    )
}

/// tollgate's equivalent: `when = "success"` and `when = "always"`.
fn tollgate_config(up: SocketAddr) -> String {
    let rules = "response_headers = { \"X-A\" = { value = \"a\", when = \"success\" }, \
                 \"X-B\" = { value = \"b\", when = \"always\" } }";
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nlimit_status = 503\n\
         [log]\naccess = \"off\"\n\
         [zones.one]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n\
         [[location]]\nmatch = \"/up/\"\nupstream = \"app\"\n{rules}\n\
         [[location]]\nmatch = \"/deny\"\nupstream = \"app\"\naccess = [\"deny all\"]\n{rules}\n\
         [[location]]\nmatch = \"/limited\"\nupstream = \"app\"\n\
         limit = [{{ zone = \"one\" }}]\n{rules}\n"
    )
}

#[tokio::test]
async fn success_and_always_are_present_where_nginxs_add_header_is() {
    let _shared = support::shared();
    if !nginx::available("the nginx comparison of add_header") {
        return;
    }
    let up = upstream().await;
    let nginx = Nginx::start(|dir, port| nginx_config(dir, port, up.addr), &[]);
    let gw = gateway(&tollgate_config(up.addr));
    // 200 and 404 from the upstream, 403 from deny, 200 then 503 from the limit.
    let paths = ["/up/ok", "/up/missing", "/deny", "/limited", "/limited"];
    for path in paths {
        let case = case(false, path, 0, [false; 4]);
        let (nginx_status, nginx_head) = raw_h1(nginx.addr, &case).await;
        let (status, head) = raw_h1(addr(&gw), &case).await;
        assert_eq!(status, nginx_status, "{path}");
        for name in ["x-a", "x-b"] {
            let nginx_has = !values(&nginx_head, name).is_empty();
            let has = !values(&head, name).is_empty();
            assert_eq!(
                has, nginx_has,
                "{path} {status} {name}:\n{head}\nnginx:\n{nginx_head}"
            );
        }
    }
}
