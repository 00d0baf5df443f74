//! `tollgate reload`: SIGHUP to the gateway its pid file names, then the outcome read
//! back from the admin API (`/status`'s reload counts move when the reload is done).
//! The file has been checked as `-t` does before this is called, so a file with a
//! problem sends nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use super::{pid_file, status, Outcome};
use crate::config::{Admin, Config};

/// Longest wait for the reload's outcome: a reload builds the next generation
/// (certificates read, regexes compiled, Redis connected) in well under this.
const WAIT: Duration = Duration::from_secs(10);
/// How often `/status` is read meanwhile.
const POLL: Duration = Duration::from_millis(50);

/// Reloads the gateway `config` (read from `path`) names by its `pid_file`. Done when it
/// reloaded (or, without `[admin]`, when the signal was sent); failed when it kept its
/// configuration, or said nothing within [`WAIT`].
pub fn reload(config: &Config, path: &Path) -> Outcome {
    let pid = match target(config, path) {
        Ok(pid) => pid,
        Err(text) => return Outcome::failed(text),
    };
    let Some(admin) = &config.admin else {
        return match pid_file::send(pid, Signal::HUP, "SIGHUP") {
            Ok(()) => Outcome::done(format!(
                "SIGHUP sent to process {pid}; without [admin] its outcome is only in the gateway's error log (\"reloaded\" or \"reload failed\")"
            )),
            Err(text) => Outcome::failed(text),
        };
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return Outcome::failed(format!("cannot start: {err}")),
    };
    runtime.block_on(watched(pid, admin))
}

/// The process a command for `config` (read from `path`) signals: the one its
/// `pid_file` names, if that runs.
pub(super) fn target(config: &Config, path: &Path) -> Result<Pid, String> {
    match &config.server.pid_file {
        Some(pid_file) => pid_file::running(pid_file),
        None => Err(format!(
            "{} sets no pid_file, so the gateway's process cannot be found: set `pid_file` in [server] (and restart the gateway), or signal the process yourself",
            path.display()
        )),
    }
}

/// SIGHUP, between two readings of `/status`: the one before, and the first after whose
/// reload counts moved.
async fn watched(pid: Pid, admin: &Admin) -> Outcome {
    let before = status::read(admin).await;
    if let Err(text) = pid_file::send(pid, Signal::HUP, "SIGHUP") {
        return Outcome::failed(text);
    }
    let before = match before {
        Ok(before) => before,
        Err(err) => {
            return Outcome::failed(format!(
                "SIGHUP sent to process {pid}, but its outcome cannot be read ({err}): see the gateway's error log"
            ))
        }
    };
    let deadline = Instant::now() + WAIT;
    let mut trouble = None;
    loop {
        tokio::time::sleep(POLL).await;
        match status::read(admin).await {
            Ok(now) if now.failed > before.failed => {
                let error = now.last_failure.unwrap_or_default();
                let generation = now.generation;
                return Outcome::failed(format!(
                    "reload failed; generation {generation} stays in force:\n{error}"
                ));
            }
            Ok(now) if now.ok > before.ok => {
                return Outcome::done(format!("reloaded: generation {}", now.generation))
            }
            Ok(_) => {}
            Err(err) => trouble = Some(err),
        }
        if Instant::now() >= deadline {
            let trouble = trouble.map_or(String::new(), |err| format!(" (last: {err})"));
            return Outcome::failed(format!(
                "SIGHUP sent to process {pid}, but no reload outcome within {WAIT:?}{trouble}: see the gateway's error log"
            ));
        }
    }
}
