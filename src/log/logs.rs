//! Every access log of a generation: `[log]`'s and those sites and locations name with
//! their own `log` (nginx's `access_log` per `server` and `location`).
//!
//! Logs alike are one log; logs writing to one file share it and its buffer, so the
//! file's lines keep the order of their requests. A request captures, once, the headers
//! any of the logs read, so its line can go to the log of wherever it ends up. One
//! thread flushes them all.

use std::io;
use std::sync::{Arc, Weak};

use http::HeaderName;

use super::{open_append, AccessLog, Destination, FLUSH_EVERY};
use crate::config::{self, Config};

/// The access logs of a generation.
pub(crate) struct Logs {
    /// `[log]`'s: where a request is logged before a site or location says otherwise.
    main: Option<Arc<AccessLog>>,
    /// Each log the file names, and what is opened for it (`None`: `off`).
    opened: Vec<(config::Log, Option<Arc<AccessLog>>)>,
    /// Where they write, each place once.
    destinations: Vec<(config::AccessLog, Arc<Destination>)>,
    /// The request headers any log reads, in the order each [`super::Record`] keeps them.
    headers: Box<[HeaderName]>,
    request_id: bool,
    limit_key: bool,
    /// Some log is not `off`: requests keep a record for their line.
    any: bool,
}

impl Logs {
    /// Opens every access log `config` names ([`Config::logs`]).
    pub(crate) fn open(config: &Config) -> io::Result<Logs> {
        let mut destinations = Vec::new();
        let mut captured = Vec::new();
        let mut opened = Vec::new();
        for log in config.logs() {
            let access_log = match &log.access {
                config::AccessLog::Off => None,
                access => {
                    let to = destination(&mut destinations, access)?;
                    Some(Arc::new(AccessLog::new(&log.format, to, &mut captured)?))
                }
            };
            opened.push((log, access_log));
        }
        let all = || opened.iter().filter_map(|(_, log): &(_, Option<Arc<AccessLog>>)| log.as_ref());
        spawn_flusher(destinations.iter().map(|(_, to)| Arc::downgrade(to)).collect());
        Ok(Logs {
            main: opened.first().and_then(|(_, log)| log.clone()),
            request_id: all().any(|log| log.wants_request_id()),
            limit_key: all().any(|log| log.wants_limit_key()),
            any: all().next().is_some(),
            headers: captured.into(),
            opened,
            destinations,
        })
    }

    /// Whether every access log the file names can be opened as the start will open it
    /// (`tollgate -t`; nginx -t fails the same way). A file this made is removed again.
    pub(crate) fn check(config: &Config) -> io::Result<()> {
        for log in config.logs() {
            let config::AccessLog::File(path) = &log.access else {
                continue;
            };
            let existed = path.exists();
            open_append(path)?;
            if !existed {
                let _ = std::fs::remove_file(path);
            }
        }
        Ok(())
    }

    /// `[log]`'s, unless it is `off`.
    pub(crate) fn main(&self) -> Option<&Arc<AccessLog>> {
        self.main.as_ref()
    }

    /// The log of a site or location that writes to `log` (`[log]` with its `log` over
    /// it); `None` when that is `off`.
    pub(crate) fn of(&self, log: &config::Log) -> Option<Arc<AccessLog>> {
        let (_, opened) = self.opened.iter().find(|(known, _)| known == log)?;
        opened.clone()
    }

    /// Whether any line is written at all.
    pub(crate) fn any(&self) -> bool {
        self.any
    }

    /// The request headers a request captures for its line.
    pub(crate) fn headers(&self) -> &[HeaderName] {
        &self.headers
    }

    /// Whether requests get a `$request_id` (some log writes it).
    pub(crate) fn wants_request_id(&self) -> bool {
        self.request_id
    }

    /// Whether a request keeps the key of the zone that decided as text (some log
    /// writes `$limit_key`).
    pub(crate) fn wants_limit_key(&self) -> bool {
        self.limit_key
    }

    /// Writes every buffered line out now (on shutdown).
    pub(crate) fn flush(&self) {
        self.destinations.iter().for_each(|(_, to)| to.flush());
    }

    /// Writes out what is buffered, then opens each file again by its path (after
    /// logrotate has moved it away: SIGUSR1). A file that cannot be opened keeps its
    /// old one; the first such error is returned, after the others are reopened.
    pub(crate) fn reopen(&self) -> io::Result<()> {
        let mut result = Ok(());
        for (_, to) in &self.destinations {
            if let (Err(err), Ok(())) = (to.reopen(), &result) {
                result = Err(err);
            }
        }
        result
    }
}

/// The destination `access` in `destinations`, opened and added if it is not there yet.
fn destination(
    destinations: &mut Vec<(config::AccessLog, Arc<Destination>)>,
    access: &config::AccessLog,
) -> io::Result<Arc<Destination>> {
    if let Some((_, to)) = destinations.iter().find(|(known, _)| known == access) {
        return Ok(Arc::clone(to));
    }
    let to = Arc::new(Destination::open(access)?);
    destinations.push((access.clone(), Arc::clone(&to)));
    Ok(to)
}

/// The flusher lives as long as any of the destinations does.
fn spawn_flusher(destinations: Vec<Weak<Destination>>) {
    if destinations.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("tollgate-log".into())
        .spawn(move || loop {
            std::thread::sleep(FLUSH_EVERY);
            let mut alive = false;
            for to in destinations.iter().filter_map(Weak::upgrade) {
                alive = true;
                to.flush();
            }
            if !alive {
                return;
            }
        });
    if let Err(err) = spawned {
        tracing::error!(error = %err, "cannot start the access-log flusher; lines are written when 64 KiB accumulate");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        crate::config::from_str(text, std::path::Path::new("/gateway.toml")).unwrap_or_else(|errors| panic!("{errors}"))
    }

    #[test]
    fn logs_alike_are_one_and_a_file_is_opened_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.log");
        let text = format!(
            r#"
            [server]
            listen = ["8080"]
            [log]
            access = "{a}"
            [upstreams.app]
            servers = ["127.0.0.1:1"]
            [[site]]
            names = ["a.test"]
            log = {{ format = "$host $http_x_a" }}
            [[site.location]]
            match = "/"
            upstream = "app"
            [[site.location]]
            match = "/b"
            upstream = "app"
            log = {{ format = "$status $http_x_b $http_x_a" }}
            [[site]]
            names = ["b.test"]
            [[site.location]]
            match = "/"
            upstream = "app"
            log = {{ access = "off" }}
            "#,
            a = a.display()
        );
        let config = config(&text);
        let logs = Logs::open(&config).unwrap();
        // [log], a.test's (its `/` the same), a.test `/b`'s, b.test's `/`; b.test is [log]'s.
        assert_eq!(logs.opened.len(), 4);
        let [(_, main), (_, site), (_, b), (_, off)] = &logs.opened[..] else { unreachable!() };
        let to = |log: &Option<Arc<AccessLog>>| Arc::as_ptr(&log.as_ref().unwrap().to);
        assert!(to(main) == to(site) && to(site) == to(b));
        assert_eq!(logs.destinations.len(), 1);
        assert!(off.is_none());
        let names: Vec<&str> = logs.headers().iter().map(HeaderName::as_str).collect();
        assert_eq!(names, ["referer", "user-agent", "x-a", "x-b"]);
        assert!(!logs.wants_request_id() && !logs.wants_limit_key());
    }
}
