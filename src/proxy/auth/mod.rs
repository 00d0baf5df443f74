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
        let (loaded, credentials) = match self.known(headers, now) {
            Known::Answered(answer) => return answer,
            Known::Unknown(loaded, credentials) => (loaded, credentials),
        };
        let Ok(_waiting) = checks.waiting.try_acquire() else {
            return Some(response::error(StatusCode::SERVICE_UNAVAILABLE));
        };
        let Ok(_running) = checks.running.acquire().await else {
            return Some(response::error(StatusCode::SERVICE_UNAVAILABLE));
        };
        let users = Arc::clone(&loaded.users);
        let checked = tokio::task::spawn_blocking(move || {
            let checked = users.check(credentials.user(), credentials.password());
            (checked, credentials)
        });
        match checked.await {
            Ok((checked, credentials)) => self.decided(&loaded, checked, &credentials),
            Err(_) => Some(response::error(StatusCode::INTERNAL_SERVER_ERROR)),
        }
    }

    /// [`Auth::check`] where the caller cannot wait (an internal redirect into this
    /// location): credentials that passed before pass at once, others are checked on the
    /// worker itself. Rare: a redirect from one `auth` into another.
    pub(crate) fn check_now(&self, headers: &HeaderMap, now: Instant) -> Option<Response<ResponseBody>> {
        match self.known(headers, now) {
            Known::Answered(answer) => answer,
            Known::Unknown(loaded, credentials) => {
                let checked = loaded.users.check(credentials.user(), credentials.password());
                self.decided(&loaded, checked, &credentials)
            }
        }
    }

    /// What is decided without a hash check: no credentials (401), `Authorization` twice
    /// (400), or credentials that passed before (`None`).
    fn known(&self, headers: &HeaderMap, now: Instant) -> Known {
        let mut sent = headers.get_all(AUTHORIZATION).iter();
        let first = sent.next();
        if sent.next().is_some() {
            return Known::Answered(Some(response::error(StatusCode::BAD_REQUEST)));
        }
        let Some(credentials) = first.and_then(|value| basic::credentials(value.as_bytes())) else {
            return Known::Answered(Some(self.unauthorized()));
        };
        let loaded = self.table.current(now);
        match loaded.passed_before(credentials.user(), credentials.password()) {
            true => Known::Answered(None),
            false => Known::Unknown(loaded, credentials),
        }
    }

    /// The answer to a hash check: a pass is remembered.
    fn decided(&self, loaded: &users::Loaded, checked: Checked, credentials: &basic::Credentials) -> Option<Response<ResponseBody>> {
        match checked {
            Checked::Pass => {
                loaded.remember(credentials.user(), credentials.password());
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

/// What [`Auth::known`] found.
enum Known {
    /// The answer, without a hash check (`None`: the credentials passed before).
    Answered(Option<Response<ResponseBody>>),
    /// Credentials to check against the table in force.
    Unknown(Arc<users::Loaded>, basic::Credentials),
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
