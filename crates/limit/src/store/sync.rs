//! The store's synchronization primitives, named in one place so that a build with
//! `--cfg tollgate_loom` swaps them for loom's models, and the tests in `loom.rs` can try
//! the interleavings of the store's threads. An ordinary build re-exports std's own types
//! and functions: the same code as naming them directly.
//!
//! Loom must see the accesses to memory that threads share. The store reaches a node's
//! head and state only through [`UnsafeCell::with`] and [`UnsafeCell::with_mut`], right
//! where it reads or writes them; loom records each access there and fails a run in which
//! a write and another access are not ordered by a lock or an atomic. Nodes and index slots
//! are written into their reservation once, before their position is published: loom sees
//! that write too, as the making of the node's or slot's atomics and cells, which later
//! accesses from other threads must be ordered after.

#[cfg(not(tollgate_loom))]
pub(super) use std::{
    hint::spin_loop,
    sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering},
    sync::{Mutex, MutexGuard},
    thread::yield_now,
};

#[cfg(tollgate_loom)]
pub(super) use loom::{
    cell::UnsafeCell,
    hint::spin_loop,
    sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering},
    sync::{Mutex, MutexGuard},
    thread::yield_now,
};

/// std's `UnsafeCell` with loom's interface: the pointer is lent to a closure rather than
/// returned, the one shape loom can track. Inlined, the closure is the plain `get()`.
#[cfg(not(tollgate_loom))]
#[repr(transparent)]
pub(super) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(tollgate_loom))]
impl<T> UnsafeCell<T> {
    #[inline(always)]
    pub const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a pointer for reading the value.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a pointer for writing the value.
    #[inline(always)]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Clears a poisoned mutex's flag, once the shard it guards is made consistent again.
#[cfg(not(tollgate_loom))]
#[inline]
pub(super) fn clear_poison<T>(mutex: &Mutex<T>) {
    mutex.clear_poison();
}

/// Loom's mutex is never poisoned (a panic ends the model), so there is nothing to clear.
#[cfg(tollgate_loom)]
pub(super) fn clear_poison<T>(_mutex: &Mutex<T>) {}
