//! Property tests: any bytes import without a panic (an error or a file); generated
//! nginx configurations of the translated directives import to a file that loads.

use std::path::Path;

use proptest::prelude::*;
use tollgate_nginx::Memory;

use super::super::import_from;
use super::{loads, MAIN};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_bytes_import_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let files = Memory::new().with(MAIN, bytes);
        let _ = import_from(&files, Path::new(MAIN));
    }

    #[test]
    fn any_directives_import_to_a_file_that_loads(config in nginx_config()) {
        let files = Memory::new().with(MAIN, config.clone());
        let imported = import_from(&files, Path::new(MAIN)).unwrap_or_else(|e| panic!("{e}\n{config}"));
        loads(&imported);
        // Exactly one report line per directive, nested ones included.
        let read = tollgate_nginx::read(&files, Path::new(MAIN)).unwrap();
        prop_assert_eq!(imported.report.lines.len(), count(&read.directives), "{}", imported.report);
    }
}

fn count(directives: &[tollgate_nginx::Directive]) -> usize {
    directives
        .iter()
        .map(|d| 1 + d.block.as_deref().map_or(0, count))
        .sum()
}

/// A word an nginx directive might take, hostile ones among them.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("on".to_owned()),
        Just("off".to_owned()),
        Just("10m".to_owned()),
        Just("0".to_owned()),
        Just("30s".to_owned()),
        Just("127.0.0.1:3000".to_owned()),
        Just("all".to_owned()),
        Just("10.0.0.0/8".to_owned()),
        Just("zone=z:10m".to_owned()),
        Just("zone=z".to_owned()),
        Just("rate=5r/s".to_owned()),
        Just("burst=5".to_owned()),
        Just("nodelay".to_owned()),
        Just("delay=2".to_owned()),
        Just("always".to_owned()),
        Just("$host".to_owned()),
        Just("$nope".to_owned()),
        Just("\"a b\"".to_owned()),
        Just("http://127.0.0.1:3000/v2/".to_owned()),
        Just("https://$host$request_uri".to_owned()),
        Just("X-A".to_owned()),
        Just("301".to_owned()),
        Just("default".to_owned()),
        Just("~^http://[^/]+/(.*)$".to_owned()),
        Just("$proxy_host".to_owned()),
        Just("$m".to_owned()),
        "[a-z/._~^*$-]{1,8}",
    ]
}

/// A location-level or server-level directive.
fn directive() -> impl Strategy<Value = String> {
    let names = prop_oneof![
        Just("proxy_pass"),
        Just("proxy_set_header"),
        Just("proxy_hide_header"),
        Just("add_header"),
        Just("allow"),
        Just("deny"),
        Just("limit_req"),
        Just("limit_conn"),
        Just("limit_req_status"),
        Just("client_max_body_size"),
        Just("return"),
        Just("rewrite"),
        Just("keepalive_timeout"),
        Just("send_timeout"),
        Just("proxy_read_timeout"),
        Just("proxy_connect_timeout"),
        Just("client_body_timeout"),
        Just("server_tokens"),
        Just("http2"),
        Just("gzip"),
        Just("frob"),
        Just("proxy_redirect"),
        Just("proxy_cookie_path"),
        Just("proxy_cookie_domain"),
    ];
    let plain = (names, proptest::collection::vec(word(), 0..4))
        .prop_map(|(name, args)| format!("{name} {};", args.join(" ")));
    prop_oneof![
        8 => plain,
        4 => header_directive(),
        1 => Just("if ($request_method = POST) { return 405; }".to_owned()),
        1 => Just("if ($request_method = GET) { return 301 https://$host$request_uri; }".to_owned()),
        1 => Just("if ($http_x !~* \"^a\" ) { return 302 /x; }".to_owned()),
        1 => Just("return 308 https://$host$request_uri;".to_owned()),
        1 => Just("add_header X-M $m;".to_owned()),
        1 => Just("include missing/*.conf;".to_owned()),
        1 => Just("limit_except GET { deny all; }".to_owned()),
    ]
}

/// A forwarding, hiding or passing header directive: the names and values whose
/// translation must not conflict (a forwarding header both written and a rule, a header
/// both hidden and passed).
fn header_directive() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        Just("X-Forwarded-For"),
        Just("x-real-ip"),
        Just("X-Forwarded-Proto"),
        Just("X-Forwarded-Host"),
        Just("Server"),
        Just("Date"),
        Just("X-Accel-Buffering"),
        Just("X-Custom"),
    ];
    let value = prop_oneof![
        Just("$proxy_add_x_forwarded_for"),
        Just("$remote_addr"),
        Just("${scheme}"),
        Just("$http_host"),
        Just("$host"),
        Just("\"\""),
        Just("https"),
        Just("$realip_remote_addr"),
    ];
    let verb = prop_oneof![Just("proxy_set_header"), Just("proxy_hide_header"), Just("proxy_pass_header")];
    (verb, name, value).prop_map(|(verb, name, value)| match verb {
        "proxy_set_header" => format!("{verb} {name} {value};"),
        _ => format!("{verb} {name};"),
    })
}

fn location() -> impl Strategy<Value = String> {
    let pattern = prop_oneof![
        Just("/".to_owned()),
        Just("/api/".to_owned()),
        Just("= /x".to_owned()),
        Just("^~ /s/".to_owned()),
        Just("~ \\.php$".to_owned()),
        Just("~* ^/(a|b)/(\\d+)$".to_owned()),
        Just("@named".to_owned()),
        Just("~ (?=x)".to_owned()),
        "/[a-z]{1,4}/",
    ];
    (pattern, proptest::collection::vec(directive(), 0..5), proptest::option::of((Just("/api/v/"), proptest::collection::vec(directive(), 0..3))))
        .prop_map(|(pattern, body, nested)| {
            let nested = nested.map_or(String::new(), |(p, b)| format!("location {p} {{ {} }}", b.join(" ")));
            format!("location {pattern} {{ {} {nested} }}", body.join(" "))
        })
}

fn server() -> impl Strategy<Value = String> {
    let listen = prop_oneof![
        Just("listen 80;"),
        Just("listen 8080 default_server;"),
        Just("listen [::]:80;"),
        Just("listen 127.0.0.1:81 reuseport;"),
        Just("listen 82 http2;"),
        Just("listen 80; http2 on;"),
        Just(""),
    ];
    let names = prop_oneof![
        Just("server_name example.com www.example.com;"),
        Just("server_name _;"),
        Just("server_name .example.org;"),
        Just("server_name ~^(?<sub>.+)\\.example\\.net$;"),
        Just("server_name *.example.com mail.*;"),
        Just(""),
    ];
    (listen, names, proptest::collection::vec(directive(), 0..3), proptest::collection::vec(location(), 0..4))
        .prop_map(|(listen, names, settings, locations)| {
            format!("server {{ {listen} {names} {} {} }}", settings.join(" "), locations.join(" "))
        })
}

fn nginx_config() -> impl Strategy<Value = String> {
    let http_settings = proptest::collection::vec(directive(), 0..3);
    let zones = prop_oneof![
        Just("limit_req_zone $binary_remote_addr zone=z:10m rate=5r/s; limit_conn_zone $binary_remote_addr zone=c:1m;"),
        Just("limit_req_zone $nope zone=z:10m rate=5r/s;"),
        Just(""),
    ];
    let upstream = prop_oneof![
        Just("upstream app { server 127.0.0.1:3000 weight=3 max_fails=2; server 127.0.0.1:3001 backup; keepalive 8; }"),
        Just("upstream app { server unix:/tmp/x.sock; }"),
        Just(""),
    ];
    let maps = prop_oneof![
        Just("map $request_method $m { default 308; GET 301; ~^P 307; }"),
        Just("map $http_x $m { hostnames; *.a b; default $nope; ~(?<n>x) $n; volatile; }"),
        Just("map $m $n { default $m; } map $nope $m { default 1; }"),
        Just(""),
    ];
    (zones, upstream, maps, http_settings, proptest::collection::vec(server(), 0..4)).prop_map(
        |(zones, upstream, maps, settings, servers)| {
            format!("events {{}}\nhttp {{\n{zones}\n{upstream}\n{maps}\n{}\n{}\n}}\n", settings.join("\n"), servers.join("\n"))
        },
    )
}
