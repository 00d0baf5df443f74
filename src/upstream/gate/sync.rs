//! The gate's synchronization primitives, named in one place so that a build with
//! `--cfg tollgate_loom` swaps them for loom's models (`loom.rs` then tries the
//! interleavings of releases, waiters and leavers). An ordinary build re-exports std's.

#[cfg(not(tollgate_loom))]
pub(super) use std::sync::{
    atomic::{AtomicU32, AtomicU64, Ordering},
    Mutex, MutexGuard,
};

#[cfg(tollgate_loom)]
pub(super) use loom::sync::{
    atomic::{AtomicU32, AtomicU64, Ordering},
    Mutex, MutexGuard,
};

/// Locks `mutex`. What it guards is consistent between statements, so a holder that
/// panicked leaves nothing half done: its poison is ignored.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
