//! The exporter: spans queue, bounded, from the request path (a span that finds the
//! queue full is dropped and counted, never waited for) to a thread of its own, which
//! sends them in batches (at most [`BATCH`] spans, or what came within [`EVERY`]) as one
//! OTLP/HTTP protobuf `POST` each, within [`TIMEOUT`], on a connection kept between
//! batches (a new one when the collector closed it). A batch that fails is counted and
//! let go: traces are never worth holding requests or memory for.
//!
//! The queue is a locked list the thread takes whole: a request that queues a span wakes
//! the thread only when its batch is full, so a few spans a second cost a wake-up a
//! second, not one each.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::{HeaderValue, Request};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

use super::span::RequestSpan;
use crate::config::TraceEndpoint;
use crate::metrics::TraceSpans;

/// The most spans one `POST` carries.
const BATCH: usize = 512;
/// How long a span waits for others to fill its batch.
const EVERY: Duration = Duration::from_secs(1);
/// A whole export, connecting included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// What the request path and the exporter thread share.
struct Shared {
    spans: Mutex<Vec<RequestSpan>>,
    size: usize,
    /// The queue is gone: the thread sends what is left and ends.
    closed: AtomicBool,
}

/// The request path's end of the queue.
pub(super) struct Queue {
    shared: Arc<Shared>,
    /// The exporter thread, to wake; `None` when it could not start.
    thread: Option<Thread>,
    counts: Arc<TraceSpans>,
}

impl Queue {
    /// A queue of `size` spans to `endpoint`, and its exporter thread (which ends when
    /// the queue is dropped, once it has sent what was in it).
    pub(super) fn start(endpoint: Arc<TraceEndpoint>, size: usize, service: String, counts: Arc<TraceSpans>) -> Queue {
        let shared = Arc::new(Shared {
            spans: Mutex::new(Vec::new()),
            size,
            closed: AtomicBool::new(false),
        });
        let (thread_shared, thread_counts) = (Arc::clone(&shared), Arc::clone(&counts));
        let started = std::thread::Builder::new()
            .name("tollgate-trace".into())
            .spawn(move || export(&thread_shared, &endpoint, &service, &thread_counts));
        let thread = match started {
            Ok(handle) => Some(handle.thread().clone()),
            Err(err) => {
                tracing::error!(error = %err, "cannot start the trace exporter: spans are dropped");
                None
            }
        };
        Queue { shared, thread, counts }
    }

    /// Queues `span`, or drops it (counted) when the queue is full or the exporter gone.
    pub(super) fn push(&self, span: Box<RequestSpan>) {
        let Some(thread) = &self.thread else {
            self.counts.dropped.add(1);
            return;
        };
        let mut spans = lock(&self.shared.spans);
        if spans.len() >= self.shared.size {
            drop(spans);
            self.counts.dropped.add(1);
            return;
        }
        spans.push(*span);
        let full = spans.len() == BATCH.min(self.shared.size);
        drop(spans);
        if full {
            thread.unpark();
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        if let Some(thread) = &self.thread {
            thread.unpark();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The exporter thread: batches until the queue closes.
fn export(shared: &Shared, endpoint: &TraceEndpoint, service: &str, counts: &TraceSpans) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(error = %err, "cannot start the trace exporter: spans are dropped");
            return;
        }
    };
    let mut kept: Option<Sender> = None;
    loop {
        // Woken when a batch is full, else once a batch's wait is over.
        let waited = Instant::now();
        while lock(&shared.spans).len() < BATCH.min(shared.size) && !shared.closed.load(Ordering::Acquire) {
            let left = EVERY.saturating_sub(waited.elapsed());
            if left.is_zero() {
                break;
            }
            std::thread::park_timeout(left);
        }
        let closed = shared.closed.load(Ordering::Acquire);
        let fresh = Vec::with_capacity(BATCH.min(shared.size));
        let mut taken = std::mem::replace(&mut *lock(&shared.spans), fresh);
        while !taken.is_empty() {
            let rest = taken.split_off(taken.len().min(BATCH));
            let batch = std::mem::replace(&mut taken, rest);
            send(&runtime, &mut kept, (endpoint, service, counts), batch);
        }
        if closed {
            return;
        }
    }
}

/// Sends one batch, counting what became of it.
fn send(
    runtime: &tokio::runtime::Runtime,
    kept: &mut Option<Sender>,
    (endpoint, service, counts): (&TraceEndpoint, &str, &TraceSpans),
    batch: Vec<RequestSpan>,
) {
    let count = batch.len() as u64;
    let body = Bytes::from(encode(batch, service));
    let sent = runtime.block_on(async { tokio::time::timeout(TIMEOUT, post(endpoint, kept, body)).await });
    match sent {
        Ok(Ok(())) => counts.exported.add(count),
        Ok(Err(why)) => fail(counts, count, endpoint, &why),
        Err(_) => fail(counts, count, endpoint, &format!("no answer within {TIMEOUT:?}")),
    }
}

fn fail(counts: &TraceSpans, count: u64, endpoint: &TraceEndpoint, why: &str) {
    counts.failed.add(count);
    if let Some(left_out) = counts.failures.admit("export", Instant::now()) {
        tracing::warn!(url = %endpoint.url, error = why, left_out, "cannot export traces: {count} spans let go");
    }
}

/// One OTLP request of `batch`, as protobuf.
pub(super) fn encode(batch: Vec<RequestSpan>, service: &str) -> Vec<u8> {
    let spans: Vec<Span> = batch.into_iter().flat_map(RequestSpan::into_otlp).collect();
    let text = |key: &str, value: &str| KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![text("service.name", service)],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "tollgate".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..InstrumentationScope::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    };
    request.encode_to_vec()
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// `body` posted on the kept connection, or, when there is none or the collector closed
/// it, on a new one to the endpoint's first server that takes it; a 2xx is done, and its
/// connection kept.
async fn post(endpoint: &TraceEndpoint, kept: &mut Option<Sender>, body: Bytes) -> Result<(), String> {
    if let Some(mut sender) = kept.take() {
        if sender.ready().await.is_ok() {
            if let Ok(done) = round_trip(&mut sender, endpoint, body.clone()).await {
                *kept = Some(sender);
                return done;
            }
        }
    }
    let mut sender = connect(endpoint).await?;
    let done = round_trip(&mut sender, endpoint, body).await.map_err(|err| format!("HTTP: {err}"))?;
    *kept = Some(sender);
    done
}

/// A connection to the endpoint (`upstream::dial`), its driver spawned.
async fn connect(endpoint: &TraceEndpoint) -> Result<Sender, String> {
    let io = crate::upstream::dial::dial(&endpoint.upstream).await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|err| format!("HTTP: {err}"))?;
    tokio::spawn(conn);
    Ok(sender)
}

/// One `POST` of `body` on `sender`: the outer error is the connection's (worth a new
/// one), the inner the collector's answer.
async fn round_trip(sender: &mut Sender, endpoint: &TraceEndpoint, body: Bytes) -> Result<Result<(), String>, hyper::Error> {
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = http::Uri::from(endpoint.target.clone());
    request.headers_mut().insert(HOST, endpoint.host.clone());
    request.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/x-protobuf"));
    let response = sender.send_request(request).await?;
    let status = response.status();
    // The answer is read (a little of it) so that the connection can carry the next.
    let _ = Limited::new(response.into_body(), 64 * 1024).collect().await;
    Ok(match status.is_success() {
        true => Ok(()),
        false => Err(format!("the collector answered {status}")),
    })
}
