//! One managed name's life: serve the stored certificate until it is due, then order a
//! new one (the challenge types in turn, the one that last worked first), store it and
//! put it in force; after a failure, wait longer each time before the next try.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use instant_acme::CertificateIdentifier;

use super::order::{self, OrderError};
use super::schedule;
use super::setup::{self, Context};
use super::status::NameState;
use super::storage::Stored;

/// Longest one order may take, from new order to certificate.
const ORDER_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest sleep between looks at the clock: a clock stepped forward, or a sibling
/// instance's renewal, is noticed within this.
const LONGEST_SLEEP: Duration = Duration::from_secs(3600);
/// How long to wait while another instance holds a name's lock.
const LOCKED_WAIT: Duration = Duration::from_secs(2);

/// When the certificate in force is to be renewed, worked out once per certificate
/// (and moved when the CA suggests a window).
struct Due {
    not_after: i64,
    renew_at: i64,
    /// When the CA's renewal information was last asked for.
    asked_ca: Option<i64>,
}

/// How often the CA's renewal information (RFC 9773) is asked for while a certificate
/// is in force: the CA may move the window, to renew early after an incident.
const ASK_CA_EVERY: i64 = 6 * 3600;

/// Runs for as long as `name` is managed with this context.
pub async fn manage(context: Arc<Context>, name: String) {
    let mut failures = 0u32;
    let mut preferred = 0usize;
    let mut due: Option<Due> = None;
    let mut unreadable = false;
    loop {
        let stored = match context.setup.storage.certificate(&name) {
            Ok(stored) => stored,
            // Once may be a sibling instance halfway through writing; twice is not.
            Err(why) if !unreadable => {
                tracing::warn!(name, error = %why, "stored certificate unreadable; looking again shortly");
                unreadable = true;
                tokio::time::sleep(LOCKED_WAIT).await;
                continue;
            }
            Err(why) => {
                tracing::error!(name, error = %why, "stored certificate unreadable; ordering a new one");
                None
            }
        };
        unreadable = false;
        if let Some(stored) = &stored {
            in_force(&context, &name, stored, &mut due);
        }
        if let Some(due) = due.as_mut().filter(|due| due.renew_at > unix_now()) {
            failures = 0;
            wait_until_due(&context, &name, due, stored.as_ref()).await;
            continue;
        }
        let until = stored.as_ref().map(|s| s.certificate.not_after);
        let state = match until {
            Some(until) => NameState::Renewing { until },
            None => NameState::Pending,
        };
        context.shared.set(&name, state);
        match attempt(&context, &name, &mut preferred).await {
            Ok(()) => failures = 0,
            Err(why) => {
                failures += 1;
                let wait = wait_after_failure(&context, failures);
                let next_try = unix_now() + wait.as_secs() as i64;
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

/// Says the name is valid, asks the CA for its renewal window now and then, and
/// sleeps towards the renewal (at most [`LONGEST_SLEEP`] at a time).
async fn wait_until_due(context: &Context, name: &str, due: &mut Due, stored: Option<&Stored>) {
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
            due.renew_at = schedule::renew_in_window(start, end, schedule::random_fraction());
            return;
        }
    }
    let next_ask = due.asked_ca.map_or(i64::MAX, |at| at + ASK_CA_EVERY);
    sleep_secs(due.renew_at.min(next_ask) - now).await;
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

/// One try at a new certificate for `name`, under its lock: `Ok` when one is stored
/// (by this instance or, meanwhile, by a sibling), or a sibling is ordering it.
async fn attempt(context: &Context, name: &str, preferred: &mut usize) -> Result<(), String> {
    if let Some(until) = context.setup.client.quiet_until(Instant::now()) {
        tokio::time::sleep_until(until.into()).await;
    }
    let storage = &context.setup.storage;
    let Some(_lock) = storage.lock(name).map_err(|err| err.to_string())? else {
        tokio::time::sleep(LOCKED_WAIT).await;
        return Ok(());
    };
    if let Ok(Some(stored)) = storage.certificate(name) {
        let renew_at = schedule::renew_at(stored.not_before, stored.certificate.not_after, 0.0);
        if renew_at > unix_now() {
            return Ok(());
        }
    }
    let _slot = context
        .orders
        .acquire()
        .await
        .map_err(|err| err.to_string())?;
    let account = match context.account().await {
        Ok(account) => account,
        Err(why) => {
            // A try that could not reach the CA is a failed order too.
            context.shared.count(false);
            return Err(why);
        }
    };
    let challenges = &context.setup.config.challenges;
    let mut failed = Vec::new();
    for turn in 0..challenges.len() {
        let index = (*preferred + turn) % challenges.len();
        let challenge = challenges[index];
        let issue = order::issue(account, name, challenge, &context.published, storage);
        let result = tokio::time::timeout(ORDER_TIMEOUT, issue).await;
        context.shared.count(matches!(result, Ok(Ok(_))));
        match result {
            Ok(Ok(issued)) => {
                storage
                    .save_certificate(name, &issued.chain, &issued.key)
                    .map_err(|err| err.to_string())?;
                tracing::info!(name, challenge = challenge.as_str(), "certificate issued");
                *preferred = index;
                return Ok(());
            }
            Ok(Err(OrderError::Validation(why))) => {
                tracing::warn!(name, challenge = challenge.as_str(), error = %why, "challenge failed");
                failed.push(format!("{}: {why}", challenge.as_str()));
            }
            Ok(Err(OrderError::Other(why))) => return Err(why),
            Err(_) => return Err(format!("no certificate within {ORDER_TIMEOUT:?}")),
        }
    }
    Err(failed.join("; "))
}

fn wait_after_failure(context: &Context, failures: u32) -> Duration {
    let config = &context.setup.config;
    let now = Instant::now();
    let ca_asked = context
        .setup
        .client
        .quiet_until(now)
        .map(|until| until - now);
    let random = schedule::random_fraction();
    schedule::retry_in(
        failures,
        config.retry_min,
        config.retry_max,
        ca_asked,
        random,
    )
}

async fn sleep_secs(seconds: i64) {
    let wait = Duration::from_secs(u64::try_from(seconds).unwrap_or(0)).min(LONGEST_SLEEP);
    tokio::time::sleep(wait).await;
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
