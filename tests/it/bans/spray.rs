//! A client that sprays fresh keys into the penalty box (issue 31.4): with the key an API
//! key it chooses, each fresh key it gets banned takes room in the zone's ban table. A
//! full table refuses new bans; it never forgets a ban still running, so the client cannot
//! lift its own ban that way.

use std::net::SocketAddr;

use super::metric;
use crate::support::raw::{api_key_requests as requests, pipelined};
use crate::support::*;

/// The issue's zone: keyed by `X-Api-Key`, 5 requests a minute, 5 rejections within a
/// minute ban for 15 minutes; the ban table at its smallest (about 150 bans of short keys).
/// `more` is appended (more locations).
fn config(up: SocketAddr, more: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
[zones.api]
key = "$http_x_api_key"
rate = "5r/m"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
limit = [{{ zone = "api", burst = 0, ban = {{ after = 5, within = "1m", for = "15m", size = "16k" }} }}]
{more}"#
    )
}

/// Six requests each for `per_client` fresh keys named `{prefix}-{client}-{i}` from each
/// of `clients` connections at once: each key is banned, or refused a ban.
async fn spray(addr: SocketAddr, prefix: &str, clients: usize, per_client: usize) {
    let sprays: Vec<_> = (0..clients)
        .map(|client| {
            let keys = (0..per_client).map(|i| format!("{prefix}-{client}-{i:03}"));
            let bytes = keys.flat_map(|key| requests(&key, 6));
            tokio::spawn(pipelined(addr, bytes.collect(), 6 * per_client))
        })
        .collect();
    for spray in sprays {
        let statuses = within(30, spray).await.unwrap();
        assert!(
            statuses.iter().all(|s| [200, 429].contains(s)),
            "{statuses:?}"
        );
    }
}

#[tokio::test]
async fn a_spray_of_fake_bans_cannot_push_out_a_running_ban() {
    let _shared = shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr, ""));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());

    // The victim's key: one request passes, five are rejected (five strikes), then banned.
    let victim = pipelined(addr, requests("victim", 7), 7).await;
    assert_eq!(victim, [200, 429, 429, 429, 429, 429, 403]);

    // Six requests each for 600 fresh keys, four connections at once: four times what
    // the table holds, so that every shard of it is full.
    spray(addr, "fake", 4, 150).await;

    let after = pipelined(addr, requests("victim", 3), 3).await;
    assert_eq!(after, [403, 403, 403], "the victim's ban holds");
    let refused = metric(admin, r#"tollgate_bans_refused_total{zone="api"}"#).await;
    let held = metric(admin, r#"tollgate_bans{zone="api"}"#).await;
    assert!(refused > 0, "a full table refuses new bans");
    assert!((100..=200).contains(&held), "{held} bans in 16k");
    assert_eq!(
        metric(admin, r#"tollgate_bans_imposed_total{zone="api"}"#).await,
        held,
        "a ban refused is not imposed"
    );
}

#[tokio::test]
async fn a_reload_that_gives_a_larger_size_makes_room_and_the_largest_size_given_wins() {
    let _shared = shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr, ""));
    let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
    spray(addr, "fake", 4, 150).await;
    let refused = r#"tollgate_bans_refused_total{zone="api"}"#;
    let (before, held) = (
        metric(admin, refused).await,
        metric(admin, r#"tollgate_bans{zone="api"}"#).await,
    );
    assert!(before > 0, "full");

    // Another location bans with the zone in a table of 64k: the zone's table grows to
    // it, the bans it holds kept.
    let more = r#"
[[location]]
match = "/more"
upstream = "app"
limit = [{ zone = "api", burst = 0, ban = { after = 5, within = "1m", for = "15m", size = "64k" } }]
"#;
    assert_eq!(gw.reload(&parse(&config(up.addr, more))).unwrap(), 2);
    spray(addr, "new", 2, 100).await;
    assert_eq!(metric(admin, refused).await, before, "room for each");
    assert_eq!(
        metric(admin, r#"tollgate_bans{zone="api"}"#).await,
        held + 200
    );
}
