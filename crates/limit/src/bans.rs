//! The penalty box ("Bans" in docs/config.md): a zone's bans and the strikes that lead
//! to them, in bounded memory.
//!
//! A strike is an enforced rejection of a key by a limit item that carries a [`Ban`].
//! Strikes are counted in windows: the first strike opens a window of `within`; the
//! `after`-th strike inside it bans the key for `for`; a strike after the window ends
//! opens a new one (its count starts at 1). A banned key is answered at once, before any
//! zone is asked (`admission::penalty`).
//!
//! Both tables are per zone, split in [`SHARDS`] shards each behind its own mutex, and
//! each shard keeps its key bytes (plus [`ENTRY_BYTES`] per entry) under a budget: the
//! zone's bans under its `size` ([`DEFAULT_SIZE`] unless set), its strikes under twice
//! that, each shard a [`SHARDS`]th of it. A full shard refuses what is new and keeps what
//! it holds until it ends ([`table`]): a key's ban or strikes are never pushed out by
//! other keys, which a client may make up at will. A ban refused is counted
//! ([`Bans::refused`]) and the key keeps its strikes, so its next strike bans it if there
//! is room by then; a first strike refused is counted too ([`Bans::strikes_refused`]).
//!
//! Times are the request's `now` as an [`Instant`], passed in: nothing here reads a
//! clock. A table outlives reloads while its zone keeps its name and key (see
//! `snapshot::zones`), so a ban holds across SIGHUP.

pub mod lines;
mod table;

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use http::StatusCode;

pub use table::ENTRY_BYTES;
use table::{Ends, Table};

/// A limit item's `ban = { after, within, for, status, size }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ban {
    /// Strikes within `within` that ban the key (1 to 1000).
    pub after: u32,
    /// How long a window of strikes lasts, from its first strike.
    pub within: Duration,
    /// How long a ban lasts (`for`).
    pub duration: Duration,
    /// The status a banned key is answered with (403 unless set).
    pub status: StatusCode,
    /// The bytes of bans the zone may hold (`size`, [`DEFAULT_SIZE`] unless set). The
    /// zone's table is one for all its items: it takes the largest they give.
    pub size: usize,
}

/// Shards per table: requests of different keys rarely wait for each other.
pub const SHARDS: usize = 16;
/// The bans a zone may hold unless its items give a `size`, in bytes (key bytes +
/// [`ENTRY_BYTES`] each). Its strikes may take twice as many.
pub const DEFAULT_SIZE: usize = 4 << 20;
/// The smallest `size`: a kilobyte a shard, some ten bans of short keys.
pub const MIN_SIZE: usize = 16 << 10;

/// One ban in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// When the ban ends.
    pub until: Instant,
    /// When it was imposed (or, for a ban learned from Redis, first seen here).
    pub since: Instant,
    /// The strikes that imposed it (0 when learned from Redis).
    pub strikes: u32,
    /// The window those strikes fell in.
    pub within: Duration,
    /// For a Redis zone: until when this copy answers alone; after it, Redis is asked
    /// again (a ban lifted on another instance ends here then). `None`: this table is
    /// the ban's only home (a local zone).
    pub trust_until: Option<Instant>,
}

/// What the table says of a key at a request's arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// No ban.
    Clear,
    /// Banned for this long still.
    Banned(Duration),
    /// A Redis zone's copy that is due to be checked against Redis: the ban holds for
    /// this long unless Redis says it was lifted.
    Recheck(Duration),
}

/// What a strike did ([`Bans::strike`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Struck {
    /// Counted; not yet a ban.
    Counted,
    /// The key's first strike of a window, not counted: the strike table is full.
    Uncounted,
    /// The strike banned the key.
    Banned(Entry),
    /// The strike earned a ban, refused: the ban table is full of bans in force. The key
    /// keeps its strikes; its next strike tries again.
    Refused,
}

impl Struck {
    /// The ban imposed, if the strike imposed one.
    pub fn banned(self) -> Option<Entry> {
        match self {
            Struck::Banned(entry) => Some(entry),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Strikes {
    /// The end of the window the first strike opened.
    ends: Instant,
    count: u32,
}

impl Ends for Strikes {
    fn ends(&self) -> Instant {
        self.ends
    }
}

impl Ends for Entry {
    fn ends(&self) -> Instant {
        self.until
    }
}

#[derive(Default)]
struct Shard {
    bans: Table<Entry>,
    strikes: Table<Strikes>,
}

/// What a [`Bans`] holds ([`Bans::usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub bans: usize,
    pub ban_bytes: usize,
    pub strikes: usize,
    pub strike_bytes: usize,
    /// The most bytes one shard counts (each may count a [`SHARDS`]th of the zone's).
    pub largest_shard_ban_bytes: usize,
    pub largest_shard_strike_bytes: usize,
    /// Ban entries the fast path believes held.
    pub held: usize,
}

/// A zone's bans and strikes.
pub struct Bans {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// Ban entries held, expired ones not yet swept included.
    held: AtomicUsize,
    /// The latest end of any ban ever held, in nanoseconds after `epoch` (0: none yet):
    /// once it has passed, every ban has ended, and a request skips rendering its key
    /// and locking even while expired entries wait to be swept.
    latest: AtomicU64,
    /// The instant `latest` counts from: the `now` of the first ban held.
    epoch: OnceLock<Instant>,
    /// Bans imposed here (`tollgate_bans_imposed_total`).
    imposed: AtomicU64,
    /// Bans refused for want of room (`tollgate_bans_refused_total`).
    refused: AtomicU64,
    /// First strikes refused for want of room (`tollgate_strikes_refused_total`).
    strikes_refused: AtomicU64,
    /// The bytes of bans the zone may hold (`size`); the strikes, twice that.
    size: AtomicUsize,
    /// The error-log lines the zone's bans make, thinned (`admission::penalty` writes them).
    pub log: lines::Lines,
}

impl Default for Bans {
    fn default() -> Self {
        Bans::new(DEFAULT_SIZE)
    }
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `at + d`, saturating: when that overflows (never for the bounded durations of the
/// config), the latest instant within a factor 2 of it that the platform can hold.
pub fn later(at: Instant, d: Duration) -> Instant {
    let mut d = d;
    loop {
        if let Some(t) = at.checked_add(d) {
            return t;
        }
        d /= 2;
    }
}

impl Bans {
    /// An empty table that holds `size` bytes of bans and twice that of strikes.
    pub fn new(size: usize) -> Bans {
        Bans {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            held: AtomicUsize::new(0),
            latest: AtomicU64::new(0),
            epoch: OnceLock::new(),
            imposed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            strikes_refused: AtomicU64::new(0),
            size: AtomicUsize::new(size),
            log: lines::Lines::default(),
        }
    }

    /// Holds `size` bytes of bans from now on (a reload that changes `size`): a smaller
    /// size forgets nothing, it refuses new entries until what is held fits.
    pub fn resize(&self, size: usize) {
        self.size.store(size, Ordering::Relaxed);
    }

    /// The bytes of bans the table may hold.
    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// The bytes each shard may count of bans and of strikes.
    fn budgets(&self) -> (usize, usize) {
        let size = self.size();
        (size / SHARDS, size.saturating_mul(2) / SHARDS)
    }

    /// Whether some ban may be in force at `now`: when not, a request need not look.
    /// No ban held costs one atomic load; bans held that have all ended, two more (and
    /// no lock), though their entries are swept only when looked up or crowded out.
    #[inline]
    pub fn may_hold(&self, now: Instant) -> bool {
        if self.held.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let latest = self.latest.load(Ordering::Relaxed);
        let Some(epoch) = self.epoch.get() else {
            return false;
        };
        now < later(*epoch, Duration::from_nanos(latest))
    }

    /// Notes that a ban held here runs until `until`.
    fn runs_until(&self, until: Instant) {
        let epoch = *self.epoch.get_or_init(|| until);
        let after = until.saturating_duration_since(epoch).as_nanos();
        let after = u64::try_from(after).unwrap_or(u64::MAX).max(1);
        self.latest.fetch_max(after, Ordering::Relaxed);
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        let at = self.hasher.hash_one(key) as usize % self.shards.len();
        lock(&self.shards[at])
    }

    /// `key`'s standing at `now`; an expired ban is forgotten.
    pub fn standing(&self, key: &[u8], now: Instant) -> Standing {
        if !self.may_hold(now) {
            return Standing::Clear;
        }
        let mut shard = self.shard(key);
        let Some(entry) = shard.bans.get(key).copied() else {
            return Standing::Clear;
        };
        if entry.until <= now {
            self.remove_ban(&mut shard, key);
            return Standing::Clear;
        }
        let left = entry.until - now;
        match entry.trust_until {
            Some(trust) if trust <= now => Standing::Recheck(left),
            _ => Standing::Banned(left),
        }
    }

    /// Counts a strike against `key` at `now` under `ban`: the ban imposed when it is
    /// the `after`-th of its window and the table has room. `redis_recheck` is set for a
    /// Redis zone (the copy here answers alone that long).
    pub fn strike(
        &self,
        key: &[u8],
        now: Instant,
        ban: &Ban,
        redis_recheck: Option<Duration>,
    ) -> Struck {
        let (ban_budget, strike_budget) = self.budgets();
        let mut shard = self.shard(key);
        let fresh = Strikes {
            ends: later(now, ban.within),
            count: 1,
        };
        let count = match shard.strikes.get_mut(key) {
            Some(s) if now < s.ends => {
                s.count = s.count.saturating_add(1);
                s.count
            }
            Some(s) => {
                *s = fresh;
                1
            }
            // A key banned at its first strike needs no count.
            None if ban.after > 1 => {
                if !shard.strikes.insert(key, fresh, now, strike_budget) {
                    self.strikes_refused.fetch_add(1, Ordering::Relaxed);
                    return Struck::Uncounted;
                }
                1
            }
            None => 1,
        };
        if count < ban.after {
            return Struck::Counted;
        }
        let entry = Entry {
            until: later(now, ban.duration),
            since: now,
            strikes: count,
            within: ban.within,
            trust_until: redis_recheck.map(|d| later(now, d)),
        };
        if !self.insert_ban(&mut shard, key, entry, now, ban_budget) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Struck::Refused;
        }
        shard.strikes.remove(key);
        self.imposed.fetch_add(1, Ordering::Relaxed);
        Struck::Banned(entry)
    }

    /// A ban Redis told of, `left` still to run: held here and trusted for `recheck`.
    /// A ban already known keeps its reason.
    pub fn learn(&self, key: &[u8], now: Instant, left: Duration, recheck: Duration) {
        let mut shard = self.shard(key);
        let (until, trust) = (later(now, left), Some(later(now, recheck)));
        if let Some(entry) = shard.bans.get_mut(key) {
            entry.until = until;
            entry.trust_until = trust;
            self.runs_until(until);
            return;
        }
        let entry = Entry {
            until,
            since: now,
            strikes: 0,
            within: Duration::ZERO,
            trust_until: trust,
        };
        // No room: Redis keeps answering for the ban, one call per request.
        self.insert_ban(&mut shard, key, entry, now, self.budgets().0);
    }

    /// Redis says `key` is not banned, in answer to a call issued at `asked`: a copy
    /// held here (of a Redis zone) goes if it was already due for a check then. A copy
    /// trusted past `asked` is newer than the answer (a ban imposed here meanwhile, whose
    /// write may not have reached Redis yet) and stays.
    pub fn unlearn(&self, key: &[u8], asked: Instant) {
        if !self.may_hold(asked) {
            return;
        }
        let mut shard = self.shard(key);
        let due = |e: &Entry| e.trust_until.is_some_and(|trust| trust <= asked);
        if shard.bans.get(key).is_some_and(due) {
            self.remove_ban(&mut shard, key);
        }
    }

    /// Redis could not be asked about `key` at `now`: a copy held here (of a Redis
    /// zone) answers alone for `recheck` more, so that a banned key's requests do not
    /// each wait for Redis's timeout while it is down.
    pub fn trust_again(&self, key: &[u8], now: Instant, recheck: Duration) {
        let mut shard = self.shard(key);
        if let Some(entry) = shard.bans.get_mut(key) {
            if entry.trust_until.is_some() {
                entry.trust_until = Some(later(now, recheck));
            }
        }
    }

    /// Redis refused the ban imposed here at `since` (lifted meanwhile, see
    /// `set_ban.lua`): this instance's copy goes too.
    pub fn withdraw(&self, key: &[u8], since: Instant) {
        let mut shard = self.shard(key);
        let ours = |e: &Entry| e.since == since && e.trust_until.is_some();
        if shard.bans.get(key).is_some_and(ours) {
            self.remove_ban(&mut shard, key);
        }
    }

    /// Lifts `key`'s ban and forgets its strikes (an operator's `DELETE`): whether a
    /// ban was in force.
    pub fn lift(&self, key: &[u8], now: Instant) -> bool {
        let mut shard = self.shard(key);
        shard.strikes.remove(key);
        match shard.bans.get(key).copied() {
            Some(entry) => {
                self.remove_ban(&mut shard, key);
                entry.until > now
            }
            None => false,
        }
    }

    /// `key`'s ban in force at `now`, if any.
    pub fn get(&self, key: &[u8], now: Instant) -> Option<Entry> {
        let shard = self.shard(key);
        shard.bans.get(key).copied().filter(|e| e.until > now)
    }

    /// Every ban in force at `now`, at most `limit` of them, in no order.
    pub fn list(&self, now: Instant, limit: usize) -> Vec<(Box<[u8]>, Entry)> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let shard = lock(shard);
            let live = shard.bans.iter().filter(|(_, e)| e.until > now);
            out.extend(live.map(|(k, e)| (k.clone(), *e)).take(limit - out.len()));
            if out.len() >= limit {
                break;
            }
        }
        out
    }

    /// Bans in force at `now` (`tollgate_bans`).
    pub fn in_force(&self, now: Instant) -> usize {
        if !self.may_hold(now) {
            return 0;
        }
        self.shards
            .iter()
            .map(|s| lock(s).bans.iter().filter(|(_, e)| e.until > now).count())
            .sum()
    }

    /// What the table holds and the bytes it counts for it, expired entries included.
    pub fn usage(&self) -> Usage {
        let mut usage = Usage::default();
        for shard in self.shards.iter() {
            let shard = lock(shard);
            let (ban_bytes, strike_bytes) = (shard.bans.bytes(), shard.strikes.bytes());
            usage.bans += shard.bans.len();
            usage.ban_bytes += ban_bytes;
            usage.strikes += shard.strikes.len();
            usage.strike_bytes += strike_bytes;
            usage.largest_shard_ban_bytes = usage.largest_shard_ban_bytes.max(ban_bytes);
            usage.largest_shard_strike_bytes = usage.largest_shard_strike_bytes.max(strike_bytes);
        }
        usage.held = self.held.load(Ordering::Relaxed);
        usage
    }

    /// Bans imposed here since the table was made (`tollgate_bans_imposed_total`).
    pub fn imposed(&self) -> u64 {
        self.imposed.load(Ordering::Relaxed)
    }

    /// Bans earned and refused for want of room since the table was made
    /// (`tollgate_bans_refused_total`): each strike of a key kept out counts.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// First strikes refused for want of room (`tollgate_strikes_refused_total`).
    pub fn strikes_refused(&self) -> u64 {
        self.strikes_refused.load(Ordering::Relaxed)
    }

    fn remove_ban(&self, shard: &mut Shard, key: &[u8]) {
        if shard.bans.remove(key).is_some() {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Holds `entry` for `key` within `budget` bytes a shard: whether it is held. A ban
    /// already held is replaced; a new one is refused when the shard is full of bans in
    /// force.
    fn insert_ban(
        &self,
        shard: &mut Shard,
        key: &[u8],
        entry: Entry,
        now: Instant,
        budget: usize,
    ) -> bool {
        // Before the count grows: `may_hold` reads the count, then this.
        self.runs_until(entry.until);
        if let Some(old) = shard.bans.get_mut(key) {
            *old = entry;
            return true;
        }
        let before = shard.bans.len();
        let held = shard.bans.insert(key, entry, now, budget);
        let after = shard.bans.len();
        if after > before {
            self.held.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.held.fetch_sub(before - after, Ordering::Relaxed);
        }
        held
    }
}
