//! The zones a snapshot holds: each built from its `[zones.NAME]` (plans by id, the
//! smallest `soft` share its locations give it), taking over a zone of the previous
//! snapshot that can pass its state on, its bans kept across a reload where they still
//! name the same clients, and its ban table sized as its limit items ask.

use std::sync::Arc;
use std::time::Instant;

use crate::config::{self, Config};
use crate::limit::key::{PlanFrom, Template};
use crate::limit::zone::{Spec, Zone};
use crate::limit::{Period, Rate};

/// Plan ids: every plan name any zone defines, in name order; a plan's id is its index.
pub(super) fn plan_ids(config: &Config) -> Vec<&str> {
    let mut plans: Vec<&str> = config
        .zones
        .iter()
        .flat_map(|z| z.plans.iter().map(|(name, _)| name.as_str()))
        .collect();
    plans.sort_unstable();
    plans.dedup();
    plans
}

/// Every zone in config order: taken over from `previous` when one there can pass its
/// state on, else new and empty.
pub(super) fn zones(config: &Config, plans: &[&str], previous: &[Arc<Zone>]) -> Vec<Arc<Zone>> {
    let (epoch, wall) = (Instant::now(), std::time::SystemTime::now());
    config
        .zones
        .iter()
        .enumerate()
        .map(|(index, z)| {
            let spec = zone_spec(z, plans, soft_share(config, index));
            let kept = previous.iter().find(|old| old.can_pass_state_to(&spec));
            let mut zone = match kept {
                Some(old) => old.succeed(spec),
                None => Zone::new(spec, epoch, wall),
            };
            keep_bans(&mut zone, previous);
            Arc::new(zone)
        })
        .collect()
}

/// The smallest `soft` share a location gives zone `index`: the zone then has a soft
/// lane, whose keys drain at that share of its slowest rate.
fn soft_share(config: &Config, index: usize) -> Option<config::Share> {
    let locations = config.sites.iter().flat_map(|site| &site.locations);
    let limits = locations.flat_map(|location| &location.limits);
    limits
        .filter(|l| l.zone == index)
        .filter_map(|l| l.soft)
        .min()
}

/// Bans outlive a reload while their zone keeps its name, key template (a key then
/// still names the same client) and backend, even when its algorithm, size or rates
/// change. A zone moved between local and Redis starts with no bans: a Redis zone's
/// table holds copies checked against Redis, a local zone's the bans themselves.
fn keep_bans(zone: &mut Zone, previous: &[Arc<Zone>]) {
    let same = |old: &&Arc<Zone>| {
        old.name == zone.name
            && old.template == zone.template
            && old.redis.is_some() == zone.redis.is_some()
    };
    if let Some(old) = previous.iter().find(same) {
        zone.bans = Arc::clone(&old.bans);
    }
}

/// Sizes each zone's ban table as its items' `ban` ask: the largest `size` they give
/// (the default when no item bans with the zone).
pub(super) fn size_bans(config: &Config, zones: &[Arc<Zone>]) {
    let locations = config.sites.iter().flat_map(|site| &site.locations);
    let limits: Vec<_> = locations.flat_map(|location| &location.limits).collect();
    for (index, zone) in zones.iter().enumerate() {
        let asked = limits.iter().filter(|l| l.zone == index);
        let size = asked.filter_map(|l| l.ban.map(|ban| ban.size)).max();
        zone.bans
            .resize(size.unwrap_or(crate::limit::bans::DEFAULT_SIZE));
    }
}

/// The zone's settings for the limiter, its plans' rates in plan-id order.
fn zone_spec(z: &config::Zone, plans: &[&str], soft: Option<config::Share>) -> Spec {
    let plan_rates = plans
        .iter()
        .map(|plan| {
            z.plans
                .iter()
                .find(|(name, _)| name == plan)
                .map(|(_, rate)| *rate)
        })
        .collect();
    Spec {
        name: z.name.clone(),
        template: Template::new(z.key.clone(), z.ipv4_prefix, z.ipv6_prefix),
        algorithm: z.algorithm,
        // `concurrency` has no rate; any value serves, it is never read.
        rate: z.rate.unwrap_or(ONE_PER_SECOND),
        plan_rates,
        max: z.max,
        size: usize::try_from(z.size).unwrap_or(usize::MAX),
        redis: z.redis,
        adaptive: z.adaptive.clone(),
        soft,
        plan_from: z.plan_from.clone().map(|text| PlanFrom {
            text,
            names: plans.iter().map(|name| Box::from(*name)).collect(),
        }),
    }
}

const ONE_PER_SECOND: Rate = Rate {
    count: std::num::NonZeroU64::MIN,
    period: Period::Second,
};
