//! A location's htpasswd table as the running gateway keeps it (read again when the file
//! changes: `watched`), and the logins that passed, so that a client sending the same
//! credentials on every request pays for one hash check, not one a request.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::watched::Watched;

use crate::access::basic::Users;
use crate::config;

/// Logins remembered as passed; past it the memory starts again empty.
const MOST_PASSED: usize = 4096;

/// The table in force and the file it was read from.
pub(super) type Table = Watched<Loaded>;

/// The table `basic` read at load, at `now`.
pub(super) fn table(basic: &config::Basic, now: Instant) -> Table {
    let loaded = Loaded::of(Arc::clone(&basic.table));
    Watched::new(&basic.users, loaded, read, "htpasswd file", now)
}

fn read(path: &Path) -> Result<Loaded, String> {
    config::auth::read_users(path).map(|users| Loaded::of(Arc::new(users)))
}

/// One reading of the file, and the logins that passed against it: a change of the
/// file starts with none, so that a removed user or a new password stops the old one.
pub(super) struct Loaded {
    pub users: Arc<Users>,
    passed: Mutex<HashSet<[u8; 32]>>,
}

impl Loaded {
    fn of(users: Arc<Users>) -> Loaded {
        Loaded {
            users,
            passed: Mutex::new(HashSet::new()),
        }
    }

    /// Whether these credentials passed before.
    pub(super) fn passed_before(&self, user: &[u8], password: &[u8]) -> bool {
        let key = key(user, password);
        self.passed.lock().is_ok_and(|passed| passed.contains(&key))
    }

    /// Remembers that these credentials passed.
    pub(super) fn remember(&self, user: &[u8], password: &[u8]) {
        let key = key(user, password);
        if let Ok(mut passed) = self.passed.lock() {
            if passed.len() >= MOST_PASSED {
                passed.clear();
            }
            passed.insert(key);
        }
    }
}

/// What a login is remembered by: a digest, never the password itself.
fn key(user: &[u8], password: &[u8]) -> [u8; 32] {
    let mut digest = Sha256::new();
    digest.update((user.len() as u64).to_le_bytes());
    digest.update(user);
    digest.update(password);
    digest.finalize().into()
}
