//! A zone's memory bound (`size` in docs/config.md): key sprays never push a store past its `size`,
//! neither the bytes it accounts as in use nor what it really allocates (a counting
//! allocator checks: a store reserves its memory at once, as nginx's shared zone does, and
//! writes into it as keys come), and an IPv4 key costs at most 64 bytes.

use crate::support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;

use tollgate::limit::leaky_bucket::LeakyBucket;
use tollgate::limit::store::Store;
use tollgate::limit::token_bucket::TokenBucket;
use tollgate::limit::{Limiter, Params, Period, Rate, NANOS_PER_MS, NODELAY};

/// Counts the bytes live on the heap that threads inside [`measured`] allocated, so a test
/// sees what a store really allocated and not what the harness did meanwhile.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The most [`LIVE`] reached during the measurement.
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    // A const-initialised `Cell` needs no allocation or destructor: safe in an allocator.
    static MEASURING: Cell<bool> = const { Cell::new(false) };
}

fn count(bytes: isize) {
    if MEASURING.with(Cell::get) {
        let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK.fetch_max(live, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed` is the system allocator's.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the system allocator with `layout` (every allocation
        // here does).
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; the caller's contract for `realloc` is the system's.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        new
    }
}

// The allocator of every test in the binary, since they share one process: threads outside
// [`measured`] only pay a thread-local check per allocation, and what they allocate never
// shows in what a test here measures.
#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` counting the heap this thread allocates; returns its result and the bytes
/// still allocated when it returns. Tests run it one at a time.
fn measured<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let (out, _, live) = measured_peak(f);
    (out, live)
}

/// As [`measured`], and the most that was allocated at once meanwhile: `(result, peak,
/// still allocated)`. (compress_memory.rs measures the coders with it.)
pub(crate) fn measured_peak<T>(f: impl FnOnce() -> T) -> (T, isize, isize) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    MEASURING.with(|m| m.set(true));
    let out = f();
    MEASURING.with(|m| m.set(false));
    let (peak, live) = (PEAK.load(Ordering::Relaxed), LIVE.load(Ordering::Relaxed));
    (out, peak, live)
}

/// xorshift64: keys without a `rand` dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn ipv6(&mut self) -> [u8; 16] {
        let mut key = [0; 16];
        key[..8].copy_from_slice(&self.next().to_be_bytes());
        key[8..].copy_from_slice(&self.next().to_be_bytes());
        key
    }
}

fn ten_per_second_nodelay() -> Params {
    Params {
        delay: NODELAY,
        ..Params::new(Rate::new(10, Period::Second).expect("non-zero"))
    }
}

fn admitted<A: Limiter>(store: &Store<A>, key: &[u8], now: u64, p: &Params) -> bool {
    let hash = store.hash(key);
    store.lock(hash).decide(hash, key, now, p).admitted()
}

#[test]
fn an_ipv6_spray_stays_within_size_and_the_hot_key_stays_limited() {
    let _shared = support::shared();
    const SIZE: usize = 10 << 20;
    const KEYS: u64 = 1_000_000;
    let p = ten_per_second_nodelay();
    let hot = *b"\x20\x01\x0d\xb8hot-client\0\0";
    let (store, real) = measured(|| {
        let store = Store::<LeakyBucket>::new(SIZE);
        let mut keys = XorShift(0x9E37_79B9_7F4A_7C15);
        // 1M keys over 250 ms: far more than fit, and none drained (10r/s drains in
        // 100 ms) by the time the eviction hand reaches it, so evictions are forced.
        let mut last_admitted: Option<u64> = None;
        for i in 0..KEYS {
            let now = i * 250;
            assert!(admitted(&store, &keys.ipv6(), now, &p));
            if i % 1000 == 0 {
                let expected = last_admitted.is_none_or(|at| now - at >= 100 * NANOS_PER_MS);
                assert_eq!(
                    admitted(&store, &hot, now, &p),
                    expected,
                    "hot key at {now} ns"
                );
                if expected {
                    last_admitted = Some(now);
                }
                let stats = store.stats();
                assert!(stats.bytes <= SIZE, "after {i} keys: {stats:?}");
            }
        }
        assert_eq!(last_admitted, Some(200 * NANOS_PER_MS));
        store
    });
    // At a fixed later time: one admitted, the next at once rejected, admitted 100 ms on.
    let t = 300 * NANOS_PER_MS;
    assert!(admitted(&store, &hot, t, &p));
    assert!(!admitted(&store, &hot, t, &p));
    assert!(!admitted(&store, &hot, t + 99 * NANOS_PER_MS, &p));
    assert!(admitted(&store, &hot, t + 100 * NANOS_PER_MS, &p));

    let stats = store.stats();
    println!(
        "1M IPv6 keys into 10 MiB: {} keys kept, {} evicted, {} expired; \
         {} bytes accounted in use, {real} allocated",
        stats.keys, stats.evictions, stats.expired, stats.bytes
    );
    assert!(stats.bytes <= SIZE);
    assert_eq!(
        stats.keys as u64 + stats.evictions + stats.expired,
        KEYS + 1
    );
    assert!(stats.evictions > KEYS / 2, "{stats:?}");
    assert!(real <= SIZE as isize, "{real} > {stats:?}");
}

/// Stores a million IPv4 keys in a store of 64 bytes a key: none may be evicted.
fn ipv4_keys_cost_at_most_64_bytes<A: Limiter>(name: &str) {
    const KEYS: usize = 1_000_000;
    let p = ten_per_second_nodelay();
    let (store, real) = measured(|| {
        let store = Store::<A>::new(64 * KEYS);
        for i in 0..KEYS as u32 {
            assert!(admitted(&store, &i.to_be_bytes(), 0, &p));
        }
        store
    });
    let stats = store.stats();
    println!(
        "{name}: 1M IPv4 keys in a store of {} bytes: {} accounted in use ({:.1} B/key), \
         {real} allocated; full at {} keys ({:.1} B/key); {} evicted",
        stats.capacity_bytes,
        stats.bytes,
        stats.bytes as f64 / KEYS as f64,
        store.max_keys(),
        stats.capacity_bytes as f64 / store.max_keys() as f64,
        stats.evictions,
    );
    assert_eq!((stats.keys, stats.evictions), (KEYS, 0), "{stats:?}");
    assert!(stats.bytes <= 64 * KEYS);
    assert!(real <= stats.capacity_bytes as isize, "{real} > {stats:?}");
}

#[test]
fn an_ipv4_key_costs_at_most_64_bytes_in_a_leaky_bucket_zone() {
    let _shared = support::shared();
    ipv4_keys_cost_at_most_64_bytes::<LeakyBucket>("leaky_bucket");
}

#[test]
fn an_ipv4_key_costs_at_most_64_bytes_in_a_token_bucket_zone() {
    let _shared = support::shared();
    ipv4_keys_cost_at_most_64_bytes::<TokenBucket>("token_bucket");
}
