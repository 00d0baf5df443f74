//! A shard's nodes: memory for the most nodes reserved at once, never moved, initialised
//! one node at a time as keys come; and each node's own lock.
//!
//! A node is a lock word, then its head (tag and key) and state, which are read or written
//! only by the holder of that lock. The lock is a spin lock held for one decision (tens of
//! nanoseconds); its word also carries the node's CLOCK reference bit, set by every use
//! and cleared by the shard's eviction hand.

use super::reserved::Reserved;
use super::sync::{spin_loop, yield_now, AtomicU32, Ordering, UnsafeCell};

const LOCKED: u32 = 1;
const REFERENCED: u32 = 2;
/// Spins before a waiting thread yields (a holder preempted mid-decision).
const SPINS: u32 = 64;

/// Keys up to this long are stored as they are; longer ones as a 128-bit digest.
pub(super) const INLINE_KEY: usize = 16;

/// `repr(C)`: the lock word fills the 4 bytes the key's head would leave as padding before
/// an 8-byte-aligned state (40 bytes for `leaky_bucket`, not 48).
#[repr(C)]
pub(super) struct Node<S> {
    lock: AtomicU32,
    head: UnsafeCell<Head>,
    /// A free node keeps a valid (fresh) state, so every initialised node can be dropped.
    state: UnsafeCell<S>,
}

/// Which key a node holds, guarded by the node's lock like its state.
#[derive(Clone, Copy)]
pub(super) struct Head {
    /// 0..=16: an inline key's length; [`TAG_DIGEST`]: a digest; [`FREE`] and the next
    /// free position: not in use.
    pub tag: u32,
    pub key: [u8; INLINE_KEY],
}

pub(super) const TAG_DIGEST: u32 = INLINE_KEY as u32 + 1;
pub(super) const FREE: u32 = 1 << 31;

impl Head {
    pub fn is_free(&self) -> bool {
        self.tag & FREE != 0
    }
}

pub(super) const fn node_size<S>() -> usize {
    size_of::<Node<S>>()
}

impl<S> Node<S> {
    /// Locks the node, spinning (then yielding) while another thread holds it.
    #[inline]
    pub fn lock(&self) -> NodeGuard<'_, S> {
        let mut spins = 0;
        loop {
            let word = self.lock.load(Ordering::Relaxed);
            if word & LOCKED == 0
                && self
                    .lock
                    .compare_exchange_weak(
                        word,
                        word | LOCKED,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            {
                return NodeGuard {
                    node: self,
                    referenced: word & REFERENCED != 0,
                };
            }
            spins += 1;
            if spins < SPINS {
                spin_loop();
            } else {
                yield_now();
            }
        }
    }
}

impl<S> Node<S> {
    /// Releases a lock kept by [`NodeGuard::keep`].
    ///
    /// # Safety
    /// The caller holds the lock, and no borrow of the data outlives this call.
    pub unsafe fn unlock(&self, referenced: bool) {
        let word = if referenced { REFERENCED } else { 0 };
        self.lock.store(word, Ordering::Release);
    }

    /// A guard for a lock kept by [`NodeGuard::keep`], marked used.
    ///
    /// # Safety
    /// The caller holds the lock and hands it to the guard.
    pub unsafe fn resume(&self) -> NodeGuard<'_, S> {
        NodeGuard {
            node: self,
            referenced: true,
        }
    }

    /// The head of a node whose lock the caller keeps.
    ///
    /// # Safety
    /// The caller holds the lock, and no `&mut` to the head lives meanwhile.
    pub unsafe fn head_kept(&self) -> &Head {
        // SAFETY: the caller's promise.
        self.head.with(|head| unsafe { &*head })
    }

    /// The state of a node whose lock the caller keeps.
    ///
    /// # Safety
    /// The caller holds the lock, and makes this the only borrow of the state.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn state_kept(&self) -> &mut S {
        // SAFETY: the caller's promise.
        self.state.with_mut(|state| unsafe { &mut *state })
    }
}

/// A locked node: unlocked when dropped, with its reference bit as last set.
pub(super) struct NodeGuard<'a, S> {
    node: &'a Node<S>,
    referenced: bool,
}

impl<S> NodeGuard<'_, S> {
    #[inline]
    pub fn head(&self) -> &Head {
        // SAFETY: the node's lock is held, so nothing else reads or writes its head.
        self.node.head.with(|head| unsafe { &*head })
    }

    pub fn head_mut(&mut self) -> &mut Head {
        // SAFETY: as in `head`, and `&mut self` makes this the only borrow.
        self.node.head.with_mut(|head| unsafe { &mut *head })
    }

    #[inline]
    pub fn state(&self) -> &S {
        // SAFETY: as in `head`.
        self.node.state.with(|state| unsafe { &*state })
    }

    #[inline]
    pub fn state_mut(&mut self) -> &mut S {
        // SAFETY: as in `head_mut`.
        self.node.state.with_mut(|state| unsafe { &mut *state })
    }

    pub fn referenced(&self) -> bool {
        self.referenced
    }

    /// Leaves the node locked past the guard, for [`Node::unlock`] to release.
    pub fn keep(self) {
        std::mem::forget(self);
    }

    /// Sets or clears the reference bit (written when the guard is dropped).
    #[inline]
    pub fn set_referenced(&mut self, referenced: bool) {
        self.referenced = referenced;
    }
}

impl<S> Drop for NodeGuard<'_, S> {
    #[inline]
    fn drop(&mut self) {
        let word = if self.referenced { REFERENCED } else { 0 };
        self.node.lock.store(word, Ordering::Release);
    }
}

/// Nodes in memory reserved once ([`Reserved`]).
pub(super) struct Slab<S> {
    nodes: Reserved<Node<S>>,
}

// SAFETY: a node's head and state are reached only under its lock (or through `&mut`), so
// states move between threads but are never shared: `S: Send` suffices.
unsafe impl<S: Send> Sync for Node<S> {}

impl<S> Slab<S> {
    pub fn new(reserved: usize) -> Slab<S> {
        Slab {
            nodes: Reserved::new(reserved),
        }
    }

    /// The node at `pos`.
    ///
    /// # Safety
    /// `pos` must be below the count of nodes initialised by [`Slab::init`].
    #[inline]
    pub unsafe fn node(&self, pos: u32) -> &Node<S> {
        // SAFETY: the caller's promise: initialised.
        unsafe { self.nodes.get(pos as usize) }
    }

    /// Initialises the node at `pos`, unlocked, with `head` and `state`.
    ///
    /// # Safety
    /// `pos` must be the count of nodes initialised so far (each is initialised once); it
    /// is checked against the reservation.
    pub unsafe fn init(&self, pos: u32, head: Head, state: S) {
        let node = Node {
            lock: AtomicU32::new(0),
            head: UnsafeCell::new(head),
            state: UnsafeCell::new(state),
        };
        // SAFETY: not yet initialised, so no reader reaches it.
        unsafe { self.nodes.write(pos as usize, node) }
    }

    /// Drops the first `initialised` nodes (the memory goes with the slab).
    ///
    /// # Safety
    /// `initialised` must be the count of nodes initialised; no node is used after.
    pub unsafe fn drop_nodes(&mut self, initialised: usize) {
        for pos in 0..initialised {
            // SAFETY: initialised, and not used after (the caller's promise).
            unsafe { self.nodes.drop_at(pos) }
        }
    }
}
