//! A zone's most-limited keys over the last minute, for `/status`: a bounded
//! heavy-hitter sketch, not a map of every key. Each worker keeps its own [`Sketch`];
//! `/status` adds them up.
//!
//! A sketch is a ring of [`WINDOWS`] windows of [`WINDOW_SECS`] each. Within a window,
//! Space-Saving (Metwally et al., 2005) tracks at most [`CAPACITY`] keys: a key not
//! tracked when the window is full takes the place of the least-counted one and
//! inherits its count plus one. A key's count is never below its true count and is
//! above it by at most the smallest count in the window; every key rejected more than
//! `1/CAPACITY` of a window's rejections is tracked.

use std::collections::HashMap;

/// Seconds per window.
pub(crate) const WINDOW_SECS: u64 = 15;
/// Windows kept: the current one and the three before it, so a report covers the last
/// 45 to 60 seconds.
pub(crate) const WINDOWS: usize = 4;
/// Keys tracked per window.
pub(crate) const CAPACITY: usize = 32;
/// Bytes of a key kept; a longer key is kept cut, and shown with "…".
const KEY_BYTES: usize = 46;

#[derive(Clone)]
struct Entry {
    hash: u64,
    count: u64,
    len: u8,
    cut: bool,
    key: [u8; KEY_BYTES],
}

impl Entry {
    fn key(&self) -> &[u8] {
        &self.key[..usize::from(self.len)]
    }
}

#[derive(Default)]
struct Window {
    /// Which window (seconds / WINDOW_SECS) the entries count; stale otherwise.
    number: u64,
    entries: Vec<Entry>,
}

/// One worker's sketch of one zone's rejections.
#[derive(Default)]
pub(crate) struct Sketch {
    windows: [Window; WINDOWS],
}

impl std::fmt::Debug for Sketch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sketch").finish_non_exhaustive()
    }
}

impl Sketch {
    /// Counts one rejection of `key` at `secs` (seconds on any steady clock).
    pub(crate) fn add(&mut self, secs: u64, key: &[u8]) {
        // Window numbers start at 1: 0 marks a window never used.
        let number = secs / WINDOW_SECS + 1;
        let window = &mut self.windows[(number % WINDOWS as u64) as usize];
        if window.number != number {
            window.number = number;
            window.entries.clear();
        }
        let (kept, cut) = match key.get(..KEY_BYTES) {
            Some(kept) if key.len() > KEY_BYTES => (kept, true),
            _ => (key, false),
        };
        let hash = hash(key);
        let entries = &mut window.entries;
        if let Some(entry) = entries
            .iter_mut()
            .find(|e| e.hash == hash && e.cut == cut && e.key() == kept)
        {
            entry.count += 1;
            return;
        }
        let mut entry = Entry {
            hash,
            count: 1,
            len: kept.len() as u8,
            cut,
            key: [0; KEY_BYTES],
        };
        entry.key[..kept.len()].copy_from_slice(kept);
        if entries.len() < CAPACITY {
            entries.push(entry);
        } else if let Some(least) = entries.iter_mut().min_by_key(|e| e.count) {
            entry.count = least.count + 1;
            *least = entry;
        }
    }

    /// Adds this sketch's counts over the windows of the last minute at `secs` to
    /// `into`: key (and whether it was cut) → rejections.
    pub(crate) fn collect(&self, secs: u64, into: &mut HashMap<(Vec<u8>, bool), u64>) {
        let current = secs / WINDOW_SECS + 1;
        let oldest = current.saturating_sub(WINDOWS as u64 - 1);
        for window in &self.windows {
            if window.number < oldest || window.number > current {
                continue;
            }
            for entry in &window.entries {
                *into.entry((entry.key().to_vec(), entry.cut)).or_default() += entry.count;
            }
        }
    }
}

/// The `n` keys with the most rejections in `counts`, most first (ties: by key).
pub(crate) fn top(counts: HashMap<(Vec<u8>, bool), u64>, n: usize) -> Vec<((Vec<u8>, bool), u64)> {
    let mut all: Vec<_> = counts.into_iter().collect();
    all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.truncate(n);
    all
}

/// FNV-1a: keys are short, and this only spares most byte comparisons.
fn hash(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(sketch: &Sketch, secs: u64) -> Vec<(String, u64)> {
        let mut all = HashMap::new();
        sketch.collect(secs, &mut all);
        top(all, 10)
            .into_iter()
            .map(|((key, _), n)| (String::from_utf8(key).unwrap(), n))
            .collect()
    }

    #[test]
    fn keys_are_counted_and_ranked() {
        let mut s = Sketch::default();
        for (key, n) in [("a", 3), ("b", 5), ("c", 1)] {
            for _ in 0..n {
                s.add(100, key.as_bytes());
            }
        }
        assert_eq!(
            counts(&s, 100),
            [("b".into(), 5), ("a".into(), 3), ("c".into(), 1)]
        );
    }

    #[test]
    fn a_heavy_key_stays_on_top_of_a_spray_of_distinct_keys() {
        let mut s = Sketch::default();
        for i in 0..10_000u32 {
            s.add(7, format!("spray-{i}").as_bytes());
            if i % 10 == 0 {
                s.add(7, b"heavy");
            }
        }
        let ranked = counts(&s, 7);
        assert_eq!(ranked[0].0, "heavy");
        // Never under the truth, and over it by at most the window's total / CAPACITY.
        assert!(ranked[0].1 >= 1_000);
        assert!(
            ranked[0].1 <= 1_000 + 11_000 / CAPACITY as u64,
            "{ranked:?}"
        );
    }

    #[test]
    fn only_the_last_minute_counts() {
        let mut s = Sketch::default();
        s.add(0, b"old");
        s.add(50, b"recent");
        s.add(61, b"now");
        // At 61 s the windows 15–60 s count: "old" (0–15 s) has left.
        assert_eq!(counts(&s, 61), [("now".into(), 1), ("recent".into(), 1)]);
        // A window's slot reused four windows later starts empty.
        s.add(120, b"later");
        assert_eq!(counts(&s, 120), [("later".into(), 1)]);
        // Nothing is reported for a time the sketch has not reached.
        assert!(counts(&s, 1_000).is_empty());
    }

    #[test]
    fn a_long_key_is_kept_cut() {
        let mut s = Sketch::default();
        let long = [b'k'; 100];
        s.add(1, &long);
        s.add(1, &long);
        let mut all = HashMap::new();
        s.collect(1, &mut all);
        assert_eq!(all.len(), 1);
        let ((key, cut), n) = all.into_iter().next().unwrap();
        assert_eq!((key.len(), cut, n), (KEY_BYTES, true, 2));
    }
}
