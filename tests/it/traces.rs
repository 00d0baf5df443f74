//! `[trace]`: spans over OTLP/HTTP to a collector the test plays (it decodes the
//! protobuf with OpenTelemetry's own message types), checked for their tree and
//! attributes; a caller's sampled `traceparent` continued, an unsampled one passed on
//! untouched; a dead collector costing requests nothing.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use support::*;

/// A collector: every span posted to it, and the content types they came with.
async fn collector() -> (Upstream, Arc<Mutex<Vec<Span>>>) {
    let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
    let kept = spans.clone();
    let up = Upstream::start(move |req| {
        let kept = kept.clone();
        async move {
            assert_eq!(req.headers()["content-type"], "application/x-protobuf");
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
            for resource in request.resource_spans {
                let service = resource.resource.unwrap().attributes;
                assert_eq!(text(&service, "service.name").as_deref(), Some("edge-1"));
                for scope in resource.scope_spans {
                    kept.lock().unwrap().extend(scope.spans);
                }
            }
            text_reply(200, "")
        }
    })
    .await;
    (up, spans)
}

fn text_reply(status: u16, body: &str) -> http::Response<Body> {
    support::text(status, body)
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    Some(match value {
        any_value::Value::StringValue(text) => text.clone(),
        any_value::Value::IntValue(n) => n.to_string(),
        other => format!("{other:?}"),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Waits until `count` spans arrived.
async fn spans_arrived(spans: &Mutex<Vec<Span>>, count: usize) -> Vec<Span> {
    for _ in 0..100 {
        if spans.lock().unwrap().len() >= count {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    spans.lock().unwrap().clone()
}

fn config(collector: std::net::SocketAddr, app: std::net::SocketAddr, sample: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\naccess = \"off\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\n\
         [trace]\notlp = \"http://{collector}/v1/traces\"\nsample = {sample}\nservice_name = \"edge-1\"\n\
         [zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"10r/s\"\n\
         [upstreams.app]\nservers = [\"{app}\"]\n\
         [[site]]\nnames = [\"a.test\"]\ndefault = true\n\
         [[site.location]]\nmatch = \"/api/\"\nupstream = \"app\"\nlimit = [{{ zone = \"per_ip\", burst = 5, nodelay = true }}]\n"
    )
}

fn request(traceparent: Option<&str>) -> http::Request<Body> {
    let mut req = http::Request::get("/api/items").header("host", "a.test");
    if let Some(traceparent) = traceparent {
        req = req.header("traceparent", traceparent);
    }
    req.body(empty()).unwrap()
}

#[tokio::test]
async fn a_span_per_request_with_its_decisions_and_upstream_and_the_trace_goes_on() {
    let _shared = support::shared();
    let (otlp, spans) = collector().await;
    let app = Upstream::named("app").await;
    let gw = gateway(&config(otlp.addr, app.addr, "1.0"));
    let at = addr(&gw);
    assert_eq!(send(at, request(None)).await.status, 200);
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut with_state = request(Some(caller));
    with_state.headers_mut().insert(
        "tracestate",
        http::HeaderValue::from_static("vendor=opaque"),
    );
    assert_eq!(send(at, with_state).await.status, 200);
    // An unsampled caller: no span, and its traceparent goes on as it came.
    let unsampled = "00-11111111111111111111111111111111-2222222222222222-00";
    assert_eq!(send(at, request(Some(unsampled))).await.status, 200);

    let spans = spans_arrived(&spans, 4).await;
    assert_eq!(spans.len(), 4, "{spans:#?}");
    let (servers, clients): (Vec<&Span>, Vec<&Span>) =
        spans.iter().partition(|span| span.kind == 2);
    assert_eq!((servers.len(), clients.len()), (2, 2));
    let told_upstream: Vec<String> = (app.seen.lock().unwrap().iter())
        .map(|seen| seen.headers["traceparent"].to_str().unwrap().to_owned())
        .collect();
    let upstream_parent = |i: usize| told_upstream[i].clone();
    for server in &servers {
        assert_eq!(server.name, "GET /api/");
        let attributes = &server.attributes;
        assert_eq!(text(attributes, "http.route").as_deref(), Some("/api/"));
        assert_eq!(text(attributes, "tollgate.site").as_deref(), Some("a.test"));
        assert_eq!(
            text(attributes, "http.response.status_code").as_deref(),
            Some("200")
        );
        assert_eq!(
            text(attributes, "client.address").as_deref(),
            Some("127.0.0.1")
        );
        // The zone's decision, its key a digest (not the address).
        let event = &server.events[0];
        assert_eq!(event.name, "limit");
        assert_eq!(
            text(&event.attributes, "tollgate.zone").as_deref(),
            Some("per_ip")
        );
        assert_eq!(
            text(&event.attributes, "tollgate.outcome").as_deref(),
            Some("passed")
        );
        let key = text(&event.attributes, "tollgate.key").unwrap();
        assert!(key.len() == 16 && key != "127.0.0.1", "{key}");
        // The upstream's span is its child, in the same trace.
        let child = clients
            .iter()
            .find(|c| c.parent_span_id == server.span_id)
            .expect("upstream span");
        assert_eq!(child.trace_id, server.trace_id);
        assert_eq!(
            text(&child.attributes, "server.port"),
            Some(app.addr.port().to_string())
        );
        assert!(child.start_time_unix_nano >= server.start_time_unix_nano);
        assert!(server.end_time_unix_nano >= child.end_time_unix_nano);
        // The upstream was told the span as its parent.
        let told = format!("00-{}-{}-01", hex(&server.trace_id), hex(&server.span_id));
        assert!(
            told_upstream[..2].contains(&told),
            "{told} not in {told_upstream:?}"
        );
    }
    // The caller's trace continued: its trace id, its span as the parent.
    let continued = servers
        .iter()
        .find(|s| hex(&s.trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736")
        .expect("continued");
    assert_eq!(hex(&continued.parent_span_id), "00f067aa0ba902b7");
    assert_eq!(continued.trace_state, "vendor=opaque");
    assert!(servers.iter().any(|s| s.parent_span_id.is_empty()));
    assert_eq!(upstream_parent(2), unsampled);
    let scraped = crate::metrics::scrape(gw.admin_addr().unwrap()).await;
    assert_eq!(
        scraped.get("tollgate_trace_spans_total{result=\"exported\"}"),
        2.0,
        "{}",
        scraped.text
    );
}

#[tokio::test]
async fn sampling_keeps_a_share_of_new_traces_and_a_dead_collector_costs_nothing() {
    let _shared = support::shared();
    let app = Upstream::named("app").await;
    // Nothing listens where the collector should be.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let gw = gateway(&config(dead, app.addr, "0.0"));
    let at = addr(&gw);
    for _ in 0..3 {
        assert_eq!(send(at, request(None)).await.status, 200);
    }
    // `sample = 0`: no new trace kept, their traceparent untouched (none).
    assert!(app
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|seen| !seen.headers.contains_key("traceparent")));
    // A caller's sampled trace is kept all the same; its export fails, counted.
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(send(at, request(Some(caller))).await.status, 200);
    let admin = gw.admin_addr().unwrap();
    let scraped = crate::metrics::scrape_until(admin, |s| {
        s.get("tollgate_trace_spans_total{result=\"failed\"}") >= 1.0
    })
    .await;
    assert_eq!(
        scraped.get("tollgate_trace_spans_total{result=\"exported\"}"),
        0.0
    );
}

#[tokio::test]
async fn each_failed_try_is_a_span_of_its_own_before_the_one_that_answered() {
    let _shared = support::shared();
    let (otlp, spans) = collector().await;
    let app = Upstream::named("app").await;
    // Nothing listens at the first server: its try fails to connect, the second answers.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let text_config = config(otlp.addr, app.addr, "1.0").replace(
        &format!("servers = [\"{}\"]", app.addr),
        &format!(
            "servers = [\"{dead}\", \"{}\"]\nbalance = \"round_robin\"",
            app.addr
        ),
    );
    let gw = gateway(&text_config);
    assert_eq!(send(addr(&gw), request(None)).await.status, 200);
    let spans = spans_arrived(&spans, 3).await;
    let clients: Vec<&Span> = spans.iter().filter(|span| span.kind == 3).collect();
    assert_eq!(clients.len(), 2, "{spans:#?}");
    let failed = clients
        .iter()
        .find(|span| text(&span.attributes, "error.type").is_some())
        .unwrap();
    assert_eq!(
        text(&failed.attributes, "error.type").as_deref(),
        Some("connect")
    );
    assert_eq!(
        text(&failed.attributes, "server.port"),
        Some(dead.port().to_string())
    );
    assert_eq!(
        text(&failed.attributes, "tollgate.attempt").as_deref(),
        Some("1")
    );
    let answered = clients
        .iter()
        .find(|span| text(&span.attributes, "error.type").is_none())
        .unwrap();
    assert_eq!(
        text(&answered.attributes, "tollgate.attempt").as_deref(),
        Some("2")
    );
    assert_eq!(
        text(&answered.attributes, "server.port"),
        Some(app.addr.port().to_string())
    );
}

#[tokio::test]
async fn a_hostile_traceparent_in_raw_bytes_starts_no_trace() {
    let _shared = support::shared();
    let (otlp, spans) = collector().await;
    let app = Upstream::named("app").await;
    // No trace of its own is kept: only a caller's sampled parent makes a span. No
    // limit: eleven requests in a row.
    let unlimited = config(otlp.addr, app.addr, "0.0").replace(
        "limit = [{ zone = \"per_ip\", burst = 5, nodelay = true }]",
        "",
    );
    let gw = gateway(&unlimited);
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut hostile: Vec<Vec<u8>> = [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
    ]
    .iter()
    .map(|value| format!("traceparent: {value}\r\n").into_bytes())
    .collect();
    // Bytes past ASCII where hex digits belong, at the right length.
    let mut high = b"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e47".to_vec();
    high.extend_from_slice(b"\xc3\xa9\xff\xfe-00f067aa0ba902b7-01\r\n");
    hostile.push(high);
    hostile.push(format!("traceparent: {valid}\r\ntraceparent: {valid}\r\n").into_bytes());
    hostile.push(format!("traceparent: {valid}{}\r\n", "-0".repeat(3000)).into_bytes());
    for header in &hostile {
        let mut request =
            b"GET /api/items HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n".to_vec();
        request.extend_from_slice(header);
        request.extend_from_slice(b"\r\n");
        let answer = support::raw::exchange(addr(&gw), &request).await;
        assert!(
            answer.starts_with(b"HTTP/1.1 200 "),
            "{header:?}: {:?}",
            String::from_utf8_lossy(&answer)
        );
    }
    // Last, a valid one: spans are exported in order, so once its two arrived, any a
    // hostile header had made would have come before.
    let request = format!("GET /api/items HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\ntraceparent: {valid}\r\n\r\n");
    support::raw::exchange(addr(&gw), request.as_bytes()).await;
    let spans = spans_arrived(&spans, 2).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    assert!(spans
        .iter()
        .all(|span| hex(&span.trace_id) == "4bf92f3577b34da6a3ce929d0e0e4736"));
}

#[tokio::test]
async fn a_request_no_server_answered_has_a_span_for_each_failed_try() {
    let _shared = support::shared();
    let (otlp, spans) = collector().await;
    let dead = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (first, second) = (dead(), dead());
    let text_config = config(otlp.addr, first, "1.0").replace(
        &format!("servers = [\"{first}\"]"),
        &format!("servers = [\"{first}\", \"{second}\"]\nbalance = \"round_robin\""),
    );
    let gw = gateway(&text_config);
    assert_eq!(send(addr(&gw), request(None)).await.status, 502);
    let spans = spans_arrived(&spans, 3).await;
    let (servers, clients): (Vec<&Span>, Vec<&Span>) =
        spans.iter().partition(|span| span.kind == 2);
    assert_eq!((servers.len(), clients.len()), (1, 2), "{spans:#?}");
    assert_eq!(
        text(&servers[0].attributes, "http.response.status_code").as_deref(),
        Some("502")
    );
    let mut ports: Vec<String> = clients
        .iter()
        .map(|span| text(&span.attributes, "server.port").unwrap())
        .collect();
    ports.sort();
    let mut want = vec![first.port().to_string(), second.port().to_string()];
    want.sort();
    assert_eq!(ports, want);
    for client in &clients {
        assert_eq!(
            text(&client.attributes, "error.type").as_deref(),
            Some("connect")
        );
        assert_eq!(client.parent_span_id, servers[0].span_id);
    }
}

#[tokio::test]
async fn a_collector_that_never_answers_fills_the_queue_and_the_rest_is_dropped_and_counted() {
    let _shared = support::shared();
    let app = Upstream::named("app").await;
    // Accepts and never answers: the exporter waits on its first batch.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let text_config = config(silent_addr, app.addr, "1.0")
        .replace(
            "service_name = \"edge-1\"",
            "service_name = \"edge-1\"\nqueue = 4",
        )
        .replace(
            "limit = [{ zone = \"per_ip\", burst = 5, nodelay = true }]",
            "",
        );
    let gw = gateway(&text_config);
    for _ in 0..30 {
        assert_eq!(send(addr(&gw), request(None)).await.status, 200);
    }
    let admin = gw.admin_addr().unwrap();
    // Each request is one span: at most the queue's 4 and a batch of 4 in the hung post
    // are held; the others are dropped, none waited for.
    let scraped = crate::metrics::scrape_until(admin, |s| {
        s.get("tollgate_trace_spans_total{result=\"dropped\"}") >= 22.0
    })
    .await;
    assert_eq!(
        scraped.get("tollgate_trace_spans_total{result=\"exported\"}"),
        0.0
    );
    held.abort();
}

#[tokio::test]
async fn parents_from_believes_a_callers_traceparent_only_from_the_clients_it_names() {
    let _shared = support::shared();
    let (otlp, spans) = collector().await;
    let app = Upstream::named("app").await;
    // The client is the X-Forwarded-For address [real_ip] believes from 127.0.0.1.
    let text_config = config(otlp.addr, app.addr, "0.0").replace(
        "service_name = \"edge-1\"",
        "service_name = \"edge-1\"\nparents_from = [\"10.0.0.0/8\"]",
    ) + "[real_ip]\ntrusted = [\"127.0.0.1\"]\n";
    let gw = gateway(&text_config);
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for client in ["192.0.2.1", "10.1.2.3"] {
        let mut req = request(Some(caller));
        req.headers_mut()
            .insert("x-forwarded-for", client.parse().unwrap());
        req.headers_mut()
            .insert("tracestate", http::HeaderValue::from_static("vendor=x"));
        assert_eq!(send(addr(&gw), req).await.status, 200);
    }
    let seen: Vec<(Option<String>, Option<String>)> = (app.seen.lock().unwrap().iter())
        .map(|seen| {
            let header = |name: &str| {
                seen.headers
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_owned())
            };
            (header("traceparent"), header("tracestate"))
        })
        .collect();
    // From outside: no trace, and neither header reaches the upstream.
    assert_eq!(seen[0], (None, None));
    // From inside: the caller's trace goes on, through the gateway's span.
    let told = seen[1].0.clone().unwrap();
    assert!(
        told.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-") && told != caller,
        "{told}"
    );
    let spans = spans_arrived(&spans, 2).await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
}
