//! The client-side families: requests by site, location and status, their duration and
//! body bytes by site and location, requests denied by a rule, TLS handshakes, and what
//! build is running. `site` and `location` are only ever names from the configuration
//! (`-` for none), so that a scan of random paths or hosts cannot grow the label sets.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::{counter, histogram};
use crate::metrics::cells::{Counter, HistogramSum};
use crate::metrics::{LocationCell, Metrics, TlsProtocol};

/// The `version` and `commit` labels of `tollgate_build_info` (the commit as build.rs
/// found it, "unknown" outside a checkout).
const VERSION: &str = env!("CARGO_PKG_VERSION");
const COMMIT: &str = env!("TOLLGATE_COMMIT");

/// A family of body bytes: its name, help and how a cell is read.
type BodyBytes = (&'static str, &'static str, fn(&LocationCell) -> u64);

/// Requests by site, location and status; their duration and body bytes by site and
/// location; and those denied by a rule.
pub(super) fn requests(metrics: &Metrics, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let located = metrics.located_in_use();
    let help = "Requests answered, by site (its first name; \"-\" in a file of top-level \
                locations or when no location matched), location (as configured; \"-\" when \
                none matched) and status.";
    let mut family =
        encoder.encode_descriptor("tollgate_requests", help, None, MetricType::Counter)?;
    for (name, cells) in &located {
        let mut by_status = BTreeMap::new();
        for cell in cells.iter() {
            cell.statuses.collect(&mut by_status);
        }
        for (status, count) in by_status {
            let status = status.to_string();
            let labels = [
                ("site", name.site.as_str()),
                ("location", name.location.as_str()),
                ("status", &status),
            ];
            counter(&mut family, &labels, count)?;
        }
    }
    let mut family = encoder.encode_descriptor(
        "tollgate_request_duration",
        "Time from a request's arrival to the last byte of its response, by site and location.",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for (name, cells) in &located {
        let mut time = HistogramSum::default();
        for cell in cells.iter() {
            time.add(&cell.time);
        }
        let labels = [
            ("site", name.site.as_str()),
            ("location", name.location.as_str()),
        ];
        histogram(family.encode_family(&labels)?, &time)?;
    }
    let bodies: [BodyBytes; 2] = [
        (
            "tollgate_request_body_bytes",
            "Request body bytes read from clients (and passed upstream), by site and location.",
            |cell| cell.received.load(Relaxed),
        ),
        (
            "tollgate_response_body_bytes",
            "Response body bytes sent to clients, by site and location.",
            |cell| cell.sent.get(),
        ),
    ];
    for (metric, help, read) in bodies {
        let mut family = encoder.encode_descriptor(metric, help, None, MetricType::Counter)?;
        for (name, cells) in &located {
            let labels = [
                ("site", name.site.as_str()),
                ("location", name.location.as_str()),
            ];
            counter(&mut family, &labels, cells.iter().map(read).sum())?;
        }
    }
    denied(metrics, encoder)
}

fn denied(metrics: &Metrics, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let denied = metrics.denied_in_use();
    let mut family = encoder.encode_descriptor(
        "tollgate_access_denied",
        "Requests answered 403 by an allow/deny rule.",
        None,
        MetricType::Counter,
    )?;
    for (rule, cells) in &denied {
        let count = cells.iter().map(Counter::get).sum();
        counter(&mut family, &[("rule", rule)], count)?;
    }
    Ok(())
}

/// TLS handshakes on client connections: every `ok` protocol tollgate offers and
/// `failed` always (a failed or timed-out handshake agreed on none: `protocol="none"`).
pub(super) fn tls(metrics: &Metrics, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let cells = metrics.tls_handshake_cells();
    let mut family = encoder.encode_descriptor(
            "tollgate_tls_handshakes",
            "TLS handshakes with clients, by result (ok, failed: refused, broken or timed out) and the protocol agreed (none when failed).",
            None,
            MetricType::Counter,
        )?;
    for protocol in TlsProtocol::ALL {
        let count: u64 = cells.iter().map(|cell| cell.ok_count(protocol)).sum();
        if protocol == TlsProtocol::Other && count == 0 {
            continue;
        }
        let labels = [("result", "ok"), ("protocol", protocol.label())];
        counter(&mut family, &labels, count)?;
    }
    let failed = cells.iter().map(|cell| cell.failed_count()).sum();
    counter(
        &mut family,
        &[("result", "failed"), ("protocol", "none")],
        failed,
    )
}

/// New QUIC connections (HTTP/3), by what became of them.
pub(super) fn quic(metrics: &Metrics, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let mut family = encoder.encode_descriptor(
        "tollgate_quic_connections",
        "New QUIC connections, by result: ok and failed handshakes, retried (a Retry asked for address validation), refused, dropped unanswered.",
        None,
        MetricType::Counter,
    )?;
    for (result, count) in metrics.quic().counts() {
        counter(&mut family, &[("result", result)], count)?;
    }
    let mut family = encoder.encode_descriptor(
        "tollgate_quic_early_requests",
        "HTTP/3 requests that came in 0-RTT ([quic] early_data): taken (a safe method, sent on with Early-Data: 1) or answered 425 Too Early.",
        None,
        MetricType::Counter,
    )?;
    for (result, count) in metrics.quic().early_counts() {
        counter(&mut family, &[("result", result)], count)?;
    }
    Ok(())
}

/// Request spans (`[trace]`), by what became of them.
pub(super) fn trace(metrics: &Metrics, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let mut family = encoder.encode_descriptor(
        "tollgate_trace_spans",
        "Request spans ([trace]), by result: exported (the collector took them), dropped (the queue was full), failed (the collector refused or did not answer).",
        None,
        MetricType::Counter,
    )?;
    for (result, count) in metrics.trace().counts() {
        counter(&mut family, &[("result", result)], count)?;
    }
    Ok(())
}

/// `tollgate_build_info{version,commit} 1`, the usual way to put a build on a graph.
pub(super) fn build_info(encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let mut family = encoder.encode_descriptor(
        "tollgate_build_info",
        "Always 1: the version and commit of the running binary.",
        None,
        MetricType::Gauge,
    )?;
    let labels = [("version", VERSION), ("commit", COMMIT)];
    family.encode_family(&labels)?.encode_gauge(&1i64)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use prometheus_client::collector::Collector;
    use prometheus_client::registry::Registry;

    use super::*;

    /// The client-side families of `metrics` alone.
    #[derive(Debug)]
    struct Traffic(Metrics);

    impl Collector for Traffic {
        fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
            requests(&self.0, &mut encoder)?;
            tls(&self.0, &mut encoder)?;
            build_info(&mut encoder)
        }
    }

    fn render(metrics: Metrics) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Traffic(metrics)));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn a_location_is_labelled_by_site_and_location_with_its_own_histogram() {
        let metrics = Metrics::new(2);
        let api = metrics.site_location("example.com", "/api/", "example.com /api/");
        let other = metrics.site_location("_", "= /ping", "_ = /ping");
        api.finish(0, 200, Duration::from_millis(3), 120);
        api.finish(1, 200, Duration::from_millis(30), 80);
        other.finish(1, 404, Duration::from_micros(100), 0);
        api.received(1).fetch_add(7, Relaxed);
        let text = render(metrics);
        for line in [
            "tollgate_requests_total{site=\"example.com\",location=\"/api/\",status=\"200\"} 2",
            "tollgate_requests_total{site=\"_\",location=\"= /ping\",status=\"404\"} 1",
            "tollgate_request_duration_seconds_count{site=\"example.com\",location=\"/api/\"} 2",
            "tollgate_request_duration_seconds_bucket{le=\"0.005\",site=\"example.com\",location=\"/api/\"} 1",
            "tollgate_request_duration_seconds_bucket{le=\"0.05\",site=\"example.com\",location=\"/api/\"} 2",
            "tollgate_request_duration_seconds_count{site=\"_\",location=\"= /ping\"} 1",
            "tollgate_response_body_bytes_total{site=\"example.com\",location=\"/api/\"} 200",
            "tollgate_request_body_bytes_total{site=\"example.com\",location=\"/api/\"} 7",
            "tollgate_request_body_bytes_total{site=\"_\",location=\"= /ping\"} 0",
        ] {
            assert!(text.contains(&format!("\n{line}\n")), "{line}\n{text}");
        }
        drop((api, other));
    }

    #[test]
    fn a_location_gone_from_the_configuration_leaves_the_scrape() {
        let metrics = Metrics::new(1);
        let kept = metrics.site_location("a.test", "/", "a.test /");
        drop(metrics.site_location("b.test", "/", "b.test /"));
        let text = render(metrics);
        assert!(text.contains("site=\"a.test\""), "{text}");
        assert!(!text.contains("b.test"), "{text}");
        drop(kept);
    }

    #[test]
    fn tls_handshakes_are_counted_by_result_and_protocol() {
        let metrics = Metrics::new(2);
        metrics.tls_handshakes(0).ok(TlsProtocol::Tls13);
        metrics.tls_handshakes(1).ok(TlsProtocol::Tls13);
        metrics.tls_handshakes(1).failed();
        let text = render(metrics);
        for line in [
            "tollgate_tls_handshakes_total{result=\"ok\",protocol=\"TLSv1.3\"} 2",
            "tollgate_tls_handshakes_total{result=\"ok\",protocol=\"TLSv1.2\"} 0",
            "tollgate_tls_handshakes_total{result=\"failed\",protocol=\"none\"} 1",
        ] {
            assert!(text.contains(&format!("\n{line}\n")), "{line}\n{text}");
        }
        assert!(!text.contains("protocol=\"other\""), "{text}");
    }

    #[test]
    fn build_info_names_the_version_and_commit() {
        let text = render(Metrics::new(1));
        let line =
            format!("\ntollgate_build_info{{version=\"{VERSION}\",commit=\"{COMMIT}\"}} 1\n");
        assert!(text.contains(&line), "{text}");
    }
}
