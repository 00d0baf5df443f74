//! A file an `auth` reads (an htpasswd file, a JWK set) as the running gateway keeps it:
//! read at load, and read again when it changes, looked at no more than once a second
//! (nginx reads its htpasswd file on every request, so that `htpasswd FILE USER` takes
//! effect without a reload, and so does this, within a second). A file that cannot be
//! read, or no longer makes sense, leaves the last good reading in force, with a warning.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

/// How often the file is looked at for a change.
const RECHECK: Duration = Duration::from_secs(1);

/// The reading in force and the file it was made from.
pub(super) struct Watched<T> {
    path: PathBuf,
    loaded: ArcSwap<T>,
    /// When the file is next looked at, and what it was when last read (or refused).
    watch: Mutex<Watch>,
    /// Makes a reading of the file.
    read: fn(&Path) -> Result<T, String>,
    /// What the file is, for the warning.
    what: &'static str,
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

impl<T> Watched<T> {
    /// `loaded`, what the file at `path` held at load, at `now`; `read` reads it again.
    pub(super) fn new(path: &Path, loaded: T, read: fn(&Path) -> Result<T, String>, what: &'static str, now: Instant) -> Watched<T> {
        Watched {
            path: path.to_owned(),
            loaded: ArcSwap::from_pointee(loaded),
            watch: Mutex::new(Watch {
                next: now + RECHECK,
                seen: stamp(path),
            }),
            read,
            what,
        }
    }

    /// The reading in force at `now`: made again first if the file changed since it was
    /// last looked at (once a second at most, by whichever request comes).
    pub(super) fn current(&self, now: Instant) -> Arc<T> {
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
        match (self.read)(&self.path) {
            Ok(loaded) => self.loaded.store(Arc::new(loaded)),
            Err(error) => tracing::warn!(%error, "the {} changed and cannot be used: the last good one stays in force", self.what),
        }
    }
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
    })
}
