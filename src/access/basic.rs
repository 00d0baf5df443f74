//! HTTP basic authentication (RFC 7617) as nginx's `auth_basic` does it: the credentials of
//! an `Authorization: Basic` header, the htpasswd table they are checked against, and the
//! challenge a 401 carries. Pure: the caller reads the file, and runs the check (which can
//! take tens of milliseconds) off the request's thread.

use std::collections::HashMap;

use http::HeaderValue;

use super::hash::{Hash, HashError};

pub use crate::vars::{credentials, Credentials};

/// The `WWW-Authenticate` value of a 401 for `realm`: `Basic realm="REALM"`.
///
/// nginx copies the realm between the quotes as it is, so a `"` or `\` in it ends or escapes
/// the quoted string (RFC 9110 §5.6.4) and a control character breaks the header. tollgate
/// refuses those when the config is read, for the config to report at the key; anything
/// else, UTF-8 included, is copied as nginx does (without RFC 7617's `charset`).
pub fn challenge(realm: &str) -> Result<HeaderValue, RealmError> {
    if let Some(bad) = realm
        .chars()
        .find(|&c| c == '"' || c == '\\' || c.is_control())
    {
        return Err(RealmError(bad));
    }
    HeaderValue::from_bytes(format!("Basic realm=\"{realm}\"").as_bytes())
        .map_err(|_| RealmError('\0'))
}

/// A character a realm may not hold (see [`challenge`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the realm holds {0:?}: it is sent between the quotes of `WWW-Authenticate: Basic \
     realm=\"…\"`, where `\"` and `\\` end or escape the string and control characters \
     are not allowed"
)]
pub struct RealmError(pub char);

/// Whether a login passed, and if not, why: the caller logs the two failures as nginx does
/// (`user "X" was not found in "FILE"`, `user "X": password mismatch`) and answers 401 to
/// both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    Pass,
    NoSuchUser,
    Mismatch,
}

/// An htpasswd file's entries, each hash parsed once. nginx reads the file again at every
/// request; when tollgate reads it again (a reload, a changed file) is the caller's choice.
#[derive(Debug)]
pub struct Users {
    table: HashMap<Box<[u8]>, Hash>,
    /// What a login as a user not in the table is verified against (and its answer thrown
    /// away): an entry whose hash takes as long as most of the table's, so that the time
    /// of a 401 does not tell which users exist. `None` for an empty table.
    decoy: Option<Hash>,
}

/// Why an htpasswd line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("no `:` between a user name and a hash")]
    NoColon,
    #[error("no user name before the `:`")]
    EmptyUser,
    #[error(transparent)]
    Hash(#[from] HashError),
}

/// A refused line of an htpasswd file: its number, from 1, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub error: LineError,
}

impl Users {
    /// The entries of an htpasswd file's `text`, with nginx's line rules, or every refused
    /// line. A line that starts with `#` or CR, and an empty one, is skipped. The user name
    /// is the line up to its first `:`, untrimmed (` alice` is not `alice`); the hash runs
    /// to the next `:`, CR or LF, so `name:hash:comment` holds a comment. The first entry
    /// for a name wins, as nginx stops at it.
    pub fn parse(text: &[u8]) -> Result<Users, Vec<BadLine>> {
        let mut table = HashMap::new();
        // Each kind of work (scheme and cost) seen: how many entries have it, and the
        // first of them.
        let mut works: Vec<((&'static str, u32), usize, Hash)> = Vec::new();
        let mut bad = Vec::new();
        for (index, line) in text.split(|&b| b == b'\n').enumerate() {
            match entry(line) {
                Ok(None) => {}
                Ok(Some((user, hash))) => {
                    if table.contains_key(user) {
                        continue;
                    }
                    match works.iter_mut().find(|(work, ..)| *work == hash.work()) {
                        Some((_, count, _)) => *count += 1,
                        None => works.push((hash.work(), 1, hash.clone())),
                    }
                    table.insert(user.into(), hash);
                }
                Err(error) => bad.push(BadLine {
                    line: index + 1,
                    error,
                }),
            }
        }
        if !bad.is_empty() {
            return Err(bad);
        }
        // The most common work, the first seen among equals.
        let decoy = works
            .into_iter()
            .rev()
            .max_by_key(|(_, count, _)| *count)
            .map(|(_, _, hash)| hash);
        Ok(Users { table, decoy })
    }

    /// Whether `password` is `user`'s. A user not in the table costs a verify all the same
    /// (against the decoy), so that an attacker cannot time which names exist.
    pub fn check(&self, user: &[u8], password: &[u8]) -> Checked {
        match self.table.get(user) {
            Some(hash) if hash.verify(password) => Checked::Pass,
            Some(_) => Checked::Mismatch,
            None => {
                if let Some(decoy) = &self.decoy {
                    std::hint::black_box(decoy.verify(password));
                }
                Checked::NoSuchUser
            }
        }
    }
}

/// One line of an htpasswd file (without its LF): `None` for one nginx skips.
fn entry(line: &[u8]) -> Result<Option<(&[u8], Hash)>, LineError> {
    if matches!(line.first(), None | Some(b'#' | b'\r')) {
        return Ok(None);
    }
    let colon = memchr::memchr(b':', line).ok_or(LineError::NoColon)?;
    let (user, rest) = line.split_at(colon);
    let rest = rest.get(1..).unwrap_or_default();
    if user.is_empty() {
        return Err(LineError::EmptyUser);
    }
    let end = memchr::memchr2(b':', b'\r', rest).unwrap_or(rest.len());
    let hash = rest.get(..end).unwrap_or_default();
    // A hash is ASCII; bytes that are not UTF-8 are no hash tollgate knows.
    let hash = std::str::from_utf8(hash).map_err(|_| HashError::Plaintext)?;
    Ok(Some((user, Hash::parse(hash)?)))
}

#[cfg(test)]
mod tests;
