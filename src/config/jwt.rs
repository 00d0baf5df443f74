//! `auth.jwt` (DESIGN §18): a bearer token checked against a JWK set, from a file read now
//! (so that `tollgate -t` names a bad one) or from the IdP's URL, fetched by the running
//! gateway. What a token must carry besides a good signature: `issuer`, `audience`, times
//! within `leeway`, and `require`d claims.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::forward_auth::Endpoint;
use super::raw::{Loose, RawJwt};
use super::{values, Upstream};
use crate::access::jwt::{KeySet, Rules};

/// `leeway` when it is not written (jsonwebtoken's and Envoy's default).
const DEFAULT_LEEWAY: u64 = 60;

/// The largest JWK set file read.
const MAX_JWKS_FILE: u64 = 256 * 1024;

/// How long a fetch of a `jwks_url` may take.
pub(crate) const JWKS_TIMEOUT: Duration = Duration::from_secs(10);

/// `auth.jwt`, read.
#[derive(Debug)]
pub(crate) struct Jwt {
    pub keys: Keys,
    pub rules: Rules,
    pub from: TokenFrom,
    /// `WWW-Authenticate: Bearer realm="…"`, or plain `Bearer` without a realm.
    pub challenge: HeaderValue,
}

/// Where the keys come from.
pub(crate) enum Keys {
    /// `jwks`: a file, read now and again when it changes.
    File { path: PathBuf, set: Arc<KeySet> },
    /// `jwks_url`: fetched by the gateway (`crate::jwks`), kept, and fetched again.
    Url(Arc<JwksEndpoint>),
}

/// Where a `jwks_url` is fetched from.
pub(crate) struct JwksEndpoint {
    /// As written.
    pub url: String,
    pub target: http::uri::PathAndQuery,
    pub host: HeaderValue,
    pub upstream: Upstream,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keys::File { path, set } => write!(f, "File({}, {} keys)", path.display(), set.count()),
            Keys::Url(endpoint) => write!(f, "Url({})", endpoint.url),
        }
    }
}

/// Where the token is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenFrom {
    /// `Authorization: Bearer TOKEN`.
    Header,
    /// The cookie of that name.
    Cookie(String),
}

pub(super) fn jwt(raw: &Spanned<RawJwt>, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Jwt> {
    let written = raw.get_ref();
    let keys = keys(raw, base, diag);
    let issuers = texts(written.issuer.as_ref(), "issuer", diag);
    let audiences = texts(written.audience.as_ref(), "audience", diag);
    let leeway = match &written.leeway {
        None => Some(DEFAULT_LEEWAY),
        Some(value) => diag.check(value.span(), leeway(value.get_ref())),
    };
    let from = match &written.from {
        None => Some(TokenFrom::Header),
        Some(from) => diag.check(from.span(), token_from(from.get_ref())),
    };
    let require = require(written, diag);
    let challenge = match &written.realm {
        None => Some(HeaderValue::from_static("Bearer")),
        Some(realm) => {
            let checked = crate::access::basic::challenge(realm.get_ref()).map_err(|e| e.to_string());
            let bearer = |_| HeaderValue::from_str(&format!("Bearer realm=\"{}\"", realm.get_ref())).ok();
            diag.check(realm.span(), checked).and_then(bearer)
        }
    };
    Some(Jwt {
        keys: keys?,
        rules: Rules {
            issuers: issuers?,
            audiences: audiences?,
            leeway: leeway?,
            require: require?,
        },
        from: from?,
        challenge: challenge?,
    })
}

/// `jwks` or `jwks_url`, exactly one.
fn keys(raw: &Spanned<RawJwt>, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Keys> {
    match (&raw.get_ref().jwks, &raw.get_ref().jwks_url) {
        (Some(file), None) => {
            let path = base.join(file.get_ref());
            let set = diag.check(file.span(), read_jwks(&path))?;
            Some(Keys::File { path, set: Arc::new(set) })
        }
        (None, Some(url)) => {
            let text = url.get_ref();
            let loopback = |text: &str| ["http://127.", "http://[::1]", "http://localhost"].iter().any(|p| text.starts_with(p));
            if !text.starts_with("https://") && !loopback(text) {
                diag.error(url.span(), "jwks_url must be https:// (http:// only to a loopback address): the keys decide who may pass");
                return None;
            }
            let endpoint = Endpoint::read(url, "jwks", JWKS_TIMEOUT, diag)?;
            Some(Keys::Url(Arc::new(JwksEndpoint {
                url: text.clone(),
                target: endpoint.target,
                host: endpoint.host,
                upstream: endpoint.upstream,
            })))
        }
        (Some(_), Some(_)) => {
            diag.error(raw.span(), "auth.jwt takes `jwks` (a file) or `jwks_url`, not both");
            None
        }
        (None, None) => {
            diag.error(raw.span(), "auth.jwt needs its keys: `jwks = \"jwks.json\"` (a file) or `jwks_url = \"https://…/.well-known/jwks.json\"`");
            None
        }
    }
}

/// The JWK set file at `path`; HMAC secrets (`oct` keys) are taken from a file.
pub(crate) fn read_jwks(path: &Path) -> Result<KeySet, String> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|err| format!("cannot read the JWK set {shown}: {err}"))?
        .len();
    if size > MAX_JWKS_FILE {
        return Err(format!("the JWK set {shown} is {size} bytes: more than the 256 KiB a key set may be"));
    }
    let text = std::fs::read(path).map_err(|err| format!("cannot read the JWK set {shown}: {err}"))?;
    KeySet::parse(&text, true).map_err(|why| format!("the JWK set {shown}: {why}"))
}

/// One text or a list of them.
fn texts(value: Option<&Loose>, key: &str, diag: &mut Diagnostics<'_>) -> Option<Vec<String>> {
    let Some(value) = value else {
        return Some(Vec::new());
    };
    let list = match value.get_ref() {
        toml::Value::String(text) => Some(vec![text.clone()]),
        toml::Value::Array(items) => items.iter().map(|item| item.as_str().map(str::to_owned)).collect(),
        _ => None,
    };
    let list = list.filter(|list| !list.is_empty() && list.iter().all(|text| !text.is_empty()));
    if list.is_none() {
        diag.error(value.span(), format!("invalid {key} {}: expected a text or a list of texts", value.get_ref()));
    }
    list
}

/// `leeway`: a duration, `"0s"` included.
fn leeway(value: &toml::Value) -> Result<u64, String> {
    if value.as_str().is_some_and(|text| text == "0s" || text == "0ms") {
        return Ok(0);
    }
    let duration = values::duration(value)?;
    if duration > Duration::from_secs(3600) {
        return Err(format!("invalid leeway {value}: an hour at most"));
    }
    Ok(duration.as_secs())
}

fn token_from(text: &str) -> Result<TokenFrom, String> {
    match text.strip_prefix("cookie:") {
        None if text == "header" => Ok(TokenFrom::Header),
        Some(name) if !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && !b"=;,\"".contains(&b)) => {
            Ok(TokenFrom::Cookie(name.to_owned()))
        }
        _ => Err(format!("invalid from {text:?}: expected \"header\" (Authorization: Bearer) or \"cookie:NAME\"")),
    }
}

fn require(written: &RawJwt, diag: &mut Diagnostics<'_>) -> Option<Vec<(String, String)>> {
    let Some(table) = &written.require else {
        return Some(Vec::new());
    };
    let mut valid = true;
    let mut require = Vec::new();
    for (name, value) in table.get_ref() {
        if name.is_empty() || value.get_ref().is_empty() {
            diag.error(value.span(), "a required claim needs a name and a value");
            valid = false;
        }
        require.push((name.clone(), value.get_ref().clone()));
    }
    valid.then_some(require)
}

/// A location whose zones read `$jwt_claim_NAME` must verify a token (`auth.jwt`): with
/// nothing verifying one, those zones would never have a key and would silently count
/// nobody.
pub(super) fn claims_verified(
    limits: Option<&[super::Limit]>,
    auth: Option<&super::Auth>,
    zones: &[super::limits::ZoneInfo],
    table: &super::raw::Span,
    diag: &mut Diagnostics<'_>,
) -> Option<()> {
    let verifies = matches!(auth, Some(super::Auth::On(super::Check::Jwt(_))));
    let reading = limits.unwrap_or_default().iter().filter_map(|limit| zones.get(limit.zone)).find(|zone| zone.reads_claims);
    match (reading, verifies) {
        (Some(zone), false) => {
            let message = format!("zone `{}` reads `$jwt_claim_…`, but nothing here verifies a token: add `auth = {{ jwt = {{ … }} }}` to the location or its site", zone.name);
            diag.error(table.clone(), message);
            None
        }
        _ => Some(()),
    }
}
