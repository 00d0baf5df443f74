//! A zone's `adaptive`: typed into `limit::adaptive::Target` with its defaults, and
//! every bound and combination refused at its `line:col`.

use std::time::Duration;

use super::*;

const UPSTREAMS: &str = "[upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n\
                         [upstreams.api]\nservers = [\"127.0.0.1:9001\"]\n";

/// A zone `z` with `adaptive = {adaptive}` and `extra` lines; the `adaptive` line is 8.
fn zone(adaptive: &str, extra: &str) -> String {
    format!(
        "{SERVER}{UPSTREAMS}[zones.z]\nadaptive = {adaptive}\nkey = \"$binary_remote_addr\"\n\
         rate = \"100r/s\"\n{extra}"
    )
}

fn target(adaptive: &str) -> Option<Target> {
    parse(&zone(adaptive, "")).zones[0].adaptive.clone()
}

fn problem(adaptive: &str, extra: &str) -> (usize, String) {
    let mut found = errors(&zone(adaptive, extra));
    assert_eq!(found.len(), 1, "{found:#?}");
    let (line, _, message) = found.remove(0);
    (line, message)
}

#[test]
fn the_designs_example_is_typed_with_defaults() {
    let t = target(r#"{ upstream = "app", latency = "200ms", min = 0.25 }"#).expect("adaptive");
    assert_eq!(
        t,
        Target {
            upstream: "app".into(),
            latency: Some(Duration::from_millis(200)),
            percentile: 90,
            failures: None,
            in_flight: None,
            min: 250,
            interval: Duration::from_secs(1),
        }
    );
    let t = target(
        r#"{ upstream = "api", failures = "2.5%", in_flight = 40, percentile = 99, interval = "200ms" }"#,
    )
    .expect("adaptive");
    assert_eq!(
        (t.failures, t.in_flight, t.percentile, t.min, t.interval),
        (Some(25), Some(40), 99, 250, Duration::from_millis(200))
    );
    assert_eq!(
        parse(&format!(
            "{SERVER}[zones.z]\nkey = \"$binary_remote_addr\"\nrate = \"1r/s\"\n"
        ))
        .zones[0]
            .adaptive,
        None
    );
}

#[test]
fn a_misspelt_upstream_gets_the_group_it_likely_meant() {
    let (_, message) = problem(r#"{ upstream = "apps", latency = "200ms" }"#, "");
    assert_eq!(message, r#"unknown upstream "apps": did you mean "app"?"#);
}

#[test]
fn an_unknown_upstream_far_from_every_group_is_refused_listing_them() {
    let (line, message) = problem(r#"{ upstream = "db", latency = "200ms" }"#, "");
    assert_eq!(line, 8);
    assert_eq!(message, r#"unknown upstream "db", expected one of "app", "api""#);
}

#[test]
fn adaptive_needs_a_target_and_an_upstream() {
    let (_, message) = problem(r#"{ upstream = "app", min = 0.5 }"#, "");
    assert!(message.contains("needs a target"), "{message}");
    let (_, message) = problem(r#"{ latency = "200ms" }"#, "");
    assert_eq!(message, "missing key `upstream`");
}

#[test]
fn every_bound_is_checked() {
    for (written, says) in [
        (r#"latency = "0ms""#, "greater than zero"),
        (r#"latency = "61s""#, "invalid latency"),
        (r#"latency = "200ms", min = 0.001"#, "invalid min"),
        (r#"latency = "200ms", min = 2"#, "invalid min"),
        (r#"latency = "200ms", percentile = 75"#, "50, 90 or 99"),
        (r#"failures = "0%""#, "invalid failures"),
        (r#"failures = "5""#, "invalid failures"),
        (r#"in_flight = 0"#, "invalid in_flight"),
        (
            r#"latency = "200ms", interval = "50ms""#,
            "invalid interval",
        ),
        (
            r#"latency = "200ms", interval = "250ms""#,
            "multiple of 100ms",
        ),
    ] {
        let (line, message) = problem(&format!(r#"{{ upstream = "app", {written} }}"#), "");
        assert_eq!(line, 8, "{written}: {message}");
        assert!(message.contains(says), "{written}: {message}");
    }
}

#[test]
fn adaptive_is_refused_on_concurrency_and_redis_zones() {
    let text = format!(
        "{SERVER}{UPSTREAMS}[zones.c]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\n\
         max = 2\nadaptive = {{ upstream = \"app\", latency = \"1s\" }}\n"
    );
    let found = errors(&text);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].2.contains("max_in_flight"), "{found:#?}");
    let (_, message) = problem(
        r#"{ upstream = "app", latency = "1s" }"#,
        "backend = \"redis\"\n[redis]\nurl = \"redis://127.0.0.1:6379\"\n",
    );
    assert!(message.contains("local zones"), "{message}");
}

#[test]
fn the_adaptive_example_of_the_docs_is_valid() {
    let doc = include_str!("../../../docs/config.md");
    let section = doc.find("### Adaptive rates\n").expect("the section");
    let start = section + doc[section..].find("```toml\n").expect("a block") + "```toml\n".len();
    let example = &doc[start..start + doc[start..].find("```").expect("its end")];
    let config = parse(&format!("{SERVER}{example}"));
    let api = config.zones.iter().find(|z| z.name == "api").expect("api");
    assert_eq!(api.adaptive.as_ref().map(|t| t.min), Some(250));
}

/// Zones `a` (adaptive with `in_flight`), `l` (adaptive, latency only), `p` (plain) and
/// `c` (`concurrency`), and a location limited by `limit` (the last line).
fn with_limit(limit: &str) -> String {
    format!(
        "{SERVER}{UPSTREAMS}[zones.a]\nkey = \"$binary_remote_addr\"\nrate = \"100r/s\"\n\
         adaptive = {{ upstream = \"app\", latency = \"200ms\", in_flight = 8 }}\n\
         [zones.l]\nkey = \"$binary_remote_addr\"\nrate = \"100r/s\"\n\
         adaptive = {{ upstream = \"app\", latency = \"200ms\" }}\n\
         [zones.p]\nkey = \"$binary_remote_addr\"\nrate = \"100r/s\"\n\
         [zones.c]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 2\n\
         [[location]]\nmatch = \"/\"\nupstream = \"app\"\nlimit = [{limit}]\n"
    )
}

#[test]
fn elastic_is_a_multiplier_or_a_higher_rate() {
    let elastic = |limit: &str| parse(&with_limit(limit)).sites[0].locations[0].limits[0].elastic;
    assert_eq!(
        elastic(r#"{ zone = "a", elastic = "3x" }"#),
        Some(Elastic::Times(3000))
    );
    assert_eq!(
        elastic(r#"{ zone = "a", elastic = "300r/s" }"#),
        Some(Elastic::Rate(Rate::new(300, Period::Second).unwrap()))
    );
    assert_eq!(elastic(r#"{ zone = "a" }"#), None);
}

#[test]
fn elastic_needs_an_adaptive_zone_with_in_flight_and_a_sensible_value() {
    for (limit, says) in [
        (
            r#"{ zone = "p", elastic = "3x" }"#,
            "needs the zone's adaptive upstream",
        ),
        (r#"{ zone = "l", elastic = "3x" }"#, "adaptive `in_flight`"),
        (
            r#"{ zone = "c", elastic = "3x" }"#,
            "`concurrency` zone has none",
        ),
        (r#"{ zone = "a", elastic = "1x" }"#, "1.1x to 100x"),
        (r#"{ zone = "a", elastic = "101x" }"#, "1.1x to 100x"),
        (
            r#"{ zone = "a", elastic = "50r/s" }"#,
            "above the zone's rate 100r/s",
        ),
        (r#"{ zone = "a", elastic = "lots" }"#, "invalid rate"),
    ] {
        let found = errors(&with_limit(limit));
        assert_eq!(found.len(), 1, "{limit}: {found:#?}");
        assert!(found[0].2.contains(says), "{limit}: {found:#?}");
    }
}

#[test]
fn the_elastic_example_of_the_docs_is_valid() {
    let doc = include_str!("../../../docs/config.md");
    let section = doc.find("### Elastic limits\n").expect("the section");
    let start = section + doc[section..].find("```toml\n").expect("a block") + "```toml\n".len();
    let example = &doc[start..start + doc[start..].find("```").expect("its end")];
    let upstreams = "[upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n";
    let config = parse(&format!("{SERVER}{upstreams}{example}"));
    let limit = &config.sites[0].locations[0].limits[0];
    assert_eq!(limit.elastic, Some(Elastic::Times(3000)));
}

/// A zone `w` of `algorithm` at `rate`, adaptive with `in_flight`, `size` as given, and a
/// location limited by `limit`.
fn window_zone(algorithm: &str, rate: &str, size: &str, limit: &str) -> String {
    format!(
        "{SERVER}{UPSTREAMS}[zones.w]\nkey = \"$binary_remote_addr\"\nalgorithm = \"{algorithm}\"\n\
         rate = \"{rate}\"\nsize = \"{size}\"\n\
         adaptive = {{ upstream = \"app\", latency = \"200ms\", in_flight = 8 }}\n\
         [[location]]\nmatch = \"/\"\nupstream = \"app\"\nlimit = [{limit}]\n"
    )
}

#[test]
fn an_elastic_rate_on_a_window_zone_keeps_the_zones_unit() {
    // The window of a key is `now / period`: one kept in seconds while elastic and in
    // hours after would never reset.
    for algorithm in ["fixed_window", "sliding_window", "sliding_log"] {
        let text = window_zone(
            algorithm,
            "10r/h",
            "10m",
            r#"{ zone = "w", elastic = "1r/s" }"#,
        );
        let found = errors(&text);
        assert_eq!(found.len(), 1, "{algorithm}: {found:#?}");
        assert!(
            found[0]
                .2
                .contains("in the unit of the zone's rates (10r/h)"),
            "{found:#?}"
        );
        // In the zone's unit, or as a multiple, it is fine.
        for elastic in ["3600r/h", "3x"] {
            let limit = format!(r#"{{ zone = "w", elastic = "{elastic}" }}"#);
            parse(&window_zone(algorithm, "10r/h", "10m", &limit));
        }
    }
    // A bucket has no windows: any unit.
    let limit = r#"{ zone = "a", elastic = "10000r/m" }"#;
    assert!(parse(&with_limit(limit)).sites[0].locations[0].limits[0]
        .elastic
        .is_some());
}

#[test]
fn a_sliding_log_key_must_fit_its_elastic_ceiling() {
    // 1000 entries of 16 bytes fit a 1m zone's per-key share; 100 times as many do not.
    let fits = window_zone("sliding_log", "1000r/s", "1m", r#"{ zone = "w" }"#);
    parse(&fits);
    let limit = r#"{ zone = "w", elastic = "100x" }"#;
    let found = errors(&window_zone("sliding_log", "1000r/s", "1m", limit));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0]
            .2
            .starts_with("with elastic = \"100x\": a sliding_log key"),
        "{found:#?}"
    );
    // Its soft lane (a quarter of the zone) is sized at the ceiling too: at 8m a key of
    // 3000 fits, and a lane of 1000 does, but not one of 3000.
    let limit = r#"{ zone = "w", soft = "100%" }"#;
    parse(&window_zone("sliding_log", "1000r/s", "8m", limit));
    let limit = r#"{ zone = "w", elastic = "3x", soft = "100%" }"#;
    let found = errors(&window_zone("sliding_log", "1000r/s", "8m", limit));
    assert!(
        found.iter().any(|f| f.2.contains("soft lane")),
        "{found:#?}"
    );
}
