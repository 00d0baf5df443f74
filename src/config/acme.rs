//! `[acme]` (RFC 8555): which CA certificates are ordered from and how, the checks on
//! `acme = true` sites, and the names to order ([`Acme::names`]) once sites and static
//! certificates are known.
//!
//! Nothing here talks to the CA or writes a file: [`Acme::check_storage`] is for
//! `tollgate -t`, which may probe the disk.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Loose, RawAcme, Span};
use super::upstream_tls::ca_certificates;
use super::values::duration_or;
use super::{Address, Server, Site, SiteName};
use crate::certs::Certificate;

/// `[acme]`, with the names it manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Acme {
    /// The ACME server's directory URL (`http://` or `https://`, with a host).
    pub directory: String,
    /// `email`: the account's contact, without `mailto:`.
    pub email: Option<String>,
    /// `storage`, resolved against the config file's directory: the account, and each
    /// name's certificate and key.
    pub storage: PathBuf,
    /// `ca`: the certificates to trust for the ACME server instead of the system's roots
    /// (read with the file, at least one).
    pub ca: Option<Vec<rustls::pki_types::CertificateDer<'static>>>,
    /// External Account Binding (`eab_kid`, `eab_hmac_key`), for CAs that need it.
    pub eab: Option<Eab>,
    /// `challenges`: the types to try, in order; each one a listener can answer.
    pub challenges: Vec<Challenge>,
    /// `retry_min`, `retry_max`: the first wait after a failed order, doubling up to the
    /// longest.
    pub retry_min: Duration,
    pub retry_max: Duration,
    /// The names to obtain certificates for: every name of every `acme = true` site,
    /// lower case, each once, in file order, less those a static certificate covers.
    pub names: Vec<String>,
    /// Names of `acme = true` sites that a `[[tls.certificates]]` entry covers: the
    /// static certificate is served and nothing is ordered (`tollgate -t` says so).
    pub covered: Vec<Covered>,
}

/// External Account Binding: the key ID and the MAC key the CA gave.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Eab {
    pub kid: String,
    /// Decoded from `eab_hmac_key` (base64url).
    pub hmac_key: Vec<u8>,
}

impl std::fmt::Debug for Eab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eab")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// An ACME challenge type tollgate answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Challenge {
    /// `http-01`: a file under `/.well-known/acme-challenge/` on a plain listener.
    Http01,
    /// `tls-alpn-01` (RFC 8737): a certificate for ALPN `acme-tls/1` on a TLS listener.
    TlsAlpn01,
}

impl Challenge {
    /// The name ACME and the config file use.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Challenge::Http01 => "http-01",
            Challenge::TlsAlpn01 => "tls-alpn-01",
        }
    }
}

/// A managed name a static certificate covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Covered {
    pub name: String,
    /// The static certificate's `cert` file.
    pub cert: PathBuf,
}

/// `storage` when absent, relative to the config file's directory.
const DEFAULT_STORAGE: &str = "acme";
/// `retry_min` when absent, in seconds.
const DEFAULT_RETRY_MIN: u64 = 60;
/// `retry_max` when absent, in seconds: a day.
const DEFAULT_RETRY_MAX: u64 = 24 * 60 * 60;
/// A shorter first wait would hammer the CA, whose rate limits count failures too.
const MIN_RETRY: Duration = Duration::from_secs(1);

const DIRECTORY_EXAMPLE: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// `[acme]`, its `ca` file read now. `server` is `None` when `[server]` had a problem:
/// the challenges are then not checked against the listeners. [`Acme::names`] and
/// [`Acme::covered`] are left empty for [`manage`].
pub(super) fn acme(
    raw: RawAcme,
    span: &Span,
    base: &Path,
    server: Option<&Server>,
    diag: &mut Diagnostics<'_>,
) -> Option<Acme> {
    let directory = diag
        .required(raw.directory.as_ref(), span, "directory")
        .and_then(|url| diag.check(url.span(), directory(url.get_ref())));
    let email = match &raw.email {
        None => Some(None),
        Some(email) => diag.check(email.span(), contact(email.get_ref())).map(Some),
    };
    let storage = match &raw.storage {
        None => Some(base.join(DEFAULT_STORAGE)),
        Some(path) if path.get_ref().is_empty() => {
            let message = format!(
                "`storage` is empty: name a directory, or leave it out for \"{DEFAULT_STORAGE}\" beside this file"
            );
            diag.error(path.span(), message);
            None
        }
        Some(path) => Some(base.join(path.get_ref())),
    };
    let ca = match &raw.ca {
        None => Some(None),
        Some(path) => ca_certificates(path, base, diag).map(Some),
    };
    let eab = eab(raw.eab_kid, raw.eab_hmac_key, span, diag);
    let challenges = challenges(raw.challenges.as_ref(), server, diag);
    let (retry_min, retry_max) = retries(&raw.retry_min, &raw.retry_max, diag);
    Some(Acme {
        directory: directory?,
        email: email?,
        storage: storage?,
        ca: ca?,
        eab: eab?,
        challenges: challenges?,
        retry_min: retry_min?,
        retry_max: retry_max?,
        names: Vec::new(),
        covered: Vec::new(),
    })
}

/// `directory`: an `http://` or `https://` URL with a host.
fn directory(text: &str) -> Result<String, String> {
    let invalid = || {
        format!(
            r#"invalid directory "{text}": expected the http:// or https:// URL of the ACME server's directory, e.g. "{DIRECTORY_EXAMPLE}""#
        )
    };
    let uri: http::Uri = text.parse().map_err(|_| invalid())?;
    let web = matches!(uri.scheme_str(), Some("http" | "https"));
    let host = uri.host().unwrap_or("");
    if !web || host.is_empty() {
        return Err(invalid());
    }
    // ACME's answers are not signed: over plain HTTP anyone on the path could hand out
    // renewal windows, waits and certificates. Only a CA on this host may go without TLS.
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if uri.scheme_str() == Some("http") && !loopback {
        return Err(format!(
            r#"directory "{text}" is plain http://: ACME needs https:// (plain http is allowed only for a CA on this host, such as a test server on 127.0.0.1)"#
        ));
    }
    Ok(text.to_owned())
}

/// `email`: one address, without the `mailto:` that ACME puts before it (accepted).
fn contact(text: &str) -> Result<String, String> {
    let address = match text.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("mailto:") => &text[7..],
        _ => text,
    };
    let valid = match address.split_once('@') {
        Some((user, domain)) => {
            !user.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !address.contains(|c: char| c.is_whitespace() || c.is_control() || c == ',')
        }
        None => false,
    };
    if valid {
        Ok(address.to_owned())
    } else {
        Err(format!(
            r#"invalid email "{text}": expected one address, e.g. "ops@example.com""#
        ))
    }
}

/// `eab_kid` and `eab_hmac_key`: both or neither. `span` is the section's.
fn eab(
    kid: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    span: &Span,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Eab>> {
    let (kid, key) = match (kid, key) {
        (None, None) => return Some(None),
        (Some(kid), Some(key)) => (kid, key),
        (Some(given), None) | (None, Some(given)) => {
            // Not said when the other was left out for a problem already reported.
            let other_left_out =
                diag.was_left_out(span, "eab_kid") || diag.was_left_out(span, "eab_hmac_key");
            if !other_left_out {
                let message = "External Account Binding needs both `eab_kid` and `eab_hmac_key`, as the CA gives them";
                diag.error(given.span(), message);
            }
            return None;
        }
    };
    let has_kid = !kid.get_ref().is_empty();
    if !has_kid {
        diag.error(kid.span(), "`eab_kid` is empty");
    }
    // The message does not repeat the key: it is a secret.
    let hmac_key = base64(key.get_ref()).filter(|decoded| !decoded.is_empty());
    if hmac_key.is_none() {
        let message = "invalid eab_hmac_key: expected the key as the CA gives it, in base64url (base64 is taken too)";
        diag.error(key.span(), message);
    }
    Some(Some(Eab {
        kid: has_kid.then(|| kid.into_inner())?,
        hmac_key: hmac_key?,
    }))
}

/// Decodes base64url (RFC 4648 §5) or standard base64 (§4), with or without `=`
/// padding. `None` when `text` is neither.
fn base64(text: &str) -> Option<Vec<u8>> {
    let unpadded = text.trim_end_matches('=');
    let padding = text.len() - unpadded.len();
    if padding > 2 || (padding > 0 && !text.len().is_multiple_of(4)) || unpadded.len() % 4 == 1 {
        return None;
    }
    let mut decoded = Vec::with_capacity(unpadded.len() * 3 / 4);
    let (mut bits, mut held) = (0u32, 0u32);
    for byte in unpadded.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        held += 6;
        if held >= 8 {
            held -= 8;
            decoded.push((bits >> held) as u8);
            bits &= (1 << held) - 1;
        }
    }
    Some(decoded)
}

/// `challenges`: the types listed, each once and each with a listener that can answer
/// it; absent, every type a listener can answer (http-01 first). `None` when `server`
/// is (its problem is reported).
fn challenges(
    raw: Option<&Spanned<Vec<Spanned<String>>>>,
    server: Option<&Server>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Challenge>> {
    let Some(list) = raw else {
        let server = server?;
        let plain = (!server.listen.is_empty()).then_some(Challenge::Http01);
        let tls = (!server.listen_tls.is_empty()).then_some(Challenge::TlsAlpn01);
        return Some(plain.into_iter().chain(tls).collect());
    };
    if list.get_ref().is_empty() {
        let message = r#"`challenges` is empty: list "http-01" and/or "tls-alpn-01", or leave it out for every type a listener can answer"#;
        diag.error(list.span(), message);
        return None;
    }
    let mut challenges = Vec::new();
    let mut valid = true;
    for written in list.get_ref() {
        let Some(challenge) = diag.check(written.span(), challenge(written.get_ref())) else {
            valid = false;
            continue;
        };
        if challenges.contains(&challenge) {
            let message = format!("\"{}\" is listed twice", challenge.as_str());
            diag.error(written.span(), message);
            valid = false;
        } else if let Some(missing) = server.and_then(|s| no_listener_for(challenge, s)) {
            diag.error(written.span(), missing);
            valid = false;
        }
        challenges.push(challenge);
    }
    server?;
    valid.then_some(challenges)
}

fn challenge(text: &str) -> Result<Challenge, String> {
    match text {
        "http-01" => Ok(Challenge::Http01),
        "tls-alpn-01" => Ok(Challenge::TlsAlpn01),
        "dns-01" => Err(
            "dns-01 is not supported: tollgate answers challenges on its own listeners, with \"http-01\" or \"tls-alpn-01\""
                .to_owned(),
        ),
        _ => Err(format!(
            r#"unknown challenge type "{text}": expected "http-01" or "tls-alpn-01""#
        )),
    }
}

/// Why `server` cannot answer `challenge`, if it cannot.
fn no_listener_for(challenge: Challenge, server: &Server) -> Option<String> {
    match challenge {
        Challenge::Http01 if server.listen.is_empty() => Some(
            "http-01 is answered on a plain listener, and `[server] listen` has none: add one, or leave http-01 out"
                .to_owned(),
        ),
        Challenge::TlsAlpn01 if server.listen_tls.is_empty() => Some(
            "tls-alpn-01 is answered on a TLS listener, and `[server] listen_tls` has none: add one, or leave tls-alpn-01 out"
                .to_owned(),
        ),
        _ => None,
    }
}

/// `retry_min` (at least 1s) and `retry_max` (at least `retry_min`).
fn retries(
    min: &Option<Loose>,
    max: &Option<Loose>,
    diag: &mut Diagnostics<'_>,
) -> (Option<Duration>, Option<Duration>) {
    let mut retry_min = duration_or(min, DEFAULT_RETRY_MIN, diag);
    let mut retry_max = duration_or(max, DEFAULT_RETRY_MAX, diag);
    if let (Some(short), Some(written)) = (retry_min, min) {
        if short < MIN_RETRY {
            let message = format!(
                "retry_min {} is too short: at least \"1s\"",
                written.get_ref()
            );
            diag.error(written.span(), message);
            retry_min = None;
        }
    }
    if let (Some(short), Some(long)) = (retry_min, retry_max) {
        if long < short {
            let (at, message) = match (max, min) {
                (Some(max), Some(_)) => (max.span(), "`retry_max` is shorter than `retry_min`"),
                (Some(max), None) => (
                    max.span(),
                    "`retry_max` is shorter than `retry_min` (\"1m\" when left out)",
                ),
                (None, Some(min)) => (
                    min.span(),
                    "`retry_min` is longer than `retry_max` (\"24h\" when left out)",
                ),
                // Both absent: the defaults are in order.
                (None, None) => return (retry_min, retry_max),
            };
            diag.error(at, message);
            retry_max = None;
        }
    }
    (retry_min, retry_max)
}

/// `acme = true` on a site: `[acme]` is in the file (`section`; an invalid one counts,
/// it is reported already), the site has names and every one can get a certificate
/// over http-01 or tls-alpn-01, and it answers on a TLS address, where its certificate
/// is served. `names` and `listen` are `None` where they had problems (reported);
/// `server` where `[server]` had. The site's `acme`, or `None` after a problem.
pub(super) fn site(
    flag: Option<&Spanned<bool>>,
    names: Option<(&[SiteName], &[Span])>,
    listen: Option<&Option<Vec<Address>>>,
    server: Option<&Server>,
    section: bool,
    diag: &mut Diagnostics<'_>,
) -> Option<bool> {
    let Some(flag) = flag.filter(|flag| *flag.get_ref()) else {
        return Some(false);
    };
    let mut valid = true;
    if !section {
        let message = "`acme = true` needs an [acme] section: it says which CA to order the certificates from";
        diag.error(flag.span(), message);
        valid = false;
    }
    if let Some((names, spans)) = names {
        let mut reported = false;
        for (name, span) in names.iter().zip(spans) {
            if let Some(message) = not_orderable(name) {
                diag.error(span.clone(), message);
                reported = true;
            }
        }
        let orderable = names
            .iter()
            .any(|name| matches!(name, SiteName::Exact(name) if !name.is_empty()));
        if !orderable && !reported {
            let message =
                "`acme = true` needs `names`: a certificate is ordered for each of its names";
            diag.error(flag.span(), message);
        }
        valid &= orderable && !reported;
    }
    if let (Some(listen), Some(server)) = (listen, server) {
        let tls = match listen {
            Some(addresses) => addresses.iter().any(|a| a.transport.is_secure()),
            None => !server.listen_tls.is_empty(),
        };
        if !tls {
            let message = "`acme = true`, but the site answers on no `listen_tls` address: its certificate would never be served";
            diag.error(flag.span(), message);
            valid = false;
        }
    }
    valid.then_some(true)
}

/// Why a name of an `acme = true` site cannot get a certificate over http-01 or
/// tls-alpn-01. `""` (requests without a host) is no name to order, and not a problem.
fn not_orderable(name: &SiteName) -> Option<String> {
    const STATIC: &str = "use a static certificate ([[tls.certificates]]) for it";
    match name {
        SiteName::Exact(name) if is_ip(name) => Some(format!(
            r#"the IP address "{name}" cannot get a certificate from ACME: http-01 and tls-alpn-01 for addresses are not widely supported; {STATIC}"#
        )),
        SiteName::Exact(_) => None,
        SiteName::LeadingWildcard(_) | SiteName::TrailingWildcard(_) => Some(format!(
            r#"the wildcard "{}" cannot get a certificate from ACME: http-01 and tls-alpn-01 cannot prove a wildcard; {STATIC}"#,
            name.key().unwrap_or_default()
        )),
        SiteName::Regex(_) => Some(format!(
            "a regex name cannot get a certificate from ACME: list the names it stands for, or {STATIC}"
        )),
    }
}

/// An IPv4 address, or an IPv6 one in brackets as site names write it.
fn is_ip(name: &str) -> bool {
    let bare = name
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or(name);
    bare.parse::<IpAddr>().is_ok()
}

/// Fills [`Acme::names`] and [`Acme::covered`]: every exact name of every `acme = true`
/// site, each once in file order, unless one of the static `certificates` covers it.
pub(super) fn manage(acme: &mut Acme, sites: &[Site], certificates: &[Certificate]) {
    let exact = sites
        .iter()
        .filter(|site| site.acme)
        .flat_map(|site| &site.names)
        .filter_map(|name| match name {
            SiteName::Exact(name) if !name.is_empty() => Some(name),
            _ => None,
        });
    for name in exact {
        let seen = acme.names.contains(name) || acme.covered.iter().any(|c| &c.name == name);
        if seen {
            continue;
        }
        match certificates.iter().find(|cert| cert.covers(name)) {
            Some(cert) => acme.covered.push(Covered {
                name: name.clone(),
                cert: cert.path.clone(),
            }),
            None => acme.names.push(name.clone()),
        }
    }
}

/// Why `storage` cannot be used: the path, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("cannot use {} as the [acme] storage: {reason}", path.display())]
pub(crate) struct StorageError {
    pub path: PathBuf,
    pub reason: String,
}

impl Acme {
    /// Whether [`Acme::storage`] can be used, without creating it
    /// ([`super::dirs::check_dir`]). For `tollgate -t`; the validation of the file writes
    /// nothing.
    pub(crate) fn check_storage(&self) -> Result<(), StorageError> {
        super::dirs::check_dir(&self.storage).map_err(|reason| StorageError {
            path: self.storage.clone(),
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_rfc_4648_vectors_in_either_alphabet() {
        let vectors = [
            ("", ""),
            ("Zg", "f"),
            ("Zg==", "f"),
            ("Zm8", "fo"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYmFy", "foobar"),
        ];
        for (text, want) in vectors {
            assert_eq!(base64(text).as_deref(), Some(want.as_bytes()), "{text}");
        }
        assert_eq!(base64("-_-_"), base64("+/+/"));
        assert_eq!(base64("-_-_"), Some(vec![0xfb, 0xff, 0xbf]));
        for bad in ["Z", "Zg=", "Zg===", "Z===", "Zm9v!", "Zm=9"] {
            assert_eq!(base64(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_email_loses_its_mailto() {
        assert_eq!(contact("mailto:a@b.test").as_deref(), Ok("a@b.test"));
        assert_eq!(contact("Mailto:a@b.test").as_deref(), Ok("a@b.test"));
        assert!(contact("a@b.test\n").is_err());
        assert!(contact("mailto:a@b.test, c@d.test").is_err());
    }
}
