//! `tollgate stop`: SIGTERM to the gateway its pid file names, then a wait until the
//! process is gone: it stops accepting at once and drains for up to `shutdown_timeout`.

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use super::{pid_file, reload, Outcome};
use crate::config::Config;

/// Waited beyond `shutdown_timeout`: the drain's end, then the access log flushed.
const MARGIN: Duration = Duration::from_secs(5);
/// How often the process is looked for meanwhile.
const POLL: Duration = Duration::from_millis(20);

/// Stops the gateway `config` (read from `path`) names by its `pid_file`. Done when its
/// process has exited; failed when it still runs `shutdown_timeout` plus [`MARGIN`]
/// after the signal.
pub fn stop(config: &Config, path: &Path) -> Outcome {
    let pid = match reload::target(config, path) {
        Ok(pid) => pid,
        Err(text) => return Outcome::failed(text),
    };
    if let Err(text) = pid_file::send(pid, Signal::TERM, "SIGTERM") {
        return Outcome::failed(text);
    }
    let limit = config.server.shutdown_timeout + MARGIN;
    let deadline = Instant::now() + limit;
    while pid_file::alive(pid) {
        if Instant::now() >= deadline {
            return Outcome::failed(format!(
                "process {pid} still runs {limit:?} after SIGTERM (its shutdown_timeout and {MARGIN:?}): see its error log; a second SIGTERM makes it exit without waiting"
            ));
        }
        std::thread::sleep(POLL);
    }
    Outcome::done(format!("stopped: process {pid} has exited"))
}
