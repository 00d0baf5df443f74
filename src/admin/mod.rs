//! The admin API (`[admin]` in docs/config.md): `GET /metrics`, `GET /healthz`,
//! `GET /status`, `GET /history` (the last 15 minutes' traffic, `admin/history.rs`),
//! `GET`/`DELETE /zones/NAME/keys/KEY`, and `GET /bans` with
//! `DELETE /bans/ZONE/KEY` (the penalty box, `admin/bans.rs`). Its listener and thread
//! (`server/admin_listener.rs`, with the connections' limits) are the shell's; here are
//! its answers. Calls that change state need the admin token (`admin/auth.rs`).

mod auth;
mod bans;
mod history;
mod keys;
mod metrics;
mod page;
mod status;
mod traffic;

pub(crate) use history::History;

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;

use crate::routing::percent_decode;
use crate::state::GatewayState;

/// Keeps `history` of `state`'s traffic for as long as the task runs: the admin API's
/// thread runs it beside its connections.
pub(crate) async fn keep_history(history: &History, state: &GatewayState) {
    history
        .keep(|| traffic::Counts::of(&state.metrics))
        .await;
}

/// The answer to `req`: `/bans` may wait on Redis (within its timeout), the rest not.
pub(crate) async fn answer_async<B>(
    req: &Request<B>,
    state: &GatewayState,
    history: &History,
) -> Response<Full<Bytes>> {
    if let Some(denied) = auth::refusal(req, state.snapshot.load().admin.as_ref()) {
        return denied;
    }
    let path = req.uri().path();
    if path == "/bans" || path.starts_with("/bans/") {
        return bans::answer(req.method(), path, state).await;
    }
    answer(req, state, history)
}

fn answer<B>(req: &Request<B>, state: &GatewayState, history: &History) -> Response<Full<Bytes>> {
    let (method, path) = (req.method(), req.uri().path());
    if let Some(rest) = path.strip_prefix("/zones/") {
        return zone_key(method, rest, state);
    }
    if let Some(key) = path.strip_prefix("/keys/") {
        return look_up(method, key, state);
    }
    if method != Method::GET && method != Method::HEAD {
        return not_allowed("GET, HEAD");
    }
    if let Some(file) = page::asset(path) {
        return file;
    }
    match path {
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n"),
        "/status" => reply(StatusCode::OK, "application/json", status::status(state)),
        "/history" => reply(StatusCode::OK, "application/json", history.json()),
        "/metrics" => reply(StatusCode::OK, metrics::CONTENT_TYPE, scrape(state)),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    }
}

/// `/zones/NAME/keys/KEY`: GET shows the key's stored state, DELETE forgets it (its next
/// request starts afresh). KEY is percent-encoded; in a zone keyed by
/// `$binary_remote_addr` alone it is an address, masked as the zone masks clients.
fn zone_key(method: &Method, rest: &str, state: &GatewayState) -> Response<Full<Bytes>> {
    let Some((name, key)) = rest.split_once("/keys/") else {
        return reply(StatusCode::NOT_FOUND, "text/plain", "not found\n");
    };
    let snapshot = state.snapshot.load();
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
    let text = String::from_utf8_lossy(&text);
    let (body, found) = match *method {
        Method::GET | Method::HEAD => {
            let state = zone.state_of(&key);
            let stored = state.is_some();
            let document = status::KeyState {
                zone: &zone.name,
                key: &text,
                stored,
                state,
            };
            (status::line(&document), stored)
        }
        Method::DELETE => {
            let reset = zone.forget(&key);
            let document = status::KeyReset {
                zone: &zone.name,
                key: &text,
                reset,
            };
            (status::line(&document), reset)
        }
        _ => return not_allowed("GET, HEAD, DELETE"),
    };
    let status = if found {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    reply(status, "application/json", body)
}

/// `/keys/KEY`: the key in every zone, and what its next request would get where.
fn look_up(method: &Method, key: &str, state: &GatewayState) -> Response<Full<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return not_allowed("GET, HEAD");
    }
    let Ok(text) = percent_decode(key.as_bytes()) else {
        return reply(StatusCode::BAD_REQUEST, "text/plain", "bad percent-encoding\n");
    };
    let text = String::from_utf8_lossy(&text);
    let snapshot = state.snapshot.load();
    let looked = keys::look(&snapshot, &text, crate::clock::now());
    reply(StatusCode::OK, "application/json", status::line(&looked))
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
fn scrape(state: &GatewayState) -> String {
    let snapshot = state.snapshot.load_full();
    let certificates = certificates(state, &snapshot);
    let acme = snapshot.pipeline.acme.is_some().then_some(&state.acme);
    metrics::render(metrics::Scrape {
        metrics: state.metrics.clone(),
        snapshot,
        reloads_ok: state.reloads_ok.load(Ordering::Relaxed),
        reloads_failed: state.reloads_failed.load(Ordering::Relaxed),
        certificates,
        acme_orders: acme.map(|acme| acme.orders()),
    })
}

/// Every certificate served, by name, and when it stops being valid (Unix seconds): the
/// static ones' names, then each managed name that has a certificate.
fn certificates(state: &GatewayState, snapshot: &crate::snapshot::Snapshot) -> Vec<(String, i64)> {
    let mut certificates = snapshot
        .tls
        .as_ref()
        .map(|tls| tls.expiries.clone())
        .unwrap_or_default();
    if snapshot.pipeline.acme.is_some() {
        certificates.extend(state.acme.published().expiries());
    }
    certificates
}
