//! What the workers and the admin API share for the gateway's whole life: the
//! generation in force, the addresses listened on, reload counts, every
//! generation's counters and the ACME manager. `server` writes it; `admin` reads it.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;

use crate::config::{Address, Transport};
use crate::metrics::Metrics;
use crate::snapshot::Snapshot;

/// The configuration in force, and what `/status` and `/metrics` tell of the gateway
/// around it.
pub(crate) struct GatewayState {
    pub snapshot: ArcSwap<Snapshot>,
    /// The addresses listened on (for `/status`).
    pub listeners: ArcSwap<Listeners>,
    /// Reloads that took effect, and those that changed nothing.
    pub reloads_ok: AtomicU64,
    pub reloads_failed: AtomicU64,
    /// The last reload that changed nothing: when, and why.
    pub last_reload_failure: Mutex<Option<ReloadFailure>>,
    /// Every generation's counters (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// Certificates by ACME: what it serves and each managed name's state.
    pub acme: crate::acme::Manager,
    /// Each worker's runtime, for the work one worker hands to the others.
    pub runtimes: Runtimes,
}

/// Each worker's runtime, and a sender of the channel whose end its drain waits for:
/// what runs there on another worker's behalf (an HTTP/3 connection) holds one, so that
/// the worker stays until it is over. Emptied when the gateway stops, so that the drain
/// waits for those alone.
#[derive(Debug, Default)]
pub(crate) struct Runtimes(Mutex<Vec<Option<Runtime>>>);

/// A worker's runtime, and a sender its drain waits for.
type Runtime = (tokio::runtime::Handle, tokio::sync::mpsc::Sender<()>);

impl Runtimes {
    /// Worker `worker` runs on `handle`; `alive` counts in its drain.
    pub(crate) fn register(&self, worker: usize, handle: tokio::runtime::Handle, alive: tokio::sync::mpsc::Sender<()>) {
        let mut all = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if all.len() <= worker {
            all.resize_with(worker + 1, || None);
        }
        all[worker] = Some((handle, alive));
    }

    /// The `n`th running worker, counting round (its index, runtime and drain count);
    /// `None` once the gateway stops.
    pub(crate) fn nth(&self, n: usize) -> Option<(usize, tokio::runtime::Handle, tokio::sync::mpsc::Sender<()>)> {
        let all = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let running = all.iter().flatten().count();
        let (worker, (handle, alive)) = all
            .iter()
            .enumerate()
            .filter_map(|(worker, runtime)| Some((worker, runtime.as_ref()?)))
            .nth(n % running.max(1))?;
        Some((worker, handle.clone(), alive.clone()))
    }

    /// The gateway stops: no more work is handed over.
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }
}

/// The addresses actually listened on (port 0 resolved), in config order.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    pub addresses: Vec<Address>,
}

impl Listeners {
    /// Those of one transport, in config order.
    pub(crate) fn of(&self, transport: Transport) -> impl Iterator<Item = SocketAddr> + '_ {
        let of_it = move |address: &&Address| address.transport == transport;
        self.addresses
            .iter()
            .filter(of_it)
            .map(|address| address.addr)
    }
}

/// A reload that changed nothing, as `/status` tells it.
#[derive(Clone, Debug)]
pub(crate) struct ReloadFailure {
    pub at: SystemTime,
    /// The error as logged, at most [`ReloadFailure::MAX_TEXT`] bytes.
    pub error: String,
    /// `reloads_ok` when it failed: a count above it now means a good reload came after,
    /// and the failure is past (the file in force is again the file on disk).
    pub ok_before: u64,
}

impl ReloadFailure {
    /// A file with many problems lists them all in the log; `/status` keeps their start.
    pub(crate) const MAX_TEXT: usize = 4096;

    pub(crate) fn new(error: &dyn std::fmt::Display) -> ReloadFailure {
        let mut error = error.to_string();
        if error.len() > Self::MAX_TEXT {
            let mut end = Self::MAX_TEXT;
            while !error.is_char_boundary(end) {
                end -= 1;
            }
            error.truncate(end);
            error.push('…');
        }
        ReloadFailure {
            at: SystemTime::now(),
            error,
            ok_before: 0,
        }
    }
}

impl GatewayState {
    /// Counts a reload that changed nothing, and keeps why.
    pub(crate) fn reload_failed(&self, error: &dyn std::fmt::Display) {
        self.reloads_failed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let failure = ReloadFailure {
            ok_before: self.reloads_ok.load(std::sync::atomic::Ordering::Relaxed),
            ..ReloadFailure::new(error)
        };
        *self
            .last_reload_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(failure);
    }

    /// The last reload that changed nothing, and whether a good one came after it.
    pub(crate) fn last_reload_failure(&self) -> Option<ReloadFailure> {
        self.last_reload_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reload_error_is_cut_on_a_character() {
        let long = "é".repeat(ReloadFailure::MAX_TEXT);
        let failure = ReloadFailure::new(&long);
        assert!(failure.error.len() <= ReloadFailure::MAX_TEXT + '…'.len_utf8());
        assert!(failure.error.ends_with("é…"));
        assert_eq!(ReloadFailure::new(&"short").error, "short");
    }
}
