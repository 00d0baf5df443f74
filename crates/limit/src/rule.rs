//! One item of a location's `limit` list, ready to use: its zone and what the item adds
//! to it (`burst`, `delay`, `dry_run`, `count_status`, `ban`, `elastic`, `soft`).

use std::sync::Arc;

use super::adaptive::Elastic;
use super::bans::Ban;
use super::soft::Share;
use super::zone::Zone;
use super::Params;

/// Most zones one location may list (the config refuses more): a decision keeps its keys
/// and locks in arrays of this size.
pub const MAX_LIMITS: usize = 8;

/// One item of a location's `limit` list, ready to use.
#[derive(Clone)]
pub struct LimitRule {
    pub zone: Arc<Zone>,
    pub burst: u64,
    /// Excess requests let through at once; [`NODELAY`](super::NODELAY) for `nodelay`.
    pub delay: u64,
    pub dry_run: bool,
    /// `count_status`: only answers with these statuses are charged (see [`super::settle`]).
    pub count: Option<StatusSet>,
    /// Whether an admitted request's charge waits for its answer to be settled
    /// (`count_status`, or the location's `cost_from`).
    pub settles: bool,
    /// The item's `ban`: its rejections are strikes (`admission::penalty`).
    pub ban: Option<Ban>,
    /// The item's `elastic`: the rate while the zone's upstream has spare capacity.
    pub elastic: Option<Elastic>,
    /// `soft`: the share over the limit let through, marked (see [`super::soft`]).
    pub soft: Option<Share>,
}

impl LimitRule {
    /// What a request on `plan` taking `cost` units asks of this rule's zone.
    pub fn params(&self, plan: Option<usize>, cost: u64) -> Params {
        Params {
            rate: self.zone.effective_rate(plan, self.elastic),
            burst: self.burst,
            delay: self.delay,
            cost,
            max: self.zone.max(),
        }
    }
}

/// HTTP statuses 100 to 599, as a set (`count_status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusSet {
    bits: [u64; 8],
}

impl StatusSet {
    const FIRST: u16 = 100;
    const LAST: u16 = 599;

    /// Adds `first..=last`; statuses outside 100–599 are ignored (the config refuses them).
    pub fn insert_range(&mut self, first: u16, last: u16) {
        for status in first.max(Self::FIRST)..=last.min(Self::LAST) {
            let bit = usize::from(status - Self::FIRST);
            self.bits[bit / 64] |= 1 << (bit % 64);
        }
    }

    pub fn contains(&self, status: u16) -> bool {
        if !(Self::FIRST..=Self::LAST).contains(&status) {
            return false;
        }
        let bit = usize::from(status - Self::FIRST);
        self.bits[bit / 64] & (1 << (bit % 64)) != 0
    }
}
