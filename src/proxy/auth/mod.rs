//! The auth phase (`auth`, `satisfy`; DESIGN §18): who may pass beyond `access`, asked
//! after the limit phase, as nginx asks its access phase after `limit_req`. So a failed
//! login is an answer like any other: the zones' `count_status` see its 401 and a
//! brute force ends in the penalty box's `ban`, and a client over its rate costs no
//! hash check.
//!
//! A hash check runs on the blocking pool (bcrypt at cost 10 takes about 90 ms), no more
//! of them at once than the machine has CPUs, and only so many logins wait for one
//! (past that, 503). Credentials that passed are remembered by a digest, so a logged-in
//! client pays for one check, not one a request.

use std::sync::Arc;
use std::time::Instant;

use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use tokio::sync::Semaphore;

use super::response;
use crate::access::basic::{self, Checked};
use crate::config;
use crate::upstream::ResponseBody;

mod users;

use users::Table;

/// Logins that may wait for a hash check at once, across the gateway.
const MOST_WAITING: usize = 256;

/// A location's `auth`, ready to ask: shared by the locations that inherit the same
/// `auth` from their site, so that a login that passed in one passes in all.
pub(crate) struct Auth {
    table: Table,
    challenge: HeaderValue,
}

/// The gateway's bound on hash checks: as many at once as CPUs, [`MOST_WAITING`] waiting.
#[derive(Clone)]
pub(crate) struct Checks {
    running: Arc<Semaphore>,
    waiting: Arc<Semaphore>,
}

impl Checks {
    pub(crate) fn new(cpus: usize) -> Checks {
        Checks {
            running: Arc::new(Semaphore::new(cpus.max(1))),
            waiting: Arc::new(Semaphore::new(MOST_WAITING)),
        }
    }
}

impl Auth {
    /// `basic` at `now`. The realm was checked when the config was read.
    pub(crate) fn new(basic: &config::Basic, now: Instant) -> Auth {
        let challenge = basic::challenge(&basic.realm).unwrap_or(HeaderValue::from_static("Basic"));
        Auth {
            table: Table::new(basic, now),
            challenge,
        }
    }

    /// Whether the request's credentials pass, at `now`: `None` when they do, else the
    /// answer (401 with the challenge; 400 for `Authorization` sent twice, as nginx; 503
    /// when too many logins wait for a check).
    pub(crate) async fn check(&self, headers: &HeaderMap, checks: &Checks, now: Instant) -> Option<Response<ResponseBody>> {
        let credentials = match credentials(headers) {
            Ok(Some(credentials)) => credentials,
            Ok(None) => return Some(self.unauthorized()),
            Err(Twice) => return Some(response::error(StatusCode::BAD_REQUEST)),
        };
        let (user, password) = (credentials.user(), credentials.password());
        let loaded = self.table.current(now);
        if loaded.passed_before(user, password) {
            return None;
        }
        let Ok(_waiting) = checks.waiting.try_acquire() else {
            return Some(response::error(StatusCode::SERVICE_UNAVAILABLE));
        };
        let Ok(_running) = checks.running.acquire().await else {
            return Some(response::error(StatusCode::SERVICE_UNAVAILABLE));
        };
        let users = Arc::clone(&loaded.users);
        let (user, password) = (user.to_vec(), password.to_vec());
        let checked = tokio::task::spawn_blocking(move || (users.check(&user, &password), user, password)).await;
        match checked {
            Ok((Checked::Pass, user, password)) => {
                loaded.remember(&user, &password);
                None
            }
            Ok((_, _, _)) => Some(self.unauthorized()),
            Err(_) => Some(response::error(StatusCode::INTERNAL_SERVER_ERROR)),
        }
    }

    /// [`Auth::check`] where the caller cannot wait (an internal redirect into this
    /// location): credentials that passed before pass at once, others are checked on the
    /// worker itself. Rare: a redirect from one `auth` into another.
    pub(crate) fn check_now(&self, headers: &HeaderMap, now: Instant) -> Option<Response<ResponseBody>> {
        let credentials = match credentials(headers) {
            Ok(Some(credentials)) => credentials,
            Ok(None) => return Some(self.unauthorized()),
            Err(Twice) => return Some(response::error(StatusCode::BAD_REQUEST)),
        };
        let (user, password) = (credentials.user(), credentials.password());
        let loaded = self.table.current(now);
        if loaded.passed_before(user, password) {
            return None;
        }
        match loaded.users.check(user, password) {
            Checked::Pass => {
                loaded.remember(user, password);
                None
            }
            Checked::NoSuchUser | Checked::Mismatch => Some(self.unauthorized()),
        }
    }

    /// nginx's 401: `WWW-Authenticate: Basic realm="…"`.
    fn unauthorized(&self) -> Response<ResponseBody> {
        let mut answer = response::error(StatusCode::UNAUTHORIZED);
        answer.headers_mut().insert(WWW_AUTHENTICATE, self.challenge.clone());
        answer
    }
}

/// `Authorization` sent twice: nginx refuses such a request (400).
struct Twice;

/// The request's basic credentials: `None` without an `Authorization` header or with one
/// that holds none.
fn credentials(headers: &HeaderMap) -> Result<Option<basic::Credentials>, Twice> {
    let mut sent = headers.get_all(AUTHORIZATION).iter();
    let first = sent.next();
    if sent.next().is_some() {
        return Err(Twice);
    }
    Ok(first.and_then(|value| basic::credentials(value.as_bytes())))
}

impl super::Pipeline {
    /// The auth phase for a request `limited` admitted: `None` when it may go on, else
    /// the refusal, settled with the zones (so `count_status` and `ban` see a 401) and
    /// carrying the location's `always` header rules. With `satisfy = "any"`, a client
    /// an `allow` rule names passes without a login.
    pub(super) async fn authenticate(
        &self,
        location: &super::Location,
        asked: &super::own::Asked<'_>,
        limited: &mut crate::limit::outcome::Outcome,
        log: &super::logged::Pending<'_>,
    ) -> Option<Response<ResponseBody>> {
        let auth = location.auth.as_ref()?;
        if location.satisfy == config::Satisfy::Any && location.access.allows(asked.client) {
            return None;
        }
        let now = crate::clock::now();
        let mut refusal = auth.check(asked.req.headers(), &self.auth_checks, now).await?;
        let pending = std::mem::take(&mut limited.settle);
        super::settle::settle(location, &mut refusal, pending, false, asked.conn.worker);
        // The 400 of `Authorization` sent twice is the request's fault, answered as nginx's
        // header parser answers it: without the location's headers.
        if refusal.status() == StatusCode::UNAUTHORIZED {
            super::own::add(super::own::Place::location(location), &mut refusal, asked, log);
        }
        Some(refusal)
    }
}
