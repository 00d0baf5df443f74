//! How the command line speaks to a gateway that runs: the pid file it writes at start
//! (`[server] pid_file`), and `tollgate reload` and `tollgate stop`, which find its
//! process by that file, signal it, and read the outcome back: a stop by watching the
//! process go, a reload through the admin API's `/status` when `[admin]` is set.
//!
//! - `pid_file`: writing the file (the gateway) and finding the process it names (the
//!   commands), and signalling it.
//! - `status`: the reload counts of `GET /status`, over one HTTP/1.1 connection.
//! - `reload`, `stop`: the two commands.

mod pid_file;
mod reload;
mod status;
mod stop;

pub(crate) use pid_file::PidFile;
pub use reload::reload;
pub use stop::stop;

/// What a command tells the operator, and whether it did what was asked: `tollgate`
/// prints `text` to stdout and exits 0 when it did, to stderr and exits 1 when not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub done: bool,
    pub text: String,
}

impl Outcome {
    fn done(text: impl Into<String>) -> Outcome {
        Outcome {
            done: true,
            text: text.into(),
        }
    }

    fn failed(text: impl Into<String>) -> Outcome {
        Outcome {
            done: false,
            text: text.into(),
        }
    }
}
