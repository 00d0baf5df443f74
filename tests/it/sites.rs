//! Sites (nginx `server {}`) through the real gateway. Here: nginx and tollgate run the
//! same sites on two ports and must pick the same site for every Host. In `sites/`:
//! `$server_name` and `$host` beside nginx's, and what nginx cannot be asked the same way
//! (HTTP/2, 444, inherited rules, config errors, TLS).

mod errors;
mod h2;
mod inherit;
mod reload;
mod rules;
mod tls;
mod variables;

use std::fmt::Write as _;
use std::net::SocketAddr;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::nginx::{self, Nginx};
use crate::support::raw::read_response;
use crate::support::{self, free_port, gateway, within};

/// Which of the two listening ports a site listens on.
#[derive(Clone, Copy, PartialEq)]
enum On {
    Both,
    A,
    B,
}

/// One site as both servers get it; its id is what it answers.
struct Site {
    id: &'static str,
    names: &'static [&'static str],
    on: On,
    /// `default_server` (nginx) / `default = true` (tollgate).
    default: bool,
}

/// The sites, in file order. Port A's default is marked (and is not first); port B's is
/// the first site listening there. One name lives on two sites that share no port.
const SITES: [Site; 11] = [
    site("exact", &["example.com", "www.example.com"], On::Both),
    site("wild", &["*.example.com"], On::Both),
    site("wild-a", &["*.a.example.com"], On::Both),
    site("mail", &["mail.*"], On::Both),
    site("mail-example", &["mail.example.*"], On::Both),
    site("regex-www", &[r"~^www\d+\.example\.net$"], On::Both),
    site(
        "regex-more",
        &[r"~^www1\d*\.example\.net$", r"~^api\."],
        On::Both,
    ),
    Site {
        id: "default-a",
        names: &[],
        on: On::A,
        default: true,
    },
    site("only-a", &["only.example.org"], On::A),
    site("only-b", &["only.example.org"], On::B),
    // The name `""` answers a request without a Host before the default does.
    site("no-host-a", &[""], On::A),
];

const fn site(id: &'static str, names: &'static [&'static str], on: On) -> Site {
    Site {
        id,
        names,
        on,
        default: false,
    }
}

/// Request heads (lines split by `|`) and the site each port should answer with (A, B),
/// or the status when it is not 200: what nginx does, by its documented `server_name`
/// rules.
#[rustfmt::skip] // A table: one request a line.
const REQUESTS: &[(&str, &str, &str)] = &[
    ("GET / HTTP/1.1|Host: example.com",                            "exact",        "exact"),
    ("GET / HTTP/1.1|Host: www.example.com",                        "exact",        "exact"),
    ("GET / HTTP/1.1|Host: WWW.Example.COM",                        "exact",        "exact"),
    ("GET / HTTP/1.1|Host: www.example.com:8080",                   "exact",        "exact"),
    ("GET / HTTP/1.1|Host: www.example.com.",                       "exact",        "exact"),
    ("GET / HTTP/1.1|Host: Www.Example.Com.:80",                    "exact",        "exact"),
    ("GET / HTTP/1.0|Host: example.com",                            "exact",        "exact"),
    ("GET / HTTP/1.1|host: www.example.com:",                       "exact",        "exact"),
    ("GET / HTTP/1.1|Host:    www.example.com.:  ",                 "exact",        "exact"),
    // `*.example.com` matches any depth; the longer `*.a.example.com` wins under `a.`.
    ("GET / HTTP/1.1|Host: x.example.com",                          "wild",         "wild"),
    ("GET / HTTP/1.1|Host: x.y.example.com",                        "wild",         "wild"),
    ("GET / HTTP/1.1|Host: a.example.com",                          "wild",         "wild"),
    ("GET / HTTP/1.1|Host: x.a.example.com",                        "wild-a",       "wild-a"),
    ("GET / HTTP/1.1|Host: X.Y.A.Example.com:443",                  "wild-a",       "wild-a"),
    ("GET / HTTP/1.1|Host: my_host.example.com",                    "wild",         "wild"),
    ("GET / HTTP/1.1|Host: -.example.com",                          "wild",         "wild"),
    // A leading wildcard beats a trailing one; the longest trailing one wins.
    ("GET / HTTP/1.1|Host: mail.example.com",                       "wild",         "wild"),
    ("GET / HTTP/1.1|Host: mail.example.org",                       "mail-example", "mail-example"),
    ("GET / HTTP/1.1|Host: mail.example.co.uk",                     "mail-example", "mail-example"),
    ("GET / HTTP/1.1|Host: mail.other.org",                         "mail",         "mail"),
    ("GET / HTTP/1.1|Host: MAIL.test.",                             "mail",         "mail"),
    ("GET / HTTP/1.1|Host: mail",                                   "default-a",    "exact"),
    // Regexes in file order, after every wildcard, on the lower-cased host.
    ("GET / HTTP/1.1|Host: www7.example.net",                       "regex-www",    "regex-www"),
    ("GET / HTTP/1.1|Host: www1.example.net",                       "regex-www",    "regex-www"),
    ("GET / HTTP/1.1|Host: WWW12.Example.NET:8080",                 "regex-www",    "regex-www"),
    ("GET / HTTP/1.1|Host: www7.example.net.",                      "regex-www",    "regex-www"),
    ("GET / HTTP/1.1|Host: api.example.net",                        "regex-more",   "regex-more"),
    ("GET / HTTP/1.1|Host: api.example.com",                        "wild",         "wild"),
    ("GET / HTTP/1.1|Host: api.mail.org",                           "regex-more",   "regex-more"),
    ("GET / HTTP/1.1|Host: wwwx.example.net",                       "default-a",    "exact"),
    // Unknown names, an address and no Host at all fall to each port's default.
    ("GET / HTTP/1.1|Host: unknown.test",                           "default-a",    "exact"),
    ("GET / HTTP/1.1|Host: example.net",                            "default-a",    "exact"),
    ("GET / HTTP/1.1|Host: 127.0.0.1",                              "default-a",    "exact"),
    ("GET / HTTP/1.1|Host: 127.0.0.1:8080",                         "default-a",    "exact"),
    ("GET / HTTP/1.1|Host: [::1]:8080",                             "default-a",    "exact"),
    ("GET / HTTP/1.1|Host: [::1]",                                  "default-a",    "exact"),
    ("GET / HTTP/1.0",                                              "no-host-a",    "exact"),
    // One name, a different site per port.
    ("GET / HTTP/1.1|Host: only.example.org",                       "only-a",       "only-b"),
    // Hosts nginx refuses (RFC 9112 3.2: exactly one valid Host in HTTP/1.1), before any
    // site. Left out on purpose, where tollgate keeps to the RFC and nginx does not: nginx
    // takes `example.com:abc`, `a.test:1:2`, `[::1`, `.example.com` and non-ASCII names
    // (tollgate: 400), and refuses a Host ending in a tab (tollgate trims it, as OWS).
    ("GET / HTTP/1.1",                                              "400",          "400"),
    ("GET / HTTP/1.1|Host:",                                        "400",          "400"),
    ("GET / HTTP/1.1|Host: a.test|Host: b.test",                    "400",          "400"),
    ("GET / HTTP/1.1|Host: www..example.com",                       "400",          "400"),
    ("GET / HTTP/1.1|Host: a/b.example.com",                        "400",          "400"),
    ("GET / HTTP/1.1|Host: www.example.com..",                      "400",          "400"),
    ("GET / HTTP/1.1|Host: WWW7.EXAMPLE.NET..",                     "400",          "400"),
    ("GET / HTTP/1.1|Host: :80",                                    "400",          "400"),
    ("GET / HTTP/1.0|Host: ",                                       "400",          "400"),
    ("GET http://user@www.example.com/ HTTP/1.1|Host: x",           "400",          "400"),
    ("GET http://a..b/ HTTP/1.1|Host: example.com",                 "400",          "400"),
    // The absolute-form target's host is the host (RFC 9112 3.2.2), not the Host header.
    ("GET http://www.example.com/ HTTP/1.1|Host: x.example.com",    "exact",        "exact"),
    ("GET http://unknown.test/ HTTP/1.1|Host: mail.other.org",      "default-a",    "exact"),
    ("GET http://WWW.Example.COM.:80/ HTTP/1.1|Host: unknown.test", "exact",        "exact"),
    ("GET http://mail.other.org/x HTTP/1.0",                        "mail",         "mail"),
    ("GET HTTPS://www.example.com HTTP/1.1|Host: x",                "exact",        "exact"),
    ("GET http://[::1]:80/ HTTP/1.1|Host: example.com",             "default-a",    "exact"),
];

/// nginx's configuration of [`SITES`] on ports `a` and `b`.
fn nginx_config(dir: &std::path::Path, a: u16, b: u16) -> String {
    let mut servers = String::new();
    for site in &SITES {
        servers.push_str(" server {\n");
        for (on, port) in [(On::A, a), (On::B, b)] {
            if site.on == on || site.on == On::Both {
                let default = if site.default { " default_server" } else { "" };
                let _ = writeln!(servers, "  listen 127.0.0.1:{port}{default};");
            }
        }
        // Quoted, for `""`; nginx keeps a backslash before any other character. A server
        // without names has the name `""` in nginx, not in tollgate: `_` stands for none.
        let names: Vec<String> = site.names.iter().map(|n| format!("\"{n}\"")).collect();
        let names = if names.is_empty() {
            "_".to_owned()
        } else {
            names.join(" ")
        };
        let _ = writeln!(servers, "  server_name {names};");
        let _ = writeln!(
            servers,
            "  location / {{ return 200 \"{}\"; }}\n }}",
            site.id
        );
    }
    nginx::http(dir, &servers)
}

/// tollgate's configuration of [`SITES`] on ports `a` and `b`.
fn tollgate_config(a: u16, b: u16) -> String {
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:{a}\", \"127.0.0.1:{b}\"]\nworkers = 1\n\
         [log]\naccess = \"off\"\n"
    );
    for site in &SITES {
        text.push_str("[[site]]\n");
        if !site.names.is_empty() {
            // TOML literal strings: a regex's backslashes stay as written.
            let names: Vec<String> = site.names.iter().map(|n| format!("'{n}'")).collect();
            let _ = writeln!(text, "names = [{}]", names.join(", "));
        }
        match site.on {
            On::Both => {}
            On::A => text.push_str(&format!("listen = [\"127.0.0.1:{a}\"]\n")),
            On::B => text.push_str(&format!("listen = [\"127.0.0.1:{b}\"]\n")),
        }
        if site.default {
            text.push_str("default = true\n");
        }
        let _ = writeln!(
            text,
            "[[site.location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"{}\" }}",
            site.id
        );
    }
    text
}

/// The answer to the request `head` (lines split by `|`): the site's id for a 200, else
/// the status alone (error pages differ), or `"none"`.
async fn answer(addr: SocketAddr, head: &str) -> String {
    let request = format!("{}\r\n\r\n", head.replace('|', "\r\n"));
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.unwrap();
    match within(5, read_response(&mut stream)).await {
        Some(reply) if reply.status == 200 => reply.body,
        Some(reply) => reply.status.to_string(),
        None => "none".to_owned(),
    }
}

#[tokio::test]
async fn each_host_reaches_the_site_nginx_picks_on_each_port() {
    if !nginx::available("the sites conformance test") {
        return;
    }
    let _shared = support::shared();
    let nginx = Nginx::start_on(2, |dir, ports| nginx_config(dir, ports[0], ports[1]), &[]);
    let (a, b) = (free_port(), free_port());
    let _gw = gateway(&tollgate_config(a, b));
    let ours = [a, b].map(|port| SocketAddr::from(([127, 0, 0, 1], port)));
    let mut nginx_unexpected = String::new();
    let mut differences = String::new();
    for &(request, on_a, on_b) in REQUESTS {
        for (port, expected) in [(0, on_a), (1, on_b)] {
            let theirs = answer(nginx.addrs[port], request).await;
            let mine = answer(ours[port], request).await;
            let name = ["A", "B"][port];
            if theirs != expected {
                let _ = writeln!(nginx_unexpected, "{name} {request:?}: nginx {theirs:?}");
            }
            if theirs != mine {
                let _ = writeln!(
                    differences,
                    "{name} {request:?}: nginx {theirs:?}, tollgate {mine:?}"
                );
            }
        }
    }
    assert!(
        nginx_unexpected.is_empty(),
        "nginx did not answer as expected (the table is wrong):\n{nginx_unexpected}{}",
        nginx.error_log()
    );
    assert!(differences.is_empty(), "{differences}");
}
