//! What becomes of a new QUIC connection before its handshake: counted in windows of a
//! second against `[quic] retry_above` and `refuse_above`, and per client address
//! against `per_address` (with `per_address_burst`) in two zones of nginx's leaky bucket.
//!
//! A UDP source address can be forged, so an address is charged in one of two zones:
//! the unproven one (its Initials came without a Retry's token) and the proven one (it
//! echoed a token, so it receives at that address). Past its budget, an unproven address
//! gets a Retry, never a refusal: a forger spending a victim's unproven budget only costs
//! the victim a round trip, and cannot touch its proven budget. A proven address past its
//! own is refused. Each zone is bounded by [`ZONE_SIZE`]; a full one forgets its least
//! recently used addresses, and a flood of forged ones churns only the unproven zone.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use crate::config::PerAddress;
use crate::limit::key::Template;
use crate::limit::zone::{Spec, Zone};
use crate::limit::{Algorithm, Params, Period, Rate, NODELAY};
use crate::snapshot::QuicAdmission;
use crate::vars::{Piece, Var, VarText};

const ONE_PER_SECOND: Rate = Rate {
    count: std::num::NonZeroU64::MIN,
    period: Period::Second,
};

/// The bytes each per-address zone may hold: some 70,000 addresses.
const ZONE_SIZE: usize = 4 * 1024 * 1024;

/// What becomes of a new connection, before its handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admit {
    Accept,
    /// A Retry: the client proves its address by echoing a token.
    Retry,
    /// A refusal (a CONNECTION_CLOSE, sent without any state kept).
    Refuse,
    /// No answer at all.
    Drop,
}

/// A listener's new connections, counted against the admission limits.
#[derive(Default)]
pub(super) struct Admission {
    /// When the window began.
    window: Option<Instant>,
    /// New connections seen in it (a retried client counts again when it comes back).
    seen: u32,
    /// Made when `per_address` is first set; kept across reloads (a rate changed by one
    /// applies to each address's state as it is).
    addresses: Option<Addresses>,
}

/// The per-address zones: addresses not proven, and proven.
struct Addresses {
    unproven: Zone,
    proven: Zone,
}

impl Admission {
    /// The next new connection at `now` from `peer`, `validated` when it came back with a
    /// Retry's token: past `refuse_above` refused (past twice that, dropped); past its
    /// address's budget retried, or refused when validated; past `retry_above` retried
    /// unless validated.
    pub(super) fn admit(&mut self, now: Instant, peer: SocketAddr, validated: bool, limits: &QuicAdmission) -> Admit {
        if self.window.is_none_or(|began| now.duration_since(began) >= Duration::from_secs(1)) {
            self.window = Some(now);
            self.seen = 0;
        }
        self.seen = self.seen.saturating_add(1);
        let seen = f64::from(self.seen);
        if let Some(refuse) = limits.refuse_above {
            if seen > 2.0 * refuse {
                return Admit::Drop;
            }
            if seen > refuse {
                return Admit::Refuse;
            }
        }
        if let Some(per_address) = &limits.per_address {
            let addresses = self.addresses.get_or_insert_with(|| Addresses::new(now));
            if !addresses.admit(now, peer.ip(), validated, per_address) {
                return if validated { Admit::Refuse } else { Admit::Retry };
            }
        }
        match limits.retry_above {
            Some(retry) if seen > retry && !validated => Admit::Retry,
            _ => Admit::Accept,
        }
    }
}

impl Addresses {
    fn new(now: Instant) -> Addresses {
        let zone = |name: &str| {
            let spec = Spec {
                name: name.to_owned(),
                // The key is the address's bytes (see `address_key`); the text names it.
                template: Template::new(VarText::from_pieces(vec![Piece::Var(Var::BinaryRemoteAddr)]), 32, 64),
                algorithm: Algorithm::LeakyBucket,
                // Each decision passes the rate in force (`Params`); this one is unread.
                rate: ONE_PER_SECOND,
                plan_rates: Vec::new(),
                max: 0,
                size: ZONE_SIZE,
                redis: None,
                adaptive: None,
                soft: None,
                plan_from: None,
            };
            Zone::new(spec, now, SystemTime::now())
        };
        Addresses {
            unproven: zone("quic unproven addresses"),
            proven: zone("quic proven addresses"),
        }
    }

    /// Whether `ip` may open one more connection now, charging it if so.
    fn admit(&self, now: Instant, ip: IpAddr, validated: bool, limit: &PerAddress) -> bool {
        let zone = if validated { &self.proven } else { &self.unproven };
        let params = Params {
            burst: limit.burst,
            delay: NODELAY,
            ..Params::new(limit.rate)
        };
        let (key, len) = address_key(ip);
        zone.decide_alone(&key[..len], now, &params).admitted()
    }
}

/// The key of a client address: an IPv4 address's 4 bytes (an IPv4-mapped IPv6 address
/// is its IPv4 one), an IPv6 address's first 8 (its /64: a client given a /64 has all
/// its addresses).
fn address_key(ip: IpAddr) -> ([u8; 8], usize) {
    let mut key = [0; 8];
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            key[..4].copy_from_slice(&v4.octets());
            (key, 4)
        }
        IpAddr::V6(v6) => {
            key.copy_from_slice(&v6.octets()[..8]);
            (key, 8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn new_connections_past_each_limit_get_a_retry_a_refusal_then_silence() {
        let limits = QuicAdmission {
            retry_above: Some(2.0),
            refuse_above: Some(4.0),
            per_address: None,
        };
        let mut admission = Admission::default();
        let start = Instant::now();
        let from = peer("192.0.2.1:4433");
        let seen: Vec<Admit> = (0..10).map(|_| admission.admit(start, from, false, &limits)).collect();
        use Admit::*;
        assert_eq!(seen, [Accept, Accept, Retry, Retry, Refuse, Refuse, Refuse, Refuse, Drop, Drop]);
        // A new second starts over; a validated client passes the Retry.
        let later = start + Duration::from_secs(1);
        assert_eq!(admission.admit(later, from, false, &limits), Accept);
        assert_eq!(admission.admit(later, from, false, &limits), Accept);
        assert_eq!(admission.admit(later, from, true, &limits), Accept);
        assert_eq!(admission.admit(later, from, false, &limits), Retry);
        assert_eq!(admission.admit(later, from, true, &limits), Refuse);
    }

    #[test]
    fn without_limits_every_connection_is_accepted() {
        let mut admission = Admission::default();
        let now = Instant::now();
        let from = peer("[2001:db8::1]:4433");
        assert!((0..10_000).all(|_| admission.admit(now, from, false, &QuicAdmission::default()) == Admit::Accept));
    }

    #[test]
    fn an_address_past_its_budget_is_retried_until_proven_then_refused_past_its_proven_one() {
        let limits = QuicAdmission {
            per_address: Some(PerAddress {
                rate: Rate::new(1, Period::Second).unwrap(),
                burst: 1,
            }),
            ..QuicAdmission::default()
        };
        let mut admission = Admission::default();
        let now = Instant::now();
        let victim = peer("192.0.2.7:5000");
        use Admit::*;
        // A forger sending from the victim's address spends its unproven budget (rate 1,
        // burst 1: two at once) and gets Retries, which it cannot answer.
        let forged: Vec<Admit> = (0..4).map(|_| admission.admit(now, victim, false, &limits)).collect();
        assert_eq!(forged, [Accept, Accept, Retry, Retry]);
        // The victim itself echoes the token: its proven budget is whole.
        assert_eq!(admission.admit(now, peer("192.0.2.7:6000"), true, &limits), Accept);
        assert_eq!(admission.admit(now, victim, true, &limits), Accept);
        assert_eq!(admission.admit(now, victim, true, &limits), Refuse);
        // Another address has budgets of its own; the budget refills at the rate.
        assert_eq!(admission.admit(now, peer("192.0.2.8:5000"), false, &limits), Accept);
        let later = now + Duration::from_secs(1);
        assert_eq!(admission.admit(later, victim, true, &limits), Accept);
        assert_eq!(admission.admit(later, victim, false, &limits), Accept);
    }

    #[test]
    fn an_ipv6_client_has_one_budget_for_its_slash_64_and_a_mapped_ipv4_its_ipv4_one() {
        let v6 = |text: &str| address_key(text.parse().unwrap());
        assert_eq!(v6("2001:db8:1:2::1"), v6("2001:db8:1:2:ffff::9"));
        assert_ne!(v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1"));
        assert_eq!(v6("::ffff:192.0.2.1"), v6("192.0.2.1"));
        assert_eq!(v6("192.0.2.1").1, 4);
    }
}
