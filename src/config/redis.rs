//! `[redis]`: where zones with `backend = "redis"` keep their state — one server by
//! `url`, or a Redis Cluster by the `urls` of some of its nodes.

use std::path::Path;
use std::time::Duration;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Loose, RawRedis, Span};
use super::{values, OnError, Redis};

/// Where Redis is, and how long a decision may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://` URLs: one server, or some nodes of a cluster.
    pub urls: Vec<String>,
    pub cluster: bool,
    pub timeout: Duration,
    /// PEM certificates `rediss://` trusts; `None`: the system's trust store.
    pub ca: Option<Vec<u8>>,
    /// How often this instance announces itself in each Redis zone
    /// (`shared::heartbeat`).
    pub heartbeat: Duration,
}

/// A decision that takes longer follows `on_error`, unless `timeout` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// How often an instance announces itself in each Redis zone (its announcement lasts
/// three beats).
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// The range `heartbeat` may take: short enough for tests, at most a minute.
const HEARTBEAT_RANGE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(60));

/// `[redis]`, its `ca` file read now so that `tollgate -t` and a reload catch a bad one.
pub(super) fn redis(
    raw: RawRedis,
    span: &Span,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Redis> {
    let timeout = match &raw.timeout {
        Some(value) => diag.check(value.span(), values::duration(value.get_ref())),
        None => Some(DEFAULT_TIMEOUT),
    };
    let cluster = raw.urls.is_some();
    let urls = urls(raw.url, raw.urls, span, diag);
    let on_error = raw.on_error.map_or(OnError::Local, |o| *o.get_ref());
    let ca = match &raw.ca {
        None => Some(None),
        Some(path) => ca(path, base, diag).map(Some),
    };
    let heartbeat = heartbeat(raw.heartbeat.as_ref(), diag);
    let settings = RedisSettings {
        urls: urls?,
        cluster,
        timeout: timeout?,
        ca: ca?,
        heartbeat: heartbeat?,
    };
    Some(Redis { settings, on_error })
}

/// `heartbeat`: 100 ms to 1 minute.
fn heartbeat(written: Option<&Loose>, diag: &mut Diagnostics<'_>) -> Option<Duration> {
    let Some(value) = written else {
        return Some(DEFAULT_HEARTBEAT);
    };
    let every = diag.check(value.span(), values::duration(value.get_ref()))?;
    let (min, max) = HEARTBEAT_RANGE;
    if every < min || every > max {
        let message = format!("invalid heartbeat {every:?}: expected \"100ms\" to \"1m\"");
        diag.error(value.span(), message);
        return None;
    }
    Some(every)
}

/// `url` (one server) or `urls` (cluster nodes, at least one): exactly one of them.
/// `span` is the section's, for the message when both are missing.
fn urls(
    url: Option<Spanned<String>>,
    urls: Option<Spanned<Vec<Spanned<String>>>>,
    span: &Span,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<String>> {
    match (url, urls) {
        (Some(url), None) => redis_url(&url, diag).map(|url| vec![url]),
        (None, Some(urls)) if urls.get_ref().is_empty() => {
            diag.error(
                urls.span(),
                "`urls` is empty: list some nodes of the cluster",
            );
            None
        }
        (None, Some(urls)) => {
            let parsed: Vec<_> = urls
                .into_inner()
                .iter()
                .map(|url| redis_url(url, diag))
                .collect();
            parsed.into_iter().collect()
        }
        (Some(url), Some(_)) => {
            let message = "give either `url` (one server) or `urls` (a Redis Cluster), not both";
            diag.error(url.span(), message);
            None
        }
        (None, None) => {
            if !diag.was_left_out(span, "url") && !diag.was_left_out(span, "urls") {
                diag.error(
                    span.clone(),
                    "missing key `url` (or `urls` for a Redis Cluster)",
                );
            }
            None
        }
    }
}

/// One `redis://` URL, checked.
fn redis_url(url: &Spanned<String>, diag: &mut Diagnostics<'_>) -> Option<String> {
    let text = url.get_ref();
    match ::redis::parse_redis_url(text) {
        Some(parsed) if matches!(parsed.scheme(), "redis" | "rediss") => Some(text.clone()),
        Some(_) => {
            let message = format!("unsupported Redis URL {text:?}: expected redis:// or rediss://");
            diag.error(url.span(), message);
            None
        }
        None => {
            let message = format!(
                "invalid Redis URL {text:?}: expected redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]"
            );
            diag.error(url.span(), message);
            None
        }
    }
}

/// The PEM certificates of the `ca` file (relative to `base`): at least one.
fn ca(path: &Spanned<String>, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Vec<u8>> {
    let file = base.join(path.get_ref());
    match std::fs::read(&file) {
        Ok(pem) if pem.windows(17).any(|w| w == b"BEGIN CERTIFICATE") => Some(pem),
        Ok(_) => {
            let message = format!(
                "{}: no certificate found: expected a PEM \"BEGIN CERTIFICATE\" block",
                file.display()
            );
            diag.error(path.span(), message);
            None
        }
        Err(err) => {
            diag.error(
                path.span(),
                format!("cannot read {}: {err}", file.display()),
            );
            None
        }
    }
}
