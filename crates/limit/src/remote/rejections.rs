//! The rejections an instance remembers for its Redis zones.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Rejections an instance remembers, so that a flood from one key costs Redis nothing
/// after its first rejection: key → the zone-clock nanosecond it may conform again (and
/// when Redis said so). Bounded: when full, expired entries go, and if none has expired,
/// all of them.
#[derive(Default)]
pub struct Rejections {
    until: Mutex<HashMap<Box<[u8]>, Remembered>>,
}

#[derive(Clone, Copy)]
struct Remembered {
    until: u64,
    at: u64,
}

/// Keys a zone remembers rejections for.
const REMEMBERED: usize = 64 * 1024;

impl Rejections {
    /// When `key` was rejected before and may not pass yet at `now`: the nanoseconds
    /// left.
    pub fn remaining(&self, key: &[u8], now: u64) -> Option<u64> {
        self.remaining_within(key, now, u64::MAX)
    }

    /// [`Rejections::remaining`], for a rejection Redis told of less than `fresh_for`
    /// ns before `now`; an older one is forgotten, so that Redis is asked again (an item
    /// with a `ban` asks at least that often: a ban imposed elsewhere is then seen).
    pub fn remaining_within(&self, key: &[u8], now: u64, fresh_for: u64) -> Option<u64> {
        let mut until = lock(&self.until);
        match until.get(key) {
            Some(r) if r.until > now && now < r.at.saturating_add(fresh_for) => Some(r.until - now),
            Some(_) => {
                until.remove(key);
                None
            }
            None => None,
        }
    }

    /// Forgets `key`'s rejection, so that its next call asks Redis (a ban due for a
    /// check, `admission::penalty`).
    pub fn forget(&self, key: &[u8]) {
        lock(&self.until).remove(key);
    }

    pub fn remember(&self, key: &[u8], until_ns: u64, now: u64) {
        let mut until = lock(&self.until);
        if until.len() >= REMEMBERED {
            until.retain(|_, r| r.until > now);
            if until.len() >= REMEMBERED {
                until.clear();
            }
        }
        until.insert(
            key.into(),
            Remembered {
                until: until_ns,
                at: now,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_are_remembered_until_they_expire_and_bounded() {
        let r = Rejections::default();
        r.remember(b"k", 1_000, 0);
        assert_eq!(r.remaining(b"k", 400), Some(600));
        assert_eq!(r.remaining(b"k", 1_000), None);
        assert_eq!(r.remaining(b"k", 400), None, "an expired entry is gone");
        for i in 0..REMEMBERED as u64 {
            r.remember(&i.to_be_bytes(), 10, 0);
        }
        r.remember(b"new", 2_000, 20);
        assert_eq!(r.remaining(b"new", 20), Some(1_980));
        assert_eq!(lock(&r.until).len(), 1, "the expired ones made room");
    }

    #[test]
    fn a_rejection_older_than_asked_is_forgotten() {
        let r = Rejections::default();
        r.remember(b"k", 60_000, 1_000);
        assert_eq!(r.remaining_within(b"k", 1_500, 1_000), Some(58_500));
        assert_eq!(r.remaining_within(b"k", 2_000, 1_000), None);
        assert_eq!(r.remaining(b"k", 2_000), None, "forgotten");
    }
}
