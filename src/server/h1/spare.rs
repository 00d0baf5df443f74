//! Read buffers for HTTP/1.1 connections that wait with none: a new connection, or a
//! keep-alive one that let its buffers go after waiting half a second (the worker asks it
//! then: `ConnState::ask_let_go`), as nginx's idle connections hold none. Such a
//! connection reads with one of its worker's spares and gives it back when nothing came,
//! so waiting costs no buffer and no allocation (`upload::poll_read_waiting`); it keeps
//! the one its request's bytes came in. At most [`KEPT`] per worker thread, none larger
//! than a usual head needs; the rest are freed. Spares no connection took between two
//! [`trim`]s (the worker calls it every few seconds) are freed too, so that memory goes
//! back to the system once a busy spell is over, as nginx's does when its connections
//! close.

use std::cell::RefCell;

use bytes::BytesMut;

/// A read buffer's room: a read makes room for this much when less is free.
pub(super) const READ_BUF: usize = 8 * 1024;
/// Most spares a worker keeps: about as many as its connections that wait at once with
/// none need; a burst beyond allocates, and frees when it is over.
const KEPT: usize = 64;

thread_local! {
    static READS: RefCell<Kept<BytesMut>> = const { RefCell::new(Kept::new()) };
}

/// The spares, and how many of them no connection has needed since the last trim: the
/// fewest there were at any moment since.
struct Kept<T> {
    spares: Vec<T>,
    unused: usize,
}

impl<T> Kept<T> {
    const fn new() -> Self {
        Kept {
            spares: Vec::new(),
            unused: 0,
        }
    }

    fn take(&mut self) -> Option<T> {
        let spare = self.spares.pop();
        self.unused = self.unused.min(self.spares.len());
        spare
    }

    fn give(&mut self, spare: T) {
        if self.spares.len() < KEPT {
            self.spares.push(spare);
        }
    }

    /// Frees the spares that stayed unused since the last trim: the oldest ones, as
    /// [`Kept::take`] takes the newest.
    fn trim(&mut self) {
        self.spares.drain(..self.unused);
        if self.spares.is_empty() {
            self.spares = Vec::new();
        }
        self.unused = self.spares.len();
    }
}

/// Frees this worker's spares that no connection took since the last call.
pub(in crate::server) fn trim() {
    READS.with_borrow_mut(Kept::trim);
}

/// An empty read buffer: a spare, else a new one of [`READ_BUF`].
pub(super) fn read_buffer() -> BytesMut {
    READS
        .with_borrow_mut(Kept::take)
        .unwrap_or_else(|| BytesMut::with_capacity(READ_BUF))
}

/// Keeps an empty read buffer for another connection (one grown past a usual head's room
/// is freed).
pub(super) fn give_read(buffer: BytesMut) {
    if buffer.is_empty() && buffer.capacity() <= 2 * READ_BUF {
        READS.with_borrow_mut(|kept| kept.give(buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_let_go_is_the_next_one_taken() {
        let mut read = read_buffer();
        read.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let _head = read.split();
        let at = read.as_ptr();
        give_read(read);
        assert_eq!(read_buffer().as_ptr(), at);
    }

    #[test]
    fn only_so_many_spares_and_none_too_large_are_kept() {
        for _ in 0..2 * KEPT {
            give_read(BytesMut::with_capacity(READ_BUF));
        }
        give_read(BytesMut::with_capacity(4 * READ_BUF));
        assert_eq!(READS.with_borrow(|kept| kept.spares.len()), KEPT);
        assert!(READS.with_borrow(|kept| kept
            .spares
            .iter()
            .all(|s| s.capacity() <= 2 * READ_BUF)));
    }

    #[test]
    fn spares_no_connection_took_between_two_trims_are_freed() {
        let mut kept = Kept::new();
        for size in 1..=4 {
            kept.give(Vec::<u8>::with_capacity(size));
        }
        kept.trim();
        assert_eq!(kept.spares.len(), 4, "the first trim only starts counting");
        // A busy spell: at most two are taken at once.
        let (a, b) = (kept.take().unwrap(), kept.take().unwrap());
        kept.give(a);
        kept.give(b);
        kept.trim();
        assert_eq!(kept.spares.len(), 2, "the two never taken are freed");
        kept.trim();
        assert!(kept.spares.is_empty(), "a quiet spell frees the rest");
        assert_eq!(kept.spares.capacity(), 0);
    }
}
