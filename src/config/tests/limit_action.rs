//! `limit_action` in `[server]`, a site and a location (the most specific wins), and
//! `[server]`'s `tarpit_hold` and `tarpit_max`: values, defaults and problems at their
//! `line:col`. `error(rest)` appends `rest` to a valid `[server]`, from line 3.

use super::*;

const ZONE: &str = "[zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n";

#[test]
fn limited_requests_are_answered_unless_told_and_a_hold_is_bounded_by_default() {
    let config = parse(SERVER);
    assert_eq!(config.server.limit_action, LimitAction::Answer);
    assert_eq!(
        config.server.tarpit,
        Tarpit {
            hold: Duration::from_secs(10),
            max: 1024,
        }
    );
    let set = parse(&format!(
        "{SERVER}limit_action = \"tarpit\"\ntarpit_hold = \"2s\"\ntarpit_max = 8\n"
    ));
    assert_eq!(set.server.limit_action, LimitAction::Tarpit);
    assert_eq!(
        set.server.tarpit,
        Tarpit {
            hold: Duration::from_secs(2),
            max: 8,
        }
    );
}

#[test]
fn the_most_specific_limit_action_wins() {
    let config = parse(&format!(
        "{SERVER}limit_action = \"tarpit\"\n{ZONE}\
         [[site]]\nnames = [\"a.test\"]\nlimit_action = \"close\"\n\
         [[site.location]]\nmatch = \"/own/\"\nlimit_action = \"answer\"\nreturn = {{ status = 200 }}\n\
         [[site.location]]\nmatch = \"/\"\nreturn = {{ status = 200 }}\n\
         [[site]]\nnames = [\"b.test\"]\n\
         [[site.location]]\nmatch = \"/\"\nreturn = {{ status = 200 }}\n"
    ));
    let actions = |site: usize| -> Vec<Option<LimitAction>> {
        let locations = &config.sites[site].locations;
        locations.iter().map(|l| l.limit_action).collect()
    };
    assert_eq!(
        actions(0),
        [Some(LimitAction::Answer), Some(LimitAction::Close)]
    );
    // Nothing on the site or location: `[server]`'s applies (resolved at run time).
    assert_eq!(actions(1), [None]);
    assert_eq!(config.server.limit_action, LimitAction::Tarpit);
}

#[test]
fn a_limit_action_is_one_of_three_words() {
    let (line, col, message) = error("limit_action = \"drop\"\n");
    assert_eq!((line, col), (3, 16), "{message}");
    assert!(
        message.starts_with("unknown variant `drop`, expected one of `answer`, `close`, `tarpit`"),
        "{message}"
    );
    let (line, col, message) =
        error("[[location]]\nmatch = \"/\"\nlimit_action = 444\nreturn = { status = 200 }\n");
    assert_eq!((line, col), (5, 16), "{message}");
}

#[test]
fn tarpit_max_is_a_positive_count_and_tarpit_hold_a_duration() {
    for (written, col) in [("0", 14), ("-1", 14), ("2000000", 14)] {
        let (line, at, message) = error(&format!("tarpit_max = {written}\n"));
        assert_eq!((line, at), (3, col), "{message}");
        assert!(
            message.contains("invalid tarpit_max") && message.contains("from 1 to 1048576"),
            "{message}"
        );
    }
    for written in ["\"0s\"", "\"soon\"", "10"] {
        let (line, col, message) = error(&format!("tarpit_hold = {written}\n"));
        assert_eq!((line, col), (3, 15), "{message}");
        assert!(message.contains("duration"), "{message}");
    }
}

#[test]
fn status_444_is_limit_action_close_not_a_status() {
    let (line, col, message) = error("limit_status = 444\n");
    assert_eq!((line, col), (3, 16), "{message}");
    assert!(message.contains("limit_action = \"close\""), "{message}");
    let (line, _, message) = error(&format!(
        "{ZONE}[[location]]\nmatch = \"/\"\nreturn = {{ status = 200 }}\n\
         limit = [{{ zone = \"per_ip\", ban = {{ after = 3, within = \"1m\", for = \"1h\", status = 444 }} }}]\n"
    ));
    assert_eq!(line, 9, "{message}");
    assert!(message.contains("limit_action = \"close\""), "{message}");
}
