//! `auth.basic` at run time: nginx's `auth_basic`. A hash check runs on the blocking
//! pool (bcrypt at cost 10 takes about 90 ms), no more of them at once than the machine
//! has CPUs, and only so many logins wait for one (past that, 503). Credentials that
//! passed are remembered by a digest, so a logged-in client pays for one check, not one
//! a request.

use std::sync::Arc;
use std::time::Instant;

use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use super::users::{self, Table};
use super::Checks;
use crate::access::basic::{self, Checked};
use crate::config;
use crate::proxy::response;
use crate::upstream::ResponseBody;

/// A location's `auth.basic`, ready to ask.
pub(crate) struct Basic {
    table: Table,
    challenge: HeaderValue,
}

impl Basic {
    /// `basic` at `now`. The realm was checked when the config was read.
    pub(crate) fn new(basic: &config::Basic, now: Instant) -> Basic {
        let challenge = basic::challenge(&basic.realm).unwrap_or(HeaderValue::from_static("Basic"));
        Basic {
            table: users::table(basic, now),
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

    /// [`Basic::check`] where the caller cannot wait (an internal redirect into this
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

/// What [`Basic::known`] found.
enum Known {
    /// The answer, without a hash check (`None`: the credentials passed before).
    Answered(Option<Response<ResponseBody>>),
    /// Credentials to check against the table in force.
    Unknown(Arc<users::Loaded>, basic::Credentials),
}
