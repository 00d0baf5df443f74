//! What the ACME manager publishes for the listeners: the certificate in force for each
//! managed name (the issued one, or a self-signed placeholder until there is one) and
//! the answers to challenges under way. The TLS resolver and the pipeline read it; only
//! the manager writes. It lives as long as the gateway, across reloads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use arc_swap::ArcSwap;
use rustls::sign::CertifiedKey;
use sha2::Digest;

/// A placeholder handshake is logged at most once per name in this many seconds.
const PLACEHOLDER_LOG_INTERVAL: i64 = 60;

/// The path prefix of http-01 answers (RFC 8555 §8.3).
pub(crate) const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";

/// Certificates in force and challenge answers; see the module docs.
#[derive(Debug, Default)]
pub struct Published {
    certificates: ArcSwap<Certificates>,
    /// http-01: token → key authorization.
    tokens: RwLock<HashMap<String, Arc<str>>>,
    /// tls-alpn-01: name → the certificate carrying the key authorization's digest.
    alpn: RwLock<HashMap<String, Arc<CertifiedKey>>>,
    /// The answers instances sharing storage published there (this one's too): the CA
    /// may reach any of them. Tokens as above; names with their key authorization.
    mirrored_tokens: RwLock<HashMap<String, Arc<str>>>,
    mirrored_alpn: RwLock<HashMap<String, (String, Arc<CertifiedKey>)>>,
}

#[derive(Debug, Default)]
struct Certificates {
    by_name: HashMap<String, Arc<Served>>,
    /// The first managed name, whose certificate is the default when no static one is.
    first: Option<String>,
}

/// The certificate in force for one managed name.
#[derive(Debug)]
pub(crate) struct Served {
    pub key: Arc<CertifiedKey>,
    /// End of validity (seconds since the epoch); `None` for a placeholder.
    pub not_after: Option<i64>,
    /// When a placeholder handshake was last logged (seconds since the epoch).
    logged: AtomicI64,
}

impl Served {
    pub(crate) fn issued(key: Arc<CertifiedKey>, not_after: i64) -> Served {
        Served {
            key,
            not_after: Some(not_after),
            logged: AtomicI64::new(i64::MIN),
        }
    }

    pub(crate) fn placeholder(key: Arc<CertifiedKey>) -> Served {
        Served {
            key,
            not_after: None,
            logged: AtomicI64::new(i64::MIN),
        }
    }
}

impl Published {
    /// The certificate to serve for `sni` (any case), if it is a managed name. A
    /// placeholder is served with an error-log line (one per name per minute).
    pub(crate) fn certificate(&self, sni: &str) -> Option<Arc<CertifiedKey>> {
        let certificates = self.certificates.load();
        if certificates.by_name.is_empty() {
            return None;
        }
        let served = match certificates.by_name.get(sni) {
            Some(served) => served,
            None => certificates.by_name.get(&sni.to_ascii_lowercase())?,
        };
        if served.not_after.is_none() {
            log_placeholder(sni, served);
        }
        Some(served.key.clone())
    }

    /// The certificate of the first managed name, for handshakes no static certificate
    /// answers (no SNI, or a name nobody serves).
    pub(crate) fn default_certificate(&self) -> Option<Arc<CertifiedKey>> {
        let certificates = self.certificates.load();
        let first = certificates.first.as_ref()?;
        certificates.by_name.get(first).map(|s| s.key.clone())
    }

    /// Each issued certificate's name and end of validity, for `/metrics`.
    pub(crate) fn expiries(&self) -> Vec<(String, i64)> {
        let certificates = self.certificates.load();
        let mut expiries: Vec<(String, i64)> = certificates
            .by_name
            .iter()
            .filter_map(|(name, s)| Some((name.clone(), s.not_after?)))
            .collect();
        expiries.sort();
        expiries
    }

    /// Puts `served` in force for `name`, at once for every new handshake.
    pub(crate) fn serve(&self, name: &str, served: Served) {
        let served = Arc::new(served);
        self.certificates.rcu(|current| {
            let mut by_name = current.by_name.clone();
            by_name.insert(name.to_owned(), served.clone());
            Certificates {
                by_name,
                first: current.first.clone(),
            }
        });
    }

    /// Whether `name` has an issued certificate in force (not a placeholder).
    pub(crate) fn has_issued(&self, name: &str) -> bool {
        let certificates = self.certificates.load();
        certificates
            .by_name
            .get(name)
            .is_some_and(|s| s.not_after.is_some())
    }

    /// Keeps only `names` (the first of them becomes the default), dropping the others'
    /// certificates: a name a reload removed is no longer served.
    pub(crate) fn keep_only(&self, names: &[String]) {
        self.certificates.rcu(|current| {
            let by_name = current
                .by_name
                .iter()
                .filter(|(name, _)| names.contains(name))
                .map(|(name, served)| (name.clone(), served.clone()))
                .collect();
            Certificates {
                by_name,
                first: names.first().cloned(),
            }
        });
    }

    /// The key authorization for an http-01 `token`, while its challenge is under way
    /// here or at an instance sharing storage.
    pub(crate) fn http01(&self, token: &str) -> Option<Arc<str>> {
        if let Some(answer) = self.tokens.read().ok()?.get(token) {
            return Some(answer.clone());
        }
        self.mirrored_tokens.read().ok()?.get(token).cloned()
    }

    /// The tls-alpn-01 certificate for `name`, while its challenge is under way here or
    /// at an instance sharing storage.
    pub(crate) fn tls_alpn01(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let name = name.to_ascii_lowercase();
        if let Some(key) = self.alpn.read().ok()?.get(&name) {
            return Some(key.clone());
        }
        let mirrored = self.mirrored_alpn.read().ok()?;
        mirrored.get(&name).map(|(_, key)| key.clone())
    }

    /// Takes the answers read from storage in place of those read before.
    pub(super) fn mirror(&self, tokens: Vec<(String, String)>, alpn: Vec<(String, String)>) {
        let tokens = tokens.into_iter().map(|(t, a)| (t, Arc::from(a))).collect();
        if let Ok(mut mirrored) = self.mirrored_tokens.write() {
            *mirrored = tokens;
        }
        let Ok(mut mirrored) = self.mirrored_alpn.write() else {
            return;
        };
        let mut next = HashMap::with_capacity(alpn.len());
        for (name, answer) in alpn {
            let known = mirrored.remove(&name).filter(|(seen, _)| *seen == answer);
            let key = match known {
                Some((_, key)) => key,
                None => {
                    let digest = sha2::Sha256::digest(answer.as_bytes());
                    match super::keys::tls_alpn01(&name, &digest) {
                        Ok(key) => key,
                        Err(_) => continue,
                    }
                }
            };
            next.insert(name, (answer, key));
        }
        *mirrored = next;
    }

    pub(super) fn answer_http01(&self, token: &str, key_authorization: &str) {
        if let Ok(mut tokens) = self.tokens.write() {
            tokens.insert(token.to_owned(), key_authorization.into());
        }
    }

    pub(super) fn withdraw_http01(&self, token: &str) {
        if let Ok(mut tokens) = self.tokens.write() {
            tokens.remove(token);
        }
    }

    pub(super) fn answer_tls_alpn01(&self, name: &str, key: Arc<CertifiedKey>) {
        if let Ok(mut alpn) = self.alpn.write() {
            alpn.insert(name.to_owned(), key);
        }
    }

    pub(super) fn withdraw_tls_alpn01(&self, name: &str) {
        if let Ok(mut alpn) = self.alpn.write() {
            alpn.remove(name);
        }
    }
}

fn log_placeholder(sni: &str, served: &Served) {
    let now = super::schedule::unix_now();
    let last = served.logged.load(Ordering::Relaxed);
    if now.saturating_sub(last) < PLACEHOLDER_LOG_INTERVAL {
        return;
    }
    if served
        .logged
        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        // The name as the client wrote it (any case): quoted and escaped.
        tracing::error!(
            name = ?sni,
            "no certificate for this name yet: serving a self-signed placeholder until ACME issues one"
        );
    }
}
