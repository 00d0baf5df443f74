//! Zones, access lists, API keys and location limits: typed values and every problem
//! at its `line:col`. `error(rest)` appends `rest` to a valid `[server]`, from line 3.

use super::*;

const RETURN: &str = "return = { status = 200 }\n";

/// A limit item with none of `count_status`, `ban`, `elastic` or `soft`.
fn plain(zone: usize, burst: u64, delay: Option<u64>, dry_run: bool) -> Limit {
    Limit {
        zone,
        burst,
        delay,
        dry_run,
        count: None,
        ban: None,
        elastic: None,
        soft: None,
    }
}

#[test]
fn a_full_limiting_config_is_typed() {
    let text = format!(
        "{SERVER}[access]\ndeny = [\"192.0.2.0/24\"]\nexempt = [\"203.0.113.7\"]\n\
         [zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"10r/s\"\nsize = \"1m\"\nipv6_prefix = 64\n\
         [zones.per_key]\nkey = \"$http_x_api_key\"\nrate = \"120r/m\"\nalgorithm = \"token_bucket\"\n\
         plans = {{ free = \"100r/h\", pro = \"10000r/h\" }}\n\
         [zones.conns]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 20\n\
         [api_keys]\ninline = {{ \"k1\" = \"free\" }}\n\
         [[location]]\nmatch = \"/api/\"\ncost = 2\nlimit_status = 503\n\
         access = [\"deny 10.0.0.13\", \"allow 10.0.0.0/8\", \"deny all\"]\n\
         limit = [{{ zone = \"per_key\", burst = 60, nodelay = true }}, {{ zone = \"per_ip\", burst = 20, delay = 8 }}, {{ zone = \"conns\", dry_run = true }}]\n{RETURN}"
    );
    let config = parse(&text);
    assert_eq!(
        config.server.limit_status,
        http::StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(config.server.ratelimit_headers, RateLimitHeaders::Draft);
    assert_eq!(
        config.access.deny,
        ["192.0.2.0/24".parse::<ipnet::IpNet>().unwrap()]
    );
    assert_eq!(
        config.access.exempt,
        ["203.0.113.7/32".parse::<ipnet::IpNet>().unwrap()]
    );
    let names: Vec<&str> = config.zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(names, ["per_ip", "per_key", "conns"]);
    let per_ip = &config.zones[0];
    assert_eq!(per_ip.rate, Rate::new(10, Period::Second));
    assert_eq!(
        (per_ip.size, per_ip.ipv4_prefix, per_ip.ipv6_prefix),
        (1 << 20, 32, 64)
    );
    assert_eq!(per_ip.algorithm, Algorithm::LeakyBucket);
    let per_key = &config.zones[1];
    assert_eq!(per_key.algorithm, Algorithm::TokenBucket);
    assert_eq!(
        per_key.plans[0],
        ("free".to_owned(), Rate::new(100, Period::Hour).unwrap())
    );
    assert_eq!((config.zones[2].max, config.zones[2].rate), (20, None));
    let keys = config.api_keys.as_ref().expect("api keys");
    assert_eq!(keys.header, "x-api-key");
    assert_eq!(keys.keys["k1"], "free");
    let location = &config.sites[0].locations[0];
    assert_eq!(
        (location.cost, location.limit_status),
        (2, Some(http::StatusCode::SERVICE_UNAVAILABLE))
    );
    assert_eq!(location.access.len(), 3);
    assert_eq!(
        location.limits,
        [
            plain(1, 60, None, false),
            plain(0, 20, Some(8), false),
            plain(2, 0, Some(0), true),
        ]
    );
}

#[test]
fn zone_problems_are_each_reported() {
    let text = format!(
        "{SERVER}[zones.a]\nkey = \"$nope\"\nrate = \"10r/x\"\nsize = \"1k\"\nalgorithm = \"magic\"\nipv4_prefix = 33\n\
         [zones.b]\nalgorithm = \"concurrency\"\nrate = \"1r/s\"\nkey = \"x\"\n\
         [zones.c]\nkey = \"x\"\n"
    );
    let found = errors(&text);
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(
        at(&found),
        [
            (4, 8),
            (5, 8),
            (6, 8),
            (7, 13),
            (8, 15),
            (9, 1),
            (11, 8),
            (13, 1)
        ],
        "{found:#?}"
    );
    assert!(
        messages[0].starts_with("unknown variable `$nope`"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].starts_with(r#"invalid rate "10r/x""#),
        "{}",
        messages[1]
    );
    assert!(messages[2].contains("at least \"32k\""), "{}", messages[2]);
    assert!(
        messages[3].starts_with("unknown variant `magic`"),
        "{}",
        messages[3]
    );
    assert_eq!(messages[4], "invalid prefix 33: expected 1 to 32");
    assert_eq!(messages[5], "a `concurrency` zone needs `max`");
    assert!(
        messages[6].contains("takes `max`, not `rate`"),
        "{}",
        messages[6]
    );
    assert_eq!(messages[7], "missing key `rate`");
}

#[test]
fn a_misspelt_zone_gets_the_zone_it_likely_meant() {
    let zones = "[zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n";
    let text = format!("{SERVER}{zones}[[location]]\nmatch = \"/\"\nlimit = [{{ zone = \"per-ip\" }}]\n{RETURN}");
    let found = errors(&text);
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(messages, [r#"unknown zone "per-ip": did you mean "per_ip"?"#]);
}

#[test]
fn location_limit_problems_name_the_zone() {
    let zones = "[zones.ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n\
                 [zones.c]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 2\n";
    let text = format!(
        "{SERVER}{zones}[[location]]\nmatch = \"/\"\n\
         limit = [{{ zone = \"nope\" }}, {{ zone = \"ip\", delay = 2, nodelay = true }}, {{ zone = \"c\", burst = 1 }}]\n{RETURN}\
         [[location]]\nmatch = \"/x\"\ncost = 3\nlimit = [{{ zone = \"ip\", burst = 1 }}]\n{RETURN}\
         [[location]]\nmatch = \"/y\"\nlimit = [{{ zone = \"ip\" }}, {{ zone = \"ip\" }}]\n{RETURN}"
    );
    let found = errors(&text);
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(messages.len(), 5, "{found:#?}");
    assert_eq!(
        messages[0],
        r#"unknown zone "nope", expected one of "ip", "c""#
    );
    assert_eq!(
        messages[1],
        "`delay` and `nodelay = true` exclude each other"
    );
    assert_eq!(
        messages[2],
        "`burst`, `nodelay` and `delay` do not apply to a `concurrency` zone"
    );
    assert!(
        messages[3].starts_with(r#"cost 3 exceeds what zone "ip" can ever admit at once (2)"#),
        "{}",
        messages[3]
    );
    assert_eq!(messages[4], r#"zone "ip" is listed twice in this location"#);
}

#[test]
fn unknown_plans_are_errors_in_either_place() {
    let zone =
        "[zones.k]\nkey = \"$http_x_api_key\"\nrate = \"1r/s\"\nplans = { free = \"1r/m\" }\n";
    let found = errors(&format!(
        "{SERVER}{zone}[api_keys]\ninline = {{ \"a\" = \"gold\" }}\n"
    ));
    assert_eq!(
        found,
        [(
            8,
            18,
            r#"unknown plan "gold", expected one of "free""#.to_owned()
        )]
    );
    let found = errors(&format!("{SERVER}{zone}"));
    assert_eq!(
        found[0].2,
        "zones define `plans` but neither `[api_keys]` nor a zone's `plan` says which request is on which plan"
    );
}

#[test]
fn api_key_files_are_read_relative_to_the_config_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("keys.toml"),
        "\"k2\" = \"free\"\n\"k3\" = \"gold\"\n",
    )
    .unwrap();
    let zone =
        "[zones.k]\nkey = \"$http_x_api_key\"\nrate = \"1r/s\"\nplans = { free = \"1r/m\" }\n";
    let text = format!("{SERVER}{zone}[api_keys]\nfile = \"keys.toml\"\n");
    let origin = dir.path().join("gateway.toml");
    let errors = from_str(&text, &origin).unwrap_err().errors;
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .message
            .contains(r#"key "k3": unknown plan "gold""#),
        "{}",
        errors[0].message
    );
    std::fs::write(dir.path().join("keys.toml"), "\"k2\" = \"free\"\n").unwrap();
    let config = load_at(&text, &origin).expect("valid");
    assert_eq!(config.api_keys.expect("keys").keys["k2"], "free");
    let text = format!("{SERVER}{zone}[api_keys]\nfile = \"missing.toml\"\n");
    let errors = from_str(&text, &origin).unwrap_err().errors;
    assert!(
        errors[0]
            .message
            .starts_with("cannot read the API key file"),
        "{}",
        errors[0].message
    );
}

#[test]
fn access_problems_point_at_each_bad_entry() {
    let text = format!(
        "{SERVER}[access]\ndeny = [\"10.0.0.0/8\", \"bogus\"]\n[[location]]\nmatch = \"/\"\naccess = [\"permit all\"]\n{RETURN}"
    );
    let found = errors(&text);
    assert_eq!(at(&found), [(4, 23), (7, 11)], "{found:#?}");
    assert!(
        found[1]
            .2
            .starts_with(r#"invalid access rule "permit all""#),
        "{}",
        found[1].2
    );
}

fn at(found: &[(usize, usize, String)]) -> Vec<(usize, usize)> {
    found.iter().map(|(line, col, _)| (*line, *col)).collect()
}

#[test]
fn window_zones_keep_one_unit_across_plans() {
    let text = format!(
        "{SERVER}[zones.w]\nkey = \"$http_x_api_key\"\nrate = \"10r/m\"\nalgorithm = \"fixed_window\"\n\
         plans = {{ pro = \"1000r/h\", free = \"5r/m\" }}\n[api_keys]\ninline = {{ \"k\" = \"pro\" }}\n"
    );
    let found = errors(&text);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!((found[0].0, found[0].1), (7, 17));
    assert!(
        found[0].2.starts_with(
            r#"plan "pro": a window zone's plans must count in the unit of its `rate` (10r/m)"#
        ),
        "{}",
        found[0].2
    );
}

#[test]
fn limits_that_could_never_work_in_memory_or_time_are_refused() {
    let zones = "[zones.daily]\nkey = \"$binary_remote_addr\"\nrate = \"1r/d\"\nalgorithm = \"token_bucket\"\n\
                 [zones.log]\nkey = \"$binary_remote_addr\"\nrate = \"20000r/h\"\nalgorithm = \"sliding_log\"\n";
    let text = format!(
        "{SERVER}{zones}[[location]]\nmatch = \"/\"\nlimit = [{{ zone = \"daily\", burst = 400 }}, {{ zone = \"log\" }}]\n{RETURN}"
    );
    let found = errors(&text);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0]
            .2
            .starts_with(r#"burst 400 at zone "daily"'s rate 1r/d takes over a year to drain"#),
        "{}",
        found[0].2
    );
    assert!(
        found[1]
            .2
            .contains(r#"give the zone `size = "32m"` or more"#),
        "{}",
        found[1].2
    );
    let fits = text
        .replace("burst = 400", "burst = 300")
        .replace("rate = \"20000r/h\"", "rate = \"5000r/h\"");
    parse(&fits);
}
