//! A request's span as the pipeline fills it (a plain record: no lock, no allocation
//! beyond its own), and its OTLP form once the answer has ended: the request's span, a
//! child span for the upstream that answered, and an event per zone decision.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span, status, Span, Status};

/// The longest `tracestate` kept (W3C: 32 members; a longer one is left out).
pub(crate) const MAX_TRACESTATE: usize = 512;

/// One request's span, being filled.
pub(crate) struct RequestSpan {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    /// The caller's `tracestate`, when it sent one (at most [`MAX_TRACESTATE`] bytes).
    pub trace_state: String,
    /// When the request arrived (wall clock).
    pub start: SystemTime,
    pub method: http::Method,
    pub target: String,
    pub protocol: http::Version,
    pub client: IpAddr,
    pub site: Option<std::sync::Arc<str>>,
    pub location: Option<std::sync::Arc<str>>,
    /// One per zone the request went through.
    pub decisions: Vec<Decision>,
    pub upstream: Option<Upstream>,
    /// The tries that failed before it (or before the gateway gave up).
    pub failed_tries: Vec<FailedTry>,
    pub status: u16,
    pub body_bytes: u64,
    pub duration: Duration,
}

/// A zone's decision on the request (a span event).
pub(crate) struct Decision {
    pub zone: std::sync::Arc<str>,
    /// The key as text when `trace_keys`, else its digest.
    pub key: String,
    pub outcome: &'static str,
    pub remaining: u64,
    pub retry_after: Option<Duration>,
    /// When, after the request's start.
    pub at: Duration,
}

/// An upstream try that failed (a child span, marked an error).
pub(crate) struct FailedTry {
    pub server: SocketAddr,
    /// `connect`, `connect timeout`, `tls`, `timeout`, `closed` or `broken`.
    pub reason: &'static str,
    /// When it failed, after the request's start.
    pub at: Duration,
    pub span_id: [u8; 8],
}

/// The upstream server that answered (a child span).
pub(crate) struct Upstream {
    pub span_id: [u8; 8],
    pub server: SocketAddr,
    pub status: u16,
    /// From the request's start to picking the server, and from there to its head.
    pub began: Duration,
    pub header_time: Duration,
}

fn attribute(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

fn text(key: &str, value: impl Into<String>) -> KeyValue {
    attribute(key, any_value::Value::StringValue(value.into()))
}

fn int(key: &str, value: u64) -> KeyValue {
    attribute(key, any_value::Value::IntValue(i64::try_from(value).unwrap_or(i64::MAX)))
}

fn nanos(at: SystemTime) -> u64 {
    let since = at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

fn protocol(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

impl RequestSpan {
    /// The request's span and its upstream's, as OTLP has them.
    pub(crate) fn into_otlp(mut self) -> Vec<Span> {
        let start = nanos(self.start);
        let end = start.saturating_add(u64::try_from(self.duration.as_nanos()).unwrap_or(u64::MAX));
        let route = self.location.as_deref().unwrap_or("");
        let mut attributes = vec![
            text("http.request.method", self.method.as_str()),
            text("url.path", self.target.clone()),
            text("network.protocol.version", protocol(self.protocol)),
            text("client.address", self.client.to_string()),
            int("http.response.status_code", u64::from(self.status)),
            int("http.response.body.size", self.body_bytes),
        ];
        if let Some(site) = &self.site {
            attributes.push(text("tollgate.site", &**site));
        }
        if !route.is_empty() {
            attributes.push(text("http.route", route));
        }
        let events = self.decisions.iter().map(|decision| {
            let mut attributes = vec![
                text("tollgate.zone", &*decision.zone),
                text("tollgate.key", decision.key.clone()),
                text("tollgate.outcome", decision.outcome),
                int("tollgate.remaining", decision.remaining),
            ];
            if let Some(retry_after) = decision.retry_after {
                attributes.push(int("tollgate.retry_after_ms", u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX)));
            }
            span::Event {
                time_unix_nano: start.saturating_add(u64::try_from(decision.at.as_nanos()).unwrap_or(0)),
                name: "limit".to_owned(),
                attributes,
                dropped_attributes_count: 0,
            }
        });
        let error = self.status >= 500;
        let name = match route {
            "" => self.method.as_str().to_owned(),
            route => format!("{} {route}", self.method),
        };
        let mut spans = vec![Span {
            trace_id: self.trace_id.to_vec(),
            span_id: self.span_id.to_vec(),
            parent_span_id: self.parent.map(|parent| parent.to_vec()).unwrap_or_default(),
            trace_state: std::mem::take(&mut self.trace_state),
            name,
            kind: span::SpanKind::Server as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes,
            events: events.collect(),
            status: Some(Status {
                message: String::new(),
                code: if error { status::StatusCode::Error } else { status::StatusCode::Unset } as i32,
            }),
            ..Span::default()
        }];
        for (i, failed) in self.failed_tries.iter().enumerate() {
            spans.push(failed.otlp(&self, start, i + 1));
        }
        if let Some(upstream) = &self.upstream {
            let mut span = upstream.otlp(&self, start, end);
            span.attributes.push(int("tollgate.attempt", self.failed_tries.len() as u64 + 1));
            spans.push(span);
        }
        spans
    }
}

impl RequestSpan {
    /// An `upstream` child span of this one: `span_id`, on `server`, from `from` to `to`
    /// (nanoseconds since the epoch), with `more` attributes and `status`.
    fn child(&self, span_id: &[u8; 8], server: SocketAddr, (from, to): (u64, u64), more: Vec<KeyValue>, status: Status) -> Span {
        let mut attributes = vec![
            text("server.address", server.ip().to_string()),
            int("server.port", u64::from(server.port())),
        ];
        attributes.extend(more);
        Span {
            trace_id: self.trace_id.to_vec(),
            span_id: span_id.to_vec(),
            parent_span_id: self.span_id.to_vec(),
            name: "upstream".to_owned(),
            kind: span::SpanKind::Client as i32,
            start_time_unix_nano: from,
            end_time_unix_nano: to,
            attributes,
            status: Some(status),
            ..Span::default()
        }
    }
}

impl FailedTry {
    /// The child span of `request` (which began at `start`): the `attempt`th try.
    fn otlp(&self, request: &RequestSpan, start: u64, attempt: usize) -> Span {
        let at = start.saturating_add(u64::try_from(self.at.as_nanos()).unwrap_or(0));
        let more = vec![text("error.type", self.reason), int("tollgate.attempt", attempt as u64)];
        let status = Status {
            message: self.reason.to_owned(),
            code: status::StatusCode::Error as i32,
        };
        request.child(&self.span_id, self.server, (at, at), more, status)
    }
}

impl Upstream {
    /// The child span of `request` (which ran from `start` to `end`).
    fn otlp(&self, request: &RequestSpan, start: u64, end: u64) -> Span {
        let began = start.saturating_add(u64::try_from(self.began.as_nanos()).unwrap_or(0));
        let head = began.saturating_add(u64::try_from(self.header_time.as_nanos()).unwrap_or(0));
        let more = vec![int("http.response.status_code", u64::from(self.status))];
        let code = if self.status >= 500 { status::StatusCode::Error } else { status::StatusCode::Unset };
        let status = Status {
            message: String::new(),
            code: code as i32,
        };
        request.child(&self.span_id, self.server, (began, head.min(end.max(began))), more, status)
    }
}
