//! The access log: one line per request, `combined` (nginx's, plus the limit status,
//! request time and upstream time), `json`, or an nginx `log_format` template
//! ([`line`]), to stdout or a file. (The error log is `tracing`'s; [`errors`] sets its
//! filter, and [`repeats`] keeps its repeated lines from flooding it.)
//!
//! Lines are appended to an in-memory buffer and written out by a flusher thread
//! every [`FLUSH_EVERY`] (or at once when the buffer grows past [`FLUSH_BYTES`]), so a
//! request never waits for a disk write, and at most one interval of lines is lost if
//! the process is killed. [`Logs::flush`] writes everything out (on shutdown). [`logs`] holds
//! every log of a generation: `[log]`'s, and those of sites and locations with their own.

mod captured;
mod digits;
pub(crate) mod errors;
mod json;
mod line;
mod logs;
pub mod repeats;
mod time;

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::{HeaderName, HeaderValue, Method, StatusCode, Uri, Version};

use crate::config::{self, LogFormat, LogTemplate};
pub(crate) use captured::Captured;
pub(crate) use logs::Logs;
use line::Line;

const FLUSH_EVERY: Duration = Duration::from_millis(100);
const FLUSH_BYTES: usize = 64 * 1024;

/// Where lines go.
enum Sink {
    Stdout,
    /// The open file, and its path to open it again (SIGUSR1).
    File(File, PathBuf),
}

/// How lines are written: a template (`combined` is one), or `json` (reading the
/// captured headers at these places).
enum Format {
    Line(Line),
    Json([usize; 2]),
}

/// One access log: how its lines read, and where they go.
pub struct AccessLog {
    format: Format,
    to: Arc<Destination>,
    /// Its lines write `$bytes_sent` (asked for every HTTP/2 and HTTP/3 answer).
    bytes_sent: bool,
}

/// A place lines go, and the lines waiting for the flusher ([`logs`]) to write them
/// there: one per place, shared by every log writing there, so its lines keep their
/// order.
pub(crate) struct Destination {
    buffer: Mutex<Vec<u8>>,
    sink: Mutex<Sink>,
    /// Failed writes, logged thinned: requests make a flush per 64 KiB of lines, and one
    /// request's line can be near that long.
    failures: repeats::Repeats,
}

/// What one access-log line says about one request.
pub(crate) struct Record {
    pub client: IpAddr,
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    /// The `Host` header (`$host`, where the target names no host).
    pub host: Option<HeaderValue>,
    /// It came over TLS (`$scheme`).
    pub https: bool,
    /// The request headers the format reads ([`AccessLog::headers`]), in that order.
    pub headers: Captured,
    /// The `Authorization` header, whose basic user name is `$remote_user` (never its
    /// password: only the name is written).
    pub authorization: Option<HeaderValue>,
    /// The `sub` of the request's verified token (`auth.jwt`): its `$remote_user`.
    pub subject: Option<Box<[u8]>>,
    pub status: StatusCode,
    pub body_bytes: u64,
    /// The answer's head as sent over HTTP/1.x; over HTTP/2 and HTTP/3 the size it would
    /// have as HTTP/1.1 text (their compressed frames are not counted), when a log
    /// writes `$bytes_sent` (else 0).
    pub head_bytes: u64,
    /// Seconds from the request head to the end of the response (or its abandonment).
    pub request_time: Duration,
    /// Time from picking the server (connect included) to its response head, if a
    /// server was asked (nginx's `$upstream_header_time`).
    pub upstream_time: Option<Duration>,
    /// When, after the request head, the server that answered was picked: with
    /// `request_time`, `$upstream_response_time`.
    pub upstream_began: Option<Duration>,
    /// The server that answered, if any, and its status.
    pub upstream_addr: Option<std::net::SocketAddr>,
    pub upstream_status: Option<StatusCode>,
    /// `PASSED`, `DELAYED`, `REJECTED`, `BANNED`, `*_DRY_RUN`; `-` when no limit applied.
    pub limit_status: &'static str,
    /// `$request_id`, 32 hex digits: made for every request when the format names it.
    pub request_id: Option<[u8; 32]>,
    /// The zone that decided, what it had left, and its key as text (kept only when the
    /// format names `$limit_key`).
    pub limit_zone: Option<std::sync::Arc<str>>,
    pub limit_remaining: Option<u64>,
    pub limit_key: Option<Box<str>>,
    /// The site and location that answered (`$site`, `$location`).
    pub site: Option<std::sync::Arc<str>>,
    pub location: Option<std::sync::Arc<str>>,
    /// The TLS version and cipher suite (OpenSSL's names), over TLS.
    pub tls: Option<(&'static str, Option<&'static str>)>,
}

impl Record {
    /// The request target as nginx's `$request_uri` shows it: path and query, also for
    /// HTTP/2 requests and absolute-form URIs.
    fn target(&self) -> &str {
        self.uri.path_and_query().map_or("/", |pq| pq.as_str())
    }

    /// `$host`: the target's host, else the `Host` header's, without its port.
    fn host(&self) -> Option<&[u8]> {
        let host = match self.uri.host() {
            Some(host) => host.as_bytes(),
            None => self.host.as_ref()?.as_bytes(),
        };
        let without_port = match host.first() {
            Some(b'[') => host.iter().position(|&b| b == b']').map_or(host, |end| &host[..=end]),
            _ => host.split(|&b| b == b':').next().unwrap_or(host),
        };
        Some(without_port)
    }

    /// The user the line names: the `sub` of a verified token, else the user of a basic
    /// `Authorization` header, if it holds one.
    fn remote_user(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        if let Some(subject) = &self.subject {
            return Some(std::borrow::Cow::Borrowed(subject));
        }
        let credentials = crate::vars::credentials(self.authorization.as_ref()?.as_bytes())?;
        Some(std::borrow::Cow::Owned(credentials.user().to_vec()))
    }

    /// From picking the server to the end of the answer (nginx's
    /// `$upstream_response_time`: the answer streams through as it comes).
    fn upstream_response_time(&self) -> Option<Duration> {
        Some(self.request_time.saturating_sub(self.upstream_began?))
    }
}

thread_local! {
    /// Each worker's line, written before it joins the buffer: a line allocates nothing.
    static LINE: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(512));
}

impl AccessLog {
    /// A log in `format` to `sink`; the request headers the format reads are found in
    /// (else added to) `captured`.
    fn new(format: &LogFormat, to: Arc<Destination>, captured: &mut Vec<HeaderName>) -> io::Result<AccessLog> {
        let format = match format {
            LogFormat::Json => Format::Json(json::headers(captured)),
            LogFormat::Combined => {
                let combined = LogTemplate::parse(config::COMBINED, config::Escape::Default);
                Format::Line(Line::new(&combined.map_err(|problem| io::Error::other(problem.message))?, captured))
            }
            LogFormat::Template(template) => Format::Line(Line::new(template, captured)),
        };
        let bytes_sent = matches!(&format, Format::Line(line) if line.names(&config::LogVar::BytesSent));
        Ok(AccessLog { format, to, bytes_sent })
    }

    /// Whether lines carry `$request_id` (the `json` format, or a template naming it).
    fn wants_request_id(&self) -> bool {
        match &self.format {
            Format::Json(_) => true,
            Format::Line(line) => line.wants_request_id(),
        }
    }

    /// Whether lines name `$limit_key` (then each record keeps its key as text).
    fn wants_limit_key(&self) -> bool {
        matches!(&self.format, Format::Line(line) if line.names(&config::LogVar::LimitKey))
    }

    /// Whether lines name `$bytes_sent` (then an HTTP/2 or HTTP/3 answer's head is
    /// measured).
    pub(crate) fn wants_bytes_sent(&self) -> bool {
        self.bytes_sent
    }

    /// Appends one line.
    pub(crate) fn write(&self, record: &Record) {
        let now = SystemTime::now();
        let full = LINE.with_borrow_mut(|line| {
            line.clear();
            match &self.format {
                Format::Line(template) => template.write(line, record, now),
                Format::Json(at) => json::write(line, record, now, *at),
            }
            line.push(b'\n');
            let mut buffer = lock(&self.to.buffer);
            buffer.extend_from_slice(line);
            buffer.len() >= FLUSH_BYTES
        });
        if full {
            self.to.flush();
        }
    }
}

impl Destination {
    /// `access` (a file or stdout), opened.
    fn open(access: &config::AccessLog) -> io::Result<Destination> {
        let sink = match access {
            config::AccessLog::File(path) => Sink::File(open_append(path)?, path.clone()),
            config::AccessLog::Stdout | config::AccessLog::Off => Sink::Stdout,
        };
        Ok(Destination {
            buffer: Mutex::new(Vec::with_capacity(FLUSH_BYTES)),
            sink: Mutex::new(sink),
            failures: repeats::Repeats::default(),
        })
    }

    /// Writes every buffered line out now.
    pub(crate) fn flush(&self) {
        let pending = std::mem::take(&mut *lock(&self.buffer));
        if pending.is_empty() {
            return;
        }
        let mut sink = lock(&self.sink);
        let result = match &mut *sink {
            Sink::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(&pending).and_then(|()| out.flush())
            }
            Sink::File(file, _) => file.write_all(&pending),
        };
        if let Err(err) = result {
            if let Some(n) = self.failures.admit("write", std::time::Instant::now()) {
                tracing::error!(error = %err, left_out = n, "cannot write the access log");
            }
        }
    }

    /// Writes out what is buffered, then opens the file again by its path (after
    /// logrotate has moved it away: SIGUSR1). On an error the old file stays in use.
    pub(crate) fn reopen(&self) -> io::Result<()> {
        self.flush();
        let mut sink = lock(&self.sink);
        if let Sink::File(file, path) = &mut *sink {
            *file = open_append(path)?;
        }
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

impl Drop for Destination {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests;
