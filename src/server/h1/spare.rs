//! Buffers that this worker's HTTP/1.1 connections let go while they wait for their next
//! request, kept for the next connection that gets one. A keep-alive connection then waits
//! holding no read buffer, no write buffer and no header map, as nginx's hold none, while
//! connections under load take them from here and give them back: no allocation per
//! request. At most [`KEPT`] of each kind per worker thread, none larger than a usual
//! request needs; the rest are freed. Spares no connection took between two [`trim`]s
//! (the worker calls it every few seconds) are freed too, so that memory goes back to
//! the system once a busy spell is over, as nginx's does when its connections close.

use std::cell::RefCell;
use std::thread::LocalKey;

use bytes::BytesMut;
use http::HeaderMap;

/// A read buffer's room: a read makes room for this much when less is free.
pub(super) const READ_BUF: usize = 8 * 1024;
/// Most spares of each kind a worker keeps: about as many as its connections busy at once
/// need; a burst beyond allocates, and frees when it is over.
const KEPT: usize = 64;
/// A write buffer's room when none is spare: a proxied answer's head and a small body.
const WRITE_ROOM: usize = 512;
/// Larger write buffers are freed, not kept (a large answer's pieces grew them).
const WRITE_KEPT: usize = 16 * 1024;
/// Header maps with room for more fields are freed, not kept.
const MAP_KEPT: usize = 32;

thread_local! {
    static READS: RefCell<Kept<BytesMut>> = const { RefCell::new(Kept::new()) };
    static WRITES: RefCell<Kept<Vec<u8>>> = const { RefCell::new(Kept::new()) };
    static MAPS: RefCell<Kept<HeaderMap>> = const { RefCell::new(Kept::new()) };
}

/// The spares of one kind, and how many of them no connection has needed since the last
/// trim: the fewest there were at any moment since.
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
    WRITES.with_borrow_mut(Kept::trim);
    MAPS.with_borrow_mut(Kept::trim);
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
        give(&READS, buffer);
    }
}

/// An empty write buffer: a spare, else a new one of [`WRITE_ROOM`].
pub(super) fn write_buffer() -> Vec<u8> {
    WRITES
        .with_borrow_mut(Kept::take)
        .unwrap_or_else(|| Vec::with_capacity(WRITE_ROOM))
}

/// Keeps a write buffer, emptied, for another connection.
pub(super) fn give_write(mut buffer: Vec<u8>) {
    if buffer.capacity() > 0 && buffer.capacity() <= WRITE_KEPT {
        buffer.clear();
        give(&WRITES, buffer);
    }
}

/// An empty header map: a spare, else a new one (it allocates as fields come).
pub(super) fn header_map() -> HeaderMap {
    MAPS.with_borrow_mut(Kept::take).unwrap_or_default()
}

/// Keeps a header map, emptied, for another connection.
pub(super) fn give_map(mut map: HeaderMap) {
    if map.capacity() > 0 && map.capacity() <= MAP_KEPT {
        if !map.is_empty() {
            map.clear();
        }
        give(&MAPS, map);
    }
}

fn give<T: 'static>(kept: &'static LocalKey<RefCell<Kept<T>>>, spare: T) {
    kept.with_borrow_mut(|kept| kept.give(spare));
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
            give_write(Vec::with_capacity(WRITE_ROOM));
        }
        give_write(Vec::with_capacity(2 * WRITE_KEPT));
        assert_eq!(WRITES.with_borrow(|kept| kept.spares.len()), KEPT);
        assert!(WRITES.with_borrow(|kept| kept.spares.iter().all(|s| s.capacity() <= WRITE_KEPT)));
        let mut large = HeaderMap::with_capacity(4 * MAP_KEPT);
        large.insert(http::header::HOST, http::HeaderValue::from_static("a"));
        give_map(large);
        assert_eq!(MAPS.with_borrow(|kept| kept.spares.len()), 0);
        let mut small = HeaderMap::with_capacity(4);
        small.insert(http::header::HOST, http::HeaderValue::from_static("a"));
        give_map(small);
        assert!(header_map().is_empty());
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
