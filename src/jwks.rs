//! Key sets fetched from an identity provider (`auth.jwt.jwks_url`): one [`Source`] per
//! URL in the process, shared by every location and every configuration generation that
//! names it, so that a reload keeps the keys it had. A thread of its own fetches each live
//! source: at once, then again when the answer's `Cache-Control: max-age` runs out
//! (within [1 minute, 1 day], 10 minutes without one), sooner when a token names a key
//! the set does not have (at most once every 30 seconds), and after a failure with a
//! growing wait (5 seconds, doubling, at most 5 minutes). A failed fetch (no answer in
//! 10 s, not a 200, over 256 KiB, not a set with a usable key) keeps the last good set;
//! until a first set comes, the locations that need it answer 503.
//!
//! A source lives while a location holds it; the fetching task ends with the last one.

mod fetch;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use tokio::sync::Notify;

use crate::access::jwt::KeySet;
use crate::config::JwksEndpoint;

/// The freshness of a set whose answer says nothing of it.
const DEFAULT_FRESH: Duration = Duration::from_secs(600);
/// The bounds on what `max-age` may ask.
const FRESH_AT_LEAST: Duration = Duration::from_secs(60);
const FRESH_AT_MOST: Duration = Duration::from_secs(24 * 3600);
/// The first wait after a failure, and the longest.
const RETRY_FIRST: Duration = Duration::from_secs(5);
const RETRY_AT_MOST: Duration = Duration::from_secs(300);
/// The shortest time between two fetches asked for by unknown key ids.
const UNKNOWN_KID_EVERY: Duration = Duration::from_secs(30);

/// One URL's key set, as fetched last.
pub(crate) struct Source {
    url: String,
    set: ArcSwapOption<KeySet>,
    /// Where to fetch from: the newest generation's resolution of the URL.
    endpoint: Mutex<Arc<JwksEndpoint>>,
    /// Wakes the fetching task before its time: an unknown `kid`, or the source's end.
    wake: Arc<Notify>,
    /// When an unknown `kid` last woke it (ms since the registry began).
    last_woken: AtomicU64,
    /// Fetches ended, good or not; `fetched` tells the requests waiting for one.
    fetches: AtomicU64,
    /// Fetches that failed (`/metrics`).
    failures: AtomicU64,
    fetched: Notify,
    began: Instant,
}

impl Source {
    /// The set in force; `None` before the first fetch succeeded.
    pub(crate) fn current(&self) -> Option<Arc<KeySet>> {
        self.set.load_full()
    }

    /// A token named a key id the set does not have: fetch again now, unless that was
    /// asked less than 30 seconds ago. `Some(fetches)` when a fetch was asked for: the
    /// count of fetches ended before it, for [`Source::fetched_since`].
    pub(crate) fn unknown_kid(&self, now: Instant) -> Option<u64> {
        let at = now.saturating_duration_since(self.began).as_millis() as u64;
        let last = self.last_woken.load(Ordering::Relaxed);
        let every = UNKNOWN_KID_EVERY.as_millis() as u64;
        if (last == 0 || at >= last + every) && self.last_woken.compare_exchange(last, at.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            let before = self.fetches.load(Ordering::Acquire);
            self.wake.notify_one();
            return Some(before);
        }
        None
    }

    /// Waits until a fetch ended after `before` fetches had (see [`Source::unknown_kid`]).
    pub(crate) async fn fetched_since(&self, before: u64) {
        loop {
            let fetched = self.fetched.notified();
            tokio::pin!(fetched);
            fetched.as_mut().enable();
            if self.fetches.load(Ordering::Acquire) > before {
                return;
            }
            fetched.await;
        }
    }
}

impl Drop for Source {
    /// Ends the fetching task now rather than at its next fetch.
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

/// What `/metrics` says of one URL's key set.
pub(crate) struct Report {
    pub url: String,
    pub fetched: u64,
    pub failed: u64,
    /// Keys in the set in force; 0 before the first good fetch.
    pub keys: usize,
}

/// Every live source of the process (none when no `jwks_url` was ever named).
pub(crate) fn reports() -> Vec<Report> {
    let Some(Ok(registry)) = REGISTRY.get() else {
        return Vec::new();
    };
    let Ok(sources) = registry.sources.lock() else {
        return Vec::new();
    };
    let report = |source: Arc<Source>| {
        let fetches = source.fetches.load(Ordering::Relaxed);
        let failed = source.failures.load(Ordering::Relaxed);
        Report {
            url: source.url.clone(),
            fetched: fetches.saturating_sub(failed),
            failed,
            keys: source.current().map_or(0, |set| set.count()),
        }
    };
    sources.iter().filter_map(Weak::upgrade).map(report).collect()
}

/// Every live source of the process, and the runtime that fetches them.
struct Registry {
    sources: Mutex<Vec<Weak<Source>>>,
    runtime: tokio::runtime::Handle,
}

static REGISTRY: OnceLock<Result<Registry, String>> = OnceLock::new();

fn registry() -> Result<&'static Registry, String> {
    REGISTRY.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// The fetching thread, with a runtime of its own that runs until the process ends.
fn start() -> Result<Registry, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start the JWKS thread: {err}"))?;
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name("tollgate-jwks".into())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .map_err(|err| format!("cannot start the JWKS thread: {err}"))?;
    Ok(Registry {
        sources: Mutex::default(),
        runtime: handle,
    })
}

/// The source of `endpoint`'s URL: the live one (now fetching from `endpoint`), or a
/// new one, fetched from now on.
pub(crate) fn source(endpoint: &Arc<JwksEndpoint>) -> Result<Arc<Source>, String> {
    let registry = registry()?;
    let mut sources = registry.sources.lock().map_err(|_| "the JWKS registry is poisoned".to_owned())?;
    sources.retain(|source| source.strong_count() > 0);
    let live = sources.iter().filter_map(Weak::upgrade).find(|source| source.url == endpoint.url);
    if let Some(source) = live {
        if let Ok(mut current) = source.endpoint.lock() {
            *current = Arc::clone(endpoint);
        }
        return Ok(source);
    }
    let source = Arc::new(Source {
        url: endpoint.url.clone(),
        set: ArcSwapOption::empty(),
        endpoint: Mutex::new(Arc::clone(endpoint)),
        wake: Arc::new(Notify::new()),
        last_woken: AtomicU64::new(0),
        fetches: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        fetched: Notify::new(),
        began: Instant::now(),
    });
    sources.push(Arc::downgrade(&source));
    registry.runtime.spawn(keep_fetching(Arc::downgrade(&source)));
    Ok(source)
}

/// Fetches `source` on its schedule while anything holds it.
async fn keep_fetching(source: Weak<Source>) {
    let mut retry = RETRY_FIRST;
    loop {
        let Some(live) = source.upgrade() else {
            return;
        };
        let endpoint = live.endpoint.lock().map(|e| Arc::clone(&e)).ok();
        let Some(endpoint) = endpoint else {
            return;
        };
        let wait = match fetch::fetch(&endpoint).await {
            Ok((set, fresh)) => {
                for skipped in &set.skipped {
                    tracing::warn!(url = %live.url, "a key of the JWK set is left out: {skipped}");
                }
                tracing::info!(url = %live.url, keys = set.count(), "JWK set fetched");
                live.set.store(Some(Arc::new(set)));
                retry = RETRY_FIRST;
                fresh.unwrap_or(DEFAULT_FRESH).clamp(FRESH_AT_LEAST, FRESH_AT_MOST)
            }
            Err(error) => {
                live.failures.fetch_add(1, Ordering::Relaxed);
                let kept = if live.set.load().is_some() { "the last good set stays in force" } else { "no set yet: its locations answer 503" };
                tracing::warn!(url = %live.url, %error, "the JWK set cannot be fetched: {kept}; trying again in {retry:?}");
                let wait = retry;
                retry = (retry * 2).min(RETRY_AT_MOST);
                wait
            }
        };
        live.fetches.fetch_add(1, Ordering::Release);
        live.fetched.notify_waiters();
        // Wait without holding the source: it may end meanwhile (and wakes this).
        let wake = Arc::clone(&live.wake);
        drop(live);
        let _ = tokio::time::timeout(wait, wake.notified()).await;
    }
}
