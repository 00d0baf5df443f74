//! `redirect_rewrite`, `cookie_path` and `cookie_domain`: what a site's and a location's
//! rules become, `"default"` resolved as nginx's `proxy_redirect default`, and the
//! problems `-t` reports.

use super::*;

const UPSTREAM: &str = "[upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n";

fn site(rest: &str) -> String {
    format!("{SERVER}{UPSTREAM}[[site]]\nnames = [\"a.test\"]\n{rest}")
}

fn from_text(rule: &RewriteRule) -> String {
    match &rule.from {
        RewriteFrom::Text(text) => text.to_string(),
        RewriteFrom::Regex(regex) => format!("~{}", regex.as_str()),
    }
}

fn listed(rules: &[RewriteRule]) -> Vec<(String, String)> {
    rules.iter().map(|r| (from_text(r), r.to.to_string())).collect()
}

fn pair(from: &str, to: &str) -> (String, String) {
    (from.to_owned(), to.to_owned())
}

#[test]
fn a_location_inherits_its_sites_rules_unless_it_writes_its_own() {
    let config = parse(&site(
        "redirect_rewrite = [{ from = \"http://app/v2/\", to = \"/api/\" }, { from = \"~^http://[^/]+(/.*)$\", to = \"$1\" }]\n\
         cookie_path = { \"/v2/\" = \"/api/\", \"/\" = \"/x/\" }\n\
         cookie_domain = { \".app.internal\" = \".example.com\" }\n\
         [[site.location]]\nmatch = \"/api/\"\nupstream = \"app\"\n\
         [[site.location]]\nmatch = \"/own/\"\nupstream = \"app\"\nredirect_rewrite = \"off\"\ncookie_path = {}\n",
    ));
    let locations = &config.sites[0].locations;
    let Redirects::Rules(inherited) = &locations[0].redirects else {
        panic!("{:?}", locations[0].redirects);
    };
    assert_eq!(
        listed(inherited),
        [pair("http://app/v2/", "/api/"), pair("~^http://[^/]+(/.*)$", "$1")]
    );
    assert_eq!(
        listed(&locations[0].cookies.paths),
        [pair("/v2/", "/api/"), pair("/", "/x/")],
        "in the order written"
    );
    assert_eq!(
        listed(&locations[0].cookies.domains),
        [pair("app.internal", "example.com")],
        "a plain domain's leading dots are set aside"
    );
    assert!(matches!(&locations[1].redirects, Redirects::Rules(r) if r.is_empty()));
    assert!(locations[1].cookies.paths.is_empty());
    assert_eq!(locations[1].cookies.domains.len(), 1);
}

#[test]
fn default_is_nginxs_proxy_redirect_default_for_each_location() {
    let config = parse(&site(
        "redirect_rewrite = \"default\"\n\
         [[site.location]]\nmatch = \"/one/\"\nupstream = \"app\"\nupstream_path = \"/two/\"\n\
         [[site.location]]\nmatch = \"/plain/\"\nupstream = \"app\"\n\
         [[site.location]]\nmatch = \"= /exact\"\nupstream = \"app\"\nupstream_path = \"/e\"\n\
         [[site.location]]\nmatch = \"~ ^/re/\"\nupstream = \"app\"\n\
         [[site.location]]\nmatch = \"/ret/\"\nreturn = { status = 204 }\n",
    ));
    let resolved: Vec<String> = config.sites[0]
        .locations
        .iter()
        .map(|l| match &l.redirects {
            Redirects::Default { path, to } => format!("{path} -> {to}"),
            Redirects::Rules(rules) => format!("{} rules", rules.len()),
        })
        .collect();
    assert_eq!(
        resolved,
        ["/two/ -> /one/", "/ -> /", "/e -> /exact", "/ -> /", "0 rules"]
    );
}

#[test]
fn default_is_refused_where_nginx_gives_it_no_meaning() {
    let loc = |rest: &str| site(&format!("[[site.location]]\n{rest}"));
    let found = errors(&loc(
        "match = \"/r/\"\nreturn = { status = 204 }\nredirect_rewrite = \"default\"\n",
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].2.contains("this location has no `upstream`"), "{found:?}");
    assert_eq!((found[0].0, found[0].1), (10, 20));
    let found = errors(&loc(
        "match = \"~ ^/r/(.*)\"\nupstream = \"app\"\nupstream_path = \"/x/$1\"\nredirect_rewrite = \"default\"\n",
    ));
    assert!(found[0].2.starts_with("redirect_rewrite = \"default\" has no meaning"), "{found:?}");
    let found = errors(&site(
        "redirect_rewrite = \"default\"\n[[site.location]]\nmatch = \"/v/\"\nupstream = \"app\"\nupstream_path = \"/$host/\"\n",
    ));
    assert!(found[0].2.contains("\"default\" (its site's) has no meaning"), "{found:?}");
    assert_eq!((found[0].0, found[0].1), (11, 17), "at the location's upstream_path");
}

#[test]
fn misshapen_values_are_reported_at_the_value() {
    let found = errors(&site(
        "redirect_rewrite = \"on\"\n\
         [[site.location]]\nmatch = \"/a/\"\nupstream = \"app\"\n\
         redirect_rewrite = [{ from = \"/\", to = \"/\", by = 1 }]\n\
         [[site.location]]\nmatch = \"/b/\"\nupstream = \"app\"\ncookie_domain = \"a.test\"\n",
    ));
    assert_eq!(
        found,
        [
            owned_error(7, 20, "invalid redirect_rewrite \"on\": expected \"off\", \"default\", or a list like [{ from = \"http://app/v2/\", to = \"/api/\" }]"),
            owned_error(11, 45, "unknown key `by`, expected `from` or `to`"),
            owned_error(15, 17, r#"invalid type: string "a.test", expected a table like { "/app/" = "/" }"#),
        ]
    );
}

fn owned_error(line: usize, col: usize, message: &str) -> (usize, usize, String) {
    (line, col, message.to_owned())
}

#[test]
fn bad_rules_are_each_reported_where_they_are() {
    let found = errors(&site(
        "[[site.location]]\nmatch = \"/a/\"\nupstream = \"app\"\n\
         redirect_rewrite = [{ from = \"~(\", to = \"/\" }, { from = \"/x\" }]\n\
         cookie_path = { \"/a/\" = \"$1\", \"~^/(a)$\" = \"/$2\" }\n\
         cookie_domain = { \"~*\" = \"x\", \"a\" = \"\\u0001\" }\n",
    ));
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(
        messages,
        [
            r#"invalid regex "(": unclosed group"#,
            "missing key `to`",
            "captures ($1 to $9) need a regex location (`~` or `~*`)",
            "`$2`: the location's regex has 1 capture group(s)",
            "a regex must follow `~` or `~*`",
            r#"invalid rewrite "\u{1}": control characters cannot be in a header value"#,
        ],
        "{found:#?}"
    );
}
