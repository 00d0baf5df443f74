//! Unix signals, mapped to what an operator means by them (as nginx).

use tokio::signal::unix::{signal, Signal, SignalKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// SIGTERM, SIGINT: stop accepting, drain, exit.
    Stop,
    /// SIGHUP: re-read the configuration.
    Reload,
    /// SIGUSR1: reopen log files (logrotate).
    ReopenLogs,
}

pub struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
    usr1: Signal,
}

impl Signals {
    /// Installs the handlers; from then on these signals no longer kill the process.
    /// Needs a running tokio runtime.
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
            usr1: signal(SignalKind::user_defined1())?,
        })
    }

    pub async fn next(&mut self) -> Intent {
        tokio::select! {
            _ = self.term.recv() => Intent::Stop,
            _ = self.int.recv() => Intent::Stop,
            _ = self.hup.recv() => Intent::Reload,
            _ = self.usr1.recv() => Intent::ReopenLogs,
        }
    }
}
