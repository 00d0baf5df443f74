//! `[redis]` and a zone's `backend`, `instances` and `on_error`.

use super::*;

const LOGIN: &str = "[zones.login]\nkey = \"$binary_remote_addr\"\nrate = \"5r/m\"\n";

#[test]
fn a_redis_zone_takes_its_settings_and_the_sections_defaults() {
    let config = parse(&format!(
        "{SERVER}[redis]\nurl = \"redis://127.0.0.1:6379/2\"\n\
         {LOGIN}backend = \"redis\"\ninstances = 3\n\
         [zones.api]\nkey = \"$http_x_api_key\"\nrate = \"10r/s\"\nbackend = \"redis\"\non_error = \"deny\"\n\
         [zones.near]\nkey = \"$binary_remote_addr\"\nrate = \"10r/s\"\nbackend = \"local\"\n"
    ));
    assert_eq!(
        config.redis,
        Some(Redis {
            settings: RedisSettings {
                urls: vec!["redis://127.0.0.1:6379/2".into()],
                cluster: false,
                ca: None,
                timeout: Duration::from_millis(50),
                heartbeat: Duration::from_secs(5),
            },
            on_error: OnError::Local,
        })
    );
    let redis: Vec<_> = config.zones.iter().map(|z| z.redis).collect();
    assert_eq!(
        redis,
        [
            Some(ZoneSettings {
                on_error: OnError::Local,
                instances: Some(3),
                lease: None,
            }),
            Some(ZoneSettings {
                on_error: OnError::Deny,
                instances: None,
                lease: None,
            }),
            None
        ]
    );
    let config = parse(&format!(
        "{SERVER}[redis]\nurl = \"redis://10.0.0.5:6380\"\ntimeout = \"20ms\"\non_error = \"allow\"\n\
         {LOGIN}backend = \"redis\"\n"
    ));
    let redis = config.redis.expect("[redis]");
    assert_eq!(
        (redis.settings.timeout, redis.on_error),
        (Duration::from_millis(20), OnError::Allow)
    );
    // A zone that names no `on_error` follows the section's.
    assert_eq!(
        config.zones[0].redis.map(|zone| zone.on_error),
        Some(OnError::Allow)
    );
}

#[test]
fn redis_problems_are_reported_where_they_are() {
    let found = errors(&format!(
        "{SERVER}[redis]\nurl = \"http://127.0.0.1:6379\"\n\
         [zones.c]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 2\nbackend = \"redis\"\n\
         {LOGIN}instances = 2\n\
         [zones.many]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\nbackend = \"redis\"\ninstances = 0\n"
    ));
    let found: Vec<(usize, usize, &str)> =
        found.iter().map(|(l, c, m)| (*l, *c, m.as_str())).collect();
    assert_eq!(found.len(), 4, "{found:#?}");
    assert_eq!((found[0].0, found[0].1), (4, 7));
    assert!(
        found[0]
            .2
            .starts_with("invalid Redis URL \"http://127.0.0.1:6379\""),
        "{}",
        found[0].2
    );
    assert_eq!((found[1].0, found[1].1), (9, 11));
    assert!(found[1]
        .2
        .starts_with("a `concurrency` zone cannot be kept in Redis"));
    assert_eq!(
        found[2],
        (
            13,
            13,
            "only a zone with `backend = \"redis\"` takes this key"
        )
    );
    assert_eq!(
        found[3],
        (18, 13, "invalid instances 0: expected 1 to 1000")
    );

    let found = errors(&format!("{SERVER}{LOGIN}backend = \"redis\"\n"));
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].2,
        "zone \"login\" has `backend = \"redis\"` but no [redis] section says where Redis is"
    );
    let (line, col, message) = error("[redis]\nurl = \"nonsense\"\n");
    assert_eq!((line, col), (4, 7));
    assert!(message.starts_with("invalid Redis URL"), "{message}");
    let (_, _, message) = error("[redis]\nurls = [\"redis://a:1\"]\nurl = \"redis://a:1\"\n");
    assert_eq!(
        message,
        "give either `url` (one server) or `urls` (a Redis Cluster), not both"
    );
    let (_, _, message) = error("[redis]\ntimeout = \"1s\"\n");
    assert_eq!(message, "missing key `url` (or `urls` for a Redis Cluster)");
    let config = parse(&format!(
        "{SERVER}[redis]\nurls = [\"redis://10.0.0.1:7000\", \"redis://10.0.0.2:7000\"]\n"
    ));
    let redis = config.redis.expect("[redis]");
    assert!(redis.settings.cluster);
    assert_eq!(redis.settings.urls.len(), 2);
}

#[test]
fn a_sliding_window_in_redis_must_keep_its_products_exact() {
    let zone = "[zones.daily]\nkey = \"$binary_remote_addr\"\nrate = \"100000r/d\"\n\
                algorithm = \"sliding_window\"\nbackend = \"redis\"\n";
    let location = |burst: u64| {
        format!(
            "[[location]]\nmatch = \"/\"\nreturn = {{ status = 200 }}\n\
             limit = [{{ zone = \"daily\", burst = {burst}, nodelay = true }}]\n"
        )
    };
    let redis = "[redis]\nurl = \"redis://127.0.0.1:6379\"\n";
    parse(&format!("{SERVER}{redis}{zone}{}", location(4_000)));
    let found = errors(&format!("{SERVER}{redis}{zone}{}", location(5_000)));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].2.starts_with(
            "rate 100000r/d with burst 5000 is too large for a sliding_window zone in Redis (\"daily\"): count + burst must stay below 104249"
        ),
        "{}",
        found[0].2
    );
}

#[test]
fn rediss_takes_a_ca_file_read_with_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ca.pem"),
        "-----BEGIN CERTIFICATE-----\nMII=\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("empty.pem"), "nothing\n").unwrap();
    let text =
        |ca: &str| format!("{SERVER}[redis]\nurl = \"rediss://10.0.0.5:6380\"\nca = \"{ca}\"\n");
    let config = load_at(&text("ca.pem"), &dir.path().join("gateway.toml")).unwrap();
    let redis = config.redis.expect("[redis]");
    assert_eq!(redis.settings.urls, ["rediss://10.0.0.5:6380"]);
    assert!(redis
        .settings
        .ca
        .is_some_and(|pem| pem.starts_with(b"-----BEGIN CERTIFICATE")));
    for (file, want) in [
        ("missing.pem", "cannot read "),
        ("empty.pem", "no certificate found"),
    ] {
        let errors = from_str(&text(file), &dir.path().join("gateway.toml")).expect_err("invalid");
        let e = &errors.errors[0];
        assert_eq!((e.line, e.col), (5, 6), "{}", e.message);
        assert!(e.message.contains(want), "{}", e.message);
    }
}

#[test]
fn the_heartbeat_is_a_duration_from_100ms_to_a_minute() {
    let redis = |heartbeat: &str| {
        format!("[redis]\nurl = \"redis://127.0.0.1:6379\"\nheartbeat = {heartbeat}\n")
    };
    let config = parse(&format!("{SERVER}{}", redis("\"250ms\"")));
    let settings = config.redis.expect("[redis]").settings;
    assert_eq!(settings.heartbeat, Duration::from_millis(250));
    for bad in ["\"50ms\"", "\"2m\""] {
        let (_, _, message) = error(&redis(bad));
        assert!(message.starts_with("invalid heartbeat"), "{message}");
        assert!(message.contains("\"100ms\" to \"1m\""), "{message}");
    }
}

#[test]
fn a_redis_zone_may_lease_and_a_local_one_may_not() {
    let redis = "[redis]\nurl = \"redis://127.0.0.1:6379\"\n";
    let config = parse(&format!(
        "{SERVER}{redis}{LOGIN}backend = \"redis\"\nlease = 20\n"
    ));
    assert_eq!(config.zones[0].redis.and_then(|r| r.lease), Some(20));
    let found = errors(&format!(
        "{SERVER}{redis}{LOGIN}lease = 20\n\
         [zones.big]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\nbackend = \"redis\"\nlease = 10001\n\
         [zones.none]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\nbackend = \"redis\"\nlease = 0\n"
    ));
    let found: Vec<(usize, &str)> = found.iter().map(|(l, _, m)| (*l, m.as_str())).collect();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found[0].1.starts_with("`lease` takes units from Redis"),
        "{}",
        found[0].1
    );
    assert_eq!(found[1].1, "invalid lease 10001: expected 1 to 10000 units");
    assert_eq!(found[2].1, "invalid lease 0: expected 1 to 10000 units");
}
