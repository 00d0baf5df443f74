//! `tollgate_trace_spans_total`: what became of request spans (`[trace]`).

use super::cells::Counter;

/// What became of request spans (`tollgate_trace_spans_total{result}`).
#[derive(Debug, Default)]
pub(crate) struct TraceSpans {
    /// Sent to the collector, which answered 2xx.
    pub exported: Counter,
    /// Let go at the request: the queue was full.
    pub dropped: Counter,
    /// In a batch the collector refused or did not answer.
    pub failed: Counter,
    /// Export failures, logged thinned.
    pub failures: crate::log::repeats::Repeats,
}

impl TraceSpans {
    /// Each result and its count, in label order.
    pub(crate) fn counts(&self) -> [(&'static str, u64); 3] {
        [
            ("exported", self.exported.get()),
            ("dropped", self.dropped.get()),
            ("failed", self.failed.get()),
        ]
    }
}
