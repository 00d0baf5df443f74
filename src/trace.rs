//! Traces: a span per request over OTLP/HTTP (`[trace]`). Each request is sampled when
//! it arrives: one whose `traceparent` says its caller sampled it is always kept (the
//! trace continues through tollgate), a new one is kept with the chance `sample`. A kept
//! request's `traceparent` is replaced, upstream, by one naming its own span; an unkept
//! one's passes on untouched. Its span, filled by the pipeline's bookkeeping (site,
//! location, each zone's decision as an event, the upstream that answered as a child
//! span), is queued for export when its answer ends (`trace/export.rs`).
//!
//! Without `[trace]` nothing here runs; an unsampled request costs one random draw.

mod context;
mod export;
mod span;

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::HeaderName;
use http::Request;

pub(crate) use context::Parent;
pub(crate) use span::{Decision, FailedTry, RequestSpan, Upstream};

use crate::config::Trace;
use crate::metrics::TraceSpans;

/// W3C's request headers.
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// `[trace]`, running: the sampling and the export queue.
pub(crate) struct Tracer {
    /// A new trace is kept when a random `u64` is below this (`sample` of `u64::MAX`).
    threshold: u64,
    /// `parents_from`: the clients whose `traceparent` is believed (`None`: all).
    parents_from: Option<Vec<ipnet::IpNet>>,
    trace_keys: bool,
    /// Keys the zone key digests (a per-process secret: digests cannot be reversed by
    /// trying keys offline, nor compared across restarts).
    digest: std::collections::hash_map::RandomState,
    queue: export::Queue,
}

impl Tracer {
    /// Whether `client`'s `traceparent` is believed (`parents_from`).
    fn believes(&self, client: IpAddr) -> bool {
        self.parents_from.as_ref().is_none_or(|networks| networks.iter().any(|net| net.contains(&client)))
    }

    /// `settings` running, its exporter thread started.
    pub(crate) fn start(settings: &Trace, counts: Arc<TraceSpans>) -> Tracer {
        // 1.0 keeps all: the threshold is then u64::MAX, and every draw but one is below.
        let threshold = (settings.sample * u64::MAX as f64) as u64;
        Tracer {
            threshold,
            parents_from: settings.parents_from.clone(),
            trace_keys: settings.trace_keys,
            digest: std::collections::hash_map::RandomState::new(),
            queue: export::Queue::start(Arc::clone(&settings.endpoint), settings.queue, settings.service_name.clone(), counts),
        }
    }

    /// The span of `req` (from `client`, arriving now), when it is sampled; its
    /// `traceparent` then names the span, for the upstream. `random` draws the sampling
    /// and the ids. An unsampled request costs a header lookup and a draw. A client
    /// `parents_from` does not name has its `traceparent` and `tracestate` taken out.
    pub(crate) fn begin<B>(
        &self,
        req: &mut Request<B>,
        client: IpAddr,
        random: &mut impl FnMut() -> u64,
    ) -> Option<Box<RequestSpan>> {
        if !self.believes(client) {
            // Neither goes on: the upstream starts afresh, or from the gateway's span.
            req.headers_mut().remove(&TRACEPARENT);
            req.headers_mut().remove(&TRACESTATE);
        }
        let mut told = req.headers().get_all(&TRACEPARENT).iter();
        // Two `traceparent`s are none (W3C Trace Context): neither is believed.
        let parent = match (told.next(), told.next()) {
            (Some(one), None) => Parent::parse(one),
            _ => None,
        };
        let sampled = match parent {
            Some(parent) => parent.sampled,
            None => random() < self.threshold,
        };
        if !sampled {
            return None;
        }
        let trace_id = parent.map_or_else(|| id::<16>(random), |parent| parent.trace_id);
        let span_id = id::<8>(random);
        req.headers_mut().insert(TRACEPARENT, context::traceparent(&trace_id, &span_id));
        Some(Box::new(RequestSpan {
            trace_id,
            span_id,
            parent: parent.map(|parent| parent.span_id),
            trace_state: match (parent, req.headers().get(&TRACESTATE)) {
                (Some(_), Some(state)) if state.len() <= span::MAX_TRACESTATE => {
                    String::from_utf8_lossy(state.as_bytes()).into_owned()
                }
                _ => String::new(),
            },
            start: SystemTime::now(),
            method: req.method().clone(),
            target: req.uri().path().to_owned(),
            protocol: req.version(),
            client,
            site: None,
            location: None,
            decisions: Vec::new(),
            upstream: None,
            failed_tries: Vec::new(),
            status: 0,
            body_bytes: 0,
            duration: Duration::ZERO,
        }))
    }

    /// A zone key as a span shows it: as is with `trace_keys`, else its digest.
    pub(crate) fn key(&self, text: String) -> String {
        if self.trace_keys {
            return text;
        }
        let mut hasher = self.digest.build_hasher();
        hasher.write(text.as_bytes());
        format!("{:016x}", hasher.finish())
    }

    /// The ended request's span, queued for export.
    pub(crate) fn end(&self, span: Box<RequestSpan>) {
        self.queue.push(span);
    }
}

/// An id of `N` random bytes, never all zero (W3C's invalid id).
fn id<const N: usize>(random: &mut impl FnMut() -> u64) -> [u8; N] {
    let mut out = [0u8; N];
    for chunk in out.chunks_mut(8) {
        chunk.copy_from_slice(&random().to_le_bytes()[..chunk.len()]);
    }
    if out.iter().all(|&b| b == 0) {
        out[0] = 1;
    }
    out
}

/// A sampled request's span and the tracer it goes back to, following the request
/// through the pipeline's bookkeeping to the end of its answer.
pub(crate) struct Traced {
    tracer: Arc<Tracer>,
    span: Box<RequestSpan>,
    /// When the request arrived (monotonic): events are placed after it.
    arrived: std::time::Instant,
}

impl Traced {
    pub(crate) fn new(tracer: Arc<Tracer>, span: Box<RequestSpan>, arrived: std::time::Instant) -> Traced {
        Traced { tracer, span, arrived }
    }

    /// The site and location that took the request.
    pub(crate) fn located(&mut self, site: &Arc<str>, location: &Arc<str>) {
        self.span.site = (!site.is_empty()).then(|| Arc::clone(site));
        self.span.location = Some(Arc::clone(location));
    }

    /// Each zone's decision, an event at `now`.
    pub(crate) fn limited(
        &mut self,
        outcome: &crate::limit::outcome::Outcome,
        rules: &[crate::limit::rule::LimitRule],
        keys: Option<&crate::limit::keys::Keys>,
        now: std::time::Instant,
    ) {
        use crate::limit::Verdict;
        let at = now.saturating_duration_since(self.arrived);
        for applied in outcome.applied.iter() {
            let Some(rule) = rules.get(applied.rule) else { continue };
            let text = keys
                .and_then(|keys| keys.get(applied.rule))
                .map(|key| rule.zone.template.text_of(key))
                .unwrap_or_default();
            let (outcome, retry_after) = match applied.decision.verdict {
                Verdict::Pass => ("passed", None),
                Verdict::Delay(_) => ("delayed", None),
                Verdict::Reject { retry_after } => ("rejected", Some(Duration::from_nanos(retry_after))),
            };
            self.span.decisions.push(Decision {
                zone: Arc::clone(&rule.zone.name),
                key: self.tracer.key(text),
                outcome,
                remaining: applied.decision.remaining,
                retry_after,
                at,
            });
        }
    }

    /// An upstream try that failed at `at` (monotonic): `reason`, on `server`.
    pub(crate) fn failed_try(&mut self, server: std::net::SocketAddr, reason: &'static str, at: std::time::Instant, random: &mut impl FnMut() -> u64) {
        self.span.failed_tries.push(FailedTry {
            server,
            reason,
            at: at.saturating_duration_since(self.arrived),
            span_id: id::<8>(random),
        });
    }

    /// The upstream that answered: `server` with `status`, picked `began` after the
    /// request arrived and answering its head `header_time` later.
    pub(crate) fn upstream(&mut self, server: std::net::SocketAddr, status: u16, (began, header_time): (Duration, Duration), random: &mut impl FnMut() -> u64) {
        self.span.upstream = Some(Upstream {
            span_id: id::<8>(random),
            server,
            status,
            began,
            header_time,
        });
    }

    /// The answer has ended: `status`, `sent` body bytes, `elapsed` since the request.
    pub(crate) fn end(mut self, status: u16, sent: u64, elapsed: Duration) {
        self.span.status = status;
        self.span.body_bytes = sent;
        self.span.duration = elapsed;
        self.tracer.end(self.span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracer(sample: f64, trace_keys: bool) -> Tracer {
        tracer_with(&format!("sample = {sample:?}\ntrace_keys = {trace_keys}\n"))
    }

    /// A tracer of `[trace]` with `more` keys.
    fn tracer_with(more: &str) -> Tracer {
        let config = crate::config::from_str(
            &format!("[server]\nlisten = [\"127.0.0.1:1\"]\n[trace]\notlp = \"http://127.0.0.1:9/v1/traces\"\n{more}"),
            std::path::Path::new("/nonexistent/gateway.toml"),
        )
        .unwrap();
        Tracer::start(config.trace.as_ref().unwrap(), Arc::default())
    }

    fn request(traceparent: Option<&'static str>) -> Request<()> {
        let mut req = Request::new(());
        if let Some(value) = traceparent {
            req.headers_mut().insert(TRACEPARENT, http::HeaderValue::from_static(value));
        }
        req
    }

    #[test]
    fn a_new_trace_is_kept_by_the_draw_and_a_callers_by_its_flag() {
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let half = tracer(0.5, false);
        let mut low = || 1u64;
        let mut high = || u64::MAX - 1;
        assert!(half.begin(&mut request(None), client, &mut low).is_some());
        assert!(half.begin(&mut request(None), client, &mut high).is_none());
        let none = tracer(0.0, false);
        let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut req = request(Some(sampled));
        let span = none.begin(&mut req, client, &mut low).expect("a sampled caller is kept");
        assert_eq!(span.parent, Some([0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]));
        // The upstream is told the gateway's span, in the caller's trace.
        let told = req.headers()[&TRACEPARENT].to_str().unwrap().to_owned();
        assert!(told.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && told.ends_with("-01"), "{told}");
        assert_ne!(told, sampled);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let mut req = request(Some(unsampled));
        assert!(tracer(1.0, false).begin(&mut req, client, &mut low).is_none());
        assert_eq!(req.headers()[&TRACEPARENT], unsampled);
    }

    #[test]
    fn a_parent_is_believed_only_from_the_clients_parents_from_names() {
        let tracer = tracer_with("sample = 0.0\nparents_from = [\"10.0.0.0/8\"]\n");
        let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut low = || 1u64;
        let mut inside = request(Some(sampled));
        assert!(tracer.begin(&mut inside, "10.1.2.3".parse().unwrap(), &mut low).is_some());
        // From elsewhere: no trace forced, and neither header goes on upstream.
        let mut outside = request(Some(sampled));
        outside.headers_mut().insert(TRACESTATE, http::HeaderValue::from_static("vendor=x"));
        assert!(tracer.begin(&mut outside, "192.0.2.1".parse().unwrap(), &mut low).is_none());
        assert!(!outside.headers().contains_key(&TRACEPARENT) && !outside.headers().contains_key(&TRACESTATE));
        // Kept by its own draw, it starts a trace of its own.
        let kept = tracer_with("sample = 1.0\nparents_from = [\"10.0.0.0/8\"]\n");
        let mut outside = request(Some(sampled));
        let span = kept.begin(&mut outside, "192.0.2.1".parse().unwrap(), &mut low).expect("kept by the draw");
        assert_eq!(span.parent, None);
        assert_ne!(span.trace_id[..], [0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36]);
    }

    #[test]
    fn keys_are_digests_unless_trace_keys() {
        let hidden = tracer(1.0, false);
        let digest = hidden.key("203.0.113.9".to_owned());
        assert_eq!(digest.len(), 16);
        assert_eq!(hidden.key("203.0.113.9".to_owned()), digest);
        assert_ne!(hidden.key("203.0.113.10".to_owned()), digest);
        assert_eq!(tracer(1.0, true).key("203.0.113.9".to_owned()), "203.0.113.9");
    }
}
