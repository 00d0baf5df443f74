//! The configuration file: TOML text in, a validated, immutable [`Config`] out.
//!
//! `raw` mirrors the file with serde (every value keeps its span), `validate` turns
//! raw values into typed ones and collects every problem, `diag` renders problems as
//! `file:line:col: message`. Past this module no string is parsed again.

mod diag;
mod location;
mod raw;
#[cfg(test)]
mod tests;
mod validate;
mod values;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use diag::{ConfigError, ConfigErrors};

/// A whole, valid configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this came from (for messages and relative paths); `<string>` when parsed from text.
    pub origin: PathBuf,
    pub server: Server,
    pub real_ip: Option<RealIp>,
    pub log: Log,
    /// Upstream groups in file order; names are unique.
    pub upstreams: Vec<Upstream>,
    /// Locations in file order (regex locations are tried in this order).
    pub locations: Vec<Location>,
}

/// `[server]`.
#[derive(Debug, Clone)]
pub struct Server {
    /// Plain-text listeners (HTTP/1.1 and h2c prior knowledge). Never empty.
    pub listen: Vec<SocketAddr>,
    /// Worker threads, each with its own runtime and `SO_REUSEPORT` listeners (ours,
    /// like nginx's `worker_processes`). `"auto"` = one per CPU.
    pub workers: usize,
    /// Time to receive a whole request header; a partial header then gets 408 and close.
    pub client_header_timeout: Duration,
    /// Longest pause between two reads of a request body.
    pub client_body_timeout: Duration,
    /// How long an idle keep-alive connection is kept open.
    pub keepalive_timeout: Duration,
    /// Largest request header block; beyond it the client gets 431.
    pub max_header_bytes: usize,
    /// How long in-flight requests may take to finish after SIGTERM.
    pub shutdown_timeout: Duration,
}

/// `[real_ip]`: who the client is, as nginx's realip module decides it.
#[derive(Debug, Clone)]
pub struct RealIp {
    pub trusted: Vec<ipnet::IpNet>,
    /// Lower-case header name, e.g. `x-forwarded-for`.
    pub header: http::HeaderName,
    pub recursive: bool,
}

/// `[log]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    pub access: AccessLog,
    pub format: LogFormat,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLog {
    Off,
    Stdout,
    /// Absolute, or resolved against the config file's directory.
    File(PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// nginx `combined` plus the limit status and upstream time.
    Combined,
    Json,
}

/// `[upstreams.NAME]`.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub name: String,
    /// Never empty. A host name in the file is resolved when the file is loaded and
    /// each of its addresses becomes a server of the same weight (as nginx does).
    pub servers: Vec<UpstreamServer>,
    pub balance: Balance,
    pub connect_timeout: Duration,
    /// No response bytes for this long (head or between body chunks): 504.
    pub read_timeout: Duration,
    /// Idle connections kept per server (per worker).
    pub keepalive: usize,
    /// Passive health: `max_fails` failures within `fail_timeout` take a server out for
    /// `fail_timeout`. 0 turns passive health off (nginx).
    pub max_fails: u32,
    pub fail_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamServer {
    pub addr: SocketAddr,
    /// At least 1.
    pub weight: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    RoundRobin,
    LeastConn,
    IpHash,
}

/// One `[[location]]`.
#[derive(Debug, Clone)]
pub struct Location {
    pub pattern: Pattern,
    pub action: Action,
}

/// The `match` string with its nginx modifier.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// `= /x`
    Exact(String),
    /// `^~ /x`: a prefix that, when it is the longest, stops the regex search.
    PriorityPrefix(String),
    /// `/x`
    Prefix(String),
    /// `~ re` (case-sensitive) and `~* re` (case-insensitive; compiled with `(?i)`).
    Regex {
        regex: regex::Regex,
        case_insensitive: bool,
    },
}

#[derive(Debug, Clone)]
pub enum Action {
    /// Forward to the upstream group at this index of [`Config::upstreams`].
    Proxy { upstream: usize },
    /// Answer directly, as nginx's `return`.
    Return(Return),
}

#[derive(Debug, Clone)]
pub struct Return {
    pub status: http::StatusCode,
    pub body: String,
    /// `Location` header, for redirects (`return = { status = 301, location = "..." }`).
    pub location: Option<String>,
}

/// Parses and validates configuration text. `origin` names the file in messages and is
/// the base for relative paths; nothing is read from disk.
pub fn from_str(text: &str, origin: &Path) -> Result<Config, ConfigErrors> {
    validate::validate(text, origin)
}

/// Reads and validates the file at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|err| ConfigErrors::io(path, &err))?;
    from_str(&text, path)
}
