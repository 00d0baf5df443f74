//! A limit item's `ban` (the penalty box, "Bans" in docs/config.md), checked and made
//! into a [`Ban`].

use std::time::Duration;

use http::StatusCode;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Loose, RawBan};
use super::values;
use super::Ban;
use crate::limit::bans::{DEFAULT_SIZE, MIN_SIZE};

/// Most strikes `after` may ask for: beyond, a ban would never come.
pub(super) const MAX_AFTER: i64 = 1_000;
/// The longest window of strikes.
pub(super) const MAX_WITHIN: Duration = Duration::from_secs(86_400);
/// The longest ban: 30 days. Longer belongs in a deny list (`access`).
pub(super) const MAX_FOR: Duration = Duration::from_secs(30 * 86_400);

/// The item's ban (`Some(None)` when it has none), or `None` after reporting a problem.
/// A ban on a `concurrency` zone is allowed: a client that keeps more requests in flight
/// than it may is as telling a sign of abuse as one over its rate.
pub(super) fn ban(
    written: Option<&Spanned<RawBan>>,
    dry_run: bool,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Ban>> {
    let Some(written) = written else {
        return Some(None);
    };
    if dry_run {
        let message = "a `dry_run` limit never rejects, so it can never ban: remove `dry_run` (to enforce) or `ban`";
        diag.error(written.span(), message);
        return None;
    }
    let raw = written.get_ref();
    let span = written.span();
    let after = diag.required(raw.after.as_ref(), &span, "after");
    let within = diag.required(raw.within.as_ref(), &span, "within");
    let duration = diag.required(raw.duration.as_ref(), &span, "for");
    let (after, within, duration) = (after?, within?, duration?);
    let after = strikes(after, diag);
    let within = bounded(within, "within", MAX_WITHIN, "24h", diag);
    let duration = bounded(duration, "for", MAX_FOR, "720h", diag);
    let status = status(raw.status.as_ref(), diag);
    let size = size(raw.size.as_ref(), diag);
    Some(Some(Ban {
        after: after?,
        within: within?,
        duration: duration?,
        status: status?,
        size: size?,
    }))
}

/// `after`: 1 to [`MAX_AFTER`] strikes.
fn strikes(after: &Spanned<i64>, diag: &mut Diagnostics<'_>) -> Option<u32> {
    let value = *after.get_ref();
    if !(1..=MAX_AFTER).contains(&value) {
        let message = format!("invalid ban after {value}: expected 1 to {MAX_AFTER} rejections");
        diag.error(after.span(), message);
        return None;
    }
    u32::try_from(value).ok()
}

/// A duration of the ban, at most `most` (written `written_most`).
fn bounded(
    value: &Loose,
    key: &str,
    most: Duration,
    written_most: &str,
    diag: &mut Diagnostics<'_>,
) -> Option<Duration> {
    let duration = diag.check(value.span(), values::duration(value.get_ref()))?;
    if duration > most {
        let message = format!(
            r#"invalid ban {key} {}: at most "{written_most}""#,
            value.get_ref()
        );
        diag.error(value.span(), message);
        return None;
    }
    Some(duration)
}

/// `size`: the bytes of bans the item's zone may hold, at least [`MIN_SIZE`] (a
/// kilobyte a shard); [`DEFAULT_SIZE`] unless set.
fn size(value: Option<&Loose>, diag: &mut Diagnostics<'_>) -> Option<usize> {
    let Some(value) = value else {
        return Some(DEFAULT_SIZE);
    };
    let bytes = diag.check(value.span(), values::size(value.get_ref()))?;
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    if bytes < MIN_SIZE {
        let message = format!(r#"invalid ban size {}: at least "16k""#, value.get_ref());
        diag.error(value.span(), message);
        return None;
    }
    Some(bytes)
}

/// `status`: 403 unless set; any of 400 to 599 but 444 (429 makes a ban look like the
/// limit; 444, no answer, is the location's `limit_action = "close"`).
fn status(value: Option<&Spanned<i64>>, diag: &mut Diagnostics<'_>) -> Option<StatusCode> {
    let Some(value) = value else {
        return Some(StatusCode::FORBIDDEN);
    };
    if *value.get_ref() == i64::from(super::limit_action::UNANSWERED) {
        diag.error(value.span(), super::limit_action::NOT_A_STATUS);
        return None;
    }
    let status = u16::try_from(*value.get_ref())
        .ok()
        .filter(|code| (400..=599).contains(code))
        .and_then(|code| StatusCode::from_u16(code).ok());
    if status.is_none() {
        let message = format!(
            "invalid ban status {}: expected 400 to 599",
            value.get_ref()
        );
        diag.error(value.span(), message);
    }
    status
}
