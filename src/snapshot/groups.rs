//! The upstream groups of a generation, and their gates: a group keeps the gate in force
//! while its `max_in_flight`, `queue` and `queue_timeout` stay as they were.

use std::sync::Arc;

use crate::config::{self, Config, MaxInFlight};
use crate::metrics::Metrics;
use crate::upstream::gate::{Gate, GateSettings};
use crate::upstream::{Group, GroupSpec};

/// Every group of `config`, in its order; `previous` are the groups in force.
pub(super) fn build(
    config: &Config,
    metrics: &Metrics,
    workers: usize,
    previous: &[Arc<Group>],
) -> Vec<Arc<Group>> {
    config
        .upstreams
        .iter()
        .map(|u| {
            let gate = gate(u, previous);
            Arc::new(Group::new(group_spec(u, metrics, gate), workers))
        })
        .collect()
}

/// The group's gate: the one in force for the group of that name when its limit, queue
/// and wait are unchanged, else a new one (counting its sheds where the old one did). An
/// `"auto"` gate is kept, its controller going on where it was, only while the group's
/// servers are the same too: what it measured is theirs.
fn gate(u: &config::Upstream, previous: &[Arc<Group>]) -> Option<Arc<Gate>> {
    let wanted = u.concurrency?;
    let settings = GateSettings {
        queue: wanted.queue,
        queue_timeout: wanted.queue_timeout,
    };
    let group = previous.iter().find(|group| group.name == u.name);
    let old = group.and_then(|group| group.gate.as_ref());
    let same_servers = || {
        let addrs = u.servers.iter().map(|s| s.addr);
        group.is_some_and(|g| g.servers.iter().map(|s| s.addr).eq(addrs))
    };
    let same_limit = |old: &Gate| match wanted.max_in_flight {
        MaxInFlight::Fixed(n) => old.auto_limit().is_none() && old.limit() == n,
        MaxInFlight::Auto(auto) => {
            old.auto_limit().is_some_and(|a| a.settings == auto) && same_servers()
        }
    };
    if let Some(old) = old.filter(|old| old.settings() == settings && same_limit(old)) {
        return Some(Arc::clone(old));
    }
    let shed = old.map_or_else(Arc::default, |old| Arc::clone(old.shed()));
    Some(Arc::new(match wanted.max_in_flight {
        MaxInFlight::Fixed(n) => Gate::new(n, settings, shed),
        MaxInFlight::Auto(auto) => Gate::auto(auto, settings, shed),
    }))
}

pub(super) fn group_spec(u: &config::Upstream, metrics: &Metrics, gate: Option<Arc<Gate>>) -> GroupSpec {
    GroupSpec {
        name: u.name.clone(),
        servers: u
            .servers
            .iter()
            .map(|s| {
                let failures = metrics.server(&u.name, &s.addr.to_string());
                (s.addr, s.weight, failures)
            })
            .collect(),
        policy: u.balance,
        connect_timeout: u.connect_timeout,
        read_timeout: u.read_timeout,
        keepalive: u.keepalive,
        max_fails: u.max_fails,
        fail_timeout: u.fail_timeout,
        tls: crate::upstream::tls::GroupTls::of(u),
        stats: metrics.upstream(&u.name),
        gate,
    }
}
