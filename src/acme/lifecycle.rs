//! One managed name's life: serve the stored certificate until it is due, then order a
//! new one (the challenge types in turn, the one that last worked first), check it,
//! store it and put it in force; after a failure, wait longer each time before the next
//! try. What to do next is [`next_step`], a pure function of the certificate in force
//! and the time; every path through the loop sleeps or talks to the CA.

use std::sync::Arc;
use std::time::{Duration, Instant};

use instant_acme::CertificateIdentifier;

use super::client::noting_retry_after;
use super::order::{self, OrderError};
use super::schedule::{self, unix_now};
use super::setup::{self, Context};
use super::status::NameState;
use super::storage::{self, Stored, LOCK_REFRESH};

/// Longest one order may take, from new order to certificate.
const ORDER_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest sleep between looks at the clock: a clock stepped forward, or a sibling
/// instance's renewal, is noticed within this.
const LONGEST_SLEEP: Duration = Duration::from_secs(3600);
/// How long to wait while another instance holds a name's lock.
const LOCKED_WAIT: Duration = Duration::from_secs(2);
/// How often the CA's renewal information (RFC 9773) is asked for while a certificate
/// is in force: the CA may move the window, to renew early after an incident.
const ASK_CA_EVERY: i64 = 6 * 3600;

/// When the certificate in force is to be renewed, worked out once per certificate
/// (and moved earlier when the CA suggests a window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Due {
    pub not_after: i64,
    pub renew_at: i64,
    /// When the CA's renewal information was last asked for.
    pub asked_ca: Option<i64>,
}

/// What a name's task does next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Wait for the renewal time (asking the CA's window meanwhile).
    Wait,
    /// Order a certificate.
    Order,
    /// Wait as after a failed try: a certificate just put in force is already due.
    Suspicious,
}

/// The next step for a name whose certificate in force is due as `due` (`None`: none
/// yet), at `now`. `fresh`: the certificate came in by the step before (issued here, or
/// stored by a sibling); being due at once means the clock or the CA is wrong, and
/// ordering again at once would loop.
pub(super) fn next_step(due: Option<&Due>, now: i64, fresh: bool) -> Step {
    match due {
        Some(due) if due.renew_at > now => Step::Wait,
        Some(_) if fresh => Step::Suspicious,
        _ => Step::Order,
    }
}

/// What a try ended with, when it did not fail.
enum Tried {
    /// A certificate was issued and stored.
    Issued,
    /// A sibling instance stored a new certificate meanwhile.
    Sibling,
    /// A sibling instance holds the name's lock.
    Busy,
}

/// Runs for as long as `name` is managed with this context.
pub(super) async fn manage(context: Arc<Context>, name: String) {
    let mut failures = 0u32;
    let mut preferred = 0usize;
    let mut due: Option<Due> = None;
    let mut fresh = false;
    loop {
        let stored = load(&context, &name, due.is_some()).await;
        if let Some(stored) = &stored {
            in_force(&context, &name, stored, &mut due);
        }
        let now = unix_now();
        let failure = match next_step(due.as_ref(), now, fresh) {
            Step::Wait => {
                failures = 0;
                fresh = false;
                wait_until_due(&context, &name, due.as_mut(), stored.as_ref()).await;
                continue;
            }
            Step::Suspicious => {
                let why = "the new certificate is already due for renewal: is the clock right?";
                Some((why.to_owned(), None))
            }
            Step::Order => {
                let until = due.map(|d| d.not_after);
                let state = match until {
                    Some(until) => NameState::Renewing { until },
                    None => NameState::Pending,
                };
                context.shared.set(&name, state);
                let (tried, asked) =
                    noting_retry_after(attempt(&context, &name, &mut preferred, until)).await;
                match tried {
                    Ok(Tried::Busy) => {
                        tokio::time::sleep(LOCKED_WAIT).await;
                        None
                    }
                    Ok(Tried::Issued | Tried::Sibling) => {
                        fresh = true;
                        None
                    }
                    Err(why) => Some((why, asked)),
                }
            }
        };
        if let Some((why, asked)) = failure {
            failures += 1;
            fresh = false;
            let until = due.map(|d| d.not_after);
            let wait = wait_after_failure(&context, failures, asked);
            let next_try = now + wait.as_secs() as i64;
            tracing::error!(name, error = %why, retry_in = ?wait, "ACME order failed");
            context.shared.set(
                &name,
                NameState::Failed {
                    reason: why,
                    next_try,
                    until,
                },
            );
            tokio::time::sleep(wait).await;
        }
    }
}

/// The stored certificate of `name`. One that cannot be read is reported, and looked at
/// again shortly once (a sibling may be writing it); then it counts as none, which
/// orders a new one unless one is in force (`in_force`).
async fn load(context: &Context, name: &str, in_force: bool) -> Option<Stored> {
    for first in [true, false] {
        match context.setup.storage.certificate(name) {
            Ok(stored) => return stored,
            Err(why) if first => {
                tracing::warn!(name, error = %why, "stored certificate unusable; looking again shortly");
                tokio::time::sleep(LOCKED_WAIT).await;
            }
            Err(why) if in_force => {
                tracing::error!(name, error = %why, "stored certificate unusable; the one in force stays until renewal")
            }
            Err(why) => {
                tracing::error!(name, error = %why, "stored certificate unusable; ordering a new one")
            }
        }
    }
    None
}

/// Puts `stored` in force if it is not already, and works out when it is due.
fn in_force(context: &Context, name: &str, stored: &Stored, due: &mut Option<Due>) {
    let not_after = stored.certificate.not_after;
    if due.as_ref().is_some_and(|d| d.not_after == not_after) {
        return;
    }
    if !context.published.has_issued(name) || due.is_some() {
        let until = super::status::rfc3339(not_after);
        tracing::info!(name, until, "certificate in force");
    }
    setup::serve(&context.published, name, stored);
    let random = schedule::random_fraction();
    let renew_at = schedule::renew_at(stored.not_before, not_after, random);
    *due = Some(Due {
        not_after,
        renew_at,
        asked_ca: None,
    });
}

/// Says the name is valid, asks the CA for its renewal window now and then (moving the
/// renewal earlier, never later), and sleeps towards the renewal (at most
/// [`LONGEST_SLEEP`] at a time).
async fn wait_until_due(
    context: &Context,
    name: &str,
    due: Option<&mut Due>,
    stored: Option<&Stored>,
) {
    let Some(due) = due else {
        return;
    };
    context.shared.set(
        name,
        NameState::Valid {
            until: due.not_after,
            renew_at: due.renew_at,
        },
    );
    let now = unix_now();
    let ask = due.asked_ca.is_none_or(|at| now - at >= ASK_CA_EVERY);
    if let (true, Some(stored)) = (ask, stored) {
        due.asked_ca = Some(now);
        if let Some((start, end)) = suggested_window(context, stored).await {
            let suggested = schedule::renew_in_window(start, end, schedule::random_fraction());
            due.renew_at = due.renew_at.min(suggested);
            return;
        }
    }
    let next_ask = due
        .asked_ca
        .map_or(i64::MAX, |at| at.saturating_add(ASK_CA_EVERY));
    let wait = due.renew_at.min(next_ask).saturating_sub(now);
    let wait = Duration::from_secs(u64::try_from(wait).unwrap_or(0)).min(LONGEST_SLEEP);
    tokio::time::sleep(wait.max(Duration::from_secs(1))).await;
}

/// The renewal window the CA suggests for `stored`, if it offers ACME Renewal
/// Information (RFC 9773); `None` when it does not or cannot be asked now, and when
/// no account is stored yet (none is made only to ask).
async fn suggested_window(context: &Context, stored: &Stored) -> Option<(i64, i64)> {
    let account = context.stored_account().await?;
    let leaf = stored.certificate.key.cert.first()?;
    let id = CertificateIdentifier::try_from(leaf).ok()?;
    match account.renewal_info(&id).await {
        Ok((info, _)) => {
            let window = info.suggested_window;
            Some((window.start.unix_timestamp(), window.end.unix_timestamp()))
        }
        Err(instant_acme::Error::Unsupported(_)) => None,
        Err(err) => {
            tracing::debug!(error = %err, "no renewal information from the CA");
            None
        }
    }
}

/// One try at a new certificate for `name`, replacing the one that ends at
/// `replacing`: under the name's lock, kept fresh while the try lasts.
async fn attempt(
    context: &Context,
    name: &str,
    preferred: &mut usize,
    replacing: Option<i64>,
) -> Result<Tried, String> {
    if let Some(until) = context.setup.client.quiet_until(Instant::now()) {
        tokio::time::sleep_until(until.into()).await;
    }
    // The slot first: the lock is held only while this instance is really ordering.
    let _slot = context
        .orders
        .acquire()
        .await
        .map_err(|err| err.to_string())?;
    let storage = &context.setup.storage;
    let Some(lock) = storage.lock(name).map_err(|err| err.to_string())? else {
        return Ok(Tried::Busy);
    };
    let lock = Arc::new(lock);
    let refresher = tokio::spawn({
        let lock = lock.clone();
        async move {
            loop {
                tokio::time::sleep(LOCK_REFRESH).await;
                lock.refresh();
            }
        }
    });
    let _refreshing = AbortOnDrop(refresher);
    // A sibling may have stored a new one while this instance waited for the lock.
    if let Ok(Some(stored)) = storage.certificate(name) {
        if Some(stored.certificate.not_after) != replacing {
            return Ok(Tried::Sibling);
        }
    }
    let account = match context.account().await {
        Ok(account) => account,
        Err(why) => {
            // A try that could not reach the CA is a failed order too.
            context.shared.count(false);
            return Err(why);
        }
    };
    issue(context, account, name, preferred)
        .await
        .map(|()| Tried::Issued)
}

/// Orders with each challenge type in turn until one issues; checks and stores what
/// the CA sent.
async fn issue(
    context: &Context,
    account: &instant_acme::Account,
    name: &str,
    preferred: &mut usize,
) -> Result<(), String> {
    let storage = &context.setup.storage;
    let challenges = &context.setup.config.challenges;
    let mut failed = Vec::new();
    for turn in 0..challenges.len() {
        let index = (*preferred + turn) % challenges.len();
        let challenge = challenges[index];
        let issue = order::issue(account, name, challenge, &context.published, storage);
        let result = tokio::time::timeout(ORDER_TIMEOUT, issue).await;
        let issued = match result {
            Ok(Ok(issued)) => issued,
            Ok(Err(OrderError::Validation(why))) => {
                context.shared.count(false);
                tracing::warn!(name, challenge = challenge.as_str(), error = %why, "challenge failed");
                failed.push(format!("{}: {why}", challenge.as_str()));
                continue;
            }
            Ok(Err(OrderError::Other(why))) => {
                context.shared.count(false);
                return Err(why);
            }
            Err(_) => {
                context.shared.count(false);
                return Err(format!("no certificate within {ORDER_TIMEOUT:?}"));
            }
        };
        let checked = storage::check_issued(name, &issued.chain, &issued.key, unix_now());
        if let Err(why) = checked {
            context.shared.count(false);
            return Err(format!("the CA's certificate is refused: {why}"));
        }
        storage
            .save_certificate(name, &issued.chain, &issued.key)
            .map_err(|err| err.to_string())?;
        context.shared.count(true);
        tracing::info!(name, challenge = challenge.as_str(), "certificate issued");
        *preferred = index;
        return Ok(());
    }
    Err(failed.join("; "))
}

/// Aborts a task when dropped: the lock's refresher ends with the try.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The wait after the `failures`-th failure in a row: backoff, and no less than the
/// CA asked for (`asked`, of this try; or of every order, when it is overloaded).
fn wait_after_failure(context: &Context, failures: u32, asked: Option<Duration>) -> Duration {
    let config = &context.setup.config;
    let now = Instant::now();
    let quiet = context
        .setup
        .client
        .quiet_until(now)
        .map(|until| until - now);
    let ca_asked = asked.max(quiet);
    let random = schedule::random_fraction();
    schedule::retry_in(
        failures,
        config.retry_min,
        config.retry_max,
        ca_asked,
        random,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(renew_at: i64) -> Due {
        Due {
            not_after: renew_at + 100,
            renew_at,
            asked_ca: None,
        }
    }

    #[test]
    fn what_comes_next() {
        let now = 1_000;
        assert_eq!(next_step(None, now, false), Step::Order);
        assert_eq!(next_step(Some(&due(1_001)), now, false), Step::Wait);
        assert_eq!(next_step(Some(&due(1_001)), now, true), Step::Wait);
        // Due: renew; but not a certificate that just came in (no order loop).
        assert_eq!(next_step(Some(&due(1_000)), now, false), Step::Order);
        assert_eq!(next_step(Some(&due(900)), now, true), Step::Suspicious);
        // Moved earlier by the CA's window: due, so ordered; the lock's re-check
        // compares certificates, not schedules, so it does not refuse it.
        let mut moved = due(5_000);
        moved.renew_at = 500;
        assert_eq!(next_step(Some(&moved), now, false), Step::Order);
    }
}
