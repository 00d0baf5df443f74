//! `[acme] storage`: the account and each name's certificate and key, so a restart
//! reuses them, and lock files, so instances sharing the directory (on a shared
//! filesystem) order a name once between them.
//!
//! ```text
//! storage/                         mode 0700
//!   <CA>/                          one per directory URL, e.g. acme-v02.api.letsencrypt.org-directory
//!     account.json                 the account's URL and key (0600)
//!     account.lock                 held while the account is made
//!     <name>/cert.pem              the chain, leaf first
//!     <name>/key.pem               its key (0600)
//!     <name>/lock                  held while the name is ordered
//!     challenges/http-01/<token>   answers under way, for siblings the CA may reach
//!     challenges/tls-alpn-01/<name>  instead (each holds the key authorization)
//! ```

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use instant_acme::AccountCredentials;

use crate::certs::{self, Certificate};
use crate::config::Challenge;

/// Most answers read from `challenges/` (a sibling has a few under way at a time).
const MOST_ANSWERS: usize = 1000;
/// Longest key authorization read (a token, a dot, a thumbprint: about 90 bytes).
const LONGEST_ANSWER: u64 = 1024;

/// A lock older than this is taken to be left by an instance that died mid-order.
const STALE_LOCK: Duration = Duration::from_secs(10 * 60);

/// One CA's part of the storage directory.
#[derive(Debug, Clone)]
pub struct Storage {
    dir: PathBuf,
}

/// A stored certificate, loaded and checked, with the start of its validity.
#[derive(Debug)]
pub struct Stored {
    pub certificate: Certificate,
    pub not_before: i64,
}

/// Why storage cannot be used: said with the path.
#[derive(Debug, thiserror::Error)]
#[error("acme storage {}: {source}", path.display())]
pub struct StorageError {
    pub path: PathBuf,
    pub source: io::Error,
}

impl Storage {
    /// The part of `root` for the CA at `directory`, made (mode 0700) if missing and
    /// checked to be writable.
    pub fn open(root: &Path, directory: &str) -> Result<Storage, StorageError> {
        let dir = root.join(ca_dir_name(directory));
        make_dir(root)?;
        make_dir(&dir)?;
        let probe = dir.join(".probe");
        write_file(&probe, b"")?;
        fs::remove_file(&probe).map_err(|source| StorageError {
            path: probe,
            source,
        })?;
        Ok(Storage { dir })
    }

    /// The stored account, if any.
    pub fn account(&self) -> Result<Option<AccountCredentials>, String> {
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

    pub fn save_account(&self, credentials: &AccountCredentials) -> Result<(), StorageError> {
        let path = self.dir.join("account.json");
        let text = serde_json::to_vec_pretty(credentials).map_err(|err| StorageError {
            path: path.clone(),
            source: io::Error::other(err),
        })?;
        replace_file(&path, &text)
    }

    /// The stored certificate of `name`, if there is one that loads: `Err` says why a
    /// stored one does not (a key that does not match may be a sibling instance halfway
    /// through writing the pair; the caller tries again later).
    pub fn certificate(&self, name: &str) -> Result<Option<Stored>, String> {
        let (cert, key) = self.paths(name);
        if !cert.exists() {
            return Ok(None);
        }
        let certificate = certs::load(&cert, &key).map_err(|err| err.to_string())?;
        let not_before = not_before(certificate.key.cert[0].as_ref())
            .ok_or_else(|| format!("{}: cannot read its validity", cert.display()))?;
        Ok(Some(Stored {
            certificate,
            not_before,
        }))
    }

    /// Stores a new certificate of `name`: the key first, then the chain, each by a
    /// rename, so a reader sees the old pair, the new pair, or a mismatch it retries.
    pub fn save_certificate(&self, name: &str, chain: &str, key: &str) -> Result<(), StorageError> {
        make_dir(&self.dir.join(name))?;
        let (cert_path, key_path) = self.paths(name);
        replace_file(&key_path, key.as_bytes())?;
        replace_file(&cert_path, chain.as_bytes())
    }

    /// Takes the lock of `name` (or `account`), unless another holder has it: `None`
    /// then. A lock left by a holder that died is taken over after [`STALE_LOCK`].
    pub fn lock(&self, name: &str) -> Result<Option<Lock>, StorageError> {
        let path = match name {
            "account" => self.dir.join("account.lock"),
            name => {
                make_dir(&self.dir.join(name))?;
                self.dir.join(name).join("lock")
            }
        };
        for _ in 0..2 {
            let created = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match created {
                Ok(mut file) => {
                    let holder = format!("pid {}\n", std::process::id());
                    let _ = file.write_all(holder.as_bytes());
                    return Ok(Some(Lock { path }));
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                    if !stale(&path) {
                        return Ok(None);
                    }
                    tracing::warn!(lock = %path.display(), "taking over a stale ACME lock");
                    let _ = fs::remove_file(&path);
                }
                Err(source) => return Err(StorageError { path, source }),
            }
        }
        Ok(None)
    }

    /// Writes the answer to a challenge under way (`key`: the http-01 token or the
    /// tls-alpn-01 name) where sibling instances read it.
    pub fn publish_answer(
        &self,
        challenge: Challenge,
        key: &str,
        answer: &str,
    ) -> Result<(), StorageError> {
        let dir = self.dir.join("challenges").join(challenge.as_str());
        make_dir(&dir)?;
        if !safe_file_name(key) {
            let source = io::Error::other("not a safe file name");
            return Err(StorageError {
                path: dir.join("?"),
                source,
            });
        }
        replace_file(&dir.join(key), answer.as_bytes())
    }

    pub fn withdraw_answer(&self, challenge: Challenge, key: &str) {
        if safe_file_name(key) {
            let dir = self.dir.join("challenges").join(challenge.as_str());
            let _ = fs::remove_file(dir.join(key));
        }
    }

    /// The answers under way that this instance and its siblings published, of each
    /// kind: (key, key authorization).
    pub fn answers(&self, challenge: Challenge) -> Vec<(String, String)> {
        let dir = self.dir.join("challenges").join(challenge.as_str());
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut answers = Vec::new();
        for entry in entries.flatten().take(MOST_ANSWERS) {
            let Ok(key) = entry.file_name().into_string() else {
                continue;
            };
            let small = entry
                .metadata()
                .is_ok_and(|m| m.is_file() && m.len() <= LONGEST_ANSWER);
            if !safe_file_name(&key) || !small {
                continue;
            }
            if let Ok(answer) = fs::read_to_string(entry.path()) {
                answers.push((key, answer));
            }
        }
        answers
    }

    fn paths(&self, name: &str) -> (PathBuf, PathBuf) {
        let dir = self.dir.join(name);
        (dir.join("cert.pem"), dir.join("key.pem"))
    }
}

/// Held while a name (or the account) is being ordered; removed when dropped, also when
/// the order is abandoned midway.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Tokens are base64url and names are DNS names: anything else (a `/`, a leading dot,
/// the temporary files' suffix) is not read or written as an answer.
fn safe_file_name(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 255
        && !key.starts_with('.')
        && !key.ends_with(".tmp")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn stale(path: &Path) -> bool {
    fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|at| SystemTime::now().duration_since(at).ok())
        .is_some_and(|age| age > STALE_LOCK)
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

fn make_dir(path: &Path) -> Result<(), StorageError> {
    let error = |source| StorageError {
        path: path.to_owned(),
        source,
    };
    match fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
    {
        Ok(()) => {}
        Err(err) => return Err(error(err)),
    }
    let meta = fs::metadata(path).map_err(error)?;
    if !meta.is_dir() {
        return Err(error(io::Error::other("not a directory")));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(error)?;
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let error = |source| StorageError {
        path: path.to_owned(),
        source,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(error)?;
    file.write_all(bytes).map_err(error)?;
    file.sync_all().map_err(error)
}

/// Writes `path` whole or not at all: a temporary file beside it, renamed over it.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    write_file(&temporary, bytes)?;
    fs::rename(&temporary, path).map_err(|source| StorageError {
        path: path.to_owned(),
        source,
    })
}

fn not_before(der: &[u8]) -> Option<i64> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(cert.validity().not_before.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_url_becomes_a_file_name() {
        let le = "https://acme-v02.api.letsencrypt.org/directory";
        assert_eq!(ca_dir_name(le), "acme-v02.api.letsencrypt.org-directory");
        assert_eq!(
            ca_dir_name("https://127.0.0.1:14000/dir"),
            "127.0.0.1_14000-dir"
        );
        assert_eq!(ca_dir_name("https://[::1]:1/a/../b"), "___1__1-a-..-b");
        assert_eq!(ca_dir_name("https://../"), "ca");
    }

    #[test]
    fn storage_is_made_private_and_locks_exclude() {
        let root = tempfile::tempdir().unwrap();
        let acme = root.path().join("acme");
        let storage = Storage::open(&acme, "https://ca.test/dir").unwrap();
        let mode = fs::metadata(&acme).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let lock = storage.lock("example.com").unwrap().expect("free");
        assert!(storage.lock("example.com").unwrap().is_none());
        drop(lock);
        assert!(storage.lock("example.com").unwrap().is_some());
        assert!(storage.certificate("example.com").unwrap().is_none());
        assert!(storage.account().unwrap().is_none());
    }

    #[test]
    fn answers_are_shared_through_storage_and_names_are_checked() {
        let root = tempfile::tempdir().unwrap();
        let storage = Storage::open(root.path(), "https://ca.test/dir").unwrap();
        storage
            .publish_answer(Challenge::Http01, "tok-EN_1", "tok-EN_1.thumb")
            .unwrap();
        storage
            .publish_answer(Challenge::TlsAlpn01, "a.example.com", "x.y")
            .unwrap();
        assert!(storage
            .publish_answer(Challenge::Http01, "../x", "a")
            .is_err());
        assert!(storage
            .publish_answer(Challenge::Http01, ".hidden", "a")
            .is_err());
        let http = storage.answers(Challenge::Http01);
        assert_eq!(http, [("tok-EN_1".to_owned(), "tok-EN_1.thumb".to_owned())]);
        assert_eq!(storage.answers(Challenge::TlsAlpn01).len(), 1);
        storage.withdraw_answer(Challenge::Http01, "tok-EN_1");
        assert!(storage.answers(Challenge::Http01).is_empty());
    }

    #[test]
    fn storage_under_a_file_is_a_clear_error() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("file");
        fs::write(&file, "").unwrap();
        let err = Storage::open(&file.join("acme"), "https://ca.test/dir").unwrap_err();
        assert!(err.to_string().starts_with("acme storage "), "{err}");
        assert!(err.to_string().contains("file/acme"), "{err}");
    }
}
