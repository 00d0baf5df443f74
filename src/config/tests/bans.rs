//! A limit item's `ban` (the penalty box): typed, defaults, and every problem at its
//! `line:col`.

use std::time::Duration;

use super::*;

/// A zone `ip`, a `concurrency` zone `c`, and one location whose `limit` is `limit`
/// (line [`LINE`]).
fn with_limit(limit: &str) -> String {
    format!(
        "{SERVER}[zones.ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n\
         [zones.c]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 2\n\
         [[location]]\nmatch = \"/\"\nlimit = [{limit}]\nreturn = {{ status = 200 }}\n"
    )
}

/// The line of the location's `limit`.
const LINE: usize = 12;

fn ban_of(limit: &str) -> Option<Ban> {
    let config = parse(&with_limit(limit));
    config.sites[0].locations[0].limits[0].ban
}

#[test]
fn a_ban_is_typed_with_403_unless_a_status_is_given() {
    let ban = ban_of(r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "15m" } }"#);
    assert_eq!(
        ban,
        Some(Ban {
            after: 5,
            within: Duration::from_secs(60),
            duration: Duration::from_secs(900),
            status: http::StatusCode::FORBIDDEN,
            size: 4 << 20,
        })
    );
    let ban = ban_of(
        r#"{ zone = "ip", ban = { after = 1, within = "500ms", for = "720h", status = 429 } }"#,
    );
    assert_eq!(
        ban.map(|b| b.status),
        Some(http::StatusCode::TOO_MANY_REQUESTS)
    );
    assert_eq!(ban_of(r#"{ zone = "ip" }"#), None);
}

#[test]
fn a_ban_table_takes_the_size_given() {
    let ban =
        ban_of(r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "15m", size = "64m" } }"#);
    assert_eq!(ban.map(|b| b.size), Some(64 << 20));
    let ban =
        ban_of(r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "15m", size = 16384 } }"#);
    assert_eq!(ban.map(|b| b.size), Some(16 << 10));
}

#[test]
fn the_designs_login_example_is_typed() {
    let limit = r#"{ zone = "ip", burst = 0, count_status = [401, 403], ban = { after = 5, within = "1m", for = "15m" } }"#;
    let config = parse(&with_limit(limit));
    let item = &config.sites[0].locations[0].limits[0];
    assert!(item.count.is_some());
    assert_eq!(
        item.ban.map(|b| (b.after, b.duration)),
        Some((5, Duration::from_secs(900)))
    );
}

#[test]
fn a_concurrency_zone_may_ban() {
    let ban = ban_of(r#"{ zone = "c", ban = { after = 3, within = "10s", for = "1m" } }"#);
    assert_eq!(ban.map(|b| b.after), Some(3));
}

#[test]
fn ban_problems_are_reported_where_they_are_written() {
    let cases = [
        (
            r#"{ zone = "ip", ban = { after = 0, within = "1m", for = "1m" } }"#,
            "0,",
            "invalid ban after 0: expected 1 to 1000 rejections",
        ),
        (
            r#"{ zone = "ip", ban = { after = 1001, within = "1m", for = "1m" } }"#,
            "1001",
            "invalid ban after 1001: expected 1 to 1000 rejections",
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, within = "25h", for = "1m" } }"#,
            "\"25h",
            r#"invalid ban within "25h": at most "24h""#,
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "721h" } }"#,
            "\"721h",
            r#"invalid ban for "721h": at most "720h""#,
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "0s" } }"#,
            "\"0s",
            r#"invalid duration "0s": must be greater than zero"#,
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, within = 60, for = "1m" } }"#,
            "60,",
            r#"invalid duration 60: expected a number with a unit (ms, s, m, h), e.g. "10s""#,
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "1m", status = 200 } }"#,
            "200",
            "invalid ban status 200: expected 400 to 599",
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "1m", size = "8k" } }"#,
            "\"8k",
            r#"invalid ban size "8k": at least "16k""#,
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "1m", size = "4mb" } }"#,
            "\"4mb",
            r#"invalid size "4mb": expected a number of bytes, optionally with a unit (k, m, g), e.g. "16k""#,
        ),
        (
            r#"{ zone = "ip", ban = { after = 5, for = "1m" } }"#,
            "{ after",
            "missing key `within`",
        ),
        (
            r#"{ zone = "ip", dry_run = true, ban = { after = 5, within = "1m", for = "1m" } }"#,
            "{ after",
            "a `dry_run` limit never rejects, so it can never ban: remove `dry_run` (to enforce) or `ban`",
        ),
    ];
    for (limit, at, message) in cases {
        let col = "limit = [".len() + limit.find(at).expect("marker") + 1;
        let found = errors(&with_limit(limit));
        assert_eq!(found, [(LINE, col, message.to_owned())], "{limit}");
    }
}

#[test]
fn an_unknown_ban_key_is_named() {
    let limit =
        r#"{ zone = "ip", ban = { after = 5, within = "1m", for = "1m", forever = true } }"#;
    let found = errors(&with_limit(limit));
    assert_eq!(found.len(), 1, "{found:#?}");
    let (line, _, message) = &found[0];
    assert_eq!(*line, LINE);
    assert_eq!(
        message,
        "unknown key `forever`, expected one of `after`, `within`, `for`, `status`, `size`"
    );
    let not_a_table = errors(&with_limit(r#"{ zone = "ip", ban = 5 }"#));
    assert!(
        not_a_table[0]
            .2
            .contains(r#"a table like { after = 5, within = "1m", for = "15m" }"#),
        "{not_a_table:#?}"
    );
}
