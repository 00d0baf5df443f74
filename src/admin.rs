//! The admin API (`[admin]`, DESIGN §5.7): `GET /metrics`, `GET /healthz`,
//! `GET /status`, and `GET`/`DELETE /zones/NAME/keys/KEY`, on a listener of its own
//! and served by a thread of its own, so that it answers while the workers are busy and
//! its requests never count among theirs.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;

use crate::log::push_json_string;
use crate::metrics::export;
use crate::routing::percent_decode;
use crate::server::Shared;

/// The running admin listener; stops (after the request at hand) when dropped.
pub struct Admin {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Admin {
    /// Binds `addr` now (a busy port fails the start), then serves on a thread.
    pub fn start(addr: SocketAddr, shared: Arc<Shared>) -> io::Result<Admin> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("tollgate-admin".into())
            .spawn(move || serve(listener, shared, stopped))?;
        tracing::info!(%addr, "admin API listening");
        Ok(Admin {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(listener: std::net::TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(error = %err, "admin API cannot start");
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(err) => {
                tracing::error!(error = %err, "admin API cannot listen");
                return;
            }
        };
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        tracing::warn!(error = %err, "admin API accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = stop.wait_for(|stop| *stop) => return,
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let response = answer(&req, &shared);
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

fn answer<B>(req: &Request<B>, shared: &Shared) -> Response<Full<Bytes>> {
    let (method, path) = (req.method(), req.uri().path());
    if let Some(rest) = path.strip_prefix("/zones/") {
        return zone_key(method, rest, shared);
    }
    if method != Method::GET && method != Method::HEAD {
        return not_allowed("GET, HEAD");
    }
    match path {
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n"),
        "/status" => reply(StatusCode::OK, "application/json", status(shared)),
        "/metrics" => reply(StatusCode::OK, export::CONTENT_TYPE, metrics(shared)),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    }
}

/// `/zones/NAME/keys/KEY`: GET shows the key's stored state, DELETE forgets it (its next
/// request starts afresh). KEY is percent-encoded; in a zone keyed by
/// `$binary_remote_addr` alone it is an address, masked as the zone masks clients.
fn zone_key(method: &Method, rest: &str, shared: &Shared) -> Response<Full<Bytes>> {
    let Some((name, key)) = rest.split_once("/keys/") else {
        return reply(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    };
    let snapshot = shared.snapshot.load();
    let Some(zone) = snapshot.zones.iter().find(|zone| *zone.name == *name) else {
        return reply(StatusCode::NOT_FOUND, "text/plain", "no such zone\n");
    };
    let Ok(text) = percent_decode(key.as_bytes()) else {
        return reply(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "bad percent-encoding\n",
        );
    };
    let key = zone.template.key_of(&text);
    let mut body = String::from("{\"zone\":");
    push_json_string(&mut body, &zone.name);
    body.push_str(",\"key\":");
    push_json_string(&mut body, &String::from_utf8_lossy(&text));
    let found = match *method {
        Method::GET | Method::HEAD => {
            let state = zone.state_of(&key);
            let _ = write!(body, ",\"stored\":{}", state.is_some());
            if let Some(state) = &state {
                body.push_str(",\"state\":");
                push_json_string(&mut body, state);
            }
            state.is_some()
        }
        Method::DELETE => {
            let forgotten = zone.forget(&key);
            let _ = write!(body, ",\"reset\":{forgotten}");
            forgotten
        }
        _ => return not_allowed("GET, HEAD, DELETE"),
    };
    body.push_str("}\n");
    let status = if found {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    reply(status, "application/json", body)
}

fn not_allowed(allow: &'static str) -> Response<Full<Bytes>> {
    let mut response = reply(
        StatusCode::METHOD_NOT_ALLOWED,
        "text/plain",
        "method not allowed\n",
    );
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    response
}

fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}

/// `/metrics`: every counter, in the Prometheus text format.
fn metrics(shared: &Shared) -> String {
    export::render(export::Scrape {
        metrics: shared.metrics.clone(),
        snapshot: shared.snapshot.load_full(),
        reloads_ok: shared.reloads_ok.load(Ordering::Relaxed),
        reloads_failed: shared.reloads_failed.load(Ordering::Relaxed),
    })
}

/// How many of a zone's most-limited keys `/status` shows.
const TOP_LIMITED: usize = 10;

/// `/status`: the generation in force (its file's SHA-256, and how many reloads took
/// effect or failed), the addresses listened on, each upstream server's passive health,
/// and each zone's keys, memory, and the keys it rejected most over the last minute.
fn status(shared: &Shared) -> String {
    let snapshot = shared.snapshot.load();
    let mut out = String::with_capacity(1024);
    let _ = write!(
        out,
        "{{\"generation\":{},\"config_sha256\":\"{}\",\"reloads\":{{\"ok\":{},\"failed\":{}}},\"listeners\":[",
        snapshot.generation,
        snapshot.config_sha256,
        shared.reloads_ok.load(Ordering::Relaxed),
        shared.reloads_failed.load(Ordering::Relaxed),
    );
    let listeners = shared.listeners.load();
    for (i, addr) in listeners.plain.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, &addr.to_string());
    }
    out.push_str("],\"tls_listeners\":[");
    for (i, addr) in listeners.tls.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, &addr.to_string());
    }
    out.push_str("],\"upstreams\":{");
    let now = Instant::now();
    for (i, group) in snapshot.upstreams.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json_string(&mut out, &group.name);
        out.push_str(":[");
        for (j, server) in group.servers.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str("{\"server\":");
            push_json_string(&mut out, &server.addr.to_string());
            let _ = write!(
                out,
                ",\"healthy\":{},\"fails\":{}}}",
                server.health.is_available(now),
                server.health.fails()
            );
        }
        out.push(']');
    }
    out.push_str("},\"zones\":{");
    for (i, zone) in snapshot.zones.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let stats = zone.stats();
        push_json_string(&mut out, &zone.name);
        let _ = write!(
            out,
            ":{{\"algorithm\":\"{}\",\"keys\":{},\"bytes\":{},\"capacity_bytes\":{},\"evictions\":{},\"top_limited\":[",
            zone.kind.name(),
            stats.keys,
            stats.bytes,
            stats.capacity_bytes,
            stats.evictions
        );
        let top = shared
            .metrics
            .zone_stats(&zone.name)
            .map(|stats| stats.top_limited(now, TOP_LIMITED))
            .unwrap_or_default();
        for (j, ((key, cut), rejected)) in top.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            let mut text = zone.template.text_of(key);
            if *cut {
                text.push('…');
            }
            out.push_str("{\"key\":");
            push_json_string(&mut out, &text);
            let _ = write!(out, ",\"rejected\":{rejected}}}");
        }
        out.push_str("]}");
    }
    out.push_str("}}\n");
    out
}
