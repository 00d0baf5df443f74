//! A limit item's `soft` share: typed in thousandths, and every problem at its
//! `line:col`.

use super::*;

/// Zones `ip` (a bucket), `day` (1r/d), `win` (a window) and `c` (`concurrency`), and one
/// location whose `limit` is `limit` (line [`LINE`]).
fn with_limit(limit: &str) -> String {
    format!(
        "{SERVER}[zones.ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n\
         [zones.day]\nkey = \"$binary_remote_addr\"\nrate = \"1r/d\"\n\
         [zones.win]\nkey = \"$binary_remote_addr\"\nrate = \"1r/d\"\nalgorithm = \"fixed_window\"\n\
         [zones.c]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 2\n\
         [[location]]\nmatch = \"/\"\nlimit = [{limit}]\nreturn = {{ status = 200 }}\n"
    )
}

/// The line of the location's `limit`.
const LINE: usize = 19;

fn soft_of(limit: &str) -> Option<u16> {
    let config = parse(&with_limit(limit));
    config.sites[0].locations[0].limits[0]
        .soft
        .map(Share::permille)
}

#[test]
fn a_share_is_kept_in_thousandths() {
    assert_eq!(soft_of(r#"{ zone = "ip", soft = "10%" }"#), Some(100));
    assert_eq!(soft_of(r#"{ zone = "ip", soft = "0.1%" }"#), Some(1));
    assert_eq!(soft_of(r#"{ zone = "ip", soft = "2.5%" }"#), Some(25));
    assert_eq!(soft_of(r#"{ zone = "ip", soft = "100%" }"#), Some(1000));
    assert_eq!(soft_of(r#"{ zone = "ip" }"#), None);
    // A window's lane is at least one request per window, whatever its rate.
    assert_eq!(soft_of(r#"{ zone = "win", soft = "1%" }"#), Some(10));
}

#[test]
fn malformed_and_out_of_range_shares_are_refused_at_the_value() {
    let col = r#"limit = [{ zone = "ip", soft = "#.len() + 1;
    for written in [
        r#""10""#,
        r#""0%""#,
        r#""0.05%""#,
        r#""100.1%""#,
        r#""1000%""#,
        r#""-5%""#,
        r#""1e1%""#,
        r#"" 10%""#,
        "10",
        "0.1",
    ] {
        let (line, at, message) =
            error(&with_limit(&format!(r#"{{ zone = "ip", soft = {written} }}"#))[SERVER.len()..]);
        assert_eq!((line, at), (LINE, col), "{written}: {message}");
        assert!(message.starts_with("invalid soft "), "{written}: {message}");
        assert!(
            message.contains(r#"expected a share like "10%""#),
            "{message}"
        );
    }
}

#[test]
fn soft_is_refused_with_dry_run_on_concurrency_and_below_a_request_a_day() {
    let cases = [
        (
            r#"{ zone = "ip", dry_run = true, soft = "10%" }"#,
            "`soft` and `dry_run = true` exclude each other",
        ),
        (
            r#"{ zone = "c", soft = "10%" }"#,
            "`soft` does not apply to a `concurrency` zone",
        ),
        (
            r#"{ zone = "day", soft = "50%" }"#,
            r#"soft = "50%" of zone "day"'s rate 1r/d is less than one request a day"#,
        ),
    ];
    for (limit, expected) in cases {
        let (line, col, message) = error(&with_limit(limit)[SERVER.len()..]);
        assert_eq!(line, LINE, "{message}");
        let at = limit.find("soft").expect("soft") + r#"limit = ["#.len() + "soft = ".len() + 1;
        assert_eq!(col, at, "{message}");
        assert!(message.starts_with(expected), "{message}");
    }
}

#[test]
fn a_sliding_log_lane_must_fit_a_quarter_of_the_zone() {
    let zone = "[zones.log]\nkey = \"$binary_remote_addr\"\nrate = \"1000r/m\"\nalgorithm = \"sliding_log\"\nsize = \"1m\"\n";
    let text = |share: &str| {
        format!(
            "{SERVER}{zone}[[location]]\nmatch = \"/\"\nreturn = {{ status = 200 }}\nlimit = [{{ zone = \"log\", soft = \"{share}\" }}]\n"
        )
    };
    // 1000 entries of 16 bytes (1024 rounded up): 16 KiB, a 64th of 1 MiB, fits the zone;
    // its whole share does not fit a 64th of a quarter of it.
    let (_, _, message) = error(&text("100%")[SERVER.len()..]);
    assert!(
        message.starts_with(
            r#"a sliding_log key of zone "log"'s soft lane may hold 1000 requests (16384 bytes)"#
        ),
        "{message}"
    );
    assert!(message.contains(r#"size = "4m""#), "{message}");
    parse(&text("25%"));
}
