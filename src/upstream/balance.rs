//! Choosing an upstream server: smooth weighted round robin, least connections, ip_hash — as nginx.
//!
//! Lock-free: nginx's smooth weighted round robin is a fixed cycle for fixed weights, so it is
//! computed once and walked with one atomic cursor. Down or already-tried servers are passed in
//! by the caller (`excluded`), so this file holds no health state of its own.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::access::canonical;
use crate::config::Balance;

/// Longest precomputed round-robin cycle. Larger weight sums are scaled down proportionally
/// (each weight kept ≥ 1), bounding both memory and the build cost (cycle length × servers).
const MAX_CYCLE: u64 = 4096;

/// After this many cursor steps landing on excluded servers, `pick` scans the cycle instead.
const MAX_CURSOR_STEPS: usize = 8;

/// nginx's ip_hash gives up rehashing after 20 tries and falls back to round robin.
const IP_HASH_TRIES: usize = 20;

/// One upstream group's balancer. `Send + Sync`; share it across workers.
#[derive(Debug)]
pub(crate) struct Balancer {
    policy: Balance,
    /// The configured weights (≥ 1), for least_conn's load comparison.
    weights: Box<[u32]>,
    /// The smooth weighted round-robin cycle of server indices.
    cycle: Box<[u32]>,
    /// `cumulative[i]` = sum of the (scaled) weights of servers `0..=i`, for ip_hash.
    cumulative: Box<[u32]>,
    cursor: AtomicUsize,
}

impl Balancer {
    /// A balancer over `weights.len()` servers. Weights of 0 are taken as 1; an empty list gives
    /// a balancer whose `pick` is always `None` (the config layer forbids both).
    pub(crate) fn new(policy: Balance, weights: &[u32]) -> Balancer {
        let weights: Box<[u32]> = weights.iter().map(|&w| w.max(1)).collect();
        let scaled = scale(&weights);
        let cumulative = scaled
            .iter()
            .scan(0u32, |sum, &w| {
                *sum = sum.saturating_add(w);
                Some(*sum)
            })
            .collect();
        Balancer {
            policy,
            cycle: smooth_cycle(&scaled),
            cumulative,
            weights,
            cursor: AtomicUsize::new(0),
        }
    }

    /// The server for this try, or None if every server is excluded. `excluded(i)` is true for a
    /// server that is down or was already tried for this request; `in_flight(i)` is its current
    /// number of active requests (for LeastConn).
    pub(crate) fn pick(
        &self,
        client: IpAddr,
        excluded: &dyn Fn(usize) -> bool,
        in_flight: &dyn Fn(usize) -> u32,
    ) -> Option<usize> {
        if self.cycle.is_empty() {
            return None;
        }
        match self.policy {
            Balance::RoundRobin => self.round_robin(excluded),
            Balance::LeastConn => self.least_conn(excluded, in_flight),
            Balance::IpHash => self.ip_hash(client, excluded),
        }
    }

    /// Each pick takes the next cycle slot; a slot whose server is excluded costs another cursor
    /// step rather than a scan, so the remaining servers keep their relative shares (a scan would
    /// hand every skipped slot to whichever server follows it).
    fn round_robin(&self, excluded: &dyn Fn(usize) -> bool) -> Option<usize> {
        let len = self.cycle.len();
        let mut slot = 0;
        for _ in 0..MAX_CURSOR_STEPS.min(len) {
            slot = self.cursor.fetch_add(1, Ordering::Relaxed) % len;
            let server = self.cycle[slot] as usize;
            if !excluded(server) {
                return Some(server);
            }
        }
        (1..len)
            .map(|k| self.cycle[(slot + k) % len] as usize)
            .find(|&server| !excluded(server))
    }

    /// The least `in_flight / weight`; among equals, the first met walking the cycle from the
    /// cursor, so equal load spreads by weight as nginx's least_conn does.
    fn least_conn(
        &self,
        excluded: &dyn Fn(usize) -> bool,
        in_flight: &dyn Fn(usize) -> u32,
    ) -> Option<usize> {
        // (server, in_flight) of the best so far, and how many servers tie with it.
        let mut best: Option<(usize, u32)> = None;
        let mut ties = 0;
        for (i, &w) in self.weights.iter().enumerate() {
            if excluded(i) {
                continue;
            }
            let load = in_flight(i);
            match best {
                Some((b, b_load)) => match lighter(load, w, b_load, self.weights[b]) {
                    std::cmp::Ordering::Less => (best, ties) = (Some((i, load)), 1),
                    std::cmp::Ordering::Equal => ties += 1,
                    std::cmp::Ordering::Greater => {}
                },
                None => (best, ties) = (Some((i, load)), 1),
            }
        }
        let (b, b_load) = best?;
        if ties == 1 {
            return Some(b);
        }
        let len = self.cycle.len();
        let start = self.cursor.fetch_add(1, Ordering::Relaxed);
        (0..len)
            .map(|k| self.cycle[start.wrapping_add(k) % len] as usize)
            .find(|&i| {
                !excluded(i)
                    && lighter(in_flight(i), self.weights[i], b_load, self.weights[b])
                        != std::cmp::Ordering::Greater
            })
            // Loads may move between the two passes; the first pass's answer still stands.
            .or(Some(b))
    }

    /// nginx's ip_hash: the hash of the client's /24 (IPv4) or whole IPv6 address picks a point
    /// in the weighted layout; an excluded server rehashes, up to 20 times, then round robin.
    fn ip_hash(&self, client: IpAddr, excluded: &dyn Fn(usize) -> bool) -> Option<usize> {
        let octets_v4;
        let octets_v6;
        let key: &[u8] = match canonical(client) {
            IpAddr::V4(v4) => {
                octets_v4 = v4.octets();
                &octets_v4[..3]
            }
            IpAddr::V6(v6) => {
                octets_v6 = v6.octets();
                &octets_v6[..]
            }
        };
        let total = self.cumulative.last().copied().unwrap_or(1).max(1);
        let mut hash: u32 = 89;
        for _ in 0..IP_HASH_TRIES {
            for &b in key {
                hash = (hash * 113 + u32::from(b)) % 6271;
            }
            let point = hash % total;
            let server = self.cumulative.partition_point(|&end| end <= point);
            if server < self.weights.len() && !excluded(server) {
                return Some(server);
            }
        }
        self.round_robin(excluded)
    }
}

/// Compares `a_load / a_weight` with `b_load / b_weight` without division.
#[inline]
fn lighter(a_load: u32, a_weight: u32, b_load: u32, b_weight: u32) -> std::cmp::Ordering {
    (u64::from(a_load) * u64::from(b_weight)).cmp(&(u64::from(b_load) * u64::from(a_weight)))
}

/// Weights scaled so their sum is at most about `MAX_CYCLE`, each kept ≥ 1.
fn scale(weights: &[u32]) -> Vec<u32> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum <= MAX_CYCLE {
        return weights.to_vec();
    }
    weights
        .iter()
        .map(|&w| {
            let s = u64::from(w) * MAX_CYCLE / sum;
            u32::try_from(s).unwrap_or(u32::MAX).max(1)
        })
        .collect()
}

/// nginx's smooth weighted round robin (ngx_http_upstream_get_peer), run for one full cycle:
/// every server's `current` grows by its weight, the largest (first on ties) is chosen and pays
/// back the total. After `sum(weights)` steps every `current` is back to 0, so the cycle repeats.
fn smooth_cycle(weights: &[u32]) -> Box<[u32]> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut cycle = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        let mut best = 0;
        for (i, &w) in weights.iter().enumerate() {
            current[i] += i64::from(w);
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        cycle.push(u32::try_from(best).unwrap_or(u32::MAX));
    }
    cycle.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

    fn none(_: usize) -> bool {
        false
    }
    fn idle(_: usize) -> u32 {
        0
    }

    fn picks(b: &Balancer, n: usize, excluded: &dyn Fn(usize) -> bool) -> Vec<usize> {
        (0..n)
            .map(|_| b.pick(CLIENT, excluded, &idle).expect("a server"))
            .collect()
    }

    fn counts(picks: &[usize], servers: usize) -> Vec<usize> {
        let mut c = vec![0; servers];
        for &p in picks {
            c[p] += 1;
        }
        c
    }

    #[test]
    fn round_robin_is_smooth_like_nginx_for_5_1_1() {
        let b = Balancer::new(Balance::RoundRobin, &[5, 1, 1]);
        assert_eq!(
            picks(&b, 14, &none),
            [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]
        );
    }

    #[test]
    fn round_robin_distributes_by_weight() {
        let b = Balancer::new(Balance::RoundRobin, &[3, 2, 1, 1]);
        assert_eq!(counts(&picks(&b, 7000, &none), 4), [3000, 2000, 1000, 1000]);
        let b = Balancer::new(Balance::RoundRobin, &[1, 1]);
        assert_eq!(picks(&b, 4, &none), [0, 1, 0, 1]);
    }

    #[test]
    fn huge_weights_are_scaled_keeping_proportions_and_minimum_one() {
        let b = Balancer::new(Balance::RoundRobin, &[1_000_000, 3_000_000, 1]);
        assert!(b.cycle.len() as u64 <= MAX_CYCLE + 3);
        let cycle: Vec<usize> = b.cycle.iter().map(|&i| i as usize).collect();
        let c = counts(&cycle, 3);
        assert_eq!(c[2], 1);
        assert!((c[1] as f64 / c[0] as f64 - 3.0).abs() < 0.01, "{c:?}");
    }

    #[test]
    fn round_robin_skips_excluded_servers_keeping_the_others_shares() {
        let b = Balancer::new(Balance::RoundRobin, &[5, 1, 1]);
        let c = counts(&picks(&b, 1000, &|i| i == 0), 3);
        assert_eq!(c[0], 0);
        assert!(c[1].abs_diff(c[2]) <= 2, "{c:?}");
    }

    #[test]
    fn every_policy_returns_none_when_all_are_excluded() {
        for policy in [Balance::RoundRobin, Balance::LeastConn, Balance::IpHash] {
            let b = Balancer::new(policy, &[1, 2, 3]);
            assert_eq!(b.pick(CLIENT, &|_| true, &idle), None, "{policy:?}");
        }
        let empty = Balancer::new(Balance::RoundRobin, &[]);
        assert_eq!(empty.pick(CLIENT, &none, &idle), None);
    }

    #[test]
    fn only_remaining_server_is_found_even_with_a_heavy_excluded_one() {
        let b = Balancer::new(Balance::RoundRobin, &[4000, 1]);
        for _ in 0..10 {
            assert_eq!(b.pick(CLIENT, &|i| i == 0, &idle), Some(1));
        }
    }

    #[test]
    fn least_conn_picks_the_idle_server() {
        let b = Balancer::new(Balance::LeastConn, &[1, 1, 1]);
        let load = |i: usize| [5, 0, 3][i];
        assert_eq!(b.pick(CLIENT, &none, &load), Some(1));
        assert_eq!(b.pick(CLIENT, &|i| i == 1, &load), Some(2));
    }

    #[test]
    fn least_conn_respects_weights() {
        let b = Balancer::new(Balance::LeastConn, &[3, 1]);
        // 2/3 < 1/1: the heavier server is less loaded per unit of weight.
        assert_eq!(b.pick(CLIENT, &none, &|i| [2, 1][i]), Some(0));
        assert_eq!(b.pick(CLIENT, &none, &|i| [4, 1][i]), Some(1));
    }

    #[test]
    fn least_conn_spreads_equal_load_by_weight() {
        let b = Balancer::new(Balance::LeastConn, &[2, 1]);
        let c = counts(
            &(0..300)
                .filter_map(|_| b.pick(CLIENT, &none, &idle))
                .collect::<Vec<_>>(),
            2,
        );
        assert_eq!(c, [200, 100]);
        let b = Balancer::new(Balance::LeastConn, &[1, 1, 1]);
        let got: Vec<_> = (0..3)
            .filter_map(|_| b.pick(CLIENT, &|i| i == 0, &idle))
            .collect();
        assert!(got.contains(&1) && got.contains(&2), "{got:?}");
    }

    #[test]
    fn ip_hash_matches_nginx_arithmetic() {
        // 89 → 3787 → 1505 → 751 over the bytes 1, 2, 3; 751 % 3 = 1.
        let b = Balancer::new(Balance::IpHash, &[1, 1, 1]);
        assert_eq!(
            b.pick("1.2.3.4".parse().expect("ip"), &none, &idle),
            Some(1)
        );
        // 751 % 7 = 2, which falls in server 0's range 0..5.
        let b = Balancer::new(Balance::IpHash, &[5, 1, 1]);
        assert_eq!(
            b.pick("1.2.3.4".parse().expect("ip"), &none, &idle),
            Some(0)
        );
    }

    #[test]
    fn ip_hash_is_stable_per_slash_24_and_spreads_different_ones() {
        let b = Balancer::new(Balance::IpHash, &[1, 1, 1, 1]);
        let pick = |s: &str| b.pick(s.parse().expect("ip"), &none, &idle);
        let first = pick("198.51.100.1");
        for last in [2, 77, 254] {
            assert_eq!(pick(&format!("198.51.100.{last}")), first);
        }
        assert_eq!(pick("::ffff:198.51.100.9"), first);
        let c = counts(
            &(0..=255)
                .filter_map(|x| pick(&format!("10.{x}.{}.1", x / 3)))
                .collect::<Vec<_>>(),
            4,
        );
        assert!(c.iter().all(|&n| n > 30), "{c:?}");
    }

    #[test]
    fn ip_hash_rehashes_deterministically_past_an_excluded_server() {
        let b = Balancer::new(Balance::IpHash, &[1, 1, 1]);
        let client: IpAddr = "1.2.3.4".parse().expect("ip");
        let again = b.pick(client, &|i| i == 1, &idle);
        assert!(again.is_some() && again != Some(1));
        for _ in 0..5 {
            assert_eq!(b.pick(client, &|i| i == 1, &idle), again);
        }
        let v6: IpAddr = "2001:db8::1".parse().expect("ip");
        assert_eq!(b.pick(v6, &none, &idle), b.pick(v6, &none, &idle));
    }
}
