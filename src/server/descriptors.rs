//! The process's file descriptors, and the share of them that client connections may
//! hold, so that the gateway can always accept on the data plane and still open upstream
//! connections, files and Redis connections however many clients hold connections open.
//!
//! The soft `RLIMIT_NOFILE` is raised to the hard one at start (what nginx users get from
//! `worker_rlimit_nofile`), then split:
//!
//! | share | descriptors |
//! |---|---|
//! | reserve | a tenth of the limit, at least [`RESERVE_MIN`]: upstream connections, the access log, Redis, the runtimes' own, the listening sockets |
//! | admin API | its `max_connections`, which it never exceeds |
//! | data plane | the rest: client connections on every listener and worker |
//!
//! A data-plane connection accepted beyond its share makes room: its worker sheds its
//! oldest idle connections (`server/shed.rs`), or closes the new one at once when none is
//! idle. So does one whose descriptor number shows the reserve in use (descriptors are
//! handed out lowest-free first: descriptor N means at least N others are open), whoever
//! holds them. The admin API gives way first: it sheds nothing, and refuses a connection
//! once the reserve is in use.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The fewest descriptors kept for what is not a client connection.
pub(super) const RESERVE_MIN: usize = 64;

/// Below this many data-plane connections, the start warns that the limit is low.
const FEW: usize = 256;

/// The fewest files answers may hold open, whatever the limit.
const FILES_MIN: usize = 16;

/// The process's descriptor limit and the data plane's share of it.
#[derive(Debug)]
pub(super) struct Descriptors {
    /// The soft `RLIMIT_NOFILE`.
    limit: usize,
    /// Descriptors at or above this number are the reserve's.
    reserve_from: usize,
    /// The most client connections the data plane holds without making room.
    share: usize,
    /// Client connections open on the data plane, every listener and worker.
    open: AtomicUsize,
}

impl Descriptors {
    /// The split of `limit` descriptors with `admin` of them for the admin API. A limit
    /// too small for the reserve and the admin API leaves the data plane a quarter of it.
    pub(super) fn new(limit: usize, admin: usize) -> Descriptors {
        let reserve = (limit / 10).max(RESERVE_MIN).min(limit);
        let share = limit.saturating_sub(reserve + admin).max(limit / 4).max(1);
        Descriptors {
            limit,
            reserve_from: limit - reserve,
            share,
            open: AtomicUsize::new(0),
        }
    }

    /// The split of this process's limit, raised to the hard limit first (see
    /// [`raise_limit`]).
    pub(super) fn of_process(admin: usize) -> Descriptors {
        let limit = raise_limit();
        let descriptors = Descriptors::new(limit, admin);
        if descriptors.share < FEW {
            tracing::warn!(
                limit,
                connections = descriptors.share,
                "few file descriptors (RLIMIT_NOFILE): client connections beyond this many \
                 close idle ones or are refused; raise it with `ulimit -n` or systemd's LimitNOFILE"
            );
        } else {
            tracing::info!(limit, connections = descriptors.share, "file descriptors");
        }
        descriptors
    }

    /// The most client connections the data plane holds without making room.
    pub(super) fn share(&self) -> usize {
        self.share
    }

    /// The most files answers hold open at once (`root` locations): a quarter of the
    /// connections' share, at least [`FILES_MIN`].
    pub(super) fn files(&self) -> usize {
        (self.share / 4).max(FILES_MIN)
    }

    /// A data-plane connection accepted on descriptor `fd`, counted until the slot drops;
    /// `true` with it when the connection is beyond the data plane's share or `fd` is in
    /// the reserve: room must be made.
    pub(super) fn take(self: &Arc<Self>, fd: RawFd) -> (Slot, bool) {
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = Slot(self.clone());
        (slot, open > self.share || self.in_reserve(fd))
    }

    /// Whether descriptor `fd` is one of the reserve's: at least that many are open.
    pub(super) fn in_reserve(&self, fd: RawFd) -> bool {
        usize::try_from(fd).is_ok_and(|fd| fd >= self.reserve_from)
    }

    /// Client connections open on the data plane.
    pub(super) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The soft `RLIMIT_NOFILE` the split was made of.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }
}

/// One data-plane connection counted in [`Descriptors`]; uncounted when dropped.
#[derive(Debug)]
pub(super) struct Slot(Arc<Descriptors>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard one, and returns the soft one then in
/// force (`usize::MAX` for no limit). A failure to raise it is logged and leaves it.
pub(super) fn raise_limit() -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let mut limits = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (limits.current, limits.maximum) {
        if soft < hard {
            let raised = Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => limits.current = Some(hard),
                Err(err) => {
                    tracing::warn!(soft, hard, error = %err, "cannot raise RLIMIT_NOFILE");
                }
            }
        }
    }
    limits.current.map_or(usize::MAX, |soft| {
        usize::try_from(soft).unwrap_or(usize::MAX)
    })
}

/// Whether an `accept` failed for want of descriptors (the process's or the system's).
pub(super) fn exhausted(err: &std::io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        Errno::from_io_error(err),
        Some(Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_split_into_reserve_admin_and_data_plane() {
        let twenty_thousand = Descriptors::new(20_000, 64);
        assert_eq!(twenty_thousand.reserve_from, 18_000);
        assert_eq!(twenty_thousand.share(), 17_936);
        let small = Descriptors::new(256, 64);
        assert_eq!((small.reserve_from, small.share()), (192, 128));
        // Too small for the reserve and the admin API: a quarter for the data plane.
        let tiny = Descriptors::new(100, 64);
        assert_eq!((tiny.reserve_from, tiny.share()), (36, 25));
        let unlimited = Descriptors::new(usize::MAX, 64);
        assert!(unlimited.share() > usize::MAX / 2);
    }

    #[test]
    fn a_connection_beyond_the_share_or_in_the_reserve_must_make_room() {
        let descriptors = Arc::new(Descriptors::new(256, 64));
        let mut slots = Vec::new();
        for fd in 0..128 {
            let (slot, over) = descriptors.take(fd);
            assert!(!over, "connection {fd} is within the share");
            slots.push(slot);
        }
        let (beyond, over) = descriptors.take(3);
        assert!(over, "the 129th is beyond the share");
        drop(beyond);
        drop(slots.pop());
        assert_eq!(descriptors.open(), 127);
        // Within the share by count, but descriptor 192 says 192 are open.
        assert!(descriptors.take(192).1);
        assert!(!descriptors.in_reserve(191));
        assert!(descriptors.in_reserve(192));
        drop(slots);
        assert_eq!(descriptors.open(), 0);
    }

    #[test]
    fn running_out_of_descriptors_is_told_from_other_accept_failures() {
        let emfile = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        assert!(exhausted(&emfile));
        let aborted =
            std::io::Error::from_raw_os_error(rustix::io::Errno::CONNABORTED.raw_os_error());
        assert!(!exhausted(&aborted));
    }
}
