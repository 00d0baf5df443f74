//! `max_in_flight` and its queue on `[upstreams.NAME]`, and `[api_keys] priority`:
//! typed, defaults, and every problem at its key.

use std::time::Duration;

use super::*;

/// `[upstreams.app]` with `keys` from line 5 on (after `servers` on line 4).
fn group(keys: &str) -> String {
    format!("{SERVER}[upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n{keys}\n")
}

/// The one problem of a group with `keys`, its message only.
fn problem(keys: &str) -> String {
    let mut found = errors(&group(keys));
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0).2
}

#[test]
fn a_number_gives_a_gate_with_the_default_queue() {
    let config = parse(&group("max_in_flight = 100"));
    let gate = config.upstreams[0].concurrency.expect("a gate");
    assert_eq!(gate.max_in_flight, MaxInFlight::Fixed(100));
    assert_eq!(gate.queue, 64);
    assert_eq!(gate.queue_timeout, Duration::from_secs(1));
    assert_eq!(parse(&group("")).upstreams[0].concurrency, None);
}

#[test]
fn queue_and_wait_are_read() {
    let config = parse(&group(
        "max_in_flight = 8\nqueue = 0\nqueue_timeout = \"250ms\"",
    ));
    let gate = config.upstreams[0].concurrency.expect("a gate");
    assert_eq!(
        (gate.queue, gate.queue_timeout),
        (0, Duration::from_millis(250))
    );
}

#[test]
fn counts_out_of_range_are_refused_at_their_key() {
    let (line, _, message) = errors(&group("max_in_flight = 0"))[0].clone();
    assert_eq!(line, 5);
    assert_eq!(message, "invalid max_in_flight 0: expected 1 to 100000");
    assert_eq!(
        problem("max_in_flight = 100001"),
        "invalid max_in_flight 100001: expected 1 to 100000"
    );
    assert_eq!(
        problem("max_in_flight = 4\nqueue = -1"),
        "invalid queue -1: expected 0 to 100000"
    );
    assert!(problem("max_in_flight = \"many\"")
        .contains(r#"expected an integer from 1 to 100000, or "auto""#));
}

#[test]
fn queue_timeout_may_not_outlast_read_timeout() {
    assert_eq!(
        problem("read_timeout = \"2s\"\nmax_in_flight = 4\nqueue_timeout = \"3s\""),
        "`queue_timeout` (3000ms) must not be longer than the group's `read_timeout` (2000ms)"
    );
    // The default wait fits a shorter read_timeout.
    let config = parse(&group("read_timeout = \"500ms\"\nmax_in_flight = 4"));
    let gate = config.upstreams[0].concurrency.expect("a gate");
    assert_eq!(gate.queue_timeout, Duration::from_millis(500));
}

#[test]
fn queue_keys_need_max_in_flight() {
    assert_eq!(
        problem("queue = 4"),
        "`queue` needs `max_in_flight` on the group"
    );
    assert_eq!(
        problem("probe_interval = \"10s\""),
        "`probe_interval` needs `max_in_flight` on the group"
    );
}

#[test]
fn auto_keys_need_auto() {
    assert_eq!(
        problem("max_in_flight = 10\nin_flight_min = 2"),
        r#"`in_flight_min` applies only with `max_in_flight = "auto"`"#
    );
}

#[test]
fn auto_takes_its_keys_with_defaults() {
    let config = parse(&group("max_in_flight = \"auto\""));
    let gate = config.upstreams[0].concurrency.expect("a gate");
    let want = AutoSettings {
        min: 4,
        max: 1000,
        probe_interval: Duration::from_secs(30),
    };
    assert_eq!(gate.max_in_flight, MaxInFlight::Auto(want));
    let config = parse(&group(
        "max_in_flight = \"auto\"\nin_flight_min = 2\nin_flight_max = 50\nprobe_interval = \"10s\"",
    ));
    let gate = config.upstreams[0].concurrency.expect("a gate");
    let want = AutoSettings {
        min: 2,
        max: 50,
        probe_interval: Duration::from_secs(10),
    };
    assert_eq!(gate.max_in_flight, MaxInFlight::Auto(want));
}

#[test]
fn auto_keys_are_checked_each_at_its_key() {
    let found = errors(&group(
        "max_in_flight = \"auto\"\nin_flight_min = 50\nin_flight_max = 10\nprobe_interval = \"2h\"",
    ));
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(found.len(), 2, "{messages:#?}");
    assert!(messages.contains(&"`in_flight_min` (50) is above `in_flight_max` (10)"));
    assert!(messages.contains(&"`probe_interval` must be from 1s to 1h"));
    assert_eq!(
        problem("max_in_flight = \"auto\"\nin_flight_min = 0"),
        "invalid in_flight_min 0: expected 1 to 100000"
    );
}

/// A zone with plans `pro` and `free`, and `[api_keys]` with `priority`.
fn priorities(priority: &str) -> String {
    format!(
        "{SERVER}[zones.z]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n\
         plans = {{ pro = \"10r/s\", free = \"1r/s\" }}\n\
         [api_keys]\ninline = {{ k = \"pro\" }}\npriority = {priority}\n"
    )
}

#[test]
fn priority_is_read_per_plan() {
    let config = parse(&priorities("{ pro = 10, free = 0 }"));
    let keys = config.api_keys.expect("api keys");
    assert_eq!(keys.priority.get("pro"), Some(&10));
    assert_eq!(keys.priority.get("free"), Some(&0));
}

#[test]
fn priority_names_known_plans_from_0_to_100() {
    let found = errors(&priorities("{ gold = 1, pro = 101 }"));
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with(r#"unknown plan "gold""#)),
        "{messages:#?}"
    );
    assert!(
        messages.contains(&"invalid priority 101: expected 0 to 100"),
        "{messages:#?}"
    );
}
