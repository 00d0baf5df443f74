//! `[acme] storage`: the account and each name's certificate and key, so a restart
//! reuses them; lock files, so instances sharing the directory (on a shared filesystem)
//! do not order a name twice at once; and the challenge answers under way, so any of
//! them can answer the CA.
//!
//! ```text
//! storage/                              mode 0700
//!   <CA>/                               one per directory URL, e.g. acme-v02.api.letsencrypt.org-directory
//!     account.json                      the account's URL and key (0600)
//!     account.contact                   the contact the CA was last given
//!     account.lock                      held while the account is made
//!     certs/<name>/bundle.pem           the key, then the chain, leaf first (0600)
//!     certs/<name>/lock                 held while the name is ordered
//!     challenges/http-01/<token>        answers under way (each holds the key
//!     challenges/tls-alpn-01/<name>       authorization)
//! ```
//!
//! Every file is written whole or not at all (a temporary file renamed over it), the
//! certificate and its key together in one file. A lock holds who took it; it is kept
//! fresh while its holder works and taken over when it is not (the holder died).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use instant_acme::AccountCredentials;

use crate::certs::{self, Certificate};
use crate::config::{check_writable, Challenge, StorageError};

/// A lock not refreshed for this long is taken to be left by a holder that died.
const STALE_LOCK: Duration = Duration::from_secs(120);
/// How often a holder refreshes its lock (see [`Lock::refresh`]).
pub(super) const LOCK_REFRESH: Duration = Duration::from_secs(30);
/// Most answers read from each `challenges/` directory.
const MOST_ANSWERS: usize = 1000;
/// Longest key authorization read (a token, a dot, a thumbprint: about 90 bytes).
const LONGEST_ANSWER: u64 = 1024;
/// An answer file older than this was left by an order that ended without removing it.
const OLDEST_ANSWER: Duration = Duration::from_secs(3600);

/// One CA's part of the storage directory.
#[derive(Debug, Clone)]
pub(super) struct Storage {
    dir: PathBuf,
}

/// A stored certificate, loaded and checked, with the start of its validity.
#[derive(Debug)]
pub(super) struct Stored {
    pub certificate: Certificate,
    pub not_before: i64,
}

impl Storage {
    /// The part of `root` for the CA at `directory`, made (mode 0700) if missing and
    /// checked to be writable.
    pub(super) fn open(root: &Path, directory: &str) -> Result<Storage, StorageError> {
        let dir = root.join(ca_dir_name(directory));
        make_dir(root)?;
        make_dir(&dir)?;
        check_writable(&dir).map_err(|reason| StorageError {
            path: dir.clone(),
            reason,
        })?;
        Ok(Storage { dir })
    }

    /// The stored account, if any.
    pub(super) fn account(&self) -> Result<Option<AccountCredentials>, String> {
        let path = self.dir.join("account.json");
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("{}: {err}", path.display())),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|err| format!("{}: {err}", path.display()))
    }

    pub(super) fn save_account(&self, credentials: &AccountCredentials) -> Result<(), StorageError> {
        let path = self.dir.join("account.json");
        let text = serde_json::to_vec_pretty(credentials).map_err(|err| error(&path, err))?;
        replace_file(&path, &text)
    }

    /// The contact the CA was last given for the stored account (`""`: none).
    pub(super) fn account_contact(&self) -> Option<String> {
        fs::read_to_string(self.dir.join("account.contact")).ok()
    }

    pub(super) fn save_account_contact(&self, contact: &str) -> Result<(), StorageError> {
        replace_file(&self.dir.join("account.contact"), contact.as_bytes())
    }

    /// The stored certificate of `name`, if there is one: `Err` says why it cannot be
    /// used (unreadable, not for `name`).
    pub(super) fn certificate(&self, name: &str) -> Result<Option<Stored>, String> {
        let bundle = self.bundle(name);
        if !bundle.exists() {
            return Ok(None);
        }
        let certificate = certs::load(&bundle, &bundle).map_err(|err| err.to_string())?;
        let stored =
            stored(certificate, name).map_err(|why| format!("{}: {why}", bundle.display()))?;
        Ok(Some(stored))
    }

    /// Stores a new certificate of `name` (its chain and key, PEM), replacing the old
    /// one whole.
    pub(super) fn save_certificate(&self, name: &str, chain: &str, key: &str) -> Result<(), StorageError> {
        let bundle = self.bundle(name);
        if let Some(dir) = bundle.parent() {
            make_dir(dir)?;
        }
        replace_file(&bundle, format!("{key}{chain}").as_bytes())
    }

    /// Takes the lock of `name` (or `account`): `None` while another holder has it. A
    /// lock left by a holder that died is taken over: at once when it was a process on
    /// this host that is gone, else once it has not been refreshed for [`STALE_LOCK`].
    pub(super) fn lock(&self, name: &str) -> Result<Option<Lock>, StorageError> {
        let path = match name {
            "account" => self.dir.join("account.lock"),
            name => {
                let dir = self.dir.join("certs").join(name);
                make_dir(&dir)?;
                dir.join("lock")
            }
        };
        let holder = format!("{} {} {}\n", host(), std::process::id(), unique());
        for _ in 0..2 {
            let created = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match created {
                Ok(mut file) => {
                    file.write_all(holder.as_bytes())
                        .map_err(|err| error(&path, err))?;
                    return Ok(Some(Lock { path, holder }));
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                    if !abandoned(&path) || !take_over(&path) {
                        return Ok(None);
                    }
                }
                Err(err) => return Err(error(&path, err)),
            }
        }
        Ok(None)
    }

    /// Writes the answer to a challenge under way (`key`: the http-01 token or the
    /// tls-alpn-01 name) where sibling instances read it.
    pub(super) fn publish_answer(
        &self,
        challenge: Challenge,
        key: &str,
        answer: &str,
    ) -> Result<(), StorageError> {
        let dir = self.dir.join("challenges").join(challenge.as_str());
        make_dir(&dir)?;
        if !safe_file_name(key) {
            let reason = format!("{key:?} is not a safe file name");
            return Err(StorageError { path: dir, reason });
        }
        replace_file(&dir.join(key), answer.as_bytes())
    }

    pub(super) fn withdraw_answer(&self, challenge: Challenge, key: &str) {
        if safe_file_name(key) {
            let dir = self.dir.join("challenges").join(challenge.as_str());
            let _ = fs::remove_file(dir.join(key));
        }
    }

    /// The answers under way that this instance and its siblings published, of one
    /// kind: (key, key authorization). Plain small files only, at most
    /// [`MOST_ANSWERS`]; an answer older than an order can take is left out.
    pub(super) fn answers(&self, challenge: Challenge) -> Vec<(String, String)> {
        let dir = self.dir.join("challenges").join(challenge.as_str());
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let now = SystemTime::now();
        let mut answers = Vec::new();
        for entry in entries.flatten() {
            let Ok(key) = entry.file_name().into_string() else {
                continue;
            };
            // `DirEntry::metadata` does not follow a symlink.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let recent = meta
                .modified()
                .ok()
                .and_then(|at| now.duration_since(at).ok())
                .is_none_or(|age| age < OLDEST_ANSWER);
            if !safe_file_name(&key) || !meta.is_file() || meta.len() > LONGEST_ANSWER || !recent {
                continue;
            }
            let mut answer = String::new();
            let read = fs::File::open(entry.path())
                .and_then(|file| file.take(LONGEST_ANSWER).read_to_string(&mut answer));
            if read.is_ok() {
                answers.push((key, answer));
            }
            if answers.len() == MOST_ANSWERS {
                break;
            }
        }
        answers
    }

    fn bundle(&self, name: &str) -> PathBuf {
        self.dir.join("certs").join(name).join("bundle.pem")
    }
}

/// `certificate` as stored for `name`: its leaf must name it.
fn stored(certificate: Certificate, name: &str) -> Result<Stored, String> {
    if !certificate.covers(name) {
        return Err(format!("the certificate is not for {name}"));
    }
    let leaf = certificate.key.cert.first().ok_or("no certificate")?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|err| format!("cannot read its validity: {err}"))?;
    let not_before = parsed.validity().not_before.timestamp();
    Ok(Stored {
        certificate,
        not_before,
    })
}

/// Checks a certificate the CA just issued for `name` before it replaces the stored
/// one: it must load with its key, name `name`, be valid now, and be a plausible
/// chain (at most [`LONGEST_CHAIN`] certificates).
pub(super) fn check_issued(name: &str, chain: &str, key: &str, now: i64) -> Result<Stored, String> {
    let issued = Path::new("issued certificate");
    let certificate = certs::parse(chain.as_bytes(), issued, key.as_bytes(), issued)
        .map_err(|err| err.to_string())?;
    if certificate.key.cert.len() > LONGEST_CHAIN {
        let n = certificate.key.cert.len();
        return Err(format!("the CA sent a chain of {n} certificates"));
    }
    let stored = stored(certificate, name)?;
    if stored.certificate.not_after <= now {
        return Err("the CA sent a certificate that is not valid now".to_owned());
    }
    Ok(stored)
}

/// Longest chain accepted from a CA: leaf, intermediates, perhaps a cross-signed root.
const LONGEST_CHAIN: usize = 5;

/// Held while a name (or the account) is being ordered; removed when dropped (also when
/// the order is abandoned midway), unless another holder has taken it over meanwhile.
#[derive(Debug)]
pub(super) struct Lock {
    path: PathBuf,
    /// What the file says: host, pid and a random tag.
    holder: String,
}

impl Lock {
    /// Marks the lock as still in use (every [`LOCK_REFRESH`] while ordering).
    pub(super) fn refresh(&self) {
        if self.still_ours() {
            if let Ok(file) = OpenOptions::new().write(true).open(&self.path) {
                let _ = file.set_modified(SystemTime::now());
            }
        }
    }

    fn still_ours(&self) -> bool {
        fs::read_to_string(&self.path).is_ok_and(|text| text == self.holder)
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.still_ours() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Whether the holder of the lock at `path` is gone: a process of this host that no
/// longer runs, or a holder that has not refreshed it for [`STALE_LOCK`] by the
/// filesystem's own clock (instances' clocks may differ).
fn abandoned(path: &Path) -> bool {
    let holder = fs::read_to_string(path).unwrap_or_default();
    let mut parts = holder.split_whitespace();
    if let (Some(host_name), Some(pid)) = (parts.next(), parts.next()) {
        let ours = host_name == host() && pid != std::process::id().to_string();
        if ours && !Path::new("/proc").join(pid).exists() {
            return true;
        }
    }
    let Ok(modified) = fs::metadata(path).and_then(|meta| meta.modified()) else {
        return false;
    };
    let now = path
        .parent()
        .and_then(fs_now)
        .unwrap_or_else(SystemTime::now);
    now.duration_since(modified)
        .is_ok_and(|age| age > STALE_LOCK)
}

/// Takes an abandoned lock out of the way by renaming it, which only one of several
/// instances trying at once manages; `false` for the others.
fn take_over(path: &Path) -> bool {
    let aside = path.with_extension(format!("stale-{}", unique()));
    if fs::rename(path, &aside).is_err() {
        return false;
    }
    tracing::warn!(lock = %path.display(), "took over an ACME lock its holder abandoned");
    let _ = fs::remove_file(aside);
    true
}

/// The time by the clock of the filesystem holding `dir`: a file's modification time
/// right after it is made.
fn fs_now(dir: &Path) -> Option<SystemTime> {
    let probe = dir.join(format!(".clock-{}", unique()));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .ok()?;
    let now = file.metadata().and_then(|meta| meta.modified()).ok();
    let _ = fs::remove_file(&probe);
    now
}

fn host() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}

/// A tag that sets this process's files apart from a sibling's (containers often all
/// run as pid 1).
fn unique() -> String {
    let seed = std::collections::hash_map::RandomState::new();
    let tag = std::hash::BuildHasher::hash_one(&seed, std::process::id());
    format!("{}-{tag:016x}", std::process::id())
}

/// Tokens are base64url and names are DNS names: anything else (a `/`, a leading dot,
/// a temporary file) is not read or written as an answer.
fn safe_file_name(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 255
        && !key.starts_with('.')
        && !key.ends_with(".tmp")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A directory name for the CA at `directory`: its host, port and path, with anything
/// but letters, digits, `.` and `-` made `_`.
fn ca_dir_name(directory: &str) -> String {
    let rest = directory
        .split_once("://")
        .map_or(directory, |(_, rest)| rest);
    let name: String = rest
        .trim_end_matches('/')
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' => c.to_ascii_lowercase(),
            '/' => '-',
            _ => '_',
        })
        .collect();
    match name.trim_start_matches('.') {
        "" => "ca".to_owned(),
        name => name.to_owned(),
    }
}

fn error(path: &Path, err: impl std::fmt::Display) -> StorageError {
    StorageError {
        path: path.to_owned(),
        reason: err.to_string(),
    }
}

fn make_dir(path: &Path) -> Result<(), StorageError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|err| error(path, err))?;
    let meta = fs::metadata(path).map_err(|err| error(path, err))?;
    if !meta.is_dir() {
        return Err(error(path, "not a directory"));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))
            .map_err(|err| error(path, err))?;
    }
    Ok(())
}

/// Writes `path` whole or not at all: a temporary file beside it (mode 0600, synced),
/// renamed over it.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", unique()));
    let temporary = PathBuf::from(temporary);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        });
    if let Err(err) = written.and_then(|()| fs::rename(&temporary, path)) {
        let _ = fs::remove_file(&temporary);
        return Err(error(path, err));
    }
    Ok(())
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
