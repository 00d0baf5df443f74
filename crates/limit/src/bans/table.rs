//! One table of a [`super::Bans`] shard: bans or strikes by key, within a budget of bytes
//! (each key's bytes plus [`ENTRY_BYTES`]).
//!
//! A full table refuses a new key. It never forgets an entry still running to make room:
//! whatever rule chose the entry to forget, a client that chooses its keys (an API key, a
//! header) could steer it by making entries of its own, and so push out the one it wants
//! gone (its own ban). Entries that have ended are reclaimed, all at once: when the table
//! is full and, since its last sweep, an eighth of what that sweep kept has ended. So a
//! spray of new keys into a full table pays for one sweep per eighth of it, not one per key.

use std::collections::HashMap;
use std::time::Instant;

/// Bytes each entry is counted for besides its key (map slot, times, counts).
pub const ENTRY_BYTES: usize = 96;

/// What a table holds: something that ends.
pub(super) trait Ends {
    /// When the entry has ended (it counts for nothing from then on).
    fn ends(&self) -> Instant;
}

pub(super) struct Table<V> {
    map: HashMap<Box<[u8]>, V>,
    /// The bytes the entries are counted for.
    bytes: usize,
    /// While the table is full, no sweep before this: when an eighth of the entries the
    /// last sweep kept will have ended. `None`: sweep when next full.
    sweep_at: Option<Instant>,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Table {
            map: HashMap::new(),
            bytes: 0,
            sweep_at: None,
        }
    }
}

/// The bytes `key`'s entry is counted for.
pub(super) fn cost(key: &[u8]) -> usize {
    key.len() + ENTRY_BYTES
}

impl<V: Ends> Table<V> {
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.map.get(key)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.map.get_mut(key)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn bytes(&self) -> usize {
        debug_assert_eq!(self.bytes, self.map.keys().map(|k| cost(k)).sum::<usize>());
        self.bytes
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Box<[u8]>, &V)> {
        self.map.iter()
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        let value = self.map.remove(key)?;
        self.bytes -= cost(key);
        Some(value)
    }

    /// Holds `value` for `key` (not held yet) if it fits in `budget` bytes, once the
    /// entries that have ended by `now` are swept when the table is full and a sweep is
    /// due. Whether it is held: a full table refuses it.
    pub fn insert(&mut self, key: &[u8], value: V, now: Instant, budget: usize) -> bool {
        debug_assert!(!self.map.contains_key(key));
        let cost = cost(key);
        let full = |table: &Self| table.bytes + cost > budget;
        if full(self) && self.sweep_at.is_none_or(|at| at <= now) {
            self.sweep(now);
        }
        if full(self) {
            return false;
        }
        self.map.insert(key.into(), value);
        self.bytes += cost;
        true
    }

    /// Forgets every entry that has ended by `now`, and notes when the next sweep is due.
    fn sweep(&mut self, now: Instant) {
        self.map.retain(|_, v| v.ends() > now);
        self.bytes = self.map.keys().map(|k| cost(k)).sum();
        let mut ends: Vec<Instant> = self.map.values().map(Ends::ends).collect();
        let nth = ends.len() / 8;
        self.sweep_at = (!ends.is_empty()).then(|| *ends.select_nth_unstable(nth).1);
    }
}
