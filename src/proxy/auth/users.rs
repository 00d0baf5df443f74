//! A location's htpasswd table as the running gateway keeps it: read at load, read again
//! when the file changes (looked at no more than once a second: nginx reads it on every
//! request, so that `htpasswd FILE USER` takes effect without a reload, and so does this,
//! within a second), and the logins that passed, so that a client sending the same
//! credentials on every request pays for one hash check, not one a request.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use sha2::{Digest, Sha256};

use crate::access::basic::Users;
use crate::config;

/// How often the file is looked at for a change.
const RECHECK: Duration = Duration::from_secs(1);

/// Logins remembered as passed; past it the memory starts again empty.
const MOST_PASSED: usize = 4096;

/// The table in force and the file it was read from.
pub(super) struct Table {
    path: PathBuf,
    loaded: ArcSwap<Loaded>,
    /// When the file is next looked at, and what it was when last read (or refused).
    watch: Mutex<Watch>,
}

/// One reading of the file, and the logins that passed against it: a change of the
/// file starts with none, so that a removed user or a new password stops the old one.
pub(super) struct Loaded {
    pub users: Arc<Users>,
    passed: Mutex<HashSet<[u8; 32]>>,
}

struct Watch {
    next: Instant,
    /// The file's identity and size and time when last read, or last refused.
    seen: Option<Stamp>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

impl Table {
    /// The table `basic` read at load, at `now`.
    pub(super) fn new(basic: &config::Basic, now: Instant) -> Table {
        Table {
            path: basic.users.clone(),
            loaded: ArcSwap::from_pointee(Loaded::of(Arc::clone(&basic.table))),
            watch: Mutex::new(Watch {
                next: now + RECHECK,
                seen: stamp(&basic.users),
            }),
        }
    }

    /// The table in force at `now`: read again first if the file changed since it was
    /// last looked at (once a second at most, by whichever request comes). A file that
    /// cannot be read or has a bad line leaves the last good table in force, with a
    /// warning once per change.
    pub(super) fn current(&self, now: Instant) -> Arc<Loaded> {
        if let Ok(mut watch) = self.watch.try_lock() {
            if now >= watch.next {
                watch.next = now + RECHECK;
                self.reread(&mut watch);
            }
        }
        self.loaded.load_full()
    }

    fn reread(&self, watch: &mut Watch) {
        let now = stamp(&self.path);
        if now == watch.seen {
            return;
        }
        watch.seen = now;
        match config::auth::read_users(&self.path) {
            Ok(users) => self.loaded.store(Arc::new(Loaded::of(Arc::new(users)))),
            Err(error) => tracing::warn!(%error, "the htpasswd file changed and cannot be used: the last good one stays in force"),
        }
    }
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

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
    })
}
