//! `tollgate_quic_connections_total` and `tollgate_quic_early_requests_total`: what
//! became of new QUIC connections, and of requests in 0-RTT.

use super::cells::Counter;

/// What became of new QUIC connections (`tollgate_quic_connections_total{result}`).
#[derive(Debug, Default)]
pub(crate) struct QuicConnections {
    /// Handshakes completed.
    pub ok: Counter,
    /// Handshakes that failed or timed out.
    pub failed: Counter,
    /// Answered with a Retry (`retry_above`).
    pub retried: Counter,
    /// Refused (`refuse_above`).
    pub refused: Counter,
    /// Dropped without an answer: past twice `refuse_above`, not even a refusal is sent.
    pub dropped: Counter,
    /// Requests taken from 0-RTT (`early_data`: a safe method).
    pub early_taken: Counter,
    /// Requests in 0-RTT answered 425 Too Early (any other method).
    pub too_early: Counter,
}

impl QuicConnections {
    /// Each result and its count, in label order.
    pub(crate) fn counts(&self) -> [(&'static str, u64); 5] {
        [
            ("ok", self.ok.get()),
            ("failed", self.failed.get()),
            ("retried", self.retried.get()),
            ("refused", self.refused.get()),
            ("dropped", self.dropped.get()),
        ]
    }

    /// The 0-RTT requests taken and refused, in label order.
    pub(crate) fn early_counts(&self) -> [(&'static str, u64); 2] {
        [("taken", self.early_taken.get()), ("too_early", self.too_early.get())]
    }
}
