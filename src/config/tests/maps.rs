//! `[maps.NAME]` (nginx `map`): what a map selects, where its variable may be used, and
//! every problem `-t` reports.

use http::{HeaderMap, Method};

use super::*;
use crate::vars::Request;

const MAPS: &str = r#"
[maps.redirect_status]
source = "$request_method"
values = { GET = "301", HEAD = "301", "~^(OPTIONS)$" = "204" }
default = "308"

[maps.backend]
source = "$http_x_tier"
values = { "~b" = "first", "~^ab" = "second", "\\~x" = "tilde", "~^(?<tier>\\w+)-(\\d+)$" = "$tier/$2" }
default = "$tier_default"

[maps.tier_default]
source = "$host"
values = { "Example.COM" = "main" }

[zones.per_tier]
key = "$backend"
rate = "1r/s"
"#;

fn config(extra: &str) -> Config {
    parse(&format!("{SERVER}{MAPS}{extra}"))
}

const REDIRECT: &str = "[[location]]\nmatch = \"/\"\n\
    limit = [{ zone = \"per_tier\" }]\n\
    response_headers = { \"X-Backend\" = \"$backend\" }\n\
    return = { status = \"$redirect_status\", location = \"https://$host$request_uri\" }\n";

fn request<'a>(method: &'a Method, headers: &'a HeaderMap) -> Request<'a> {
    Request {
        method,
        host: Some("example.com"),
        ..Request::new("192.0.2.1".parse().expect("ip"), headers)
    }
}

fn tier(value: &str) -> String {
    let config = config(REDIRECT);
    let mut headers = HeaderMap::new();
    if !value.is_empty() {
        headers.insert("x-tier", value.parse().expect("value"));
    }
    let mut out = Vec::new();
    config.zones[0].key.render(&request(&Method::GET, &headers), &mut out);
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn a_status_map_answers_each_method_with_its_status() {
    let config = config(REDIRECT);
    let Action::Return(ret) = &config.sites[0].locations[0].action else {
        panic!("a return");
    };
    let ReturnStatus::Map(statuses) = &ret.status else {
        panic!("a status map");
    };
    let headers = HeaderMap::new();
    for (method, status) in [
        (Method::GET, 301),
        (Method::HEAD, 301),
        (Method::OPTIONS, 204),
        (Method::POST, 308),
        (Method::from_bytes(b"get").expect("method"), 301),
    ] {
        let got = statuses.status(&request(&method, &headers));
        assert_eq!(got.as_u16(), status, "{method}");
    }
}

#[test]
fn regex_keys_are_tried_in_the_order_written_not_by_name() {
    // By name `~^ab` would come before `~b`.
    assert_eq!(tier("abc"), "first");
}

#[test]
fn captures_named_groups_escaped_keys_and_maps_in_the_default() {
    assert_eq!(tier("gold-42"), "gold/42");
    assert_eq!(tier("~x"), "tilde");
    assert_eq!(tier("~X"), "tilde");
    assert_eq!(tier("zzz"), "main");
    assert_eq!(tier(""), "main");
}

fn messages(rest: &str) -> Vec<String> {
    let found = errors(&format!("{SERVER}{rest}"));
    found.into_iter().map(|(line, _, message)| format!("{line}: {message}")).collect()
}

#[test]
fn a_map_that_uses_itself_is_refused_with_its_path() {
    let found = messages(
        "[maps.a]\nsource = \"$b\"\n[maps.b]\nsource = \"$host\"\nvalues = { x = \"$a\" }\n\
         [maps.c]\nsource = \"$a\"\n\
         [[location]]\nmatch = \"/\"\nreturn = { status = 200, body = \"$c\" }\n",
    );
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("map `$a` uses itself: $a → $b → $a"), "{found:#?}");
}

#[test]
fn names_of_built_in_variables_are_refused() {
    for name in ["host", "http_x_api_key", "arg_x", "cookie_s", "1"] {
        let found = messages(&format!("[maps.{name}]\nsource = \"$uri\"\n"));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("built-in") || found[0].contains("invalid map name"), "{found:#?}");
    }
    let found = messages("[maps.\"a-b\"]\nsource = \"$uri\"\n");
    assert!(found[0].contains(r#"invalid map name "a-b""#), "{found:#?}");
}

#[test]
fn problems_of_keys_and_values_are_reported_where_they_are() {
    let found = messages(
        "[maps.m]\nsource = \"$request_method\"\n\
         values = { GET = \"a\", get = \"b\", POST = \"$1\", \"~(x)\" = \"$2\", \"~(\" = \"c\", \
         \"~(?<host>h)\" = \"d\", \"~\" = \"e\", PUT = \"$nope\" }\n\
         default = \"$1\"\n",
    );
    let expected = [
        r#"conflicting key "get": already written at line 5"#,
        "captures ($1 to $9) in an exact key's value",
        "`$2`: the key's regex has 1 capture group(s)",
        r#"invalid regex "(""#,
        "the named group `host` would hide the variable `$host`",
        r#"invalid key "~": a regex must follow `~`"#,
        "unknown variable `$nope`",
        "captures ($1 to $9) in `default`",
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for want in expected {
        assert!(found.iter().any(|m| m.contains(want)), "{want}: {found:#?}");
    }
}

#[test]
fn a_status_variable_must_be_a_map_of_statuses() {
    let ret = |status: &str, rest: &str| {
        format!(
            "[maps.s]\nsource = \"$request_method\"\nvalues = {{ GET = \"301\" }}\ndefault = \"{status}\"\n\
             [maps.t]\nsource = \"$uri\"\n\
             [[location]]\nmatch = \"/\"\nreturn = {{ status = \"$s\"{rest} }}\n"
        )
    };
    let location = ", location = \"/x\"";
    let cases = [
        (ret("99", location), "`$s` is no status for `return`: its default \"99\": invalid status 99"),
        (ret("$uri", location), "its default \"${uri}\": a status holds no variable"),
        (ret("", location), "its default \"\""),
        (ret("200", ""), "the status may be 301, a redirect: `return` needs a `location`"),
        (ret("444", location), "status 444 closes the connection"),
        (ret("200", location).replace("\"$s\"", "\"$t\""), "its default \"\""),
        (ret("200", location).replace("\"$s\"", "\"$host\""), "expected a number, or a map variable alone"),
        (ret("200", location).replace("\"$s\"", "\"$s$s\""), "expected a number, or a map variable alone"),
        (ret("200", location).replace("\"$s\"", "\"$nope\""), "expected a number, or a map variable alone"),
    ];
    for (text, want) in cases {
        let found = messages(&text);
        assert_eq!(found.len(), 1, "{text}\n{found:#?}");
        assert!(found[0].contains(want), "{want}\n{found:#?}");
    }
}

#[test]
fn a_zone_key_refuses_what_a_map_would_bring_in() {
    let found = messages(
        "[maps.m]\nsource = \"$request_id\"\n[zones.z]\nkey = \"$m\"\nrate = \"1r/s\"\n",
    );
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("`$m` is a map that reads: `$request_id` cannot be part of a key"), "{found:#?}");
}

#[test]
fn an_unknown_variable_names_maps_as_an_option() {
    let found = messages("[[location]]\nmatch = \"/\"\nreturn = { status = 200, body = \"$nomap\" }\n");
    assert!(found[0].contains("or a `[maps.NAME]`"), "{found:#?}");
}

#[test]
fn the_example_of_the_docs_loads() {
    let doc = include_str!("../../../docs/config.md");
    let section = doc.find("## `[maps.NAME]`").expect("the maps section");
    let start = section + doc[section..].find("```toml\n").expect("an example") + 8;
    let end = start + doc[start..].find("```").expect("its end");
    let config = parse(&format!("{SERVER}{}", &doc[start..end]));
    let Action::Return(ret) = &config.sites[0].locations[0].action else {
        panic!("a return");
    };
    assert!(matches!(ret.status, ReturnStatus::Map(_)));
}
