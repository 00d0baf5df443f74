//! One password hash of an htpasswd file, parsed once when the file is read and verified
//! at each login: what Debian's `htpasswd` writes (apr1, bcrypt, SHA-256/512-crypt,
//! `{SHA}`), and what nginx reads besides (`$1$`, `{SSHA}`, `{PLAIN}`).
//!
//! nginx hands any other hash to the C library's `crypt`, so DES, a password stored as plain
//! text and yescrypt "work" there, or quietly never match (glibc reads `secret` as DES with
//! the salt `se`). tollgate refuses them when the file is read, with the reason, so that
//! `tollgate -t` names the line rather than every login failing.

use std::fmt;

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use sha1::{Digest, Sha1};
use sha_crypt::{PasswordVerifier as _, ShaCrypt};

use super::constant_time::same;
use super::md5_crypt::{md5_crypt, CRYPT64};

/// The highest bcrypt cost accepted: htpasswd's own (`-C` takes 4 to 17). Each step doubles
/// the time of a login; at 17 one takes seconds of a core, which a client could make the
/// gateway spend per request.
const BCRYPT_MAX_COST: u32 = 17;

/// The most SHA-crypt rounds accepted: 200 times the default 5,000, half a second of a core
/// for SHA-512 (the specification allows 999,999,999: minutes, per request).
const SHA_CRYPT_MAX_ROUNDS: u32 = 1_000_000;

/// The fewest SHA-crypt rounds the specification allows. glibc raises fewer to it, but
/// writes the raised count, so a hash with fewer was never written by it.
const SHA_CRYPT_MIN_ROUNDS: u32 = 1_000;

/// Standard base64 as LDAP tools write `{SHA}` and `{SSHA}`, with or without padding.
const LDAP_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A parsed htpasswd hash. The parse keeps what [`Hash::verify`] needs, so that a login
/// re-reads nothing but the bcrypt and SHA-crypt strings, which their crates take whole.
#[derive(Clone)]
pub enum Hash {
    /// md5-crypt: `$apr1$` (htpasswd's default) or `$1$` (glibc's); the same algorithm
    /// under two magic strings.
    Md5Crypt {
        magic: &'static str,
        salt: Box<[u8]>,
        /// The 22 characters after the salt, compared as written.
        encoded: [u8; 22],
    },
    /// bcrypt, `$2a$`, `$2b$` or `$2y$` (`htpasswd -B`), whole, with its cost.
    Bcrypt { text: Box<str>, cost: u32 },
    /// SHA-crypt, `$5$` (SHA-256, `htpasswd -2`) or `$6$` (SHA-512, `-5`), whole, with
    /// its rounds (5,000 when the hash does not say).
    ShaCrypt {
        scheme: &'static str,
        text: Box<str>,
        rounds: u32,
    },
    /// `{SHA}`: base64(SHA-1(password)), unsalted (`htpasswd -s`).
    Sha1([u8; 20]),
    /// `{SSHA}`: base64(SHA-1(password ‖ salt) ‖ salt).
    SaltedSha1 { digest: [u8; 20], salt: Box<[u8]> },
    /// `{PLAIN}`: the password itself, which someone chose to store as it is.
    Plain(Box<[u8]>),
}

/// Why an htpasswd hash was refused. The texts never quote the hash, which may be a
/// password stored as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    #[error("no hash after the user name")]
    Empty,
    #[error(
        "DES crypt (htpasswd -d) uses only the first 8 characters of a password; \
         make the entry again with htpasswd -B"
    )]
    Des,
    #[error(
        "not a hash tollgate reads: a password stored as plain text (htpasswd -p), which \
         nginx on Linux never matches either, or an unknown scheme; hash it with htpasswd -B \
         (a stored password is written {{PLAIN}}password)"
    )]
    Plaintext,
    #[error("yescrypt ($y$) is not supported; make the entry again with htpasswd -B")]
    Yescrypt,
    #[error(
        "bcrypt $2x$ (hashes of a buggy crypt_blowfish, before 2011) is not supported; \
         make the entry again with htpasswd -B"
    )]
    BuggyBcrypt,
    #[error(
        "unknown password scheme `{0}`; tollgate reads $apr1$, $1$, $2a$, $2b$, $2y$, $5$, \
         $6$, {{SHA}}, {{SSHA}} and {{PLAIN}}"
    )]
    Unknown(String),
    #[error("malformed {scheme} hash: {why}")]
    Malformed {
        scheme: &'static str,
        why: &'static str,
    },
    #[error(
        "{scheme} cost {cost} is above {max}: a login would take too long, and a client \
         could make the gateway spend that time per request"
    )]
    TooCostly {
        scheme: &'static str,
        cost: u32,
        max: u32,
    },
}

impl Hash {
    /// The hash `text` (what follows `user:` in an htpasswd line, up to the next `:`, CR
    /// or LF), or why it cannot be used. The scheme prefixes are case-sensitive, as nginx's.
    pub fn parse(text: &str) -> Result<Hash, HashError> {
        if text.is_empty() {
            return Err(HashError::Empty);
        }
        let Some(scheme) = scheme(text) else {
            return Err(if is_des(text) {
                HashError::Des
            } else if text.starts_with(['$', '{']) {
                HashError::Unknown(text[..1].to_owned())
            } else {
                HashError::Plaintext
            });
        };
        let rest = &text[scheme.len()..];
        match scheme {
            "$apr1$" => md5_crypt_hash("$apr1$", rest),
            "$1$" => md5_crypt_hash("$1$", rest),
            "$2a$" | "$2b$" | "$2y$" => bcrypt_hash(text),
            "$2x$" => Err(HashError::BuggyBcrypt),
            "$5$" => sha_crypt_hash("$5$", text, rest, 43),
            "$6$" => sha_crypt_hash("$6$", text, rest, 86),
            "$y$" => Err(HashError::Yescrypt),
            "{SHA}" => {
                let digest = LDAP_BASE64.decode(rest).ok().and_then(|d| d.try_into().ok());
                digest.map(Hash::Sha1).ok_or(HashError::Malformed {
                    scheme: "{SHA}",
                    why: "not the base64 of a 20-byte SHA-1 digest",
                })
            }
            "{SSHA}" => salted_sha1_hash(rest),
            "{PLAIN}" => Ok(Hash::Plain(rest.as_bytes().into())),
            other => Err(HashError::Unknown(shown(other).to_owned())),
        }
    }

    /// Whether `password` hashes to this. Every comparison takes the same time wherever the
    /// two differ. This is the expensive part of a login (bcrypt at cost 10: tens of
    /// milliseconds), for the caller to run off the request's thread.
    pub fn verify(&self, password: &[u8]) -> bool {
        match self {
            Hash::Md5Crypt {
                magic,
                salt,
                encoded,
            } => same(&md5_crypt(password, magic.as_bytes(), salt), encoded),
            // Passwords past 72 bytes are cut there, as by Apache and the C library.
            Hash::Bcrypt { text, .. } => bcrypt::verify(password, text).unwrap_or(false),
            // The crate reads the algorithm from the hash, whichever default it is given.
            Hash::ShaCrypt { text, .. } => ShaCrypt::SHA512
                .verify_password(password, &**text)
                .is_ok(),
            Hash::Sha1(digest) => same(&Sha1::digest(password), digest),
            Hash::SaltedSha1 { digest, salt } => {
                let computed = Sha1::new()
                    .chain_update(password)
                    .chain_update(salt)
                    .finalize();
                same(&computed, digest)
            }
            Hash::Plain(stored) => same(password, stored),
        }
    }

    /// What a verify against this hash costs, as a comparable key: its scheme and its cost
    /// (bcrypt's cost, SHA-crypt's rounds, 0 for the fixed-cost ones). Two hashes with the
    /// same key take the same time for the same password.
    pub(crate) fn work(&self) -> (&'static str, u32) {
        match self {
            Hash::Md5Crypt { magic, .. } => (magic, 0),
            Hash::Bcrypt { cost, .. } => ("bcrypt", *cost),
            Hash::ShaCrypt { scheme, rounds, .. } => (scheme, *rounds),
            Hash::Sha1(_) => ("{SHA}", 0),
            Hash::SaltedSha1 { .. } => ("{SSHA}", 0),
            Hash::Plain(_) => ("{PLAIN}", 0),
        }
    }
}

/// The scheme only: a hash may be a password kept as it is.
impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (scheme, cost) = self.work();
        write!(f, "Hash({scheme}, cost {cost})")
    }
}

/// The scheme prefix of `text`: `$id$` or `{NAME}`, delimiters included.
fn scheme(text: &str) -> Option<&str> {
    let end = if let Some(rest) = text.strip_prefix('$') {
        rest.find('$')? + 2
    } else if text.starts_with('{') {
        text.find('}')? + 1
    } else {
        return None;
    };
    Some(&text[..end])
}

/// An unknown scheme as an error may quote it: a short name (`$argon2id$`, `{SSHA512}`),
/// else only its opening character, lest a password kept as it is be quoted in a log.
fn shown(scheme: &str) -> &str {
    let name = scheme.get(1..scheme.len().saturating_sub(1)).unwrap_or("");
    let plausible = name.len() <= 10
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plausible {
        scheme
    } else {
        scheme.get(..1).unwrap_or("")
    }
}

/// What `htpasswd -d` writes: two characters of salt and eleven of hash, in crypt's base64.
fn is_des(text: &str) -> bool {
    text.len() == 13 && is_crypt64(text)
}

fn is_crypt64(text: &str) -> bool {
    text.bytes().all(|b| CRYPT64.contains(&b))
}

/// `SALT$HASH` after an md5-crypt magic: a salt of at most 8 characters, as the C library
/// and Apache cut it, and 22 characters of crypt's base64.
fn md5_crypt_hash(magic: &'static str, rest: &str) -> Result<Hash, HashError> {
    let malformed = |why| HashError::Malformed {
        scheme: magic,
        why,
    };
    let (salt, encoded) = rest
        .split_once('$')
        .ok_or(malformed("no `$` after the salt"))?;
    if salt.len() > 8 {
        return Err(malformed("a salt longer than 8 characters"));
    }
    let encoded: [u8; 22] = encoded
        .as_bytes()
        .try_into()
        .ok()
        .filter(|_| is_crypt64(encoded))
        .ok_or(malformed("the hash is not 22 characters of crypt's base64"))?;
    Ok(Hash::Md5Crypt {
        magic,
        salt: salt.as_bytes().into(),
        encoded,
    })
}

/// bcrypt, read by its crate (60 characters, a cost, a salt and a hash in bcrypt's base64),
/// and its cost held to htpasswd's range.
fn bcrypt_hash(text: &str) -> Result<Hash, HashError> {
    let parts: bcrypt::HashParts = text.parse().map_err(|_| HashError::Malformed {
        scheme: "bcrypt",
        why: "not 60 characters of $2y$, a two-digit cost, `$` and bcrypt's base64",
    })?;
    let cost = parts.get_cost();
    if cost < 4 {
        return Err(HashError::Malformed {
            scheme: "bcrypt",
            why: "a cost below 4",
        });
    }
    if cost > BCRYPT_MAX_COST {
        return Err(HashError::TooCostly {
            scheme: "bcrypt",
            cost,
            max: BCRYPT_MAX_COST,
        });
    }
    Ok(Hash::Bcrypt {
        text: text.into(),
        cost,
    })
}

/// `[rounds=N$]SALT$HASH` after `$5$` or `$6$`: a salt of at most 16 characters, and a hash of
/// `length` characters of crypt's base64 (43 for SHA-256, 86 for SHA-512).
fn sha_crypt_hash(
    scheme: &'static str,
    text: &str,
    rest: &str,
    length: usize,
) -> Result<Hash, HashError> {
    let malformed = |why| HashError::Malformed { scheme, why };
    let (rounds, rest) = match rest.strip_prefix("rounds=") {
        Some(rest) => {
            let (count, rest) = rest
                .split_once('$')
                .ok_or(malformed("no `$` after rounds="))?;
            let count: u32 = count
                .parse()
                .map_err(|_| malformed("rounds= is not a number"))?;
            (count, rest)
        }
        None => (5_000, rest),
    };
    if rounds < SHA_CRYPT_MIN_ROUNDS {
        return Err(malformed("fewer than 1000 rounds"));
    }
    if rounds > SHA_CRYPT_MAX_ROUNDS {
        return Err(HashError::TooCostly {
            scheme,
            cost: rounds,
            max: SHA_CRYPT_MAX_ROUNDS,
        });
    }
    let (salt, hash) = rest
        .split_once('$')
        .ok_or(malformed("no `$` after the salt"))?;
    if salt.len() > 16 {
        return Err(malformed("a salt longer than 16 characters"));
    }
    if hash.len() != length || !is_crypt64(hash) {
        return Err(malformed("the hash is not crypt's base64 of the digest's length"));
    }
    // What the crate's verifier will read: refused here rather than at every login.
    sha_crypt::PasswordHashRef::new(text).map_err(|_| malformed("not modular crypt format"))?;
    Ok(Hash::ShaCrypt {
        scheme,
        text: text.into(),
        rounds,
    })
}

/// `{SSHA}`: base64 of a SHA-1 digest followed by the salt. nginx reads a shorter value as
/// if it were 20 bytes long, and never matches it; tollgate refuses it.
fn salted_sha1_hash(rest: &str) -> Result<Hash, HashError> {
    let decoded = LDAP_BASE64.decode(rest).ok();
    let (digest, salt) = decoded
        .as_deref()
        .and_then(|d| d.split_first_chunk::<20>())
        .ok_or(HashError::Malformed {
            scheme: "{SSHA}",
            why: "not the base64 of a 20-byte SHA-1 digest and a salt",
        })?;
    Ok(Hash::SaltedSha1 {
        digest: *digest,
        salt: salt.into(),
    })
}

#[cfg(test)]
mod tests;
