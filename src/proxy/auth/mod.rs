//! The auth phase (`auth`, `satisfy`; DESIGN §18): who may pass beyond `access`, asked
//! after the limit phase, as nginx asks its access phase after `limit_req`. So a failed
//! login is an answer like any other: the zones' `count_status` see its 401 and a
//! brute force ends in the penalty box's `ban`, and a client over its rate costs no
//! hash check and no question to an auth service.
//!
//! [`basic`] checks a login against an htpasswd file; [`forward`] asks an auth service
//! ([`subrequest`] is what it sends).

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderName, HeaderValue, Response, StatusCode};
use tokio::sync::Semaphore;

use super::response;
use crate::config;
use crate::upstream::ResponseBody;

mod basic;
mod forward;
mod jwt;
mod subrequest;
mod users;
mod watched;

pub(crate) use basic::Basic;
use forward::Answer;
pub(crate) use forward::Service;
pub(crate) use jwt::Jwt;

/// Logins that may wait for a hash check at once, across the gateway.
const MOST_WAITING: usize = 256;

/// A location's `auth`, ready to ask: shared by the locations that inherit the same
/// `auth` from their site, so that a login that passed in one passes in all.
pub(crate) enum Auth {
    Basic(Basic),
    Request(Service),
    Jwt(Jwt),
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
    /// The `auth` as written, ready to ask; `group` reaches the service of a `request`.
    /// An error when the thread that fetches key sets cannot start.
    pub(crate) fn new(check: &config::Check, group: impl FnOnce(&config::Upstream) -> Arc<crate::upstream::Group>) -> Result<Auth, String> {
        Ok(match check {
            config::Check::Basic(basic) => Auth::Basic(Basic::new(basic, Instant::now())),
            config::Check::Jwt(settings) => Auth::Jwt(Jwt::new(Arc::clone(settings), Instant::now())?),
            config::Check::Request(settings) => {
                let group = group(&settings.upstream);
                Auth::Request(Service::new(Arc::clone(settings), group))
            }
        })
    }

    /// An `auth` asked where the caller cannot wait (an internal redirect into another
    /// location's `auth`): a login is checked on the worker itself, and so is a token
    /// (its claims go with the request when `keep_claims`, the location reading them); an
    /// auth service cannot be asked there, so that is a 500 (and an error-log line).
    pub(crate) fn check_now<B>(&self, req: &mut http::Request<B>, keep_claims: bool, now: Instant) -> Option<Response<ResponseBody>> {
        match self {
            Auth::Basic(basic) => basic.check_now(req.headers(), now),
            Auth::Jwt(jwt) => match jwt.check(req.headers(), now) {
                jwt::Checked::Verified(claims) => {
                    if keep_claims {
                        req.extensions_mut().insert(claims);
                    }
                    None
                }
                jwt::Checked::Refused(refusal) => Some(jwt.answer(refusal)),
            },
            Auth::Request(_) => {
                tracing::error!("an internal redirect led into a location with another auth.request: answered 500");
                Some(response::error(StatusCode::INTERNAL_SERVER_ERROR))
            }
        }
    }

    /// The headers a pass takes from the client and copies from the service.
    pub(crate) fn copied(&self) -> &[HeaderName] {
        match self {
            Auth::Basic(_) | Auth::Jwt(_) => &[],
            Auth::Request(service) => service.copied(),
        }
    }
}

/// What the auth phase decided.
pub(super) enum Verdict<'a> {
    Pass(Granted<'a>),
    Refuse(Response<ResponseBody>),
}

/// What a request that passed takes on: the client's headers of the names an auth
/// service's answer gives are replaced by the service's; a verified token's claims.
#[derive(Default)]
pub(super) struct Granted<'a> {
    removed: &'a [HeaderName],
    added: Vec<(HeaderName, HeaderValue)>,
    /// A verified token's claims: its `sub` names the user in the access log.
    claims: Option<Arc<crate::vars::Claims>>,
    /// The claims go with the request (a text of the location reads them).
    keep_claims: bool,
}

impl Granted<'_> {
    pub(super) fn apply<B>(self, req: &mut http::Request<B>, log: &mut super::logged::Pending<'_>) {
        let headers = req.headers_mut();
        for name in self.removed {
            headers.remove(name);
        }
        for (name, value) in self.added {
            headers.append(name, value);
        }
        let Some(claims) = self.claims else {
            return;
        };
        if let Some(subject) = claims.get("sub") {
            log.subject(subject);
        }
        if self.keep_claims {
            req.extensions_mut().insert(claims);
        }
    }
}

impl super::Pipeline {
    /// The auth phase for a request `limited` admitted: what it takes on when it may go
    /// on, else the refusal, settled with the zones (so `count_status` and `ban` see a
    /// 401) and carrying the location's `always` header rules. With `satisfy = "any"`, a
    /// client an `allow` rule names passes without a login.
    pub(super) async fn authenticate<'l>(
        &self,
        location: &'l super::Location,
        asked: &super::own::Asked<'_>,
        limited: &mut crate::limit::outcome::Outcome,
        log: &super::logged::Pending<'_>,
    ) -> Verdict<'l> {
        let Some(auth) = location.auth.as_deref() else {
            return Verdict::Pass(Granted::default());
        };
        let removed = auth.copied();
        if location.satisfy == config::Satisfy::Any && location.access.allows(asked.client) {
            return Verdict::Pass(Granted { removed, ..Granted::default() });
        }
        let answer = match auth {
            // Boxed: the two futures that wait are made only where they are asked, and a
            // request's future stays small (a token is checked without waiting).
            Auth::Basic(basic) => {
                let checked = basic.check(asked.req.headers(), &self.auth_checks, crate::clock::now());
                Box::pin(checked).await.map_or(Answer::Pass(Vec::new()), Answer::Refuse)
            }
            Auth::Request(service) => Box::pin(service.ask(asked)).await,
            Auth::Jwt(jwt) => match Self::token_checked(location, jwt, asked.req).await {
                Verdict::Pass(granted) => return Verdict::Pass(granted),
                Verdict::Refuse(refusal) => Answer::Refuse(refusal),
            },
        };
        let mut refusal = match answer {
            Answer::Pass(added) => return Verdict::Pass(Granted { removed, added, ..Granted::default() }),
            Answer::Refuse(refusal) => refusal,
        };
        let pending = std::mem::take(&mut limited.settle);
        super::settle::settle(location, &mut refusal, pending, false, asked.conn.worker);
        // The 400 of `Authorization` sent twice is the request's fault, answered as nginx's
        // header parser answers it: without the location's headers.
        if refusal.status() != StatusCode::BAD_REQUEST {
            super::own::add(super::own::Place::location(location), &mut refusal, asked, log);
        }
        Verdict::Refuse(refusal)
    }
}

/// Checks the token of a request to `location` before its limits, when a zone's key or
/// plan reads `$jwt_claim_NAME`: the claims (or the refusal, answered after the limits)
/// go with the request. A request refused here has no claims, so those zones skip it;
/// it is answered 401 all the same, once the limits have counted it.
pub(super) fn check_first<B>(location: &super::Location, req: &mut http::Request<B>, now: Instant) {
    let Some(Auth::Jwt(jwt)) = location.auth.as_deref() else {
        return;
    };
    match jwt.check(req.headers(), now) {
        jwt::Checked::Verified(claims) => req.extensions_mut().insert(claims).map(drop),
        // No waiting here for a key being fetched: the zones are counted now.
        jwt::Checked::Refused(jwt::Refusal::UnknownKey(_)) => req.extensions_mut().insert(jwt::Refusal::Invalid).map(drop),
        jwt::Checked::Refused(refusal) => req.extensions_mut().insert(refusal).map(drop),
    };
}

impl super::Pipeline {
    /// A JWT location's auth phase: the verdict [`check_first`] reached, else the token
    /// checked now. The claims go with the request when the location reads them.
    async fn token_checked<'l, B>(location: &'l super::Location, jwt: &Jwt, req: &http::Request<B>) -> Verdict<'l> {
        let mut checked = checked_first(req).unwrap_or_else(|| jwt.check(req.headers(), crate::clock::now()));
        if let jwt::Checked::Refused(jwt::Refusal::UnknownKey(before)) = checked {
            // Boxed: only a request with a new key waits.
            checked = Box::pin(jwt.after_fetch(before, req.headers())).await;
        }
        match checked {
            jwt::Checked::Verified(claims) => Verdict::Pass(Granted {
                claims: Some(claims),
                // Checked first, the claims are in the request already.
                keep_claims: location.claims_read && !location.check_first,
                ..Granted::default()
            }),
            jwt::Checked::Refused(refusal) => Verdict::Refuse(jwt.answer(refusal)),
        }
    }
}

/// What [`check_first`] found for `req`, if it ran.
fn checked_first<B>(req: &http::Request<B>) -> Option<jwt::Checked> {
    let extensions = req.extensions();
    let claims = extensions.get::<Arc<crate::vars::Claims>>().cloned().map(jwt::Checked::Verified);
    claims.or_else(|| extensions.get::<jwt::Refusal>().copied().map(jwt::Checked::Refused))
}
