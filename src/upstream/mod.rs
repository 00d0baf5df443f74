//! Upstream groups at run time: their servers, health, balancing and connection pools.
//!
//! The decisions (which server, is it healthy) are pure and live in [`balance`] and
//! [`health`]; [`pool`] holds the I/O: connecting, keep-alive reuse and sending.
//! [`tls`] adds the handshake for groups that speak TLS.
//! The bodies that cross the gateway are `wire::body`'s; [`ResponseBody`] is its response
//! body with [`h1::Body`] as the upstream's.

pub(crate) mod balance;
pub(crate) mod dial;
pub(crate) mod gate;
pub mod h1;
pub(crate) mod health;
pub(crate) mod pool;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Balance;
use crate::log::repeats::Repeats;
use crate::metrics::{FailureKind, Failures, UpstreamStats};
use balance::Balancer;
use health::Health;
use pool::IdlePool;
use tls::{GroupTls, ServerTls};

/// The body of a response sent to the client: tollgate's own answer, or an upstream's
/// body ([`h1::Body`]) streaming through.
pub(crate) type ResponseBody = crate::wire::body::ResponseBody<h1::Body>;

/// One `[upstreams.NAME]` group, shared by every worker.
pub struct Group {
    pub name: String,
    pub servers: Vec<Server>,
    balancer: Balancer,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    /// A group of one server is never marked down (nginx ignores `max_fails` there).
    single: bool,
    /// Response times and requests that found no server (`/metrics`).
    pub stats: Arc<UpstreamStats>,
    /// Error-log lines about the group as a whole (no live server, clients' bodies).
    pub log: Repeats,
    /// `max_in_flight`: the group's concurrency gate, which the next generation takes
    /// over while its keys stay the same.
    pub gate: Option<Arc<gate::Gate>>,
}

/// One upstream server: its address, passive health, load and idle connections.
pub struct Server {
    pub addr: SocketAddr,
    pub health: Health,
    in_flight: AtomicU32,
    pub pool: IdlePool,
    /// Failed attempts by kind (`/metrics`).
    failures: Arc<Failures>,
    /// Error-log lines about this server.
    pub log: Repeats,
    /// How the server is reached over TLS; `None`: plain TCP.
    pub tls: Option<ServerTls>,
}

impl Server {
    /// An attempt on this server failed: passive health counts it (unless the kind is
    /// the request's own trouble, an oversized response head), and so does `/metrics`.
    pub(crate) fn failed(&self, kind: FailureKind) {
        if kind != FailureKind::OversizedHead {
            self.health.record_failure(Instant::now());
        }
        self.failures.add(kind);
    }
}

/// Settings a [`Group`] is built from (the snapshot maps the config onto this).
pub(crate) struct GroupSpec {
    pub name: String,
    /// Address, weight, and where the server's failures are counted.
    pub servers: Vec<(SocketAddr, u32, Arc<Failures>)>,
    pub policy: Balance,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub keepalive: usize,
    pub max_fails: u32,
    pub fail_timeout: Duration,
    pub stats: Arc<UpstreamStats>,
    /// TLS for each server, in the order of `servers`; `None` for plain HTTP.
    pub tls: Option<GroupTls>,
    pub gate: Option<Arc<gate::Gate>>,
}

impl Group {
    /// Lets `worker`'s idle connections that stayed unused since the last trim go of
    /// their buffers ([`IdlePool::trim`]).
    pub(crate) fn trim_idle(&self, worker: usize) {
        for server in &self.servers {
            server.pool.trim(worker);
        }
    }

    /// `workers` is the number of worker threads; each gets its own idle pool per
    /// server, so a connection is only ever driven by the runtime that opened it.
    pub(crate) fn new(spec: GroupSpec, workers: usize) -> Group {
        let weights: Vec<u32> = spec.servers.iter().map(|(_, w, _)| *w).collect();
        let mut tls = spec.tls.map(|tls| tls.into_servers().into_iter());
        let servers = spec
            .servers
            .into_iter()
            .map(|(addr, _, failures)| Server {
                addr,
                health: Health::new(spec.max_fails, spec.fail_timeout),
                in_flight: AtomicU32::new(0),
                pool: IdlePool::new(workers, spec.keepalive),
                failures,
                log: Repeats::default(),
                tls: tls.as_mut().and_then(Iterator::next),
            })
            .collect::<Vec<_>>();
        Group {
            name: spec.name,
            single: servers.len() == 1,
            servers,
            balancer: Balancer::new(spec.policy, &weights),
            connect_timeout: spec.connect_timeout,
            read_timeout: spec.read_timeout,
            stats: spec.stats,
            log: Repeats::default(),
            gate: spec.gate,
        }
    }

    /// The next server to try, skipping those in `tried` (a bit per server; a group
    /// has at most 64 servers' worth of retry memory) and those passive health has
    /// taken out. `None` when nothing is left ("no live upstreams").
    pub(crate) fn pick(&self, client: IpAddr, tried: u64, now: Instant) -> Option<usize> {
        let excluded = |i: usize| {
            (i < 64 && tried & (1 << i) != 0)
                || (!self.single && !self.servers[i].health.is_available(now))
        };
        let in_flight = |i: usize| self.servers[i].in_flight.load(Ordering::Relaxed);
        self.balancer.pick(client, &excluded, &in_flight)
    }

    /// Requests on the group's servers now, from their pick until their response body
    /// ends (the load signals' in-flight; read by the tick thread, not per request).
    pub(crate) fn in_flight(&self) -> u64 {
        let count = |s: &Server| u64::from(s.in_flight.load(Ordering::Relaxed));
        self.servers.iter().map(count).sum()
    }
}

/// What a request holds on its upstream server while the response streams: its
/// place in the server's load count (`least_conn`), its slot in the group's gate, and
/// where its connection goes back when the body has been read whole.
pub(crate) struct Lease {
    active: ActiveRequest,
    worker: usize,
    /// Given back with the lease (after the connection is back in its pool).
    permit: Option<gate::Permit>,
}

impl Lease {
    pub(crate) fn new(active: ActiveRequest, worker: usize) -> Lease {
        Lease {
            active,
            worker,
            permit: None,
        }
    }

    /// Holds the request's slot in the group's gate until the response ends.
    pub(crate) fn hold(&mut self, permit: Option<gate::Permit>) {
        self.permit = permit;
    }

    /// The response is over; `conn` is its connection if keep-alive allows reuse.
    pub(crate) fn end(self, conn: Option<h1::UpstreamConn>) {
        if let Some(conn) = conn {
            let server = &self.active.group.servers[self.active.server];
            server.pool.put(self.worker, conn);
        }
    }
}

/// An active request on one server of a group (for `least_conn`), from the moment it
/// is sent until its response body ends; released on drop.
pub(crate) struct ActiveRequest {
    group: Arc<Group>,
    server: usize,
}

impl ActiveRequest {
    pub(crate) fn new(group: Arc<Group>, server: usize) -> ActiveRequest {
        group.servers[server]
            .in_flight
            .fetch_add(1, Ordering::Relaxed);
        ActiveRequest { group, server }
    }
}

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        self.group.servers[self.server]
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}
