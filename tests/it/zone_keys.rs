//! A request's zone keys, rendered once per request (`limit::keys::Keys`): each rule's
//! key where the decision, the penalty box, a Redis zone and the sketch read it.
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::HeaderMap;

use tollgate::limit::key::Template;
use tollgate::limit::keys::Keys;
use tollgate::limit::rule::LimitRule;
use tollgate::limit::zone::{Spec, Zone};
use tollgate::limit::{Algorithm, Period, Rate};
use tollgate::vars::{Request, VarText};

fn rule(key: &str) -> LimitRule {
    let zone = Zone::new(
        Spec {
            name: key.into(),
            template: Template::new(VarText::parse(key).expect("a key"), 24, 64),
            algorithm: Algorithm::LeakyBucket,
            rate: Rate::new(1, Period::Second).expect("a rate"),
            plan_rates: Vec::new(),
            max: 0,
            size: 1 << 16,
            redis: None,
            adaptive: None,
            soft: None,
            plan_from: None,
        },
        Instant::now(),
        SystemTime::now(),
    );
    LimitRule {
        zone: Arc::new(zone),
        burst: 0,
        delay: 0,
        dry_run: false,
        count: None,
        settles: false,
        ban: None,
        elastic: None,
        soft: None,
    }
}

#[test]
fn each_rule_has_its_key_and_an_empty_one_none() {
    let rules = [
        rule("$binary_remote_addr"),
        rule("$http_x_api_key"),
        rule("k:$remote_addr"),
    ];
    let mut headers = HeaderMap::new();
    let client = IpAddr::from([192, 0, 2, 77]);
    let keys = Keys::render(&rules, &Request::new(client, &headers), Vec::new());
    assert_eq!(keys.get(0), Some(&[192, 0, 2, 0][..]), "masked to /24");
    assert_eq!(keys.get(1), None, "no header: the zone does not apply");
    assert_eq!(keys.get(2), Some(&b"k:192.0.2.77"[..]));
    assert_eq!(keys.get(3), None, "past the list");
    headers.insert("x-api-key", "abc".parse().expect("a value"));
    // The buffer of a request before is reused, its old keys gone.
    let again = Keys::render(&rules, &Request::new(client, &headers), keys.into_buffer());
    assert_eq!(again.get(1), Some(&b"abc"[..]));
    assert_eq!(again.bytes(), b"\xc0\x00\x02\x00abck:192.0.2.77");
}

#[test]
fn a_selection_renumbers_the_keys_it_keeps() {
    let rules = [rule("a"), rule("$http_none"), rule("c")];
    let headers = HeaderMap::new();
    let client = IpAddr::from([192, 0, 2, 1]);
    let keys = Keys::render(&rules, &Request::new(client, &headers), Vec::new());
    let selected = keys.select(&[2, 1]);
    assert_eq!(selected.get(0), Some(&b"c"[..]));
    assert_eq!(selected.get(1), None);
    assert_eq!(selected.bytes(), b"c");
}
