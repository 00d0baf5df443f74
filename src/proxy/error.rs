//! What went wrong while handling a request, who is to blame, the status it maps to, and
//! its error-log line ([`report`]).

use std::fmt;
use std::time::Instant;

use http::StatusCode;

use crate::upstream::h1::ConnectError;
use crate::upstream::Group;
use crate::wire::body::BodyError;

/// Who failed, which sets the error log's level and whether the client connection can
/// be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Party {
    /// The client: its body too large, too slow or broken (logged at info; the
    /// connection is closed).
    Client,
    /// An upstream server: refused, timed out, broke off (warn).
    Upstream,
    /// tollgate itself: a body it could not spool to its file (error; the connection is
    /// closed).
    Gateway,
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The client paused its body for longer than `client_body_timeout`.
    #[error("client body timed out")]
    ClientBodyTimeout,
    /// The client's body is larger than `client_max_body_size`: it said so in
    /// `Content-Length`, or it grew past the limit.
    #[error("client body larger than client_max_body_size")]
    BodyTooLarge,
    /// The client's body broke off or was malformed.
    #[error("client body failed: {0}")]
    ClientBody(String),
    /// The file a body was being read into (`client_body_temp_path`) failed: full,
    /// gone, not writable.
    #[error("client body temporary file failed: {0}")]
    BodyTempFile(std::io::Error),
    /// Every server of the group is down (passive health) or was tried.
    #[error("no live upstreams in \"{0}\"")]
    NoLiveUpstream(String),
    #[error("{0}")]
    Connect(#[from] ConnectError),
    /// The server broke the exchange: reset, closed early, garbage response.
    #[error("upstream {addr} failed: {source}")]
    Upstream {
        addr: std::net::SocketAddr,
        source: crate::upstream::h1::Error,
    },
    /// A 101 the client did not ask for, or to a protocol other than WebSocket.
    #[error("upstream {0} switched protocols unasked (only WebSocket is tunnelled)")]
    UnexpectedUpgrade(std::net::SocketAddr),
    /// No response head within `read_timeout`.
    #[error("upstream {0} timed out")]
    Timeout(std::net::SocketAddr),
}

impl ProxyError {
    pub(crate) fn party(&self) -> Party {
        match self {
            ProxyError::ClientBodyTimeout
            | ProxyError::BodyTooLarge
            | ProxyError::ClientBody(_) => Party::Client,
            ProxyError::BodyTempFile(_) => Party::Gateway,
            _ => Party::Upstream,
        }
    }

    /// The one place errors become statuses (nginx's choices).
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ProxyError::ClientBody(_) => StatusCode::BAD_REQUEST,
            ProxyError::ClientBodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ProxyError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ProxyError::BodyTempFile(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ProxyError::Connect(ConnectError::Timeout { .. }) | ProxyError::Timeout(_) => {
                StatusCode::GATEWAY_TIMEOUT
            }
            ProxyError::NoLiveUpstream(_)
            | ProxyError::Connect(_)
            | ProxyError::Upstream { .. }
            | ProxyError::UnexpectedUpgrade(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The kind of failure, for the error log's [`crate::log::repeats`].
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ProxyError::ClientBodyTimeout => "client_body_timeout",
            ProxyError::BodyTooLarge => "body_too_large",
            ProxyError::ClientBody(_) => "client_body",
            ProxyError::BodyTempFile(_) => "body_temp_file",
            ProxyError::NoLiveUpstream(_) => "no_live_upstream",
            ProxyError::Connect(ConnectError::Timeout { .. }) => "connect_timeout",
            ProxyError::Connect(ConnectError::Io { .. }) => "connect",
            ProxyError::Connect(ConnectError::Tls { .. }) => "tls",
            ProxyError::Upstream { source, .. } if source.is_tls() => "tls",
            ProxyError::Upstream { .. } => "broken",
            ProxyError::UnexpectedUpgrade(_) => "unexpected_upgrade",
            ProxyError::Timeout(_) => "timeout",
        }
    }

    /// The upstream server that failed, when one did.
    pub(crate) fn server(&self) -> Option<std::net::SocketAddr> {
        match self {
            ProxyError::Connect(ConnectError::Timeout { addr, .. })
            | ProxyError::Connect(ConnectError::Io { addr, .. })
            | ProxyError::Connect(ConnectError::Tls { addr, .. })
            | ProxyError::Upstream { addr, .. }
            | ProxyError::UnexpectedUpgrade(addr)
            | ProxyError::Timeout(addr) => Some(*addr),
            _ => None,
        }
    }

    /// The client's request body broke off while it was being sent upstream.
    pub(crate) fn client_body(err: BodyError) -> ProxyError {
        match err {
            BodyError::Timeout => ProxyError::ClientBodyTimeout,
            BodyError::TooLarge => ProxyError::BodyTooLarge,
            BodyError::Spool(err) => ProxyError::BodyTempFile(err),
            other => ProxyError::ClientBody(other.to_string()),
        }
    }
}

/// Short text for log lines about who failed.
impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Party::Client => "client",
            Party::Upstream => "upstream",
            Party::Gateway => "gateway",
        })
    }
}

/// One error-log line per failed request, at a level that matches who failed, unless
/// the same kind of failure at the same place was logged less than
/// [`crate::log::repeats::INTERVAL`] ago (then it is counted, and the next line says so).
pub(super) fn report(err: &ProxyError, group: &Group) {
    let server = err
        .server()
        .and_then(|addr| group.servers.iter().find(|s| s.addr == addr));
    let repeats = server.map_or(&group.log, |server| &server.log);
    let Some(left_out) = repeats.admit(err.kind(), Instant::now()) else {
        return;
    };
    let kind = err.kind();
    match (err.party(), left_out) {
        (Party::Client, 0) => tracing::info!(upstream = %group.name, kind, "{err}"),
        (Party::Client, n) => {
            tracing::info!(upstream = %group.name, kind, "{err} (and {n} more like it since the last report)")
        }
        (Party::Upstream, 0) => tracing::warn!(upstream = %group.name, kind, "{err}"),
        (Party::Upstream, n) => {
            tracing::warn!(upstream = %group.name, kind, "{err} (and {n} more like it since the last report)")
        }
        (Party::Gateway, 0) => tracing::error!(upstream = %group.name, kind, "{err}"),
        (Party::Gateway, n) => {
            tracing::error!(upstream = %group.name, kind, "{err} (and {n} more like it since the last report)")
        }
    }
}
