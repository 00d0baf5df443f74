//! The JSON documents of `/status` and `/zones/NAME/keys/KEY`, as structs that serde
//! writes. Maps keep the snapshot's order (upstreams and zones as configured).

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::ser::{Serialize, Serializer};

use super::traffic::{Counts, CLASSES};
use crate::acme::{rfc3339, NameState};
use crate::config::Transport;
use crate::limit::zone::Zone;
use crate::metrics::load::{Failure, SHOWN_SLOTS, SLOT};
use crate::metrics::Answer;
use crate::snapshot::Snapshot;
use crate::state::{GatewayState, Listeners, ReloadFailure};
use crate::upstream::gate::Shed;

/// How many of a zone's most-limited keys `/status` shows.
const TOP_LIMITED: usize = 10;

/// `/status`: the generation in force (its file's SHA-256, and how many reloads took
/// effect or failed), the addresses listened on, each upstream server's passive health,
/// and each zone's keys, memory, and the keys it rejected most over the last minute.
#[derive(serde::Serialize)]
struct Status {
    generation: u64,
    config_sha256: String,
    reloads: Reloads,
    listeners: Vec<String>,
    tls_listeners: Vec<String>,
    upstreams: Ordered<Vec<ServerHealth>>,
    zones: Ordered<ZoneStatus>,
    /// Each group's load signals over the last second, as the adaptive tick last read
    /// them (what the controllers saw).
    upstream_load: Ordered<UpstreamLoad>,
    /// Each group with `max_in_flight`: its gate.
    upstream_concurrency: Ordered<GateStatus>,
    /// Every certificate served, by name: when it stops being valid.
    #[serde(skip_serializing_if = "Ordered::is_empty")]
    certificates: Ordered<String>,
    /// With `[acme]`: each managed name's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    acme: Option<Ordered<ManagedName>>,
    /// The overall counts since start: responses by status class, the zones' delays and
    /// rejections, upstream failures, open connections (`/history` has their rates).
    traffic: Traffic,
}

/// A name ACME manages: `state` as the operator reads it (`valid until …`, `failed:
/// reason, next try at …`), then the same in parts.
#[derive(serde::Serialize)]
struct ManagedName {
    state: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    renew_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_try: Option<String>,
}

fn managed_name(state: &NameState) -> ManagedName {
    let (renew_at, error, next_try) = match state {
        NameState::Valid { renew_at, .. } => (Some(rfc3339(*renew_at)), None, None),
        NameState::Failed {
            reason, next_try, ..
        } => (None, Some(reason.clone()), Some(rfc3339(*next_try))),
        _ => (None, None, None),
    };
    ManagedName {
        state: state.to_string(),
        status: state.word(),
        not_after: state.until().map(rfc3339),
        renew_at,
        error,
        next_try,
    }
}

/// A group's concurrency gate: its limit, what is in flight and waiting now, and the
/// requests it shed, by reason.
#[derive(serde::Serialize)]
struct GateStatus {
    mode: &'static str,
    limit: u32,
    in_flight: u32,
    queue: u32,
    queue_max: u32,
    queue_timeout_ms: u64,
    shed: Ordered<u64>,
    /// With `max_in_flight = "auto"`: the controller's bounds and what it measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    auto: Option<AutoStatus>,
}

#[derive(serde::Serialize)]
struct AutoStatus {
    in_flight_min: u32,
    in_flight_max: u32,
    probe_interval_ms: u64,
    /// The unloaded latency the limit is judged against; absent until measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    min_rtt_ms: Option<f64>,
    /// The limit is pinned to `in_flight_min` while `min_rtt` is measured again.
    probing: bool,
}

fn auto_status(auto: &crate::upstream::gate::Auto) -> AutoStatus {
    let shown = auto.shown();
    AutoStatus {
        in_flight_min: auto.settings.min,
        in_flight_max: auto.settings.max,
        probe_interval_ms: millis(auto.settings.probe_interval),
        min_rtt_ms: shown.min_rtt.map(|d| d.as_secs_f64() * 1000.0),
        probing: shown.probing,
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `upstream_concurrency`: every group that has a gate, in config order.
fn gates(snapshot: &Snapshot) -> Ordered<GateStatus> {
    let gates = snapshot.upstreams.iter().filter_map(|group| {
        let gate = group.gate.as_ref()?;
        let settings = gate.settings();
        let shed = Shed::ALL.map(|reason| (reason.label().to_owned(), gate.shed().get(reason)));
        let status = GateStatus {
            mode: if gate.auto_limit().is_some() {
                "auto"
            } else {
                "fixed"
            },
            limit: gate.limit(),
            in_flight: gate.in_flight(),
            queue: gate.queue_len(),
            queue_max: settings.queue,
            queue_timeout_ms: millis(settings.queue_timeout),
            shed: Ordered(shed.into()),
            auto: gate.auto_limit().map(auto_status),
        };
        Some((group.name.clone(), status))
    });
    Ordered(gates.collect())
}

#[derive(serde::Serialize)]
struct Reloads {
    ok: u64,
    failed: u64,
    /// The last reload that changed nothing, if any did.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_failure: Option<LastFailure>,
}

#[derive(serde::Serialize)]
struct LastFailure {
    at: String,
    error: String,
    /// A good reload came after it: the configuration in force is the file's again.
    past: bool,
}

fn last_failure(failure: ReloadFailure, reloads_ok: u64) -> LastFailure {
    let secs = failure
        .at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    LastFailure {
        at: rfc3339(i64::try_from(secs).unwrap_or(i64::MAX)),
        error: failure.error,
        past: reloads_ok > failure.ok_before,
    }
}

#[derive(serde::Serialize)]
struct ServerHealth {
    server: String,
    healthy: bool,
    fails: u32,
}

#[derive(serde::Serialize)]
struct ZoneStatus {
    algorithm: &'static str,
    keys: usize,
    bytes: usize,
    capacity_bytes: usize,
    evictions: u64,
    /// Bans in force (a Redis zone: those this instance holds), when there are any;
    /// `/bans` lists them.
    #[serde(skip_serializing_if = "is_zero")]
    bans: usize,
    top_limited: Vec<Limited>,
    /// Requests by what the zone answered (`tollgate_limit_decisions_total`'s counts).
    decisions: Ordered<u64>,
    /// A Redis zone's instances: what `on_error = "local"` divides its rate by.
    #[serde(skip_serializing_if = "Option::is_none")]
    instances: Option<InstancesStatus>,
    /// With `adaptive`: the factor every rate is scaled by now.
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_factor: Option<f64>,
    /// With `adaptive` and its `in_flight`: whether `elastic` limits are in force now.
    #[serde(skip_serializing_if = "Option::is_none")]
    elastic: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adaptive: Option<AdaptiveStatus>,
}

/// An adaptive zone's last step: the signal that decided it (the worst one when none
/// was over), its value (absent while unknown) and target, in ms for a latency, as a
/// ratio for failures, as a count for in-flight.
#[derive(serde::Serialize)]
struct AdaptiveStatus {
    upstream: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<f64>,
    cuts: u64,
    raises: u64,
}

/// An adaptive zone's `rate_factor`, `elastic` and `adaptive`.
fn adaptive_status(zone: &Zone) -> (Option<f64>, Option<bool>, Option<AdaptiveStatus>) {
    let Some(adaptive) = &zone.adaptive else {
        return (None, None, None);
    };
    let control = &adaptive.control;
    let reading = control.stepping().aimd.last_reading();
    let shown = reading.map(|r| r.shown());
    let status = AdaptiveStatus {
        upstream: adaptive.target.upstream.clone(),
        signal: reading.map(|r| r.name(adaptive.target.percentile)),
        value: shown.and_then(|(value, _)| value),
        target: shown.map(|(_, target)| target),
        cuts: control.cuts.load(Ordering::Relaxed),
        raises: control.raises.load(Ordering::Relaxed),
    };
    let word = control.factor.read();
    let factor = f64::from(word.permille()) / 1000.0;
    let elastic = adaptive.target.in_flight.map(|_| word.spare());
    (Some(factor), elastic, Some(status))
}

/// `instances` is the number divided by; `from` says where it comes from (`counted`,
/// `configured`, or `unknown` before any heartbeat answered: then 1); `live` is the
/// count last seen, whether or not `instances` overrides it.
#[derive(serde::Serialize)]
struct InstancesStatus {
    instances: u64,
    from: &'static str,
    live: Option<u64>,
}

#[derive(serde::Serialize)]
struct Limited {
    /// The key as text; `…` at the end when the stored key was cut short.
    key: String,
    rejected: u64,
}

/// One group's load: `latency_ms` members and `failure_ratio` are left out while
/// unknown (under 10 responses in the window).
#[derive(serde::Serialize)]
struct UpstreamLoad {
    in_flight: u64,
    window_ms: u64,
    samples: u64,
    latency_ms: Latencies,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_ratio: Option<f64>,
}

#[derive(serde::Serialize)]
struct Latencies {
    #[serde(skip_serializing_if = "Option::is_none")]
    p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p90: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p99: Option<f64>,
}

fn upstream_load(snapshot: &Snapshot) -> Ordered<UpstreamLoad> {
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    let groups = snapshot.upstreams.iter().map(|group| {
        let signals = group.stats.signals();
        let load = UpstreamLoad {
            in_flight: signals.in_flight,
            window_ms: (SLOT * SHOWN_SLOTS as u32).as_millis() as u64,
            samples: signals.samples,
            latency_ms: Latencies {
                p50: ms(signals.p50),
                p90: ms(signals.p90),
                p99: ms(signals.p99),
            },
            failure_ratio: signals.failure_share.map(|p| f64::from(p) / 1000.0),
        };
        (group.name.clone(), load)
    });
    Ordered(groups.collect())
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A JSON object whose members keep the order they were pushed in.
pub(super) struct Ordered<T>(pub Vec<(String, T)>);

impl<T> Ordered<T> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<T: Serialize> Serialize for Ordered<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, value)| (name, value)))
    }
}

/// `/status`'s `traffic`: the counts as named members.
#[derive(serde::Serialize)]
struct Traffic {
    requests: Ordered<u64>,
    delayed: u64,
    rejected: u64,
    upstream_failures: Ordered<u64>,
    connections: u64,
}

impl From<Counts> for Traffic {
    fn from(counts: Counts) -> Traffic {
        Traffic {
            requests: named(&CLASSES, &counts.requests),
            delayed: counts.delayed,
            rejected: counts.rejected,
            upstream_failures: named(&Failure::ALL.map(Failure::label), &counts.upstream_failures),
            connections: counts.connections,
        }
    }
}

pub(super) fn named<T: Copy>(names: &[&str], values: &[T]) -> Ordered<T> {
    let members = names.iter().zip(values);
    Ordered(members.map(|(n, v)| ((*n).to_owned(), *v)).collect())
}

/// The addresses listened on over `transport`, as `/status` lists them.
fn shown(listeners: &Listeners, transport: Transport) -> Vec<String> {
    listeners.of(transport).map(|a| a.to_string()).collect()
}

/// The `/status` document, one line of JSON.
pub(super) fn status(state: &GatewayState) -> String {
    let snapshot = state.snapshot.load();
    let listeners = state.listeners.load();
    let now = Instant::now();
    let upstreams = snapshot.upstreams.iter().map(|group| {
        let servers = group.servers.iter().map(|server| ServerHealth {
            server: server.addr.to_string(),
            healthy: server.health.is_available(now),
            fails: server.health.fails(),
        });
        (group.name.to_string(), servers.collect())
    });
    let zones = snapshot.zones.iter().map(|zone| {
        let status = zone_status(zone, state, &snapshot, now);
        (zone.name.to_string(), status)
    });
    let reloads_ok = state.reloads_ok.load(Ordering::Relaxed);
    let document = Status {
        generation: snapshot.generation,
        config_sha256: snapshot.config_sha256.to_string(),
        reloads: Reloads {
            ok: reloads_ok,
            failed: state.reloads_failed.load(Ordering::Relaxed),
            last_failure: state
                .last_reload_failure()
                .map(|failure| last_failure(failure, reloads_ok)),
        },
        listeners: shown(&listeners, Transport::Tcp),
        tls_listeners: shown(&listeners, Transport::Tls),
        upstreams: Ordered(upstreams.collect()),
        zones: Ordered(zones.collect()),
        upstream_load: upstream_load(&snapshot),
        upstream_concurrency: gates(&snapshot),
        certificates: Ordered(
            super::certificates(state, &snapshot)
                .into_iter()
                .map(|(name, not_after)| (name, rfc3339(not_after)))
                .collect(),
        ),
        acme: snapshot.pipeline.acme.as_ref().map(|_| {
            let states = state.acme.states();
            Ordered(
                states
                    .iter()
                    .map(|(n, s)| (n.clone(), managed_name(s)))
                    .collect(),
            )
        }),
        traffic: Counts::of(&state.metrics).into(),
    };
    line(&document)
}

/// A zone as `/status` shows it: its store, bans, decisions, most limited keys, instances
/// (a Redis zone) and adaptive state.
fn zone_status(zone: &Zone, state: &GatewayState, snapshot: &Snapshot, now: Instant) -> ZoneStatus {
    let stats = zone.stats();
    let counted = state.metrics.zone_stats(&zone.name);
    let top = counted
        .as_ref()
        .map(|stats| stats.top_limited(now, TOP_LIMITED))
        .unwrap_or_default();
    let decisions = Answer::ALL.map(|outcome| {
        let count = counted.as_ref().map_or(0, |stats| stats.decided(outcome));
        (outcome.label().to_owned(), count)
    });
    let top_limited = top.into_iter().map(|((key, cut), rejected)| {
        let mut key = zone.template.text_of(&key);
        if cut {
            key.push('…');
        }
        Limited { key, rejected }
    });
    let (rate_factor, elastic, adaptive) = adaptive_status(zone);
    ZoneStatus {
        algorithm: zone.algorithm.name(),
        keys: stats.keys,
        bytes: stats.bytes,
        capacity_bytes: stats.capacity_bytes,
        evictions: stats.evictions,
        bans: zone.bans.in_force(now),
        top_limited: top_limited.collect(),
        decisions: Ordered(decisions.into()),
        instances: zone.redis.map(|settings| {
            let live = snapshot
                .redis
                .as_ref()
                .and_then(|r| r.fleet().live(&zone.name));
            let divisor = settings.instances(live);
            InstancesStatus {
                instances: divisor.count(),
                from: divisor.source(),
                live,
            }
        }),
        rate_factor,
        elastic,
        adaptive,
    }
}

/// `GET /zones/NAME/keys/KEY`: whether the key is stored, and its state if it is.
#[derive(serde::Serialize)]
pub(super) struct KeyState<'a> {
    pub zone: &'a str,
    pub key: &'a str,
    pub stored: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// `DELETE /zones/NAME/keys/KEY`: whether there was a key to forget.
#[derive(serde::Serialize)]
pub(super) struct KeyReset<'a> {
    pub zone: &'a str,
    pub key: &'a str,
    pub reset: bool,
}

/// `document` as one line of JSON and a newline.
pub(super) fn line(document: &impl Serialize) -> String {
    // Serializing these structs cannot fail: every map key is a string.
    let mut text = serde_json::to_string(document).unwrap_or_default();
    text.push('\n');
    text
}
