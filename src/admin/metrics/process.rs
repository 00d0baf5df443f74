//! The `process_*` families under the names of Prometheus's standard process collector
//! (client_golang's, client_python's), so that dashboards made for any exporter read
//! them: memory, CPU time, descriptors and start time, read from `/proc/self` at scrape
//! time. Where `/proc` is missing (not Linux) or unreadable, the families are left out
//! rather than the scrape failing.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

/// The figures of one scrape, each `None` when it could not be read.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Process {
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
    /// Unix time, seconds.
    pub start_time: Option<f64>,
    pub open_fds: Option<u64>,
    /// The soft `RLIMIT_NOFILE`: what `open_fds` may reach.
    pub max_fds: Option<u64>,
}

impl Process {
    /// This process's figures now.
    pub(super) fn read() -> Process {
        let page = rustix::param::page_size() as u64;
        let ticks = rustix::param::clock_ticks_per_second();
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let stat = stat.as_deref().and_then(Stat::parse);
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| boot_time(&text));
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|dir| dir.count() as u64);
        let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let ticks = ticks.max(1) as f64;
        Process {
            resident_bytes: stat.map(|s| s.rss_pages * page),
            virtual_bytes: stat.map(|s| s.vsize),
            cpu_seconds: stat.map(|s| (s.utime + s.stime) as f64 / ticks),
            start_time: stat
                .zip(boot)
                .map(|(s, boot)| boot as f64 + s.start_ticks as f64 / ticks),
            // Reading the directory opened one more, which the count includes.
            open_fds: open_fds.map(|n| n.saturating_sub(1)),
            max_fds,
        }
    }

    /// Writes the families it has figures for.
    pub(super) fn encode(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                self.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                self.virtual_bytes.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds.",
                self.start_time,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                self.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                self.max_fds.map(|v| v as f64),
            ),
        ];
        if let Some(cpu) = self.cpu_seconds {
            let help = "Total user and system CPU time spent in seconds.";
            let mut family = encoder.encode_descriptor(
                "process_cpu_seconds",
                help,
                None,
                MetricType::Counter,
            )?;
            family
                .encode_counter::<prometheus_client::encoding::NoLabelSet, f64, f64>(&cpu, None)?;
        }
        for (name, help, value) in gauges {
            let Some(value) = value else { continue };
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            family.encode_gauge(&value)?;
        }
        Ok(())
    }
}

/// What the scrape needs of `/proc/self/stat` (proc(5)).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stat {
    utime: u64,
    stime: u64,
    start_ticks: u64,
    vsize: u64,
    rss_pages: u64,
}

impl Stat {
    /// The line's fields after the command name, which is in parentheses and may hold
    /// spaces and parentheses itself: the last `)` ends it.
    fn parse(line: &str) -> Option<Stat> {
        let (_, after) = line.rsplit_once(')')?;
        // Field 3 (state) is the first after the name: field n is at index n - 3.
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Stat {
            utime: field(14)?,
            stime: field(15)?,
            start_ticks: field(22)?,
            vsize: field(23)?,
            rss_pages: field(24)?,
        })
    }
}

/// `btime` of `/proc/stat`: when the system booted, Unix time in seconds.
fn boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line's shape, with a name that holds `) (` to trip a naive split.
    const STAT: &str = "4242 (tollgate) (x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 \
                        250 50 0 0 20 0 3 0 123456 104857600 2560 18446744073709551615 \
                        1 1 0 0 0 0 0 4096 17472 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn stat_fields_are_counted_from_after_the_last_parenthesis() {
        let stat = Stat::parse(STAT).expect("parses");
        assert_eq!(
            stat,
            Stat {
                utime: 250,
                stime: 50,
                start_ticks: 123456,
                vsize: 104857600,
                rss_pages: 2560,
            }
        );
        assert_eq!(Stat::parse("4242 (cut short) S 1 2"), None);
    }

    #[test]
    fn boot_time_is_the_btime_line() {
        let text = "cpu  1 2 3\nintr 5\nbtime 1764370000\nprocesses 9\n";
        assert_eq!(boot_time(text), Some(1_764_370_000));
        assert_eq!(boot_time("cpu 1\n"), None);
    }

    #[test]
    fn only_the_figures_read_are_written() {
        let mut registry = prometheus_client::registry::Registry::default();
        let process = Process {
            resident_bytes: Some(4096),
            cpu_seconds: Some(1.5),
            ..Process::default()
        };
        registry.register_collector(Box::new(Only(process)));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(
            out.contains("\nprocess_resident_memory_bytes 4096"),
            "{out}"
        );
        assert!(out.contains("\nprocess_cpu_seconds_total 1.5"), "{out}");
        assert!(!out.contains("process_open_fds"), "{out}");
        assert!(!out.contains("process_virtual_memory_bytes"), "{out}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_every_figure_on_linux() {
        let process = Process::read();
        assert!(process.resident_bytes.unwrap() > 0);
        assert!(process.virtual_bytes.unwrap() >= process.resident_bytes.unwrap());
        assert!(process.cpu_seconds.unwrap() >= 0.0);
        assert!(process.open_fds.unwrap() >= 3);
        assert!(process.max_fds.unwrap() >= process.open_fds.unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = process.start_time.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} {now}"
        );
    }

    #[derive(Debug)]
    struct Only(Process);

    impl prometheus_client::collector::Collector for Only {
        fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
            self.0.encode(&mut encoder)
        }
    }
}
