use http::header::{LOCATION, SET_COOKIE};
use http::{HeaderMap, HeaderValue};

use super::*;

fn text(value: &str) -> VarText {
    VarText::parse(value).unwrap()
}

fn rule(from: &str, to: &str) -> RewriteRule {
    let from = match from.strip_prefix('~') {
        Some(source) => RewriteFrom::Regex(regex::bytes::Regex::new(source).unwrap()),
        None => RewriteFrom::Text(text(from)),
    };
    RewriteRule { from, to: text(to) }
}

fn rules(list: &[(&str, &str)]) -> Vec<RewriteRule> {
    list.iter().map(|(from, to)| rule(from, to)).collect()
}

/// The headers after `urls` rewrote them for a plain request to 127.0.0.1:8080.
fn rewritten(urls: &UpstreamUrls, headers: &[(HeaderName, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(name.clone(), HeaderValue::from_str(value).unwrap());
    }
    let empty = HeaderMap::new();
    let req = vars::Request {
        host: Some("Gate.Example:8080"),
        server_port: 8080,
        ..vars::Request::new("192.0.2.1".parse().unwrap(), &empty)
    };
    let prepared = urls.prepare(Some(&req), false, req.host, "", 8080);
    urls.rewrite(&mut map, &prepared);
    map
}

fn values(map: &HeaderMap, name: HeaderName) -> Vec<&str> {
    map.get_all(name).iter().map(|v| v.to_str().unwrap()).collect()
}

#[test]
fn a_prefix_rule_rewrites_location_and_refresh_and_a_path_is_made_absolute() {
    let urls = UpstreamUrls::of(rules(&[("http://app/v2/", "/api/")]), vec![], vec![]);
    let map = rewritten(
        &urls,
        &[
            (LOCATION, "http://app/v2/x?q=1"),
            (REFRESH, "5; URL=http://app/v2/y"),
        ],
    );
    assert_eq!(values(&map, LOCATION), ["http://gate.example:8080/api/x?q=1"]);
    assert_eq!(values(&map, REFRESH), ["5; URL=/api/y"]);
}

#[test]
fn values_no_rule_matches_are_left_as_they_came() {
    let urls = UpstreamUrls::of(rules(&[("http://app/v2/", "/api/")]), vec![], vec![]);
    let map = rewritten(
        &urls,
        &[
            (LOCATION, "/relative"),
            (REFRESH, "5"),
            (SET_COOKIE, "a=b; Path=/v2/"),
        ],
    );
    assert_eq!(values(&map, LOCATION), ["/relative"]);
    assert_eq!(values(&map, REFRESH), ["5"]);
    assert_eq!(values(&map, SET_COOKIE), ["a=b; Path=/v2/"]);
}

#[test]
fn a_prefix_is_compared_case_sensitively_and_the_first_matching_rule_wins() {
    let list = [("http://APP/", "/upper/"), ("http://app/", "/lower/"), ("http://", "/any/")];
    let urls = UpstreamUrls::of(rules(&list), vec![], vec![]);
    let map = rewritten(&urls, &[(LOCATION, "http://app/x")]);
    assert_eq!(values(&map, LOCATION), ["http://gate.example:8080/lower/x"]);
}

#[test]
fn a_regex_replaces_the_whole_value_with_its_captures() {
    let list = [(r"~^http://[^/]+/v(\d)/(.*)$", "https://$host/api$1/$2")];
    let urls = UpstreamUrls::of(rules(&list), vec![], vec![]);
    assert!(urls.per_request());
    let map = rewritten(&urls, &[(LOCATION, "http://app:81/v3/a/b"), (REFRESH, "0;url=http://x/v9/")]);
    assert_eq!(values(&map, LOCATION), ["https://gate.example/api3/a/b"]);
    assert_eq!(values(&map, REFRESH), ["0;url=https://gate.example/api9/"]);
}

#[test]
fn a_regex_whose_to_holds_only_its_captures_needs_no_request() {
    let urls = UpstreamUrls::of(rules(&[("~^http://app(/.*)$", "$1")]), vec![], vec![]);
    assert!(!urls.per_request());
    let prepared = urls.prepare(None, false, Some("gate.test"), "", 80);
    let mut map = HeaderMap::new();
    map.insert(LOCATION, HeaderValue::from_static("http://app/a?b"));
    urls.rewrite(&mut map, &prepared);
    assert_eq!(values(&map, LOCATION), ["http://gate.test/a?b"]);
}

#[test]
fn cookie_paths_are_prefixes_and_domains_whole_names_in_any_case() {
    let urls = UpstreamUrls::of(
        vec![],
        rules(&[("/app/", "/"), ("~^/v(\\d)$", "/version/$1")]),
        rules(&[("app.internal", "example.com")]),
    );
    let map = rewritten(
        &urls,
        &[
            (SET_COOKIE, "a=1; Path=/app/x; Domain=.APP.internal; HttpOnly"),
            (SET_COOKIE, "b=2;path=/v7;domain=app.internal.evil"),
            (SET_COOKIE, "c=3; path=/APP/"),
        ],
    );
    assert_eq!(
        values(&map, SET_COOKIE),
        [
            "a=1; Path=/x; Domain=.example.com; HttpOnly",
            "b=2; path=/version/7; domain=app.internal.evil",
            "c=3; path=/APP/",
        ]
    );
}

#[test]
fn a_variable_that_brings_control_bytes_cannot_add_a_header_line() {
    let mut headers = HeaderMap::new();
    headers.insert("x-evil", HeaderValue::from_bytes(b"a\xffb").unwrap());
    let urls = UpstreamUrls::of(rules(&[("/", "/$http_x_evil/")]), vec![], vec![]);
    let req = vars::Request::new("192.0.2.1".parse().unwrap(), &headers);
    let prepared = urls.prepare(Some(&req), true, None, "gate.example", 443);
    let mut map = HeaderMap::new();
    map.insert(REFRESH, HeaderValue::from_static("1; url=/x"));
    urls.rewrite(&mut map, &prepared);
    assert_eq!(map.get(REFRESH).unwrap().as_bytes(), b"1; url=/a\xffb/x");
    assert_eq!(prepared.origin, b"https://gate.example");
}

#[test]
fn a_location_without_rules_prepares_nothing_and_changes_nothing() {
    let urls = UpstreamUrls::default();
    let prepared = urls.prepare(None, false, Some("h"), "", 80);
    assert!(prepared.filled.is_empty() && prepared.origin.is_empty());
    let map = rewritten(&urls, &[(LOCATION, "http://app/")]);
    assert_eq!(values(&map, LOCATION), ["http://app/"]);
}

#[test]
fn the_origin_leaves_out_the_schemes_own_port() {
    assert_eq!(origin(false, Some("A.test:80"), "", 80), "http://a.test");
    assert_eq!(origin(true, Some("a.test"), "", 8443), "https://a.test:8443");
    assert_eq!(origin(false, None, "site.test", 8080), "http://site.test:8080");
    assert_eq!(origin(false, Some("[::1]:8080"), "", 8080), "http://[::1]:8080");
}

#[test]
fn default_is_from_the_groups_scheme_and_name_to_the_locations_path() {
    let text = "[server]\nlisten = [\"127.0.0.1:8080\"]\n\
        [upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n\
        [upstreams.secure]\nservers = [\"127.0.0.1:3001\"]\ntls = true\n\
        [[site]]\nredirect_rewrite = \"default\"\n\
        [[site.location]]\nmatch = \"/one/\"\nupstream = \"secure\"\nupstream_path = \"/two/\"\n\
        [[site.location]]\nmatch = \"/plain/\"\nupstream = \"app\"\n";
    let config = crate::config::from_str(text, std::path::Path::new("/t.toml")).unwrap();
    let locations = &config.sites[0].locations;
    let one = UpstreamUrls::new(&locations[0], config.upstreams.get(1));
    let map = rewritten(
        &one,
        &[(LOCATION, "https://secure/two/x"), (REFRESH, "1;url=http://secure/two/")],
    );
    assert_eq!(values(&map, LOCATION), ["http://gate.example:8080/one/x"]);
    assert_eq!(values(&map, REFRESH), ["1;url=http://secure/two/"]);
    let plain = UpstreamUrls::new(&locations[1], config.upstreams.first());
    let map = rewritten(&plain, &[(LOCATION, "http://app/plain/y")]);
    assert_eq!(values(&map, LOCATION), ["http://gate.example:8080/plain/y"]);
}
