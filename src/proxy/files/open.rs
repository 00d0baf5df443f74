//! Opening a file under the location's directory so that the kernel, not a string
//! check, keeps it there: `openat2` with `RESOLVE_BENEATH` refuses `..` and any symlink
//! leading out of the directory (absolute ones included) and follows those that stay
//! inside; `RESOLVE_NO_MAGICLINKS` refuses `/proc` links. Kernels before 5.6 lack
//! `openat2`: a walk of one component at a time, each opened without following, does
//! the same. `follow_symlinks = true` lets symlinks lead anywhere (nginx's default).
//!
//! The directory's handle is kept for a second ([`Directory`]) and then opened again, so
//! a deploy that swaps a `current` symlink is seen within a second (nginx, whose
//! `open_file_cache` is off by default, sees it at once; with it on, after
//! `open_file_cache_valid`, 60 s). Size, mtime and type come from `fstat` of the opened
//! handle: what is checked is what is sent.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use http::StatusCode;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Symlinks followed in one walk before giving up (Linux's own limit).
const MOST_LINKS: usize = 40;

/// Set once `openat2` said ENOSYS: the kernel is older than 5.6, and every later open
/// walks without asking again.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Why a file could not be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// ENOENT: nothing by that name.
    Missing,
    /// 404 for any other reason: a component not a directory, a name too long, a
    /// symlink leading out of the directory (EXDEV) or too many of them (ELOOP; nginx
    /// says 403 to a symlink it refuses), a socket (ENXIO).
    NotFound,
    /// EACCES: 403.
    Forbidden,
    /// Anything else: 500.
    Failed,
}

impl Failure {
    fn of(errno: Errno) -> Failure {
        match errno {
            Errno::NOENT => Failure::Missing,
            // ENXIO: a socket, which cannot be opened; nginx would say 500.
            Errno::NOTDIR | Errno::NAMETOOLONG | Errno::XDEV | Errno::LOOP | Errno::NXIO => {
                Failure::NotFound
            }
            Errno::ACCESS => Failure::Forbidden,
            _ => Failure::Failed,
        }
    }

    pub(super) fn status(self) -> StatusCode {
        match self {
            Failure::Missing | Failure::NotFound => StatusCode::NOT_FOUND,
            Failure::Forbidden => StatusCode::FORBIDDEN,
            Failure::Failed => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// How long an opened directory handle serves before the directory is opened again.
const DIR_KEPT: Duration = Duration::from_secs(1);

/// A location's directory, opened at most once a second and shared by the requests
/// meanwhile: each saves an `open` and a `close`. A directory that cannot be opened is
/// tried again by the next request.
#[derive(Default)]
pub(super) struct Directory {
    kept: ArcSwapOption<Kept>,
}

/// A directory handle and when it was opened.
struct Kept {
    dir: OwnedFd,
    opened: Instant,
}

impl Directory {
    /// `dir` as a [`Root`] at `now`: the kept handle if it is younger than a second,
    /// else a new one (symlinks in `dir`'s own path are followed).
    pub(super) fn open(&self, dir: &Path, follow_symlinks: bool, now: Instant) -> Result<Root, Failure> {
        let kept = self.kept.load_full();
        let young = |kept: &Kept| now.saturating_duration_since(kept.opened) < DIR_KEPT;
        let kept = match kept {
            Some(kept) if young(&kept) => kept,
            _ => {
                let opened = Arc::new(Kept { dir: open_dir(dir)?, opened: now });
                self.kept.store(Some(Arc::clone(&opened)));
                opened
            }
        };
        Ok(Root { kept, follow_symlinks })
    }
}

fn open_dir(dir: &Path) -> Result<OwnedFd, Failure> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::open(dir, flags, Mode::empty()).map_err(Failure::of)
}

/// The location's directory, as one request looks under it.
pub(super) struct Root {
    kept: Arc<Kept>,
    follow_symlinks: bool,
}

/// What `fstat` said of an opened file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Meta {
    pub kind: Kind,
    pub size: u64,
    /// Seconds since 1970.
    pub mtime: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    /// A FIFO, socket or device: never served.
    Other,
}

/// A file opened for reading, with what `fstat` said of it.
pub(super) struct Opened {
    pub file: File,
    pub meta: Meta,
}

impl Root {
    /// `rel` (relative, as `resolve::relative` makes it) opened for reading.
    pub(super) fn open_file(&self, rel: &str) -> Result<Opened, Failure> {
        let flags = OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK;
        let file = File::from(self.open_fd(rel, flags)?);
        let meta = meta(&file)?;
        Ok(Opened { file, meta })
    }

    /// What is at `rel`, without opening it for reading (`try_files`, `index` and
    /// sidecars are only looked at).
    pub(super) fn probe(&self, rel: &str) -> Result<Meta, Failure> {
        meta(&File::from(self.open_fd(rel, OFlags::PATH)?))
    }

    fn open_fd(&self, rel: &str, flags: OFlags) -> Result<OwnedFd, Failure> {
        let rel = if rel.is_empty() { "." } else { rel };
        let flags = flags | OFlags::CLOEXEC;
        let resolve = if self.follow_symlinks {
            ResolveFlags::NO_MAGICLINKS
        } else {
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
        };
        if NO_OPENAT2.load(Ordering::Relaxed) {
            return self.open_walking(rel, flags).map_err(Failure::of);
        }
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(&self.kept.dir, rel, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(fd),
                // A rename raced the lookup of a `..`: the kernel asks for another try.
                Err(Errno::AGAIN) if tries < 3 => tries += 1,
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    return self.open_walking(rel, flags).map_err(Failure::of);
                }
                Err(errno) => return Err(Failure::of(errno)),
            }
        }
    }

    /// `open_fd` on a kernel without `openat2`.
    fn open_walking(&self, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
        if self.follow_symlinks {
            return rustix::fs::openat(&self.kept.dir, rel, flags, Mode::empty());
        }
        walk(self.kept.dir.as_fd(), rel, flags)
    }
}

/// `rel` opened under `root` one component at a time, each without following: a
/// symlink is read and its target walked in its place, a `..` climbs back (never above
/// `root`), an absolute target is refused (EXDEV), as `RESOLVE_BENEATH` does. Each step
/// opens from the directory handle the one before gave, so a component swapped
/// meanwhile is caught (the last open is `O_NOFOLLOW`: ELOOP).
pub(super) fn walk(root: BorrowedFd<'_>, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
    let mut pending: Vec<Vec<u8>> = components(rel.as_bytes()).rev().map(<[u8]>::to_vec).collect();
    let mut dirs: Vec<OwnedFd> = Vec::new();
    let mut links = 0;
    // `docs/` names a directory only, as the kernel's own lookup has it.
    let dir_only = rel.ends_with('/');
    while let Some(name) = pending.pop() {
        let dir = dirs.last().map_or(root, AsFd::as_fd);
        if name == b".." {
            dirs.pop().ok_or(Errno::XDEV)?;
            continue;
        }
        let step = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(dir, name.as_slice(), step, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd)?;
        match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
            rustix::fs::FileType::Symlink => {
                links += 1;
                if links > MOST_LINKS {
                    return Err(Errno::LOOP);
                }
                let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
                let target = target.as_bytes();
                if target.first() == Some(&b'/') {
                    return Err(Errno::XDEV);
                }
                pending.extend(components(target).rev().map(<[u8]>::to_vec));
            }
            rustix::fs::FileType::Directory => dirs.push(fd),
            _ if pending.is_empty() && !dir_only => {
                return rustix::fs::openat(dir, name.as_slice(), flags | OFlags::NOFOLLOW, Mode::empty());
            }
            _ => return Err(Errno::NOTDIR),
        }
    }
    let dir = dirs.last().map_or(root, AsFd::as_fd);
    rustix::fs::openat(dir, ".", flags, Mode::empty())
}

/// The components of a relative path, without empty ones and `.`.
fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
}

fn meta(file: &File) -> Result<Meta, Failure> {
    let stat = rustix::fs::fstat(file).map_err(|_| Failure::Failed)?;
    let kind = match rustix::fs::FileType::from_raw_mode(stat.st_mode) {
        rustix::fs::FileType::RegularFile => Kind::File,
        rustix::fs::FileType::Directory => Kind::Dir,
        _ => Kind::Other,
    };
    Ok(Meta {
        kind,
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mtime: stat.st_mtime,
    })
}
