//! Zones kept in Redis ("Zones in Redis" in docs/config.md), so that every instance
//! pointing at one Redis shares one limit. The admission layer (`crate::admission`) asks
//! through one interface, `RemoteZone` (`zone.rs`): a key's decision, its lane's, its
//! ban's, a ban shared, the zone's instances; what answered requests owe or give back
//! goes through `in_background`, and leased units through `Leases`. Key names, script
//! modes and connections stay in here. What these calls mean to the limiter is in
//! `limit::remote`, as values.
//!
//! A decision is one atomic Lua script on one Redis key, `tollgate:<zone>:<key>`: it
//! reads the key's state, decides with the same integer arithmetic as the local
//! algorithm, charges an admitted request, and sets a TTL equal to the time the state
//! needs to drain. Its clock is Redis's own `TIME`, so instances whose clocks disagree
//! still agree. The script is sent by SHA (`EVALSHA`) and loaded again when Redis
//! answers `NOSCRIPT` (after a restart or `SCRIPT FLUSH`).

mod backend;
mod bans;
mod connection;
pub mod heartbeat;
mod lease;
mod scripts;
mod zone;

pub use backend::{Backend, SetBan};
pub(crate) use backend::StoredBan;
pub use bans::{ban_key, zone_ban_prefix};
pub(crate) use bans::parse_ban_key;
pub(crate) use heartbeat::Announcement;
pub use heartbeat::Fleet;
pub(crate) use lease::{Fetch, First, Leases};
pub(crate) use scripts::BanOr;
pub(crate) use zone::{in_background, RemoteZone, Settle};
pub use scripts::Reply;
// Only the tests run a script in a mode of their choice (tests/it/redis_*.rs).
#[cfg(feature = "testing")]
pub use scripts::Mode;
// Only the tests run a script with a time of their own (tests/it/redis_scripts.rs).
#[cfg(feature = "testing")]
pub use scripts::{Scripts, TimeSource};

/// The Redis key of `key` in zone `zone`: `tollgate:<zone>:<key>`, the key's bytes as
/// they are (no hash tag: a cluster spreads a zone's keys over every shard).
pub fn redis_key(zone: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + zone.len() + key.len());
    out.extend_from_slice(b"tollgate:");
    out.extend_from_slice(zone.as_bytes());
    out.push(b':');
    out.extend_from_slice(key);
    out
}

/// What every soft lane key starts with: a prefix no zone key (`tollgate:`) or ban key
/// (`tollgate-ban:`) has, so no client's key, whatever its bytes, names another's lane.
pub(crate) const SOFT_PREFIX: &[u8] = b"tollgate-soft:";

/// The Redis key of `key`'s soft lane in zone `zone` (`soft`, `limit::soft`):
/// `tollgate-soft:<zone>:<key>`. A lane call touches this one key (it reads no ban), so
/// it needs no hash tag: it goes wherever its bytes hash, as a zone key does.
pub(crate) fn soft_key(zone: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SOFT_PREFIX.len() + zone.len() + 1 + key.len());
    out.extend_from_slice(SOFT_PREFIX);
    out.extend_from_slice(zone.as_bytes());
    out.push(b':');
    out.extend_from_slice(key);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prefixed_with_the_zone_and_keep_their_bytes() {
        assert_eq!(
            redis_key("per_ip", &[10, 0, 0, 1]),
            b"tollgate:per_ip:\x0a\x00\x00\x01"
        );
        assert_eq!(redis_key("api", b"k:1"), b"tollgate:api:k:1");
    }

    #[test]
    fn a_lane_key_can_never_be_a_zone_key() {
        assert_eq!(soft_key("api", b"k"), b"tollgate-soft:api:k");
        // A client whose key ends in what a lane key adds still names its own key.
        assert_ne!(redis_key("api", b"k:soft"), soft_key("api", b"k"));
        assert!(!soft_key("api", b"k").starts_with(b"tollgate:"));
    }
}
