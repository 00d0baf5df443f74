//! When to renew a certificate and when to try again after a failure: arithmetic over
//! times the caller reads and a random fraction it draws, so tests choose both.
//!
//! Times are seconds since the Unix epoch, as certificates state them.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// When to renew a certificate valid from `not_before` to `not_after`: once a third of
/// its lifetime is left, spread over the next thirtieth of it by `random` (in `0..1`)
/// so that instances and names sharing a CA do not all renew in the same second.
pub(super) fn renew_at(not_before: i64, not_after: i64, random: f64) -> i64 {
    let lifetime = not_after.saturating_sub(not_before).max(0);
    let start = not_after - lifetime / 3;
    start + spread(lifetime / 30, random)
}

/// When to renew within a window the CA suggests (ACME Renewal Information, RFC 9773):
/// a random point in it, as the RFC asks (a point already past means at once).
pub(super) fn renew_in_window(start: i64, end: i64, random: f64) -> i64 {
    start + spread(end.saturating_sub(start).max(0), random)
}

/// How long to wait before the next try after `failures` failed ones in a row (at
/// least one): `min`, doubled per failure up to `max`, plus up to a quarter more by
/// `random`; never less than the CA asked with `Retry-After`.
pub(super) fn retry_in(
    failures: u32,
    min: Duration,
    max: Duration,
    ca_asked: Option<Duration>,
    random: f64,
) -> Duration {
    let doublings = failures.saturating_sub(1).min(31);
    let base = min.saturating_mul(1 << doublings).min(max);
    let jitter = base.mul_f64(random.clamp(0.0, 1.0) / 4.0);
    let wait = (base + jitter).min(max.max(min));
    wait.max(ca_asked.unwrap_or(Duration::ZERO))
}

/// Now, in seconds since the Unix epoch: the ACME module's one clock read.
pub(super) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn spread(width: i64, random: f64) -> i64 {
    (width as f64 * random.clamp(0.0, 1.0)) as i64
}

/// A fraction in `0..1` for spreading times: not for secrets, only so that instances
/// differ (std's hasher keys are random per process and per call).
pub(super) fn random_fraction() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u8(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3600;

    #[test]
    fn a_90_day_certificate_renews_with_30_days_left_spread_over_3_days() {
        let (from, to) = (1_000 * DAY, 1_090 * DAY);
        assert_eq!(renew_at(from, to, 0.0), to - 30 * DAY);
        assert_eq!(renew_at(from, to, 0.999_999), to - 27 * DAY - 1);
        let middle = renew_at(from, to, 0.5);
        assert!(middle > to - 30 * DAY && middle < to - 27 * DAY);
    }

    #[test]
    fn a_short_lived_certificate_renews_at_a_third_left() {
        assert_eq!(renew_at(100, 160, 0.0), 140);
        assert_eq!(renew_at(100, 160, 0.5), 141);
        // An inverted or empty validity renews at its end (at once, in practice).
        assert_eq!(renew_at(200, 100, 0.5), 100);
    }

    #[test]
    fn a_suggested_window_is_used_at_a_random_point() {
        assert_eq!(renew_in_window(1_000, 2_000, 0.0), 1_000);
        assert_eq!(renew_in_window(1_000, 2_000, 0.5), 1_500);
        assert_eq!(renew_in_window(1_000, 2_000, 0.999_9), 1_999);
        assert_eq!(renew_in_window(2_000, 1_000, 0.5), 2_000);
    }

    #[test]
    fn retries_double_up_to_the_cap() {
        let (min, max) = (Duration::from_secs(60), Duration::from_secs(3600));
        let wait = |failures| retry_in(failures, min, max, None, 0.0).as_secs();
        assert_eq!(
            [wait(1), wait(2), wait(3), wait(6), wait(7)],
            [60, 120, 240, 1920, 3600]
        );
        assert_eq!(wait(1_000), 3600);
        let jittered = retry_in(1, min, max, None, 0.999).as_secs();
        assert!((60..75).contains(&jittered), "{jittered}");
        // The cap holds with the jitter too.
        assert_eq!(retry_in(20, min, max, None, 0.999), max);
    }

    #[test]
    fn retry_after_from_the_ca_is_a_floor() {
        let (min, max) = (Duration::from_secs(60), Duration::from_secs(3600));
        let asked = Some(Duration::from_secs(7200));
        assert_eq!(retry_in(1, min, max, asked, 0.0), Duration::from_secs(7200));
        let small = Some(Duration::from_secs(5));
        assert_eq!(retry_in(1, min, max, small, 0.0), min);
    }

    #[test]
    fn random_fractions_are_in_range_and_vary() {
        let draws: Vec<f64> = (0..64).map(|_| random_fraction()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        assert!(draws.windows(2).any(|w| w[0] != w[1]));
    }
}
