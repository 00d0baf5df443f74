//! The timeouts in force for a location's requests: its own, else its site's, else the
//! server's (`client_body_timeout`, `send_timeout`) or its upstream group's
//! (`read_timeout`, `connect_timeout`), resolved when the snapshot is built.

use std::time::Duration;

use http::Response;

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
    /// Marks `response` with the location's `send_timeout`, if it sets one.
    pub(super) fn mark<B>(&self, response: &mut Response<B>) {
        if let Some(send) = self.send {
            response.extensions_mut().insert(SendTimeout(send));
        }
    }
}
