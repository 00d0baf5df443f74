//! `[trace]`: OpenTelemetry traces of requests over OTLP/HTTP (`src/trace/`). `otlp` is
//! the collector's traces URL (`http://127.0.0.1:4318/v1/traces`); `sample` the share of
//! new traces kept (a request whose `traceparent` says its caller sampled it is always
//! kept); `trace_keys` puts zone keys in spans as they are (else as a digest);
//! `service_name` names the gateway in them; `queue` bounds the spans waiting for export;
//! `parents_from` names the clients whose `traceparent` is believed (absent: everyone's).

use std::sync::Arc;
use std::time::Duration;

use http::uri::PathAndQuery;
use http::HeaderValue;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::forward_auth::Endpoint;
use super::raw::RawTrace;
use super::Upstream;

/// `sample` when absent: one new trace in a hundred.
const SAMPLE: f64 = 0.01;
/// `queue` when absent, and its most.
const QUEUE: usize = 2048;
const MAX_QUEUE: i64 = 1 << 20;
/// A connection to the collector, and its answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `[trace]`, checked.
#[derive(Clone, Debug)]
pub(crate) struct Trace {
    pub endpoint: Arc<TraceEndpoint>,
    pub sample: f64,
    pub trace_keys: bool,
    pub service_name: String,
    pub queue: usize,
    /// `None`: every client's `traceparent` is believed.
    pub parents_from: Option<Vec<ipnet::IpNet>>,
}

/// Where spans are posted.
pub(crate) struct TraceEndpoint {
    /// As written.
    pub url: String,
    pub target: PathAndQuery,
    pub host: HeaderValue,
    pub upstream: Upstream,
}

impl std::fmt::Debug for TraceEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

pub(super) fn trace(raw: RawTrace, span: &std::ops::Range<usize>, diag: &mut Diagnostics<'_>) -> Option<Trace> {
    let url: &Spanned<String> = diag.required(raw.otlp.as_ref(), span, "otlp")?;
    let endpoint = Endpoint::read(url, "otlp", TIMEOUT, diag);
    let sample = match &raw.sample {
        None => Some(SAMPLE),
        Some(sample) => match *sample.get_ref() {
            value if (0.0..=1.0).contains(&value) => Some(value),
            value => {
                diag.error(sample.span(), format!("invalid sample {value}: expected a share from 0.0 to 1.0"));
                None
            }
        },
    };
    let queue = match &raw.queue {
        None => Some(QUEUE),
        Some(queue) => match *queue.get_ref() {
            value @ 1..=MAX_QUEUE => usize::try_from(value).ok(),
            value => {
                diag.error(queue.span(), format!("invalid queue {value}: expected 1 to {MAX_QUEUE} spans"));
                None
            }
        },
    };
    let parents_from = match &raw.parents_from {
        None => Some(None),
        Some(list) => {
            let mut valid = true;
            let mut networks = Vec::with_capacity(list.get_ref().len());
            for item in list.get_ref() {
                let network = diag.check(item.span(), super::values::network(item.get_ref()));
                valid &= network.is_some();
                networks.extend(network);
            }
            valid.then_some(Some(networks))
        }
    };
    let service_name = raw.service_name.map_or_else(|| "tollgate".to_owned(), |name| name.into_inner());
    let endpoint = endpoint?;
    Some(Trace {
        endpoint: Arc::new(TraceEndpoint {
            url: url.get_ref().clone(),
            target: endpoint.target,
            host: endpoint.host,
            upstream: endpoint.upstream,
        }),
        sample: sample?,
        trace_keys: raw.trace_keys.unwrap_or(false),
        service_name,
        queue: queue?,
        parents_from: parents_from?,
    })
}
