//! Verdicts on tokens, remembered: a client sends the same token with every request, and
//! a signature check costs tens of microseconds (ES256 about 85 µs on a small machine), a
//! digest of the token and a lookup well under one. A verdict is kept until it may change:
//! a pass until the token expires or five minutes pass, a refusal for a minute (not one
//! that time or a new key may turn: not yet valid, no key). The memory starts again empty
//! when the key set changes, or when it holds 4096.
//!
//! The digest is 128 bits of two SipHash keyed at random when the memory is made: a client
//! who does not know the keys cannot make a forged token whose digest is a good one's
//! (that is a second preimage, 2^128 tries), and the tokens themselves are not kept. It
//! costs a tenth of a SHA-256 (which took a third of a request's instructions).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use std::hash::{BuildHasher, Hasher, RandomState};

use super::keys::KeySet;
use super::token::{self, Refused, Rules, NOT_YET, NO_KEY};
use crate::vars::Claims;

/// Verdicts remembered; past it the memory starts again empty.
const MOST_REMEMBERED: usize = 4096;

/// The longest a pass is remembered, whatever the token's `exp` (seconds).
const REMEMBER_PASS: u64 = 300;

/// The longest a refusal is remembered (seconds).
const REMEMBER_REFUSAL: u64 = 60;

/// The verdicts of one location's `auth.jwt` (its rules), for the key set in force.
pub struct Remembered {
    inner: Mutex<Inner>,
    /// The digest's two keys.
    keys: [RandomState; 2],
}

impl Default for Remembered {
    fn default() -> Remembered {
        Remembered {
            inner: Mutex::default(),
            keys: [RandomState::new(), RandomState::new()],
        }
    }
}

#[derive(Default)]
struct Inner {
    /// The set the verdicts were reached with (by address: a new set starts afresh).
    set: Option<Arc<KeySet>>,
    /// By digest: the verdict, and until when it holds.
    verdicts: HashMap<[u64; 2], (Verdict, u64)>,
}

/// What a check came to.
type Verdict = Result<Arc<Claims>, Refused>;

impl Remembered {
    /// [`token::verify`] of `token` against `set` and `rules` at `now` (seconds since the
    /// epoch), remembered.
    pub fn verify(&self, token: &[u8], set: &Arc<KeySet>, rules: &Rules, now: u64) -> Result<Arc<Claims>, Refused> {
        let digest = self.digest(token);
        if let Some(known) = self.recall(set, &digest, now) {
            return known;
        }
        let (verdict, until) = match token::verify(token, set, rules, now) {
            Ok(verified) => {
                let until = verified.expires.saturating_add(rules.leeway).min(now + REMEMBER_PASS);
                (Ok(Arc::new(verified.claims)), until)
            }
            Err(Refused::Invalid(why)) if why == NOT_YET || why == NO_KEY => return Err(Refused::Invalid(why)),
            Err(refused) => (Err(refused), now + REMEMBER_REFUSAL),
        };
        if let Ok(mut inner) = self.inner.lock() {
            if inner.verdicts.len() >= MOST_REMEMBERED {
                inner.verdicts.clear();
            }
            inner.verdicts.insert(digest, (verdict.clone(), until));
        }
        verdict
    }

    fn digest(&self, token: &[u8]) -> [u64; 2] {
        self.keys.each_ref().map(|key| {
            let mut hasher = key.build_hasher();
            hasher.write(token);
            hasher.finish()
        })
    }

    fn recall(&self, set: &Arc<KeySet>, digest: &[u64; 2], now: u64) -> Option<Verdict> {
        let mut inner = self.inner.lock().ok()?;
        if !inner.set.as_ref().is_some_and(|known| Arc::ptr_eq(known, set)) {
            inner.set = Some(Arc::clone(set));
            inner.verdicts.clear();
            return None;
        }
        let (verdict, until) = inner.verdicts.get(digest)?;
        (now < *until).then(|| verdict.clone())
    }
}
