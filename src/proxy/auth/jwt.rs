//! `auth.jwt` at run time: the token is taken from `Authorization: Bearer` (or a cookie),
//! checked against the key set in force ([`crate::access::jwt`]), and its claims go with
//! the request for `$jwt_claim_NAME`. A token checked before is not checked again
//! ([`Remembered`]).
//!
//! Answers (RFC 6750): no token, 401 with `WWW-Authenticate: Bearer`; a bad one, 401 with
//! `error="invalid_token"`; a good one lacking a `require`d claim, 403 with
//! `error="insufficient_scope"`; `Authorization` sent twice, 400.

use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use super::watched::Watched;
use crate::access::jwt::{self, KeySet, Refused, Remembered};
use crate::config;
use crate::proxy::response;
use crate::upstream::ResponseBody;
use crate::vars::Claims;

/// A location's `auth.jwt`, ready to ask.
pub(crate) struct Jwt {
    settings: Arc<config::Jwt>,
    keys: Keys,
    remembered: Remembered,
    invalid: HeaderValue,
    insufficient: HeaderValue,
}

/// The longest a request with an unknown `kid` waits for the key set fetched for it.
const WAIT_FOR_KEYS: std::time::Duration = std::time::Duration::from_secs(2);

/// What [`Jwt::check`] found.
pub(super) enum Checked {
    Verified(Arc<Claims>),
    Refused(Refusal),
}

/// Why a request has no verified claims. Kept with the request (its extensions) when the
/// token is checked before the limits, and answered after them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token: 401 with the plain challenge.
    NoToken,
    /// `Authorization` twice: 400.
    Twice,
    /// A bad token: 401 `invalid_token`.
    Invalid,
    /// A good token lacking a `require`d claim: 403 `insufficient_scope`.
    Insufficient,
    /// The `jwks_url` was never fetched: 503.
    NoKeys,
    /// No key of the set has the token's `kid`, and the set is being fetched again (the
    /// count of fetches ended before): the request may wait for it ([`Jwt::after_fetch`]),
    /// else it is a 401 as [`Refusal::Invalid`].
    UnknownKey(u64),
}

/// Where the key set in force is.
enum Keys {
    /// A `jwks` file, read again when it changes.
    File(Watched<Arc<KeySet>>),
    /// A `jwks_url`, fetched by [`crate::jwks`].
    Url(Arc<crate::jwks::Source>),
}

impl Jwt {
    /// `settings`, its key set read (a file) or asked for (a URL: fetched from now on,
    /// or kept from the generation before).
    pub(crate) fn new(settings: Arc<config::Jwt>, now: Instant) -> Result<Jwt, String> {
        jwt::install();
        let keys = match &settings.keys {
            config::JwtKeys::File { path, set } => Keys::File(Watched::new(path, Arc::clone(set), read, "JWK set", now)),
            config::JwtKeys::Url(endpoint) => Keys::Url(crate::jwks::source(endpoint)?),
        };
        // `Bearer error="…"`, or `Bearer realm="…", error="…"`.
        let with_error = |error: &str| {
            let text = match settings.challenge.to_str().unwrap_or("Bearer") {
                "Bearer" => format!("Bearer error=\"{error}\""),
                realm => format!("{realm}, error=\"{error}\""),
            };
            HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("Bearer"))
        };
        Ok(Jwt {
            invalid: with_error("invalid_token"),
            insufficient: with_error("insufficient_scope"),
            settings,
            keys,
            remembered: Remembered::default(),
        })
    }

    /// The request's verified claims, or why it gets none.
    pub(super) fn check(&self, headers: &HeaderMap, now: Instant) -> Checked {
        let token = match self.token(headers) {
            Ok(Some(token)) => token,
            Ok(None) => return Checked::Refused(Refusal::NoToken),
            Err(refusal) => return Checked::Refused(refusal),
        };
        let set = match &self.keys {
            Keys::File(file) => Arc::clone(&*file.current(now)),
            Keys::Url(source) => match source.current() {
                Some(set) => set,
                None => return Checked::Refused(Refusal::NoKeys),
            },
        };
        match self.remembered.verify(token, &set, &self.settings.rules, unix_now()) {
            Ok(claims) => Checked::Verified(claims),
            Err(Refused::Invalid(why)) => {
                if let (Keys::Url(source), jwt::NO_KEY) = (&self.keys, why) {
                    if let Some(before) = source.unknown_kid(now) {
                        return Checked::Refused(Refusal::UnknownKey(before));
                    }
                }
                tracing::debug!(why, "a bearer token was refused");
                Checked::Refused(Refusal::Invalid)
            }
            Err(Refused::Insufficient) => Checked::Refused(Refusal::Insufficient),
        }
    }

    /// A token whose `kid` was unknown, checked again once the set fetched for it came (or
    /// [`WAIT_FOR_KEYS`] passed): an identity provider's new key is in use at once.
    pub(super) async fn after_fetch(&self, before: u64, headers: &HeaderMap) -> Checked {
        if let Keys::Url(source) = &self.keys {
            let _ = tokio::time::timeout(WAIT_FOR_KEYS, source.fetched_since(before)).await;
        }
        match self.check(headers, crate::clock::now()) {
            Checked::Refused(Refusal::UnknownKey(_)) => Checked::Refused(Refusal::Invalid),
            checked => checked,
        }
    }

    /// The answer to a request refused for `refusal`.
    pub(super) fn answer(&self, refusal: Refusal) -> Response<ResponseBody> {
        let (status, challenge) = match refusal {
            Refusal::Twice => return response::error(StatusCode::BAD_REQUEST),
            Refusal::NoKeys => return response::error(StatusCode::SERVICE_UNAVAILABLE),
            Refusal::NoToken => (StatusCode::UNAUTHORIZED, &self.settings.challenge),
            Refusal::Invalid | Refusal::UnknownKey(_) => (StatusCode::UNAUTHORIZED, &self.invalid),
            Refusal::Insufficient => (StatusCode::FORBIDDEN, &self.insufficient),
        };
        let mut answer = response::error(status);
        answer.headers_mut().insert(WWW_AUTHENTICATE, challenge.clone());
        answer
    }

    /// The token as sent: `None` without one; `Authorization` twice is a 400.
    fn token<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h [u8]>, Refusal> {
        match &self.settings.from {
            config::TokenFrom::Cookie(name) => Ok(crate::vars::cookie(headers, name).filter(|t| !t.is_empty())),
            config::TokenFrom::Header => {
                let mut sent = headers.get_all(AUTHORIZATION).iter();
                let first = sent.next();
                if sent.next().is_some() {
                    return Err(Refusal::Twice);
                }
                Ok(first.and_then(|value| bearer(value.as_bytes())))
            }
        }
    }

}

fn read(path: &Path) -> Result<Arc<KeySet>, String> {
    config::read_jwks(path).map(Arc::new)
}

/// The token of `Authorization: Bearer TOKEN` (the scheme in any case); `None` for
/// another scheme or an empty token.
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_is_read_in_any_case_and_nothing_else_is() {
        assert_eq!(bearer(b"Bearer abc.def.ghi"), Some(&b"abc.def.ghi"[..]));
        assert_eq!(bearer(b"bearer   abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"BEARER x"), Some(&b"x"[..]));
        for other in [&b"Basic YWxpY2U6c2VjcmV0"[..], b"Bearer", b"Bearer ", b"Bearerabc", b"Token abc", b""] {
            assert_eq!(bearer(other), None, "{:?}", String::from_utf8_lossy(other));
        }
    }
}
