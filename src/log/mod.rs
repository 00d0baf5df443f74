//! The access log: one line per request, `combined` (nginx's, plus the limit status,
//! request time and upstream time) or `json`, to stdout or a file. (The error log is
//! `tracing`'s; [`errors`] sets its filter, and [`repeats`] keeps its repeated lines from
//! flooding it.)
//!
//! Lines are appended to an in-memory buffer and written out by a flusher thread
//! every [`FLUSH_EVERY`] (or at once when the buffer grows past [`FLUSH_BYTES`]), so a
//! request never waits for a disk write, and at most one interval of lines is lost if
//! the process is killed. [`AccessLog::flush`] writes everything out (on shutdown).

pub(crate) mod errors;
pub mod repeats;

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, StatusCode, Uri, Version};

use crate::config::{self, LogFormat};

const FLUSH_EVERY: Duration = Duration::from_millis(100);
const FLUSH_BYTES: usize = 64 * 1024;

/// Where lines go.
enum Sink {
    Stdout,
    /// The open file, and its path to open it again (SIGUSR1).
    File(File, PathBuf),
}

pub struct AccessLog {
    format: LogFormat,
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
    pub referer: Option<HeaderValue>,
    pub user_agent: Option<HeaderValue>,
    /// The `Authorization` header, whose basic user name is `$remote_user` (never its
    /// password: only the name is written).
    pub authorization: Option<HeaderValue>,
    /// The `sub` of the request's verified token (`auth.jwt`): its `$remote_user`.
    pub subject: Option<Box<[u8]>>,
    pub status: StatusCode,
    pub body_bytes: u64,
    /// Seconds from the request head to the end of the response (or its abandonment).
    pub request_time: Duration,
    /// Time from picking the server (connect included) to its response head, if a
    /// server was asked (nginx's `$upstream_header_time`).
    pub upstream_time: Option<Duration>,
    /// The server that answered, if any.
    pub upstream_addr: Option<std::net::SocketAddr>,
    /// `PASSED`, `DELAYED`, `REJECTED`, `BANNED`, `*_DRY_RUN`; `-` when no limit applied.
    pub limit_status: &'static str,
    /// `$request_id`, 32 hex digits: made for every request when the format is `json`.
    pub request_id: Option<[u8; 32]>,
}

impl AccessLog {
    /// Whether lines carry `$request_id` (the `json` format).
    pub(crate) fn wants_request_id(&self) -> bool {
        self.format == LogFormat::Json
    }

    /// Opens the configured access log; `None` when it is `off`.
    pub(crate) fn open(log: &config::Log) -> io::Result<Option<Arc<AccessLog>>> {
        let sink = match &log.access {
            config::AccessLog::Off => return Ok(None),
            config::AccessLog::Stdout => Sink::Stdout,
            config::AccessLog::File(path) => Sink::File(open_append(path)?, path.clone()),
        };
        let log = Arc::new(AccessLog {
            format: log.format,
            buffer: Mutex::new(Vec::with_capacity(FLUSH_BYTES)),
            sink: Mutex::new(sink),
            failures: repeats::Repeats::default(),
        });
        spawn_flusher(Arc::downgrade(&log));
        Ok(Some(log))
    }

    /// Whether the configured access log can be opened as the start will open it
    /// (`tollgate -t`; nginx -t fails the same way). A file this made is removed again.
    pub(crate) fn check(log: &config::Log) -> io::Result<()> {
        let config::AccessLog::File(path) = &log.access else {
            return Ok(());
        };
        let existed = path.exists();
        open_append(path)?;
        if !existed {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }

    /// Appends one line.
    pub(crate) fn write(&self, record: &Record) {
        let mut line = String::with_capacity(256);
        match self.format {
            LogFormat::Combined => format_combined(&mut line, record),
            LogFormat::Json => format_json(&mut line, record),
        }
        line.push('\n');
        let full = {
            let mut buffer = lock(&self.buffer);
            buffer.extend_from_slice(line.as_bytes());
            buffer.len() >= FLUSH_BYTES
        };
        if full {
            self.flush();
        }
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

/// The flusher lives as long as the log does.
fn spawn_flusher(log: Weak<AccessLog>) {
    let spawned = std::thread::Builder::new()
        .name("tollgate-log".into())
        .spawn(move || loop {
            std::thread::sleep(FLUSH_EVERY);
            match log.upgrade() {
                Some(log) => log.flush(),
                None => return,
            }
        });
    if let Err(err) = spawned {
        tracing::error!(error = %err, "cannot start the access-log flusher; lines are written when 64 KiB accumulate");
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

/// `client - - [21/Nov/2026:21:41:36 +0000] "GET /x HTTP/1.1" 200 12 "referer" "agent" PASSED 0.002 0.001`
fn format_combined(out: &mut String, r: &Record) {
    let _ = write!(out, "{} - ", r.client);
    match remote_user(r) {
        Some(user) => push_escaped(out, &user, Escape::Combined),
        None => out.push('-'),
    }
    out.push_str(" [");
    write_time_local(out, SystemTime::now());
    let _ = write!(out, "] \"{} ", r.method);
    push_escaped(out, request_target(&r.uri).as_bytes(), Escape::Combined);
    let _ = write!(
        out,
        " {:?}\" {} {} \"",
        r.version,
        r.status.as_u16(),
        r.body_bytes
    );
    push_header(out, r.referer.as_ref(), Escape::Combined);
    out.push_str("\" \"");
    push_header(out, r.user_agent.as_ref(), Escape::Combined);
    let _ = write!(
        out,
        "\" {} {:.3} ",
        r.limit_status,
        r.request_time.as_secs_f64()
    );
    match r.upstream_time {
        Some(t) => {
            let _ = write!(out, "{:.3}", t.as_secs_f64());
        }
        None => out.push('-'),
    }
}

fn format_json(out: &mut String, r: &Record) {
    out.push_str("{\"time\":\"");
    write_time_iso(out, SystemTime::now());
    let _ = write!(
        out,
        "\",\"remote_addr\":\"{}\",\"method\":\"{}\",\"uri\":\"",
        r.client, r.method
    );
    push_escaped(out, request_target(&r.uri).as_bytes(), Escape::Json);
    let _ = write!(
        out,
        "\",\"protocol\":\"{:?}\",\"status\":{},\"body_bytes_sent\":{},\"referer\":\"",
        r.version,
        r.status.as_u16(),
        r.body_bytes
    );
    push_header(out, r.referer.as_ref(), Escape::Json);
    out.push_str("\",\"user_agent\":\"");
    push_header(out, r.user_agent.as_ref(), Escape::Json);
    out.push_str("\",\"remote_user\":\"");
    if let Some(user) = remote_user(r) {
        push_escaped(out, &user, Escape::Json);
    }
    let _ = write!(
        out,
        "\",\"limit_status\":\"{}\",\"request_time\":{:.3},\"upstream_time\":",
        r.limit_status,
        r.request_time.as_secs_f64()
    );
    match r.upstream_time {
        Some(t) => {
            let _ = write!(out, "{:.3}", t.as_secs_f64());
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"upstream_addr\":");
    match r.upstream_addr {
        Some(addr) => {
            let _ = write!(out, "\"{addr}\"");
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"request_id\":");
    match r
        .request_id
        .as_ref()
        .and_then(|id| std::str::from_utf8(id).ok())
    {
        Some(id) => {
            let _ = write!(out, "\"{id}\"");
        }
        None => out.push_str("null"),
    }
    out.push('}');
}

/// The request target as nginx's `$request` shows it: path and query, also for
/// HTTP/2 requests and absolute-form URIs.
fn request_target(uri: &Uri) -> &str {
    uri.path_and_query().map_or("/", |pq| pq.as_str())
}

#[derive(Clone, Copy)]
enum Escape {
    /// nginx's escaping for the default log format: `"`, `\` and bytes outside
    /// printable ASCII as `\xHH`.
    Combined,
    /// JSON string escaping (bytes outside ASCII as `\u00HH`, as nginx's `escape=json`).
    Json,
}

/// The user the line names: the `sub` of a verified token, else the user of a basic
/// `Authorization` header, if it holds one.
fn remote_user(r: &Record) -> Option<std::borrow::Cow<'_, [u8]>> {
    if let Some(subject) = &r.subject {
        return Some(std::borrow::Cow::Borrowed(subject));
    }
    let credentials = crate::vars::credentials(r.authorization.as_ref()?.as_bytes())?;
    Some(std::borrow::Cow::Owned(credentials.user().to_vec()))
}

fn push_header(out: &mut String, value: Option<&HeaderValue>, escape: Escape) {
    match value {
        Some(v) => push_escaped(out, v.as_bytes(), escape),
        None if matches!(escape, Escape::Combined) => out.push('-'),
        None => {}
    }
}

fn push_escaped(out: &mut String, bytes: &[u8], escape: Escape) {
    for &b in bytes {
        match (escape, b) {
            (Escape::Json, b'"') => out.push_str("\\\""),
            (Escape::Json, b'\\') => out.push_str("\\\\"),
            (Escape::Json, b'\n') => out.push_str("\\n"),
            (Escape::Json, b'\r') => out.push_str("\\r"),
            (Escape::Json, b'\t') => out.push_str("\\t"),
            (Escape::Json, 0x20..=0x7e) => out.push(b as char),
            (Escape::Json, _) => {
                let _ = write!(out, "\\u{b:04x}");
            }
            (Escape::Combined, b'"' | b'\\') | (Escape::Combined, 0..=0x1f | 0x7f..=0xff) => {
                let _ = write!(out, "\\x{b:02X}");
            }
            (Escape::Combined, _) => out.push(b as char),
        }
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// nginx's `$time_local`, always in UTC: `21/Nov/2026:21:41:36 +0000`.
fn write_time_local(out: &mut String, now: SystemTime) {
    let t = time::OffsetDateTime::from(now);
    let _ = write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        t.day(),
        MONTHS[usize::from(u8::from(t.month())) - 1],
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    );
}

/// `2026-11-21T21:41:36.123Z`
fn write_time_iso(out: &mut String, now: SystemTime) {
    let t = time::OffsetDateTime::from(now);
    let _ = write!(
        out,
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            client: "192.0.2.7".parse().unwrap(),
            method: Method::GET,
            uri: "/a?b=c".parse().unwrap(),
            version: Version::HTTP_11,
            referer: None,
            user_agent: Some(HeaderValue::from_static("curl/8.0")),
            authorization: None,
            subject: None,
            status: StatusCode::OK,
            body_bytes: 12,
            request_time: Duration::from_millis(2),
            upstream_time: Some(Duration::from_millis(1)),
            upstream_addr: Some("127.0.0.1:3000".parse().unwrap()),
            limit_status: "-",
            request_id: Some(*b"0123456789abcdef0123456789abcdef"),
        }
    }

    #[test]
    fn combined_line_has_nginx_fields_then_limit_and_times() {
        let mut line = String::new();
        format_combined(&mut line, &record());
        let (head, rest) = line.split_once(" [").unwrap();
        assert_eq!(head, "192.0.2.7 - -");
        let (_, rest) = rest.split_once("] ").unwrap();
        assert_eq!(
            rest,
            "\"GET /a?b=c HTTP/1.1\" 200 12 \"-\" \"curl/8.0\" - 0.002 0.001"
        );
    }

    #[test]
    fn the_basic_user_is_remote_user_and_its_password_is_never_written() {
        let mut r = record();
        // "al\"ice:hunter2"
        r.authorization = Some(HeaderValue::from_static("Basic YWwiaWNlOmh1bnRlcjI="));
        let mut line = String::new();
        format_combined(&mut line, &r);
        assert!(line.starts_with("192.0.2.7 - al\\x22ice ["), "{line}");
        let mut json = String::new();
        format_json(&mut json, &r);
        assert!(json.contains("\"remote_user\":\"al\\\"ice\""), "{json}");
        assert!(!line.contains("hunter2") && !json.contains("hunter2"));
        r.authorization = Some(HeaderValue::from_static("Bearer abc"));
        let mut line = String::new();
        format_combined(&mut line, &r);
        assert!(line.starts_with("192.0.2.7 - - ["), "{line}");
    }

    #[test]
    fn json_line_escapes_and_uses_null_for_missing() {
        let mut r = record();
        r.user_agent = Some(HeaderValue::from_bytes(b"a\"b\\c\xff").unwrap());
        r.upstream_time = None;
        r.upstream_addr = None;
        r.request_id = None;
        let mut line = String::new();
        format_json(&mut line, &r);
        assert!(
            line.contains("\"user_agent\":\"a\\\"b\\\\c\\u00ff\""),
            "{line}"
        );
        assert!(
            line.contains("\"upstream_time\":null,\"upstream_addr\":null,\"request_id\":null}"),
            "{line}"
        );
        assert!(
            line.contains("\"status\":200,\"body_bytes_sent\":12"),
            "{line}"
        );
    }

    #[test]
    fn time_local_is_nginx_shaped() {
        let mut s = String::new();
        write_time_local(
            &mut s,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_297_296),
        );
        assert_eq!(s, "21/Nov/2026:21:41:36 +0000");
    }
}
