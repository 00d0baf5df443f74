//! `GET /keys/KEY`: one client key as every zone sees it, for the admin page's "look up
//! a key": in each zone, the key's stored state and ban, and, at each location whose
//! `limit` list names the zone, what its next request there would get (decided without
//! charging anything). KEY is percent-encoded text, read by each zone as its own keys are
//! (an address in a zone keyed by `$binary_remote_addr`).

use std::time::Instant;

use serde::Serialize;

use crate::limit::{Decision, Verdict};
use crate::snapshot::Snapshot;

/// The answer: the key, and each zone's view of it.
#[derive(Serialize)]
pub(super) struct Looked<'a> {
    key: &'a str,
    zones: Vec<InZone<'a>>,
}

#[derive(Serialize)]
struct InZone<'a> {
    zone: &'a str,
    algorithm: &'static str,
    stored: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    /// Milliseconds its ban has left, when banned.
    #[serde(skip_serializing_if = "Option::is_none")]
    banned_ms: Option<u128>,
    /// Kept in Redis: the local state is only `on_error = "local"`'s.
    redis: bool,
    next: Vec<Next>,
}

/// What the key's next request at one location would get.
#[derive(Serialize)]
struct Next {
    location: String,
    /// `pass`, `delay`, `reject`, or `banned`.
    verdict: &'static str,
    remaining: u64,
    /// How long it would wait (`delay`) or be refused for (`reject`), in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    wait_ms: Option<u64>,
}

/// `text` as every zone of `snapshot` sees it at `now`.
pub(super) fn look<'a>(snapshot: &'a Snapshot, text: &'a str, now: Instant) -> Looked<'a> {
    let zones = snapshot.zones.iter().map(|zone| {
        let key = zone.template.key_of(text.as_bytes());
        let state = zone.state_of(&key);
        let banned = zone.bans.get(&key, now).map(|ban| ban.until.saturating_duration_since(now));
        let mut next = Vec::new();
        for site in &snapshot.pipeline.sites.sites {
            for location in &site.locations {
                let policy = &location.limits;
                for rule in policy.rules().iter().filter(|rule| std::ptr::eq(&*rule.zone, &**zone)) {
                    let decision = zone.peek(&key, now, &rule.params(None, policy.cost()));
                    let label = match &*location.names.0 {
                        "" => location.names.1.to_string(),
                        site => format!("{site} {}", location.names.1),
                    };
                    next.push(next_request(label, decision, banned.is_some()));
                }
            }
        }
        InZone {
            zone: &zone.name,
            algorithm: zone.algorithm.name(),
            stored: state.is_some(),
            state,
            banned_ms: banned.map(|left| left.as_millis()),
            redis: zone.redis.is_some(),
            next,
        }
    });
    Looked {
        key: text,
        zones: zones.collect(),
    }
}

fn next_request(location: String, decision: Decision, banned: bool) -> Next {
    let millis = |nanos: u64| nanos / 1_000_000;
    let (verdict, wait_ms) = match decision.verdict {
        _ if banned => ("banned", None),
        Verdict::Pass => ("pass", None),
        Verdict::Delay(nanos) => ("delay", Some(millis(nanos))),
        Verdict::Reject { retry_after } => ("reject", Some(millis(retry_after))),
    };
    Next {
        location,
        verdict,
        remaining: decision.remaining,
        wait_ms,
    }
}
