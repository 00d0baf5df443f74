//! One token checked: taken from the request, its header read to choose the key, its
//! signature and times, issuer and audience checked by jsonwebtoken, then the location's
//! `require`. What passes becomes the request's claims ([`crate::vars::Claims`]).

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, decode_header, Validation};
use serde_json::{Map, Value};

use super::keys::KeySet;

/// Why a token naming a key the set does not have is refused.
pub const NO_KEY: &str = "no key for its kid and alg";

/// Why a token used before its `nbf` is refused.
pub const NOT_YET: &str = "not yet valid (nbf)";

/// The longest token read: a few hundred bytes is usual, a few KiB with many claims.
pub const MAX_TOKEN: usize = 8 * 1024;

/// What a location asks of a token, besides a good signature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// `issuer`: the `iss` it must carry (one of them).
    pub issuers: Vec<String>,
    /// `audience`: an `aud` it must carry (one of them); empty: `aud` is not looked at.
    pub audiences: Vec<String>,
    /// `leeway`, in seconds, for `exp` and `nbf`.
    pub leeway: u64,
    /// `require`: claims that must hold a value.
    pub require: Vec<(String, String)>,
}

/// Why a token does not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// It is not good: malformed, no key for it, a bad signature, expired, not yet
    /// valid, another issuer or audience. 401.
    Invalid(&'static str),
    /// Good, but a `require` does not hold. 403.
    Insufficient,
}

/// A token that passed: its claims as text, and its `exp` (seconds since the epoch).
pub struct Verified {
    pub claims: crate::vars::Claims,
    pub expires: u64,
}

/// Checks `token` against `keys` and `rules` at `now` (seconds since the epoch). The times
/// are checked here, not by jsonwebtoken (which would read the clock itself).
pub fn verify(token: &[u8], keys: &KeySet, rules: &Rules, now: u64) -> Result<Verified, Refused> {
    if token.len() > MAX_TOKEN {
        return Err(Refused::Invalid("token too long"));
    }
    // Unchecked, to choose the key: `alg: none` and unknown algorithms fail here.
    let header = decode_header(token).map_err(|_| Refused::Invalid("malformed token"))?;
    let key = keys
        .choose(header.kid.as_deref(), header.alg)
        .ok_or(Refused::Invalid(NO_KEY))?;
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.required_spec_claims.clear();
    if !rules.issuers.is_empty() {
        validation.set_issuer(&rules.issuers);
    }
    match rules.audiences.is_empty() {
        true => validation.validate_aud = false,
        false => validation.set_audience(&rules.audiences),
    }
    let decoded = decode::<Map<String, Value>>(token, &key.decoding, &validation).map_err(|err| Refused::Invalid(reason(err.kind())))?;
    let claims = decoded.claims;
    let expires = timely(&claims, rules.leeway, now)?;
    if !rules.require.iter().all(|(name, wanted)| holds(claims.get(name), name, wanted)) {
        return Err(Refused::Insufficient);
    }
    Ok(Verified {
        claims: rendered(&claims),
        expires,
    })
}

/// `exp` (required) and `nbf` (when there) against `now`, each with `leeway`; the
/// token's `exp`.
fn timely(claims: &Map<String, Value>, leeway: u64, now: u64) -> Result<u64, Refused> {
    let seconds = |name: &str| match claims.get(name) {
        None => Ok(None),
        // A number of seconds; a fraction is cut (RFC 7519's NumericDate may have one).
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)).map(Some).ok_or(Refused::Invalid("malformed token")),
        Some(_) => Err(Refused::Invalid("malformed token")),
    };
    let Some(expires) = seconds("exp")? else {
        return Err(Refused::Invalid("a required claim (exp) is missing"));
    };
    if expires.saturating_add(leeway) < now {
        return Err(Refused::Invalid("expired"));
    }
    if seconds("nbf")?.is_some_and(|nbf| nbf > now.saturating_add(leeway)) {
        return Err(Refused::Invalid(NOT_YET));
    }
    Ok(expires)
}

/// What the log says of a failed check.
fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "expired",
        ErrorKind::ImmatureSignature => "not yet valid (nbf)",
        ErrorKind::InvalidIssuer => "another issuer",
        ErrorKind::InvalidAudience => "another audience",
        ErrorKind::InvalidSignature => "bad signature",
        ErrorKind::MissingRequiredClaim(_) => "a required claim (exp) is missing",
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat => "algorithm not the key's",
        _ => "malformed token",
    }
}

/// Whether `claim` holds `wanted`: equal to it, an array with it, or for `scope` and `scp`
/// (OAuth's space-separated scopes, RFC 8693) a word of it.
fn holds(claim: Option<&Value>, name: &str, wanted: &str) -> bool {
    match claim {
        Some(Value::String(text)) if name == "scope" || name == "scp" => text.split(' ').any(|word| word == wanted),
        Some(Value::String(text)) => text == wanted,
        Some(Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(wanted)),
        Some(Value::Number(n)) => n.to_string() == wanted,
        Some(Value::Bool(b)) => b.to_string() == wanted,
        _ => false,
    }
}

/// The claims as variables read them: a string as it is, an array's items joined with
/// `,`, anything else as compact JSON.
fn rendered(claims: &Map<String, Value>) -> crate::vars::Claims {
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let pairs = claims.iter().map(|(name, value)| {
        let value = match value {
            Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
            other => text(other),
        };
        (Box::from(name.as_str()), Box::from(value.into_bytes()))
    });
    crate::vars::Claims::new(pairs.collect())
}
