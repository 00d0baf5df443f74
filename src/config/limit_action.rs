//! `limit_action`: what a request refused by a limit gets (the `limit_status` answer,
//! nothing at all, or a wait first), and `[server]`'s `tarpit_hold` and `tarpit_max`,
//! which bound that wait.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `limit_action` (`[server]`, a site, a location): the answer to a request a zone
/// rejects or a ban refuses. Access denials (403) and Redis failures (503) are not
/// limits: they are always answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitAction {
    /// The `limit_status` answer, with `Retry-After` and a problem+json body.
    #[default]
    Answer,
    /// No answer: the connection closes (HTTP/2: the stream is reset), as after nginx's
    /// `return 444` or `limit_req_status 444`; logged as 444.
    Close,
    /// The request is held `tarpit_hold`, nothing read or written, then answered as by
    /// `"answer"` and the connection closed; past `tarpit_max` held at once, `"close"`.
    Tarpit,
}

/// `tarpit_hold` and `tarpit_max` (`[server]` only: the count is the instance's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tarpit {
    /// How long a refused request is held before its answer.
    pub hold: Duration,
    /// Most requests held at once by the whole instance.
    pub max: usize,
}

/// `tarpit_hold` when absent, in seconds: as long as `client_header_timeout`'s default,
/// the time tollgate already lets any client hold a connection for nothing. Long enough
/// that a client that asks again at once is slowed a thousandfold, short enough that a
/// person briefly over a limit is not left hanging (a 429's `Retry-After` is usually a
/// few seconds anyway), and with `tarpit_max` it allows about 100 held refusals a
/// second before the rest are closed.
pub(super) const DEFAULT_HOLD_SECS: u64 = 10;

/// nginx's status for "close without an answer" (`return 444`, `limit_req_status 444`).
pub(super) const UNANSWERED: u16 = 444;

/// Why `limit_status = 444` (or a ban's `status = 444`) is refused.
pub(super) const NOT_A_STATUS: &str = "444 is nginx's way to close the connection without an answer; here that is `limit_action = \"close\"` (a 444 status would be sent as an answer)";
