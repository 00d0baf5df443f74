//! The importer per directive family: what it writes, what it reports, and that every
//! file it writes loads (`config::from_str`, as `tollgate -t` reads it).

use std::path::Path;

use tollgate_nginx::Memory;

use super::{import_from, Imported, ImportError, Status};
use crate::config;

pub(super) const MAIN: &str = "/etc/nginx/nginx.conf";

/// `text` imported, `{DIR}` in it naming `dir` (which holds the files it names); the file
/// written must load from `dir`, where its relative paths start.
pub(super) fn import_in(dir: &Path, text: &str) -> Imported {
    let text = text.replace("{DIR}", &dir.display().to_string());
    let imported = import_from(&Memory::new().with(MAIN, text.as_str()), Path::new(MAIN)).unwrap_or_else(|e| panic!("{e}"));
    if let Err(errors) = config::from_str(&imported.toml, &dir.join("gateway.toml")) {
        panic!("{errors}\n{}\n{}", imported.toml, imported.report);
    }
    imported
}

/// `text` as /etc/nginx/nginx.conf, imported; the file it writes must load.
pub(super) fn import(text: &str) -> Imported {
    import_files(Memory::new().with(MAIN, text))
}

pub(super) fn import_files(files: Memory) -> Imported {
    let imported = import_from(&files, Path::new(MAIN)).unwrap_or_else(|e| panic!("{e}"));
    loads(&imported);
    imported
}

pub(super) fn loads(imported: &Imported) {
    if let Err(errors) = config::from_str(&imported.toml, Path::new("/etc/nginx/gateway.toml")) {
        panic!("{errors}\n{}\n{}", imported.toml, imported.report);
    }
}

/// The status of the directive `name` at `line` of nginx.conf.
fn status(imported: &Imported, line: usize, name: &str) -> Status {
    imported
        .report
        .find("nginx.conf", line, name)
        .unwrap_or_else(|| panic!("no line {line} {name}:\n{}", imported.report))
        .status
        .clone()
}

pub(super) fn exact(imported: &Imported, line: usize, name: &str) {
    let found = status(imported, line, name);
    assert!(matches!(found, Status::Exact(_)), "{line} {name}: {found:?}\n{}", imported.report);
}

pub(super) fn approx(imported: &Imported, line: usize, name: &str, part: &str) {
    match status(imported, line, name) {
        Status::Approx(why) => assert!(why.contains(part), "{line} {name}: {why}"),
        other => panic!("{line} {name}: {other:?}\n{}", imported.report),
    }
}

pub(super) fn unsupported(imported: &Imported, line: usize, name: &str, part: &str) {
    match status(imported, line, name) {
        Status::Unsupported(why) => assert!(why.contains(part), "{line} {name}: {why}"),
        other => panic!("{line} {name}: {other:?}\n{}", imported.report),
    }
}

pub(super) fn has(imported: &Imported, text: &str) {
    assert!(imported.toml.contains(text), "no {text:?} in:\n{}", imported.toml);
}

/// Every directive has exactly one line in the report.
pub(super) fn one_line_each(imported: &Imported, directives: usize) {
    assert_eq!(imported.report.lines.len(), directives, "{}", imported.report);
}

#[test]
fn a_proxy_site_becomes_a_site_with_its_groups_and_nginx_defaults() {
    let imported = import(
        "http {
    upstream app {
        server 127.0.0.1:3000 weight=2;
        server 127.0.0.1:3001 max_fails=3 fail_timeout=5s;
        server 127.0.0.1:3002 backup;
        keepalive 16;
    }
    upstream health_off { server 127.0.0.1:3005 fail_timeout=0; }
    server {
        listen 8080;
        server_name example.com www.example.com;
        location / { proxy_pass http://app; }
        location /api/ {
            proxy_pass http://127.0.0.1:4000/v2/;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
    }
}
",
    );
    has(&imported, "[upstreams.app]\nservers = [{ addr = \"127.0.0.1:3000\", weight = 2 }, \"127.0.0.1:3001\"]\nconnect_timeout = \"60s\"\nkeepalive = 16\nmax_fails = 3\nfail_timeout = \"5s\"\n");
    has(&imported, "# nginx.conf:2\n[upstreams.app]");
    has(&imported, "[upstreams.127_0_0_1_4000]\nservers = [\"127.0.0.1:4000\"]");
    has(&imported, "[[site]]\nnames = [\"example.com\", \"www.example.com\"]\nlisten = [\"0.0.0.0:8080\"]\n");
    has(&imported, "[upstreams.health_off]\nservers = [\"127.0.0.1:3005\"]\nconnect_timeout = \"60s\"\nmax_fails = 0\n");
    has(&imported, "[server]\nlisten = [{ addr = \"0.0.0.0:8080\", http2 = false }]\n");
    has(&imported, "# nginx.conf:12\n[[site.location]]\nmatch = \"/\"\nupstream = \"app\"\nrequest_headers = { Host = \"app\" }\nredirect_rewrite = \"default\"\nforwarded_headers = []\n");
    has(&imported, "upstream_path = \"/v2/\"\nredirect_rewrite = [{ from = \"http://127.0.0.1:4000/v2/\", to = \"/api/\" }]\nforwarded_headers = [\"X-Forwarded-For\"]\n");
    has(&imported, "upstream_path = \"/v2/\"");
    has(&imported, "request_headers = { Host = \"127.0.0.1:4000\" }");
    exact(&imported, 3, "server");
    approx(&imported, 5, "server", "no backup servers");
    exact(&imported, 8, "server");
    approx(&imported, 6, "keepalive", "per server and worker");
    assert_eq!(
        status(&imported, 12, "proxy_pass"),
        Status::Exact(Some("Host: \"app\" written, nginx's default $proxy_host".to_owned()))
    );
    // nginx's implicit `proxy_redirect default`, from the proxy_pass text.
    has(&imported, "redirect_rewrite = \"default\"\n");
    has(&imported, "redirect_rewrite = [{ from = \"http://127.0.0.1:4000/v2/\", to = \"/api/\" }]\n");
    approx(&imported, 15, "proxy_set_header", "replaced by its address unless it comes from a `[real_ip] trusted` peer");
    one_line_each(&imported, 16);
    assert_eq!(imported.report.exit_code(), 0);
}

#[test]
fn limits_become_zones_and_limit_lists_with_nginx_status() {
    let imported = import(
        "http {
    limit_req_zone $binary_remote_addr zone=per_ip:10m rate=10r/s;
    limit_req_zone $http_x_api_key zone=keys:1k rate=120r/m;
    limit_conn_zone $binary_remote_addr zone=conns:10m;
    limit_req_status 429;
    server {
        listen 80;
        limit_req zone=per_ip burst=20 nodelay;
        location / { proxy_pass http://127.0.0.1:3000; }
        location /api/ {
            limit_req zone=keys burst=5 delay=2;
            limit_req zone=per_ip;
            limit_req_dry_run on;
            limit_conn conns 10;
            proxy_pass http://127.0.0.1:3000;
        }
    }
}
",
    );
    has(&imported, "[zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"10r/s\"\nsize = \"10m\"\n");
    has(&imported, "[zones.keys]\nkey = \"$http_x_api_key\"\nrate = \"120r/m\"\nsize = \"32k\"\n");
    has(&imported, "[zones.conns]\nkey = \"$binary_remote_addr\"\nsize = \"10m\"\nalgorithm = \"concurrency\"\nmax = 10\n");
    has(&imported, "limit_status = 503\nratelimit_headers = \"none\"\n");
    has(&imported, "limit = [{ zone = \"per_ip\", burst = 20, nodelay = true }]\nlimit_status = 429\n");
    has(&imported, "limit = [{ zone = \"keys\", burst = 5, delay = 2, dry_run = true }, { zone = \"per_ip\", dry_run = true }, { zone = \"conns\" }]\nlimit_status = 429\n");
    approx(&imported, 3, "limit_req_zone", "raised to 32k");
    exact(&imported, 14, "limit_conn");
    exact(&imported, 13, "limit_req_dry_run");
}

#[test]
fn limit_req_status_444_closes_unanswered_as_limit_action_close() {
    let imported = import(
        "http {
    limit_req_zone $binary_remote_addr zone=per_ip:10m rate=10r/s;
    server {
        listen 80;
        location / {
            limit_req zone=per_ip;
            limit_req_status 444;
            proxy_pass http://127.0.0.1:3000;
        }
    }
}
",
    );
    has(&imported, "limit = [{ zone = \"per_ip\" }]\nlimit_action = \"close\"\n");
    assert!(!imported.toml.contains("limit_status = 444"), "{}", imported.toml);
    exact(&imported, 7, "limit_req_status");
}

#[test]
fn access_rules_and_real_ip() {
    let imported = import(
        "http {
    set_real_ip_from 10.0.0.0/8;
    set_real_ip_from 127.0.0.1;
    real_ip_recursive on;
    server {
        listen 80;
        allow 10.1.0.0/16;
        deny all;
        location / { proxy_pass http://127.0.0.1:3000; }
        location /open/ { allow all; proxy_pass http://127.0.0.1:3000; }
        location = /bye { return 410; }
    }
}
",
    );
    has(&imported, "[real_ip]\ntrusted = [\"10.0.0.0/8\", \"127.0.0.1\"]\nheader = \"X-Real-IP\"\nrecursive = true\n");
    has(&imported, "access = [\"allow 10.1.0.0/16\", \"deny all\"]");
    has(&imported, "access = [\"allow all\"]");
    // nginx answers `return` before allow/deny: the return location has none.
    assert!(imported.toml.ends_with("match = \"= /bye\"\nreturn = { status = 410 }\n"));
    exact(&imported, 7, "allow");
    exact(&imported, 2, "set_real_ip_from");
}

#[test]
fn proxy_protocol_listeners_and_their_senders() {
    let imported = import(
        "http {
    set_real_ip_from 10.0.0.0/8;
    real_ip_header proxy_protocol;
    server {
        listen 80 proxy_protocol;
        listen 8080 http2 proxy_protocol;
        location / { proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    exact(&imported, 3, "real_ip_header");
    approx(&imported, 5, "listen", "proxy_protocol_from");
    has(
        &imported,
        "listen = [{ addr = \"0.0.0.0:80\", http2 = false, proxy_protocol = true }, \
         { addr = \"0.0.0.0:8080\", proxy_protocol = true }]\n",
    );
    has(&imported, "proxy_protocol_from = [\"10.0.0.0/8\"]\n");
    assert!(!imported.toml.contains("[real_ip]"), "{}", imported.toml);
    let anyone = import("http { server { listen 80 proxy_protocol; location / { return 200; } } }\n");
    has(&anyone, "proxy_protocol_from = [\"0.0.0.0/0\", \"::/0\"]\n");
}

#[test]
fn returns_and_the_rewrites_that_map() {
    let imported = import(
        "http {
    server {
        listen 80;
        server_name example.com;
        return 301 https://$host$request_uri;
        location / { proxy_pass http://127.0.0.1:3000; }
    }
    server {
        listen 80;
        server_name old.example.com;
        rewrite ^(.*)$ https://example.com$1 permanent;
    }
    server {
        listen 80;
        server_name api.example.com;
        location /api/ {
            rewrite ^/api/(.*)$ /v1/$1 break;
            proxy_pass http://127.0.0.1:3000;
        }
        location /x { rewrite ^/x/(\\d+)$ /y/$1 last; return 404; }
        location = /teapot { return 418 \"short and stout\"; }
        location /go { return https://example.org/; }
        location /drop { proxy_pass http://127.0.0.1:3000; return 444; proxy_pass http://127.0.0.1:3001; }
    }
}
",
    );
    has(&imported, "match = \"/\"\nreturn = { status = 301, location = \"https://$host$request_uri\" }\n");
    has(&imported, "return = { status = 301, location = \"https://example.com$request_uri\" }");
    has(&imported, "upstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\" }\nupstream_path = \"/v1/\"\nredirect_rewrite = [{ from = \"http://127.0.0.1:3000/\", to = \"/\" }]\nforwarded_headers = []\n");
    has(&imported, "return = { status = 418, body = \"short and stout\" }");
    has(&imported, "return = { status = 302, location = \"https://example.org/\" }");
    has(&imported, "return = { status = 444 }");
    exact(&imported, 5, "return");
    exact(&imported, 6, "location");
    approx(&imported, 11, "rewrite", "$request_uri");
    exact(&imported, 17, "rewrite");
    unsupported(&imported, 20, "rewrite", "internal rewrite");
    let passes: Vec<String> = imported
        .report
        .lines
        .iter()
        .filter(|l| l.line == 23 && l.name == "proxy_pass")
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        passes,
        [
            "nginx.conf:23: proxy_pass: unsupported: a second proxy_pass (nginx refuses it)",
            "nginx.conf:23: proxy_pass: exact (never reached: the location's return answers first)"
        ]
    );
    assert_eq!(imported.report.exit_code(), 2);
}

#[test]
fn nested_locations_flatten_with_nginx_inheritance() {
    let imported = import(
        "http {
    proxy_set_header X-App outer;
    add_header X-Frame-Options DENY always;
    client_max_body_size 5m;
    server {
        listen 80;
        location /a/ {
            proxy_set_header X-Own a;
            proxy_pass http://127.0.0.1:3000;
            location /a/b/ { client_max_body_size 0; proxy_pass http://127.0.0.1:3000; }
            location ~ \\.php$ { proxy_pass http://127.0.0.1:3000; }
        }
        location / { proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    // A level with its own proxy_set_header replaces the whole list above it.
    has(&imported, "match = \"/a/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\", X-Own = \"a\" }");
    has(&imported, "match = \"/a/b/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\", X-Own = \"a\" }\nresponse_headers = { X-Frame-Options = { value = \"DENY\", when = \"always\" } }\nclient_max_body_size = \"0\"\nredirect_rewrite = [{ from = \"http://127.0.0.1:3000/\", to = \"/\" }]\nforwarded_headers = []\n");
    has(&imported, "match = \"/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\", X-App = \"outer\" }");
    has(&imported, "client_max_body_size = \"5m\"");
    exact(&imported, 10, "location");
    approx(&imported, 11, "location", "flattened");
    approx(&imported, 3, "add_header", "replaces the upstream's header of that name (nginx adds a second)");
}

#[test]
fn forwarding_and_framing_headers_stay_tollgates() {
    let imported = import(
        "http {
    server {
        listen 80;
        location / {
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Real-IP $http_x_client;
            proxy_set_header Content-Length \"\";
            proxy_set_header Host $proxy_host:8080;
            proxy_hide_header X-Powered-By;
            proxy_pass_header Server;
            proxy_pass http://127.0.0.1:3000;
            proxy_hide_header Date;
            proxy_pass_header Date;
            proxy_pass_header X-Custom;
        }
    }
}
",
    );
    // `$host` is not tollgate's X-Forwarded-Host (the Host as sent): a rule, as nginx has it.
    exact(&imported, 5, "proxy_set_header");
    exact(&imported, 6, "proxy_set_header");
    exact(&imported, 7, "proxy_set_header");
    approx(&imported, 8, "proxy_set_header", "frames the request");
    exact(&imported, 9, "proxy_set_header");
    exact(&imported, 11, "proxy_pass_header");
    exact(&imported, 14, "proxy_pass_header");
    assert_eq!(
        status(&imported, 15, "proxy_pass_header"),
        Status::Exact(Some("tollgate passes `X-Custom` anyway: nothing written".to_owned()))
    );
    // proxy_pass_header wins over proxy_hide_header, as in nginx; Server is no longer hidden.
    has(&imported, "request_headers = { Host = \"127.0.0.1:3000:8080\", X-Forwarded-Host = \"$host\", X-Real-IP = \"$http_x_client\" }\nhide_headers = [\"X-Powered-By\"]\nredirect_rewrite = [{ from = \"http://127.0.0.1:3000/\", to = \"/\" }]\npass_headers = [\"Server\", \"Date\"]\nforwarded_headers = [\"X-Forwarded-Proto\"]\n");
    exact(&imported, 12, "proxy_pass");
}

#[test]
fn forwarding_headers_are_those_nginx_sets() {
    let imported = import(
        "http {
    set_real_ip_from 10.0.0.0/8;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-Host $http_host;
    server {
        listen 80;
        location / { proxy_pass http://127.0.0.1:3000; }
        location /own/ {
            proxy_set_header X-Forwarded-Proto https;
            proxy_set_header X-Forwarded-For \"\";
            proxy_set_header X-Real-IP $realip_remote_addr;
            proxy_pass http://127.0.0.1:3000;
        }
    }
}
",
    );
    approx(&imported, 3, "proxy_set_header", "from a trusted peer tollgate appends that peer's address");
    exact(&imported, 4, "proxy_set_header");
    exact(&imported, 5, "proxy_set_header");
    has(&imported, "match = \"/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\" }\nredirect_rewrite = [{ from = \"http://127.0.0.1:3000/\", to = \"/\" }]\nforwarded_headers = [\"X-Forwarded-For\", \"X-Real-IP\", \"X-Forwarded-Host\"]\n");
    // The location's list replaces http's: nginx writes none of the three there. A
    // constant and an empty value are rules; a value not translated removes the client's
    // copy rather than pass it.
    exact(&imported, 10, "proxy_set_header");
    exact(&imported, 11, "proxy_set_header");
    has(&imported, "request_headers = { Host = \"127.0.0.1:3000\", X-Forwarded-For = \"\", X-Forwarded-Proto = \"https\", X-Real-IP = \"\" }\nredirect_rewrite = [{ from = \"http://127.0.0.1:3000/\", to = \"/\" }]\nforwarded_headers = []\n");
    unsupported(&imported, 12, "proxy_set_header", "`$realip_remote_addr` is not a tollgate variable");
}

#[test]
fn listen_and_server_name_in_their_forms() {
    let imported = import(
        "http {
    server {
        listen 80 default_server;
        listen [::]:80 default_server;
        listen 127.0.0.1:8081 reuseport;
        server_name .example.com *.example.org mail.* ~^www\\d+\\.example\\.net$ \"\";
        location / { return 200 ok; }
    }
    server {
        listen 80;
        server_name example.com other.example;
        location / { return 200 other; }
    }
    server { location / { return 200 default-port; } }
}
",
    );
    has(&imported, "[server]\nlisten = [{ addr = \"0.0.0.0:80\", http2 = false }, { addr = \"[::]:80\", http2 = false }, { addr = \"127.0.0.1:8081\", http2 = false }]\n");
    has(&imported, "names = [\"example.com\", \"*.example.com\", \"*.example.org\", \"mail.*\", '~^www\\d+\\.example\\.net$']\nlisten = [\"0.0.0.0:80\", \"[::]:80\", \"127.0.0.1:8081\"]\ndefault = true\n");
    has(&imported, "names = [\"other.example\"]\nlisten = [\"0.0.0.0:80\"]\n");
    approx(&imported, 5, "listen", "reuseport");
    approx(&imported, 6, "server_name", "requests without Host");
    approx(&imported, 11, "server_name", "`example.com` left out");
    exact(&imported, 3, "listen");
}

#[test]
fn what_is_not_translated_is_reported_and_kept_as_a_comment() {
    let imported = import(
        "user nginx;
worker_processes auto;
events { worker_connections 1024; }
http {
    include mime.types;
    gzip_disable msie6;
    map $http_upgrade $connection_upgrade { default upgrade; '' close; }
    server {
        listen 80;
        root /srv/www;
        location / {
            try_files $uri /index.html;
            if ($request_method = POST) { return 405; }
            frobnicate 3;
        }
        location @fallback { proxy_pass http://127.0.0.1:3000; }
        location /v { proxy_set_header X-Body $request_body; proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    approx(&imported, 1, "user", "process settings");
    approx(&imported, 3, "worker_connections", "connection handling");
    unsupported(&imported, 5, "include", "cannot read /etc/nginx/mime.types");
    unsupported(&imported, 6, "gzip_disable", "Accept-Encoding");
    exact(&imported, 7, "map");
    exact(&imported, 7, "default");
    has(&imported, "[maps.connection_upgrade]\nsource = \"$http_upgrade\"\nvalues = { \"\" = \"close\" }\ndefault = \"upgrade\"\n");
    approx(&imported, 10, "root", "dotfiles");
    exact(&imported, 12, "try_files");
    unsupported(&imported, 13, "if", "no `return` after it");
    unsupported(&imported, 13, "return", "inside `if`");
    unsupported(&imported, 14, "frobnicate", "not known");
    unsupported(&imported, 16, "location", "named location");
    unsupported(&imported, 16, "proxy_pass", "not translated");
    unsupported(&imported, 17, "proxy_set_header", "`$request_body` is not a tollgate variable");
    exact(&imported, 11, "location");
    has(&imported, "# nginx.conf:14: frobnicate 3; (unsupported:");
    has(&imported, "# Not translated (see the report):\n# nginx.conf:5: include mime.types; (unsupported:");
    has(&imported, "\n# nginx.conf:6: gzip_disable msie6; (unsupported:");
    assert_eq!(imported.report.exit_code(), 2);
    one_line_each(&imported, 23);
}

#[test]
fn includes_are_followed_and_each_line_names_its_file() {
    let imported = import_files(
        Memory::new()
            .with(MAIN, "http {\n    include conf.d/*.conf;\n}\n")
            .with("/etc/nginx/conf.d/a.conf", "server {\n    listen 81;\n    location / { return 204; }\n}\n"),
    );
    let line = imported.report.find("conf.d/a.conf", 2, "listen").expect("a line for a.conf:2");
    assert_eq!(line.to_string(), "conf.d/a.conf:2: listen: exact");
    exact(&imported, 2, "include");
    has(&imported, "# conf.d/a.conf:1\n[[site]]");
}

#[test]
fn a_text_nginx_refuses_is_an_error_at_its_line() {
    let err = import_from(&Memory::new().with(MAIN, "http {\n  server {\n    listen 80\n  }\n"), Path::new(MAIN)).unwrap_err();
    assert!(matches!(err, ImportError::Nginx(_)));
    assert_eq!(err.to_string(), "/etc/nginx/nginx.conf:4: unexpected \"}\": directive \"listen\" (line 3) has no \";\" before it");
}

#[test]
fn nginx_pid_file_is_left_to_nginx_and_the_report_names_pid_file() {
    let imported = import("pid /run/nginx.pid;\nhttp {\n    server { listen 80; return 204; }\n}\n");
    approx(&imported, 1, "pid", "set `[server] pid_file` to another path");
    assert!(!imported.toml.contains("pid_file"), "{}", imported.toml);
}

#[test]
fn timeouts_and_other_server_wide_values() {
    let imported = import(
        "http {
    keepalive_timeout 65;
    send_timeout 30s;
    client_body_timeout 1m30s;
    underscores_in_headers on;
    server_tokens off;
    proxy_read_timeout 120;
    server {
        listen 80;
        client_header_timeout 20s;
        keepalive_timeout 10s;
        location / { proxy_connect_timeout 5s; proxy_pass http://127.0.0.1:3000; }
    }
    server {
        listen 81;
        client_body_timeout 10s;
        proxy_read_timeout 7s;
        location / {
            send_timeout 5s;
            proxy_pass http://127.0.0.1:3000;
            location /in/ { client_body_timeout 1s; proxy_pass http://127.0.0.1:3000; }
        }
        location /other/ { proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    has(&imported, "client_header_timeout = \"20s\"\nclient_body_timeout = \"90s\"\nsend_timeout = \"30s\"\nkeepalive_timeout = \"65s\"\nunderscores_in_headers = true\n");
    has(&imported, "# nginx.conf:12\n[[site.location]]\nmatch = \"/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\" }\nredirect_rewrite = [{ from = \"http://127.0.0.1:3000/\", to = \"/\" }]\nforwarded_headers = []\nread_timeout = \"2m\"\nconnect_timeout = \"5s\"\n");
    // nginx's inheritance: http → server → location → nested location.
    has(&imported, "forwarded_headers = []\nclient_body_timeout = \"10s\"\nsend_timeout = \"5s\"\nread_timeout = \"7s\"\n\n");
    has(&imported, "forwarded_headers = []\nclient_body_timeout = \"1s\"\nsend_timeout = \"5s\"\nread_timeout = \"7s\"\n\n");
    has(&imported, "match = \"/other/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\" }\nredirect_rewrite = [{ from = \"http://127.0.0.1:3000/\", to = \"/\" }]\nforwarded_headers = []\nclient_body_timeout = \"10s\"\nread_timeout = \"7s\"\n");
    // The group keeps nginx's connect timeout.
    has(&imported, "servers = [\"127.0.0.1:3000\"]\nconnect_timeout = \"60s\"\n");
    exact(&imported, 2, "keepalive_timeout");
    approx(&imported, 11, "keepalive_timeout", "one `keepalive_timeout` for the whole gateway: 65s");
    approx(&imported, 10, "client_header_timeout", "one `client_header_timeout` for the whole gateway ([server])");
    approx(&imported, 6, "server_tokens", "nginx sends `Server: nginx`, tollgate `Server: tollgate`");
    for (line, name) in [(3, "send_timeout"), (4, "client_body_timeout"), (7, "proxy_read_timeout"), (12, "proxy_connect_timeout"), (16, "client_body_timeout"), (17, "proxy_read_timeout"), (19, "send_timeout"), (21, "client_body_timeout")] {
        exact(&imported, line, name);
    }
}

#[test]
fn certificates_and_tls_listeners_load() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["example.com".into()]).unwrap();
    std::fs::write(dir.path().join("site.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.path().join("site.key"), cert.signing_key.serialize_pem()).unwrap();
    let main = dir.path().join("nginx.conf");
    let text = "http {
    server {
        listen 443 ssl http2;
        server_name example.com;
        ssl_certificate site.pem;
        ssl_certificate_key site.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers HIGH:!aNULL;
        location / { proxy_pass https://127.0.0.1:8443; }
    }
    server { listen 443 ssl; server_name www.example.com; location / { return 301 https://example.com$request_uri; } }
}
";
    std::fs::write(&main, text).unwrap();
    let imported = super::import(&main).unwrap();
    config::from_str(&imported.toml, &dir.path().join("gateway.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", imported.toml));
    assert!(imported.toml.contains("listen_tls = [\"0.0.0.0:443\"]"), "{}", imported.toml);
    assert!(imported.toml.contains("servers = [\"https://127.0.0.1:8443\"]"), "{}", imported.toml);
    let find = |line, name| imported.report.find("nginx.conf", line, name).unwrap().status.clone();
    assert_eq!(find(3, "listen"), Status::Exact(None));
    // nginx serves HTTP/2 on an address one of whose listens says so.
    assert_eq!(find(11, "listen"), Status::Exact(None));
    assert_eq!(find(7, "ssl_protocols"), Status::Exact(None));
    assert!(matches!(find(8, "ssl_ciphers"), Status::Approx(_)));
}

mod auth;
mod files;
mod props;

mod logs;
mod rewrites;
mod tls;
