//! `/metrics`: the Prometheus (OpenMetrics) text, written by prometheus-client's
//! encoder at scrape time from the workers' cells added up, the zones' stores, the
//! upstream servers' health and the reload counts. The client side's families are in
//! `traffic`, the process's in `process`.

mod process;
mod clients;

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::limit::remote::Failure;
use crate::metrics::cells::HistogramSum;
use crate::metrics::load::{Failure as LoadFailure, Totals};
use crate::metrics::{Answer, FailureKind, Metrics};
use crate::snapshot::Snapshot;
use crate::upstream::gate::{Gate, Shed};

/// The `Content-Type` of [`render`]'s text.
pub(super) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a scrape reads.
pub(super) struct Scrape {
    pub metrics: Arc<Metrics>,
    pub snapshot: Arc<Snapshot>,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    /// Every certificate served, static or by ACME: its name and end of validity.
    pub certificates: Vec<(String, i64)>,
    /// With `[acme]`: orders that ended with a certificate, and that failed.
    pub acme_orders: Option<(u64, u64)>,
}

impl fmt::Debug for Scrape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scrape")
            .field("generation", &self.snapshot.generation)
            .finish_non_exhaustive()
    }
}

/// The exposition text of every metric.
pub(super) fn render(scrape: Scrape) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::with_capacity(8 * 1024);
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        clients::requests(&self.metrics, &mut encoder)?;
        self.upstreams(&mut encoder)?;
        self.upstream_load(&mut encoder)?;
        self.gates(&mut encoder)?;
        self.zones(&mut encoder)?;
        self.adaptive_zones(&mut encoder)?;
        self.bans(&mut encoder)?;
        self.certificates(&mut encoder)?;
        jwks(&mut encoder)?;
        clients::tls(&self.metrics, &mut encoder)?;
        clients::quic(&self.metrics, &mut encoder)?;
        clients::trace(&self.metrics, &mut encoder)?;
        self.gateway(&mut encoder)?;
        clients::build_info(&mut encoder)?;
        process::Process::read().encode(&mut encoder)
    }
}

/// A gate's gauge: its name, help and how it is read.
type GateGauge = (&'static str, &'static str, fn(&Gate) -> u32);

type Labels<'a, const N: usize> = [(&'static str, &'a str); N];

impl Scrape {
    fn upstreams(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let m = &self.metrics;
        let upstreams = m.upstreams_in_use();
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_duration",
            "Time from sending a request upstream to the response head.",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (name, stats) in &upstreams {
            let mut time = HistogramSum::default();
            for cell in stats.time.iter() {
                time.add(cell);
            }
            histogram(family.encode_family(&[("upstream", name.as_str())])?, &time)?;
        }

        let servers = m.servers_in_use();
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_failures",
            "Failed attempts on an upstream server by kind; kind=\"no_live_upstream\" \
             counts requests that found no server left to try.",
            None,
            MetricType::Counter,
        )?;
        for ((upstream, server), failures) in &servers {
            for kind in FailureKind::ALL {
                let labels = [
                    ("upstream", upstream.as_str()),
                    ("server", server.as_str()),
                    ("kind", kind.label()),
                ];
                counter(&mut family, &labels, failures.get(kind))?;
            }
        }
        for (name, stats) in &upstreams {
            let labels = [
                ("upstream", name.as_str()),
                ("server", ""),
                ("kind", "no_live_upstream"),
            ];
            counter(&mut family, &labels, stats.no_live.get())?;
        }

        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_healthy",
            "1 while passive health lets an upstream server be picked, 0 while it is out.",
            None,
            MetricType::Gauge,
        )?;
        let now = Instant::now();
        for group in &self.snapshot.upstreams {
            for server in &group.servers {
                let addr = server.addr.to_string();
                let labels = [("upstream", group.name.as_str()), ("server", &addr)];
                let up = i64::from(server.health.is_available(now));
                family.encode_family(&labels)?.encode_gauge(&up)?;
            }
        }
        Ok(())
    }

    /// The load signals (`metrics::load`): each group's last second as the adaptive tick
    /// last read it, and its requests and failed requests (per request, not per try).
    fn upstream_load(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let upstreams = self.metrics.upstreams_in_use();
        let signals: Vec<_> = upstreams.iter().map(|(n, s)| (n, s.signals())).collect();
        let help = "Requests on an upstream group's servers, at the last tick.";
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_in_flight",
            help,
            None,
            MetricType::Gauge,
        )?;
        for (name, signals) in &signals {
            family
                .encode_family(&[("upstream", name.as_str())])?
                .encode_gauge(&signals.in_flight)?;
        }
        let help = "Response-head latency percentiles of an upstream group over the last second; absent under 10 responses.";
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_latency",
            help,
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        for (name, signals) in &signals {
            let quantiles = [
                ("0.5", signals.p50),
                ("0.9", signals.p90),
                ("0.99", signals.p99),
            ];
            for (quantile, value) in quantiles {
                let Some(value) = value else { continue };
                family
                    .encode_family(&[("upstream", name.as_str()), ("quantile", quantile)])?
                    .encode_gauge(&value.as_secs_f64())?;
            }
        }
        let help = "Share of an upstream group's requests that failed (5xx, timeout, refused, broken) over the last second; absent under 10.";
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_failure_ratio",
            help,
            None,
            MetricType::Gauge,
        )?;
        for (name, signals) in &signals {
            if let Some(share) = signals.failure_share {
                family
                    .encode_family(&[("upstream", name.as_str())])?
                    .encode_gauge(&(f64::from(share) / 1000.0))?;
            }
        }
        let totals: Vec<_> = upstreams
            .iter()
            .map(|(name, stats)| (name, Totals::of(&stats.load)))
            .collect();
        let help = "Requests to an upstream group that ended (a response head or a failure).";
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_requests",
            help,
            None,
            MetricType::Counter,
        )?;
        for (name, totals) in &totals {
            counter(&mut family, &[("upstream", name.as_str())], totals.ended)?;
        }
        let help = "Requests to an upstream group that failed, by kind (per request; tollgate_upstream_failures counts tries).";
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_failed_requests",
            help,
            None,
            MetricType::Counter,
        )?;
        for (name, totals) in &totals {
            for kind in LoadFailure::ALL {
                let labels = [("upstream", name.as_str()), ("kind", kind.label())];
                counter(&mut family, &labels, totals.failures[kind as usize])?;
            }
        }
        Ok(())
    }

    /// The concurrency gates of groups with `max_in_flight`: limit, in flight, waiting,
    /// and requests shed by reason.
    fn gates(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let gates: Vec<_> = self
            .snapshot
            .upstreams
            .iter()
            .filter_map(|group| Some((group.name.as_str(), group.gate.as_ref()?)))
            .collect();
        let gauges: [GateGauge; 3] = [
            (
                "tollgate_upstream_concurrency_limit",
                "The most requests an upstream group's gate lets in flight at once (max_in_flight; with \"auto\", as its controller set it last).",
                Gate::limit,
            ),
            (
                "tollgate_upstream_concurrency_in_flight",
                "Requests holding a slot of an upstream group's gate.",
                Gate::in_flight,
            ),
            (
                "tollgate_upstream_queue",
                "Requests waiting for a slot of an upstream group's gate.",
                Gate::queue_len,
            ),
        ];
        for (name, help, read) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (upstream, gate) in &gates {
                let value = i64::from(read(gate));
                family
                    .encode_family(&[("upstream", *upstream)])?
                    .encode_gauge(&value)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_concurrency_min_rtt_seconds",
            "With max_in_flight = \"auto\": the unloaded latency (p90) the gate's limit is judged against, once measured.",
            None,
            MetricType::Gauge,
        )?;
        for (upstream, gate) in &gates {
            let min_rtt = gate.auto_limit().and_then(|auto| auto.shown().min_rtt);
            if let Some(min_rtt) = min_rtt {
                family
                    .encode_family(&[("upstream", *upstream)])?
                    .encode_gauge(&min_rtt.as_secs_f64())?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "tollgate_upstream_shed",
            "Requests an upstream group's gate answered 503, by reason (queue_full, timeout, priority).",
            None,
            MetricType::Counter,
        )?;
        for (upstream, gate) in &gates {
            for reason in Shed::ALL {
                let labels = [("upstream", *upstream), ("reason", reason.label())];
                counter(&mut family, &labels, gate.shed().get(reason))?;
            }
        }
        Ok(())
    }

    fn zones(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let zones = self.metrics.zones_in_use();
        let mut family = encoder.encode_descriptor(
            "tollgate_limit_decisions",
            "What a zone decided for a request.",
            None,
            MetricType::Counter,
        )?;
        for (zone, stats) in &zones {
            for outcome in Answer::ALL {
                let labels = [("zone", zone.as_str()), ("outcome", outcome.label())];
                counter(&mut family, &labels, stats.decided(outcome))?;
            }
        }
        let stats: Vec<_> = self
            .snapshot
            .zones
            .iter()
            .map(|zone| (&*zone.name, zone.stats()))
            .collect();
        let gauges = [
            ("tollgate_zone_keys", "Keys a zone holds state for."),
            ("tollgate_zone_bytes", "Memory a zone's state uses."),
            (
                "tollgate_zone_capacity_bytes",
                "A zone's `size`: its memory bound.",
            ),
        ];
        for (i, (name, help)) in gauges.into_iter().enumerate() {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (zone, stats) in &stats {
                let value = [stats.keys, stats.bytes, stats.capacity_bytes][i] as u64;
                family
                    .encode_family(&[("zone", *zone)])?
                    .encode_gauge(&value)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "tollgate_redis_errors",
            "Redis calls of a zone with `backend = \"redis\"` that failed: timeout, connection or reply; each followed `on_error`.",
            None,
            MetricType::Counter,
        )?;
        for zone in self.snapshot.zones.iter().filter(|z| z.redis.is_some()) {
            let Some((_, stats)) = zones.iter().find(|(name, _)| **name == *zone.name) else {
                continue;
            };
            for failure in Failure::ALL {
                let count = stats
                    .redis_errors
                    .iter()
                    .map(|cells| cells[failure as usize].get())
                    .sum();
                let labels = [("zone", &*zone.name), ("kind", failure.label())];
                counter(&mut family, &labels, count)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "tollgate_zone_evictions",
            "Keys evicted from a full zone before their state had drained.",
            None,
            MetricType::Counter,
        )?;
        for (zone, stats) in &stats {
            counter(&mut family, &[("zone", *zone)], stats.evictions)?;
        }
        Ok(())
    }

    /// Zones with `adaptive`: their factor, and its changes by direction.
    fn adaptive_zones(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let zones: Vec<_> = self
            .snapshot
            .zones
            .iter()
            .filter_map(|zone| Some((&*zone.name, &zone.adaptive.as_ref()?.control)))
            .collect();
        let help = "The factor an adaptive zone's rates are scaled by (1 when its upstream is under target).";
        let mut family = encoder.encode_descriptor(
            "tollgate_zone_rate_factor",
            help,
            None,
            MetricType::Gauge,
        )?;
        for (zone, control) in &zones {
            let factor = f64::from(control.factor.permille()) / 1000.0;
            family
                .encode_family(&[("zone", *zone)])?
                .encode_gauge(&factor)?;
        }
        let help = "1 while an adaptive zone's upstream has spare capacity and its `elastic` limits are in force.";
        let mut family =
            encoder.encode_descriptor("tollgate_zone_elastic", help, None, MetricType::Gauge)?;
        for (zone, control) in &zones {
            let spare = i64::from(control.factor.read().spare());
            family
                .encode_family(&[("zone", *zone)])?
                .encode_gauge(&spare)?;
        }
        let help = "Changes of an adaptive zone's rate factor, down (cuts) and up (raises).";
        let mut family = encoder.encode_descriptor(
            "tollgate_zone_rate_factor_changes",
            help,
            None,
            MetricType::Counter,
        )?;
        for (zone, control) in &zones {
            let down = control.cuts.load(std::sync::atomic::Ordering::Relaxed);
            let up = control.raises.load(std::sync::atomic::Ordering::Relaxed);
            counter(&mut family, &[("zone", zone), ("direction", "down")], down)?;
            counter(&mut family, &[("zone", zone), ("direction", "up")], up)?;
        }
        Ok(())
    }

    /// The penalty box: bans in force (for a Redis zone, those this instance holds),
    /// bans imposed by this instance, and bans and strikes refused for want of room, per
    /// zone. The counter is `tollgate_bans_imposed_total`:
    /// OpenMetrics names a counter's family without `_total`, so `tollgate_bans_total`
    /// would be a second family `tollgate_bans` beside the gauge.
    fn bans(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let now = std::time::Instant::now();
        let zones = &self.snapshot.zones;
        let help = "Bans in force in a zone (a Redis zone: those this instance holds).";
        let mut family =
            encoder.encode_descriptor("tollgate_bans", help, None, MetricType::Gauge)?;
        for zone in zones {
            let value = zone.bans.in_force(now) as u64;
            family
                .encode_family(&[("zone", &*zone.name)])?
                .encode_gauge(&value)?;
        }
        let help = "Bans imposed in a zone by this instance.";
        let mut family =
            encoder.encode_descriptor("tollgate_bans_imposed", help, None, MetricType::Counter)?;
        for zone in zones {
            counter(&mut family, &[("zone", &*zone.name)], zone.bans.imposed())?;
        }
        let help = "Bans earned in a zone and refused: its ban table was full of bans in force.";
        let mut family =
            encoder.encode_descriptor("tollgate_bans_refused", help, None, MetricType::Counter)?;
        for zone in zones {
            counter(&mut family, &[("zone", &*zone.name)], zone.bans.refused())?;
        }
        let help = "First strikes in a zone not counted: its strike table was full.";
        let mut family = encoder.encode_descriptor(
            "tollgate_strikes_refused",
            help,
            None,
            MetricType::Counter,
        )?;
        for zone in zones {
            counter(
                &mut family,
                &[("zone", &*zone.name)],
                zone.bans.strikes_refused(),
            )?;
        }
        Ok(())
    }

    fn certificates(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let mut family = encoder.encode_descriptor(
            "tollgate_certificate_expiry_timestamp_seconds",
            "When each certificate served stops being valid (static or by ACME), by name.",
            None,
            MetricType::Gauge,
        )?;
        for (name, not_after) in &self.certificates {
            family
                .encode_family(&[("name", name.as_str())])?
                .encode_gauge(not_after)?;
        }
        let Some((issued, failed)) = self.acme_orders else {
            return Ok(());
        };
        let mut family = encoder.encode_descriptor(
            "tollgate_acme_orders",
            "ACME orders that ended with a certificate (issued) and that failed.",
            None,
            MetricType::Counter,
        )?;
        counter(&mut family, &[("result", "issued")], issued)?;
        counter(&mut family, &[("result", "failed")], failed)
    }

    fn gateway(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let mut family = encoder.encode_descriptor(
            "tollgate_reloads",
            "Reloads that took effect (ok) and that changed nothing (failed).",
            None,
            MetricType::Counter,
        )?;
        counter(&mut family, &[("result", "ok")], self.reloads_ok)?;
        counter(&mut family, &[("result", "failed")], self.reloads_failed)?;
        let mut family = encoder.encode_descriptor(
            "tollgate_config_generation",
            "The configuration generation in force: 1 at start, one more per reload.",
            None,
            MetricType::Gauge,
        )?;
        family.encode_gauge(&self.snapshot.generation)?;
        let mut family = encoder.encode_descriptor(
            "tollgate_open_files",
            "Files held open by answers under way (root and alias locations); past a quarter of the connections' share of descriptors, a file answer is refused 503.",
            None,
            MetricType::Gauge,
        )?;
        family.encode_gauge(&(self.snapshot.pipeline.open_files.count() as u64))?;

        let connections = self.metrics.connections_in_use();
        let mut family = encoder.encode_descriptor(
            "tollgate_connections",
            "Open client connections, by listening address.",
            None,
            MetricType::Gauge,
        )?;
        for (listener, cells) in &connections {
            let open: i64 = cells.iter().map(|cell| cell.get()).sum();
            let open = open.max(0);
            family
                .encode_family(&[("listener", listener.as_str())])?
                .encode_gauge(&open)?;
        }
        Ok(())
    }
}

/// The key sets fetched for `auth.jwt` (`jwks_url`).
fn jwks(encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let reports = crate::jwks::reports();
    if reports.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(
        "tollgate_jwks_fetches",
        "Fetches of each jwks_url that brought a usable key set (ok) and that did not (failed; the last good set stays).",
        None,
        MetricType::Counter,
    )?;
    for report in &reports {
        counter(&mut family, &[("url", report.url.as_str()), ("result", "ok")], report.fetched)?;
        counter(&mut family, &[("url", report.url.as_str()), ("result", "failed")], report.failed)?;
    }
    let mut family = encoder.encode_descriptor(
        "tollgate_jwks_keys",
        "Keys in the set in force for each jwks_url (0 before a first good fetch: its locations answer 503).",
        None,
        MetricType::Gauge,
    )?;
    for report in &reports {
        family
            .encode_family(&[("url", report.url.as_str())])?
            .encode_gauge(&(report.keys as u64))?;
    }
    Ok(())
}

fn counter<const N: usize>(
    family: &mut MetricEncoder<'_>,
    labels: &Labels<'_, N>,
    value: u64,
) -> fmt::Result
where
    for<'a> Labels<'a, N>: EncodeLabelSet,
{
    family
        .encode_family(labels)?
        .encode_counter::<NoLabelSet, u64, f64>(&value, None::<&Exemplar<NoLabelSet, f64>>)
}

fn histogram(mut encoder: MetricEncoder<'_>, sum: &HistogramSum) -> fmt::Result {
    encoder.encode_histogram::<NoLabelSet>(sum.sum_seconds(), sum.count(), &sum.buckets(), None)
}
