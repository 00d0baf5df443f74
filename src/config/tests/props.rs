//! Properties of `from_str` over arbitrary and mutated text: whatever the text, problems
//! come back as `Err`, never as a panic. The mutated files are the shipped `gateway.toml`
//! and a sample that touches every section; the paths they name (certificates, key files,
//! a CA) resolve under a directory that does not exist, and nothing here writes a file.

use std::path::Path;

use proptest::prelude::*;
use proptest::sample::Index;

use super::super::maps::Maps;
use super::super::zones::parse_key;
use super::super::{from_str, VarText};
use crate::props::{apply, mutations};

/// Relative paths in the text resolve here, where nothing can be read.
const ORIGIN: &str = "/nonexistent/tollgate-props/gateway.toml";

const SHIPPED: &str = include_str!("../../../gateway.toml");

/// Every section and most keys, including the ones that name files.
pub(super) const SAMPLE: &str = r#"
[server]
listen = ["127.0.0.1:8080", "[::1]:8080"]
listen_tls = ["127.0.0.1:8443"]
workers = 2
max_header_bytes = "16k"
limit_status = 503
ratelimit_headers = "both"
server_header = "edge"
forwarded_headers = ["X-Forwarded-For", "X-Real-IP"]
compress = { encodings = ["gzip", "br"], types = ["text/*", "application/json"], min_length = "20" }
sendfile = false

[tls]
certificates = [{ cert = "certs/a.pem", key = "certs/a.key" }]
handshake_timeout = "5s"

[redis]
url = "redis://127.0.0.1:6379/0"
timeout = "50ms"
on_error = "deny"
ca = "ca.pem"

[real_ip]
trusted = ["10.0.0.0/8", "fd00::/8"]
header = "X-Real-IP"
recursive = false

[access]
deny = ["192.0.2.0/24"]
exempt = ["203.0.113.7/32"]

[admin]
listen = "127.0.0.1:9901"

[log]
access = "logs/access.log"
format = "json"

[upstreams.app]
servers = ["127.0.0.1:3000", { addr = "127.0.0.1:3001", weight = 2 }]
balance = "least_conn"
keepalive = 8

[maps.tier]
source = "$http_x_tier"
values = { "~^(gold|silver)$" = "$1", GOLD = "gold", "~*^b" = "$tier_default" }
default = "free"

[maps.tier_default]
source = "$request_method"
values = { POST = "writer" }

[maps.redirect_status]
source = "$request_method"
values = { GET = "301", "~^P" = "308" }
default = "302"

[zones.win]
key = "${http_x_api_key}:$arg_user|$cookie_session|$tier"
rate = "100r/m"
algorithm = "sliding_window"
backend = "redis"
instances = 3
on_error = "local"

[zones.log]
key = "$remote_addr$uri$request_method$host"
rate = "5r/s"
algorithm = "sliding_log"
size = "1m"
ipv4_prefix = 24

[zones.fixed]
key = "global"
rate = "1000r/h"
algorithm = "fixed_window"
plans = { gold = "2000r/h" }

[api_keys]
header = "X-API-Key"
inline = { "k1" = "gold" }
file = "keys.toml"

[[location]]
match = "~* \\.(png|jpg)$"
limit = [{ zone = "win", burst = 5, delay = 2, dry_run = true }, { zone = "log" }]
cost = 2
limit_status = 429
upstream = "app"
redirect_rewrite = [{ from = "~^http://app(/.*)$", to = "$1" }, { from = "http://$host/", to = "/" }]
cookie_path = { "/v2/" = "/", "~^/(a)$" = "/b/$1" }
cookie_domain = { "app.internal" = "$host" }
response_headers = { "X-Frame-Options" = { value = "DENY", when = "success" }, "X-A" = "a" }
pass_headers = ["Server"]
forwarded_headers = []

[[location]]
match = "= /x"
access = ["allow 10.0.0.0/8", "deny all"]
limit = [{ zone = "fixed", nodelay = true }]
return = { status = 302, location = "/y", body = "moved" }

[[location]]
match = "/r"
return = { status = "$redirect_status", location = "https://$host$request_uri" }

[[location]]
match = "/"
root = "www"
index = ["index.html", "index.htm"]
try_files = ["$uri", "$uri/", "/index.html"]
error_pages = { "404" = "/404.html", "500 502 503 504" = "=500 /50x.html", "403" = "https://example.com/" }
expires = "1h 30m"
precompressed = ["br", "zstd", "gzip"]
compress = {}
follow_symlinks = true
dotfiles = false

[[location]]
match = "^~ /assets/"
alias = "static/"
upstream = "app"
try_files = ["$uri", "@upstream"]
intercept_errors = true
error_pages = { "502" = "= /down.html" }
expires = "max"
"#;

fn origin() -> &'static Path {
    Path::new(ORIGIN)
}

/// One edit of whole lines.
#[derive(Clone, Debug)]
pub(super) enum LineEdit {
    Delete(Index),
    Duplicate(Index, Index),
    /// Swap the values of two `key = value` lines.
    SwapValues(Index, Index),
}

pub(super) fn line_edits() -> impl Strategy<Value = Vec<LineEdit>> {
    let edit = prop_oneof![
        1 => any::<Index>().prop_map(LineEdit::Delete),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Duplicate(a, b)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::SwapValues(a, b)),
    ];
    prop::collection::vec(edit, 1..5)
}

pub(super) fn apply_lines(text: &str, edits: &[LineEdit]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for edit in edits {
        if lines.is_empty() {
            break;
        }
        match edit {
            LineEdit::Delete(at) => {
                lines.remove(at.index(lines.len()));
            }
            LineEdit::Duplicate(from, to) => {
                let line = lines[from.index(lines.len())].clone();
                lines.insert(to.index(lines.len() + 1), line);
            }
            LineEdit::SwapValues(a, b) => {
                let valued: Vec<usize> = (0..lines.len())
                    .filter(|&i| lines[i].contains(" = "))
                    .collect();
                if valued.is_empty() {
                    continue;
                }
                let (a, b) = (valued[a.index(valued.len())], valued[b.index(valued.len())]);
                let value = |line: &str| line.split_once(" = ").map(|(_, v)| v.to_owned());
                let (Some(va), Some(vb)) = (value(&lines[a]), value(&lines[b])) else {
                    continue;
                };
                let key = |line: &str| line.split_once(" = ").map(|(k, _)| k.to_owned());
                if let (Some(ka), Some(kb)) = (key(&lines[a]), key(&lines[b])) {
                    lines[a] = format!("{ka} = {vb}");
                    lines[b] = format!("{kb} = {va}");
                }
            }
        }
    }
    lines.join("\n")
}

/// What [`toml_like`] files are made of.
const SECTIONS: &[&str] = &[
    "[server]",
    "[tls]",
    "[redis]",
    "[real_ip]",
    "[access]",
    "[admin]",
    "[log]",
    "[upstreams.app]",
    "[zones.z]",
    "[api_keys]",
    "[[location]]",
    "[zones]",
    "[upstreams]",
];
const KEYS: &[&str] = &[
    "listen",
    "listen_tls",
    "workers",
    "client_header_timeout",
    "keepalive_timeout",
    "max_header_bytes",
    "limit_status",
    "ratelimit_headers",
    "certificates",
    "url",
    "urls",
    "timeout",
    "on_error",
    "ca",
    "trusted",
    "header",
    "recursive",
    "deny",
    "exempt",
    "access",
    "format",
    "servers",
    "balance",
    "keepalive",
    "max_fails",
    "fail_timeout",
    "key",
    "rate",
    "size",
    "algorithm",
    "plans",
    "max",
    "backend",
    "instances",
    "ipv4_prefix",
    "ipv6_prefix",
    "inline",
    "file",
    "match",
    "upstream",
    "return",
    "limit",
    "cost",
];
const VALUES: &[&str] = &[
    "\"\"",
    "\"10s\"",
    "\"0s\"",
    "\"99999999999d\"",
    "\"16k\"",
    "\"1g\"",
    "\"2r/s\"",
    "\"0.5r/s\"",
    "\"0r/s\"",
    "\"$binary_remote_addr\"",
    "\"${http_\"",
    "\"$\"",
    "\"127.0.0.1:8080\"",
    "\"[::1]:0\"",
    "\"10.0.0.0/33\"",
    "\"app\"",
    "\"z\"",
    "\"= /\"",
    "\"~ (\"",
    "\"~* ^/a$\"",
    "\"^~ /b\"",
    "\"/\"",
    "\"redis://x\"",
    "\"deny all\"",
    "-1",
    "0",
    "1",
    "65536",
    "9223372036854775807",
    "-9223372036854775808",
    "1.5",
    "true",
    "[]",
    "[\"a\", 1]",
    "[{ zone = \"z\", burst = -1 }]",
    "[\"127.0.0.1:1\"]",
    "{}",
    "{ status = 200 }",
    "{ status = 99, location = \"\" }",
    "{ free = \"1r/s\" }",
    "[{ cert = \"a\", key = \"b\" }]",
    "[{ addr = \"x\", weight = 0 }]",
    "1979-05-27",
];

/// Sections and keys the loader knows, and values of every TOML type, so that random
/// files get past the TOML parser into validation.
fn toml_like() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        1 => prop::sample::select(SECTIONS).prop_map(str::to_owned),
        4 => (prop::sample::select(KEYS), prop::sample::select(VALUES))
            .prop_map(|(k, v)| format!("{k} = {v}")),
    ];
    prop::collection::vec(line, 0..24).prop_map(|lines| lines.join("\n"))
}

/// A key template written back as text, every variable braced.
fn print_key(template: &VarText) -> String {
    template.to_string()
}

fn key_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "([a-z:|]{0,3}\\$\\{?(binary_remote_addr|remote_addr|http_[a-zA-Z_-]{0,6}|arg_[^}]{0,4}|cookie_.{0,4}|uri|request_method|host|scheme|server_name|server_port|request_uri|args|remote_port|request_id|[0-9]|x)?\\}?){0,4}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn mutated_files_load_or_fail_with_errors(
        shipped in any::<bool>(),
        edits in mutations(6),
    ) {
        let mut bytes = if shipped { SHIPPED } else { SAMPLE }.as_bytes().to_vec();
        apply(&mut bytes, &edits);
        let _ = from_str(&String::from_utf8_lossy(&bytes), origin());
    }

    #[test]
    fn files_with_lines_moved_and_values_swapped_load_or_fail_with_errors(
        shipped in any::<bool>(),
        edits in line_edits(),
    ) {
        let text = apply_lines(if shipped { SHIPPED } else { SAMPLE }, &edits);
        let _ = from_str(&text, origin());
    }

    #[test]
    fn random_files_load_or_fail_with_errors(text in prop_oneof![any::<String>(), toml_like()]) {
        if let Err(errors) = from_str(&text, origin()) {
            prop_assert!(!errors.errors.is_empty(), "an error list with nothing in it");
        }
    }

    #[test]
    fn zone_keys_parse_as_they_print(text in key_text()) {
        let Ok(template) = parse_key(&text, &Maps::default()) else {
            return Ok(());
        };
        prop_assert!(!template.pieces().is_empty());
        let printed = print_key(&template);
        prop_assert_eq!(parse_key(&printed, &Maps::default()), Ok(template), "printed as {:?}", printed);
        // Through the whole loader too, as a zone's key.
        let file = format!(
            "{}\n[zones.k]\nkey = {}\nrate = \"1r/s\"\n",
            super::SERVER,
            toml::Value::String(text)
        );
        prop_assert!(from_str(&file, origin()).is_ok());
    }
}

#[test]
fn the_samples_load_as_they_are() {
    assert!(from_str(SHIPPED, origin()).is_ok());
    // SAMPLE names files that cannot be read here; those, and only those, fail.
    let errors = from_str(SAMPLE, origin()).expect_err("unreadable files");
    for error in &errors.errors {
        assert!(error.message.contains("/nonexistent/"), "{}", error.message);
    }
}
