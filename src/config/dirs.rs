//! Whether a directory the gateway writes to can be used, for `tollgate -t`: the
//! `[acme]` storage and `client_body_temp_path`. Only probes the disk; the gateway
//! makes a missing directory itself when it starts.

use std::path::Path;

/// Whether `path` can be used as a directory to write in, without making it: an
/// existing directory must let us create a file (one is made and removed at once); a
/// missing one needs its nearest existing ancestor to be such a directory, where it
/// will be made.
pub(crate) fn check_dir(path: &Path) -> Result<(), String> {
    let missing = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return writable(path),
        Ok(_) => return Err("not a directory".to_owned()),
        Err(err) if gone(&err) => err,
        Err(err) => return Err(err.to_string()),
    };
    let mut ancestors = path.ancestors().skip(1);
    let (parent, meta) = loop {
        let Some(parent) = ancestors.next() else {
            return Err(missing.to_string());
        };
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        match std::fs::metadata(parent) {
            Ok(meta) => break (parent, meta),
            Err(err) if gone(&err) => continue,
            Err(err) => return Err(format!("{}: {err}", parent.display())),
        }
    };
    if !meta.is_dir() {
        return Err(format!(
            "it does not exist and cannot be created: {} is not a directory ({missing})",
            parent.display()
        ));
    }
    writable(parent).map_err(|reason| format!("it does not exist and cannot be created: {reason}"))
}

/// An error that says the path, or a directory on its way, is not there.
fn gone(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Whether a file can be created in `dir`: one is (named apart from any other
/// instance's probe), and removed again.
pub(crate) fn writable(dir: &Path) -> Result<(), String> {
    let unique = std::collections::hash_map::RandomState::new();
    let tag = std::hash::BuildHasher::hash_one(&unique, std::process::id());
    let probe = dir.join(format!(
        ".tollgate-write-test-{}-{tag:x}",
        std::process::id()
    ));
    let cannot = |err: std::io::Error| format!("cannot create a file in {}: {err}", dir.display());
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(cannot)?;
    std::fs::remove_file(&probe).map_err(|err| format!("cannot remove {}: {err}", probe.display()))
}
