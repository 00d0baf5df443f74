use std::sync::Arc;

use http::{HeaderMap, Method};
use regex::bytes::RegexBuilder;

use crate::{Key, Map, Request, Var, VarText};

fn regex(source: &str, caseless: bool) -> Key {
    Key::Regex(
        RegexBuilder::new(source)
            .case_insensitive(caseless)
            .build()
            .expect("regex"),
    )
}

fn text(text: &str) -> VarText {
    VarText::parse(text).expect("parses")
}

/// A map over `$http_x` with `entries`, default `dflt`.
fn map(entries: Vec<(Key, &str)>, dflt: &str) -> Arc<Map> {
    let entries = entries.into_iter().map(|(k, v)| (k, text(v))).collect();
    Arc::new(Map::new("m", text("$http_x"), entries, text(dflt)))
}

fn value(map: &Arc<Map>, x: Option<&str>) -> String {
    let mut headers = HeaderMap::new();
    if let Some(x) = x {
        headers.insert("x", x.parse().expect("value"));
    }
    let req = Request::new("192.0.2.1".parse().expect("ip"), &headers);
    let mut out = Vec::new();
    req.append(&Var::Map(Arc::clone(map)), &mut out);
    String::from_utf8(out).expect("utf-8")
}

fn exact(key: &str) -> Key {
    Key::Exact(key.to_owned())
}

#[test]
fn an_exact_key_wins_over_an_earlier_regex() {
    let m = map(
        vec![(regex("^a", false), "regex"), (exact("abc"), "exact")],
        "d",
    );
    assert_eq!(value(&m, Some("abc")), "exact");
    assert_eq!(value(&m, Some("abd")), "regex");
    assert_eq!(value(&m, Some("zzz")), "d");
}

#[test]
fn exact_keys_match_in_any_ascii_case_regexes_as_written() {
    let m = map(
        vec![
            (exact("GeT"), "exact"),
            (regex("^post$", false), "cs"),
            (regex("^put$", true), "ci"),
        ],
        "d",
    );
    assert_eq!(value(&m, Some("get")), "exact");
    assert_eq!(value(&m, Some("GET")), "exact");
    assert_eq!(value(&m, Some("post")), "cs");
    assert_eq!(value(&m, Some("POST")), "d");
    assert_eq!(value(&m, Some("PuT")), "ci");
}

#[test]
fn the_first_matching_regex_in_written_order_wins() {
    let m = map(
        vec![
            (regex("b", false), "first"),
            (regex("^ab", false), "second"),
        ],
        "",
    );
    assert_eq!(value(&m, Some("abc")), "first");
    let m = map(
        vec![
            (regex("^ab", false), "first"),
            (regex("b", false), "second"),
        ],
        "",
    );
    assert_eq!(value(&m, Some("abc")), "first");
}

#[test]
fn captures_and_named_groups_fill_in_the_regex_value() {
    let m = map(
        vec![(regex(r"^(\w+)-(?<tail>\w+)$", false), "$2/$1/${1}x")],
        "none",
    );
    assert_eq!(value(&m, Some("left-right")), "right/left/leftx");
    assert_eq!(value(&m, Some("nodash")), "none");
}

#[test]
fn the_default_is_empty_when_not_set_and_may_hold_variables() {
    let m = map(vec![(exact("a"), "1")], "");
    assert_eq!(value(&m, Some("b")), "");
    let m = map(vec![(exact("a"), "1")], "got $http_x");
    assert_eq!(value(&m, Some("b")), "got b");
}

#[test]
fn an_empty_source_matches_an_exact_empty_key_but_no_regex() {
    let m = map(
        vec![(regex("^$", false), "regex"), (regex(".*", false), "any")],
        "d",
    );
    assert_eq!(value(&m, None), "d");
    let m = map(
        vec![(regex("^$", false), "regex"), (exact(""), "empty")],
        "d",
    );
    assert_eq!(value(&m, None), "empty");
}

#[test]
fn a_value_may_use_another_map() {
    let inner = map(vec![(exact("a"), "inner-a")], "inner-d");
    let outer = Map::new(
        "outer",
        text("$request_method"),
        vec![(
            exact("GET"),
            VarText::from_pieces(vec![crate::Piece::Var(Var::Map(inner))]),
        )],
        text(""),
    );
    let outer = Arc::new(outer);
    assert_eq!(value(&outer, Some("a")), "inner-a");
    assert_eq!(value(&outer, Some("b")), "inner-d");
    let mut headers = HeaderMap::new();
    headers.insert("x", "a".parse().expect("value"));
    let req = Request {
        method: &Method::POST,
        ..Request::new("192.0.2.1".parse().expect("ip"), &headers)
    };
    assert_eq!(outer.entry(&req), None);
}

#[test]
fn entry_says_which_value_a_request_selects() {
    let m = map(vec![(exact("a"), "1"), (regex("^b", false), "2")], "");
    let mut headers = HeaderMap::new();
    headers.insert("x", "bee".parse().expect("value"));
    let req = Request::new("192.0.2.1".parse().expect("ip"), &headers);
    assert_eq!(m.entry(&req), Some(1));
}

#[test]
fn uses_looks_through_maps_but_not_at_a_regex_keys_own_captures() {
    let m = Arc::new(Map::new(
        "m",
        text("$host"),
        vec![(regex("(x)", false), text("$1"))],
        text(""),
    ));
    let t = VarText::from_pieces(vec![crate::Piece::Var(Var::Map(m))]);
    assert!(t.uses(|v| *v == Var::Host));
    assert!(!t.uses(|v| matches!(v, Var::Capture(_))));
    assert_eq!(t.to_string(), "${m}");
    let refused = VarText::parse_with(
        "k:$m",
        |name| {
            (name == "m")
                .then(|| t.pieces()[0].clone())
                .and_then(|p| match p {
                    crate::Piece::Var(v) => Some(v),
                    crate::Piece::Text(_) => None,
                })
        },
        |v| (*v == Var::Host).then(|| "no host".to_owned()),
    );
    let err = refused.expect_err("refused through the map");
    assert_eq!(err.at, 2);
    assert!(err.message.contains("no host"), "{}", err.message);
}

#[test]
fn a_huge_source_is_one_linear_pass_per_regex() {
    // Many regexes over a 1 MiB value: linear-time matching keeps this quick.
    let entries = (0..20)
        .map(|i| (regex(&format!("(a+)+{i}$"), false), "hit"))
        .collect();
    let m = map(entries, "miss");
    let long = "a".repeat(1 << 20);
    assert_eq!(value(&m, Some(&long)), "miss");
}
