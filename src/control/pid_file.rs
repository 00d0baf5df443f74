//! The pid file (nginx `pid`): the gateway's process id as one decimal line. The gateway
//! writes it at start and removes it at a clean exit; `tollgate reload` and `stop` read
//! it to find whom to signal.

use std::io::Write;
use std::path::{Path, PathBuf};

use rustix::io::Errno;
use rustix::process::{Pid, Signal};

/// The file this process wrote; dropping it removes the file if it still names this
/// process.
#[derive(Debug)]
pub(crate) struct PidFile {
    path: PathBuf,
    pid: u32,
}

impl PidFile {
    /// Writes this process's id to `path`, through a temporary file in the same
    /// directory renamed over it, so that a reader sees the old file or the whole new
    /// one, never a part. A file already there is replaced (as nginx does) whatever it
    /// names: the start got this far with every address bound, so a gateway it names
    /// that still runs serves other addresses, or is the one `--upgrade` replaces.
    pub(crate) fn write(path: &Path) -> std::io::Result<PidFile> {
        let pid = std::process::id();
        if let Ok(old) = running(path) {
            if u32::try_from(old.as_raw_nonzero().get()).ok() != Some(pid) {
                tracing::warn!(
                    "pid_file {} named process {old}, which still runs; it names this one ({pid}) now",
                    path.display()
                );
            }
        }
        let written = write_whole(path, pid);
        written.map(|()| PidFile {
            path: path.to_path_buf(),
            pid,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PidFile {
    /// After a binary upgrade (`--upgrade`) the file names the successor, and is its to
    /// remove: it is left alone then.
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .is_ok_and(|text| text.trim().parse::<u32>() == Ok(self.pid));
        if ours {
            if let Err(err) = std::fs::remove_file(&self.path) {
                tracing::warn!("cannot remove pid_file {}: {err}", self.path.display());
            }
        }
    }
}

/// Writes `pid` to a new file of a random name beside `path` (the same file system, so
/// the rename is atomic), made with `O_EXCL`: in a directory others may write to (`/tmp`),
/// a link planted at a name guessed in advance is never followed, and the rename replaces
/// a link at `path` itself rather than writing through it.
fn write_whole(path: &Path, pid: u32) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().map_or_else(
        || "pid".into(),
        |name| name.to_string_lossy().into_owned(),
    );
    // Readable by all, as nginx's: `tollgate reload` may run as another user.
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(mode)
        .tempfile_in(dir)?;
    temp.write_all(format!("{pid}\n").as_bytes())?;
    temp.as_file().sync_all()?;
    temp.persist(path).map(drop).map_err(|err| err.error)
}

/// The process `path` names, if it runs. The error says what is wrong with the file for
/// an operator: missing, unreadable, not a number, or naming a process that is gone.
pub(super) fn running(path: &Path) -> Result<Pid, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => {
            format!("no pid file at {shown}: is the gateway running? (it writes its pid_file when it starts)")
        }
        _ => format!("cannot read the pid file {shown}: {err}"),
    })?;
    let pid = text
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|&pid| pid > 0)
        .and_then(Pid::from_raw)
        .ok_or_else(|| format!("the pid file {shown} holds no process id: {:?}", clip(&text)))?;
    match alive(pid) {
        true => Ok(pid),
        false => Err(format!(
            "the pid file {shown} names process {pid}, which is not running: a stale file (the gateway stopped without removing it); start the gateway"
        )),
    }
}

/// Whether `pid` is a process that has not exited. One that has exited but that its
/// parent has not yet reaped (a zombie: state `Z` in /proc on Linux) counts as gone.
pub(super) fn alive(pid: Pid) -> bool {
    match rustix::process::test_kill_process(pid) {
        // Another user's process: there all the same.
        Ok(()) | Err(Errno::PERM) => !zombie(pid),
        Err(_) => false,
    }
}

fn zombie(pid: Pid) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `PID (COMM) STATE …`, where COMM may hold spaces and parentheses.
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

/// Sends `signal` (named `name` for the message) to `pid`.
pub(super) fn send(pid: Pid, signal: Signal, name: &str) -> Result<(), String> {
    rustix::process::kill_process(pid, signal).map_err(|err| match err {
        Errno::PERM => format!(
            "cannot send {name} to process {pid}: not permitted (run as the gateway's user, or root)"
        ),
        err => format!("cannot send {name} to process {pid}: {err}"),
    })
}

/// At most 40 characters of what a broken pid file holds, for the message.
fn clip(text: &str) -> String {
    text.trim().chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_planted_at_the_path_or_a_guessable_name_are_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let path = dir.path().join("tollgate.pid");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        // Where a temporary name made of the pid would be: in /tmp anyone can put a link there.
        let guessed = dir.path().join(format!(".tollgate.pid.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &guessed).unwrap();
        let file = PidFile::write(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file(), "the link itself was replaced");
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
        assert_eq!(mode & 0o777, 0o644, "readable by all, as nginx's");
        drop(file);
    }

    #[test]
    fn writes_this_process_id_and_removes_it_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tollgate.pid");
        std::fs::write(&path, "garbage that is replaced").unwrap();
        let file = PidFile::write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
        let pid = running(&path).unwrap();
        assert_eq!(pid.as_raw_nonzero().get(), std::process::id() as i32);
        drop(file);
        assert!(!path.exists());
    }

    #[test]
    fn a_file_that_names_a_successor_is_left_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tollgate.pid");
        let file = PidFile::write(&path).unwrap();
        std::fs::write(&path, "1\n").unwrap();
        drop(file);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n");
    }

    #[test]
    fn a_missing_broken_or_stale_file_says_which() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tollgate.pid");
        assert!(running(&path).unwrap_err().starts_with("no pid file at "));
        std::fs::write(&path, "twelve\n").unwrap();
        let err = running(&path).unwrap_err();
        assert!(err.ends_with("holds no process id: \"twelve\""), "{err}");
        std::fs::write(&path, "-5\n").unwrap();
        assert!(running(&path).unwrap_err().contains("holds no process id"));
        // A child that has exited and been reaped: its id names no process.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = child.id();
        child.wait().unwrap();
        std::fs::write(&path, format!("{id}\n")).unwrap();
        let err = running(&path).unwrap_err();
        assert!(err.contains(&format!("names process {id}, which is not running")), "{err}");
    }

    #[test]
    fn an_exited_child_not_yet_reaped_is_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = Pid::from_raw(child.id() as i32).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive(pid) {
            assert!(std::time::Instant::now() < deadline, "`true` still runs");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        child.wait().unwrap();
    }
}
