//! The timeouts in force for a location's requests: its own, else its site's, else the
//! server's (`client_body_timeout`, `send_timeout`) or its upstream group's
//! (`read_timeout`, `connect_timeout`), resolved when the snapshot is built.

use std::time::Duration;

use http::Response;

use super::Route;
use crate::config;
use crate::wire::body::BodyLimits;

/// A location's timeouts, resolved.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// `client_body_timeout` (with the server's `client_body_min_rate`).
    pub body: BodyLimits,
    /// `send_timeout` when the location or its site sets one; the connection's
    /// otherwise.
    pub send: Option<Duration>,
    /// `read_timeout` and `connect_timeout` towards the location's upstream group.
    pub read: Duration,
    pub connect: Duration,
}

/// Marks an answer whose location sets its own `send_timeout`: the connection holds
/// the client to it while it sends this answer. Only such answers carry it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendTimeout(pub Duration);

impl Timeouts {
    /// A location's: its own (or its site's), else the server's and its group's.
    pub(crate) fn resolve(server: &config::Server, own: &config::Timeouts, route: &Route) -> Timeouts {
        let (read, connect) = match route {
            Route::Proxy(group)
            | Route::Files {
                upstream: Some(group),
                ..
            } => (group.read_timeout, group.connect_timeout),
            Route::Return(_) | Route::Files { upstream: None, .. } => {
                (Duration::ZERO, Duration::ZERO)
            }
        };
        Timeouts {
            body: BodyLimits {
                timeout: own.client_body.unwrap_or(server.client_body_timeout),
                min_rate: server.client_body_min_rate,
            },
            send: own.send,
            read: own.read.unwrap_or(read),
            connect: own.connect.unwrap_or(connect),
        }
    }

    /// Marks `response` with the location's `send_timeout`, if it sets one.
    pub(super) fn mark<B>(&self, response: &mut Response<B>) {
        if let Some(send) = self.send {
            response.extensions_mut().insert(SendTimeout(send));
        }
    }
}
