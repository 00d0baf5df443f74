//! A Redis zone's bans in Redis: one key per ban, `tollgate-ban:<zone>:{TAG}:<key>`,
//! with a TTL (PX) equal to the time left and a value that says why (see `set_ban.lua`).
//! The prefix is one no zone's state key (`tollgate:<zone>:<key>`) can have, whatever
//! the zone's name, so no client's key can write or read a ban. A lifted ban leaves a
//! short tombstone (`lift_ban.lua`), so that a ban imposed before the lift whose write
//! lands after it is refused (a ban imposed again within that moment is refused too).
//!
//! The decision script reads a key's ban key in the same call (`ban.lua`), and Redis
//! Cluster runs a script only on keys of one hash slot. The decision key
//! (`tollgate:<zone>:<key>`) goes wherever its bytes hash; the ban key follows it
//! through its hash tag `{TAG}`: a short string, taken from a table made when the
//! backend is (never on a request), whose slot is the decision key's slot. On one server
//! the tag changes nothing.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::{redis_key, Backend, SetBan};
use crate::limit::bans::{Bans, Entry};
use crate::limit::Arrival;

/// What every ban key starts with.
pub(super) const BAN_PREFIX: &[u8] = b"tollgate-ban:";

/// The least time a lifted ban's tombstone refuses a write of a ban (it lasts twice the
/// `[redis]` timeout if longer): a write is late by at most the timeout.
pub(super) const MIN_TOMBSTONE: Duration = Duration::from_secs(1);

/// Redis Cluster's hash slots.
const SLOTS: usize = 16_384;

/// The CRC16 (XMODEM) table: `CRC_TABLE[b]` is the CRC of the byte `b`.
const CRC_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

/// The CRC16 (XMODEM) Redis Cluster hashes keys with, a byte at a time.
fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (crc << 8) ^ CRC_TABLE[usize::from((crc >> 8) as u8 ^ byte)]
    })
}

/// The hash slot of `key`: of its hash tag (the bytes between the first `{` and the next
/// `}`, when not empty), else of the whole key.
pub(super) fn slot_of(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tag.unwrap_or(key)) % SLOTS as u16
}

static TAGS: OnceLock<Box<[[u8; 4]]>> = OnceLock::new();

/// Makes the tag table now (about 240,000 CRCs of at most 4 bytes, a few ms), so that no
/// request makes it: called when a backend is made.
pub(super) fn prepare_tags() {
    tags();
}

/// A hash tag per slot: `TAGS[s]` is a string of 1 to 4 letters and digits whose slot is
/// `s`. Made once, 64 KiB.
fn tags() -> &'static [[u8; 4]] {
    TAGS.get_or_init(|| {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut tags = vec![[0u8; 4]; SLOTS];
        let mut left = SLOTS;
        'lengths: for len in 1..=4usize {
            let combinations = ALPHABET.len().pow(len as u32);
            for mut n in 0..combinations {
                let mut tag = [0u8; 4];
                for byte in tag.iter_mut().take(len) {
                    *byte = ALPHABET[n % ALPHABET.len()];
                    n /= ALPHABET.len();
                }
                let slot = usize::from(crc16(&tag[..len])) % SLOTS;
                if tags[slot][0] == 0 {
                    tags[slot] = tag;
                    left -= 1;
                    if left == 0 {
                        break 'lengths;
                    }
                }
            }
        }
        tags.into_boxed_slice()
    })
}

/// The tag of `slot` (its bytes up to the first zero).
fn tag_of(slot: u16) -> &'static [u8] {
    let tag = &tags()[usize::from(slot) % SLOTS];
    let len = tag.iter().position(|&b| b == 0).unwrap_or(tag.len());
    &tag[..len]
}

/// What every ban key of zone `zone` starts with: `tollgate-ban:<zone>:` (zone names
/// hold no `:`, `{`, or glob character, so it is also a `SCAN` pattern's prefix).
pub fn zone_ban_prefix(zone: &str) -> Vec<u8> {
    [BAN_PREFIX, zone.as_bytes(), b":"].concat()
}

/// The Redis key of `key`'s ban in zone `zone`, whose decision key is `call_key`
/// ([`redis_key`]`(zone, key)`, already made for the call): in its slot.
pub(crate) fn ban_key_of(call_key: &[u8], zone: &str, key: &[u8]) -> Vec<u8> {
    let tag = tag_of(slot_of(call_key));
    let mut out = Vec::with_capacity(BAN_PREFIX.len() + zone.len() + tag.len() + key.len() + 4);
    out.extend_from_slice(BAN_PREFIX);
    out.extend_from_slice(zone.as_bytes());
    out.extend_from_slice(b":{");
    out.extend_from_slice(tag);
    out.extend_from_slice(b"}:");
    out.extend_from_slice(key);
    out
}

/// The Redis key of `key`'s ban in zone `zone`: `tollgate-ban:<zone>:{TAG}:<key>`, in
/// the slot of the decision key [`redis_key`]`(zone, key)`.
pub fn ban_key(zone: &str, key: &[u8]) -> Vec<u8> {
    ban_key_of(&redis_key(zone, key), zone, key)
}

/// The zone and key a ban key names.
pub(crate) fn parse_ban_key(ban_key: &[u8]) -> Option<(&str, &[u8])> {
    let rest = ban_key.strip_prefix(BAN_PREFIX)?;
    let colon = rest.iter().position(|&b| b == b':')?;
    let zone = std::str::from_utf8(&rest[..colon]).ok()?;
    let rest = rest[colon + 1..].strip_prefix(b"{")?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let key = rest.get(close + 1..)?.strip_prefix(b":")?;
    Some((zone, key))
}

/// Writes a ban just imposed here to Redis, in the background (the answer does not wait
/// for it). A ban Redis holds already (imposed by another instance) is kept as it is,
/// and its time left is learnt here; a ban refused by a lift's tombstone is withdrawn
/// here too. If the write fails, the ban holds here and is forgotten at the
/// next check against Redis.
pub(crate) fn share_ban(
    backend: &Arc<Backend>,
    zone: &str,
    bans: &Arc<Bans>,
    key: &[u8],
    entry: &Entry,
    arrival: &Arrival,
) {
    let (backend, bans) = (Arc::clone(backend), Arc::clone(bans));
    let ban_key = ban_key(zone, key);
    let key: Box<[u8]> = key.into();
    let entry = *entry;
    let within_ms = u64::try_from(entry.within.as_millis()).unwrap_or(u64::MAX);
    let for_ms = u64::try_from((entry.until - entry.since).as_millis()).unwrap_or(u64::MAX);
    let why = [u64::from(entry.strikes), within_ms];
    let (now, worker) = (arrival.now, arrival.worker);
    tokio::spawn(async move {
        let written = backend.set_ban(&ban_key, why, for_ms, now, worker);
        match written.await {
            Ok(SetBan::Written) => {}
            Ok(SetBan::Held(left_ms)) => {
                let recheck = entry
                    .trust_until
                    .map_or(Duration::ZERO, |t| t - entry.since);
                let left = Duration::from_millis(left_ms);
                bans.learn(&key, backend.now(), left, recheck);
            }
            Ok(SetBan::Lifted) => bans.withdraw(&key, entry.since),
            Err(failure) => {
                tracing::warn!(failure = failure.label(), "cannot write a ban to Redis");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;

    #[test]
    fn slots_are_the_ones_redis_cluster_computes() {
        let keys: [&[u8]; 6] = [
            b"tollgate:per_ip:\x0a\x00\x00\x01",
            b"foo",
            b"{user1000}.following",
            b"foo{}{bar}",
            b"foo{{bar}}zap",
            b"",
        ];
        for key in keys {
            assert_eq!(Slot::new(slot_of(key)), Some(Slot::for_key(key)), "{key:?}");
        }
        // The reference value of the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn every_slot_has_a_short_tag_of_its_own() {
        for slot in 0..SLOTS as u16 {
            let tag = tag_of(slot);
            assert!(!tag.is_empty() && tag.len() <= 4);
            assert_eq!(slot_of(tag), slot);
        }
    }

    #[test]
    fn a_ban_key_shares_its_decision_keys_slot_and_reads_back() {
        for key in [&b"\x0a\x00\x00\x01"[..], b"k:1", b"{x}y", b"", b"}{"] {
            let ban = ban_key("per_ip", key);
            assert_eq!(slot_of(&ban), slot_of(&redis_key("per_ip", key)));
            assert!(ban.starts_with(&zone_ban_prefix("per_ip")));
            assert_eq!(parse_ban_key(&ban), Some(("per_ip", key)));
        }
        assert_eq!(parse_ban_key(b"tollgate:per_ip:k"), None);
    }

    #[test]
    fn no_zone_key_can_be_a_ban_key() {
        // A zone named `ban` (or anything a zone name may be) whose key a client picks.
        for zone in ["ban", "tollgate-ban", "a-b_c9"] {
            let state = redis_key(zone, b"{x}per_ip:\x0a\x00\x00\x01");
            assert!(!state.starts_with(BAN_PREFIX), "{state:?}");
            assert!(parse_ban_key(&state).is_none());
        }
    }
}
