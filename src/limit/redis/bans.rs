//! A Redis zone's bans in Redis: one key per ban, `tollgate:ban:{TAG}:<zone>:<key>`,
//! with a TTL (PX) equal to the time left and a value that says why (see `set_ban.lua`).
//!
//! The decision script reads a key's ban key in the same call (`ban.lua`), and Redis
//! Cluster runs a script only on keys of one hash slot. The decision key
//! (`tollgate:<zone>:<key>`) goes wherever its bytes hash; the ban key follows it
//! through its hash tag `{TAG}`: a short string, taken from a table made once, whose
//! slot is the decision key's slot. On one server the tag changes nothing.

use std::sync::{Arc, OnceLock};

use super::super::bans::Entry;
use super::super::Arrival;
use super::{redis_key, Backend};

/// What every ban key starts with (the admin API scans for it).
pub const BAN_PREFIX: &[u8] = b"tollgate:ban:";

/// Redis Cluster's hash slots.
const SLOTS: usize = 16_384;

/// The CRC16 (XMODEM) Redis Cluster hashes keys with.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of `key`: of its hash tag (the bytes between the first `{` and the next
/// `}`, when not empty), else of the whole key.
pub fn slot_of(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tag.unwrap_or(key)) % SLOTS as u16
}

/// A hash tag per slot: `TAGS[s]` is a string of 1 to 4 letters and digits whose slot is
/// `s`. Made once (about 250,000 CRCs), 64 KiB.
fn tags() -> &'static [[u8; 4]] {
    static TAGS: OnceLock<Box<[[u8; 4]]>> = OnceLock::new();
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
                let slot = usize::from(crc16(&tag[..len]));
                let slot = slot % SLOTS;
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

/// The Redis key of `key`'s ban in zone `zone`: `tollgate:ban:{TAG}:<zone>:<key>`, in
/// the slot of the decision key [`redis_key`]`(zone, key)`.
pub fn ban_key(zone: &str, key: &[u8]) -> Vec<u8> {
    let slot = slot_of(&redis_key(zone, key));
    let tag = tag_of(slot);
    let mut out = Vec::with_capacity(BAN_PREFIX.len() + tag.len() + zone.len() + key.len() + 4);
    out.extend_from_slice(BAN_PREFIX);
    out.push(b'{');
    out.extend_from_slice(tag);
    out.extend_from_slice(b"}:");
    out.extend_from_slice(zone.as_bytes());
    out.push(b':');
    out.extend_from_slice(key);
    out
}

/// The zone and key a ban key names (zone names hold no `:`).
pub fn parse_ban_key(ban_key: &[u8]) -> Option<(&str, &[u8])> {
    let rest = ban_key.strip_prefix(BAN_PREFIX)?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let rest = rest.get(close + 1..)?.strip_prefix(b":")?;
    let colon = rest.iter().position(|&b| b == b':')?;
    let zone = std::str::from_utf8(&rest[..colon]).ok()?;
    Some((zone, &rest[colon + 1..]))
}

/// Writes a ban just imposed here to Redis, in the background (the answer does not wait
/// for it). If it fails, the ban holds here and is forgotten at the next check
/// against Redis.
pub fn share_ban(
    backend: &Arc<Backend>,
    zone: &str,
    key: &[u8],
    entry: &Entry,
    arrival: &Arrival<'_>,
) {
    let backend = Arc::clone(backend);
    let ban_key = ban_key(zone, key);
    let within_ms = u64::try_from(entry.within.as_millis()).unwrap_or(u64::MAX);
    let for_ms = u64::try_from((entry.until - entry.since).as_millis()).unwrap_or(u64::MAX);
    let why = [u64::from(entry.strikes), within_ms];
    let (now, worker) = (arrival.now, arrival.worker);
    tokio::spawn(async move {
        if let Err(failure) = backend.set_ban(&ban_key, why, for_ms, now, worker).await {
            tracing::warn!(failure = failure.label(), "cannot write a ban to Redis");
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
            assert!(ban.starts_with(BAN_PREFIX));
            assert_eq!(parse_ban_key(&ban), Some(("per_ip", key)));
        }
        assert_eq!(parse_ban_key(b"tollgate:per_ip:k"), None);
    }
}
