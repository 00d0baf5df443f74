//! tollgate: an nginx-style edge gateway.
//!
//! # Layout
//!
//! Pure core (no sockets, no clocks read inside):
//! - [`config`]: TOML text to a validated, immutable `Config`, with `file:line:col` errors.
//! - [`routing`]: nginx location matching, as data plus an ordering.
//! - [`access`]: the real client address (nginx realip), CIDR allow/deny lists.
//! - [`limit`]: rate-limit algorithms (one file each), key templates, the bounded
//!   per-zone store, and the decision over a location's zones. Its one I/O part is
//!   [`limit::redis`]: zones kept in Redis, one Lua script per algorithm.
//! - [`proxy::headers`]: what is forwarded upstream and back (X-Forwarded-*, hop-by-hop).
//! - [`upstream::balance`], [`upstream::health`]: choosing a server, passive health.
//! - [`clock`]: time as a trait, so tests advance it by hand.
//!
//! Thin I/O shell:
//! - [`server`]: worker threads, listeners, connections, timeouts, graceful shutdown.
//! - [`proxy`]: the request pipeline (identify, deny, route, allow/deny, limit, forward,
//!   respond, log).
//! - [`upstream`]: pooled keep-alive connections to upstream servers, spoken to by
//!   [`upstream::h1`], a lean HTTP/1.1 client that runs inside the request's own task.
//! - [`snapshot`]: the one place config meets runtime objects.
//! - [`log`]: the access log, and [`log::repeats`], which keeps repeated error-log lines
//!   from flooding the error log.
//! - [`metrics`]: per-worker counters, and the Prometheus text `/metrics` serves.
//! - [`signals`]: unix signals mapped to what the operator means by them.
//! - [`tls`]: certificates (read and checked with the config), SNI, ALPN, resumption.
//! - [`body`]: streamed bodies with idle timeouts.
//!
//! Dependencies point one way: `main` → [`server`] → [`snapshot`] → [`proxy`] →
//! [`routing`], [`access`], [`limit`], [`upstream`]; [`snapshot`] → [`config`], [`tls`],
//! [`metrics`]; [`config`] → [`tls`] (certificates are checked with the file). A request
//! loads the snapshot exactly once.
#![deny(unsafe_code)]

#[deny(clippy::disallowed_methods)]
pub mod access;
pub mod admin;
pub mod certs;
pub mod config;
#[deny(clippy::disallowed_methods)]
pub mod limit;
pub mod log;
pub mod metrics;
#[cfg(test)]
mod props;
pub mod proxy;
#[deny(clippy::disallowed_methods)]
pub mod routing;
pub mod server;
pub mod signals;
pub mod snapshot;
pub mod state;
pub mod tls;
pub mod upstream;

pub use config::Config;
pub use server::{Gateway, StartError};
