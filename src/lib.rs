//! tollgate: an nginx-style edge gateway. `docs/architecture.md` tells the whole layout;
//! `tests/it/architecture.rs` keeps the dependency rules below true.
//!
//! Pure core (no sockets; no clock read inside: callers pass `now`):
//! - [`limit`]: rate-limit algorithms (one file each), key templates, the bounded
//!   per-zone store, local decisions over a location's zones, ban tables, soft and
//!   adaptive arithmetic, and what a zone kept in Redis means as values
//!   ([`limit::remote`]). A crate of its own (`crates/limit`, `tollgate-limit`, with
//!   neither tokio nor redis), re-exported here.
//! - [`routing`]: nginx location matching, as data plus an ordering.
//! - [`access`]: the real client address (nginx realip), CIDR allow/deny lists.
//! - [`vars`]: nginx's variables (`$host`, `$request_uri`, …): one parser, one request
//!   view, one meaning each, for zone keys, header rules and `return`. A crate of its own
//!   below the limiter (`crates/vars`, `tollgate-vars`), re-exported here.
//!
//! Values:
//! - [`config`]: TOML text to a validated, immutable `Config` made of the core's own
//!   value types, with `file:line:col` errors.
//! - [`certs`]: certificates read and checked while the file is validated.
//! - [`import`]: `tollgate import`: an nginx configuration (read by `crates/nginx`,
//!   `tollgate-nginx`) as the config's raw model, written with a report of every
//!   directive. It sees [`config`]'s raw model and the core's variables.
//!
//! The pipeline, handed one generation per request:
//! - [`admission`]: what the limit phase calls: a location's zones across local and
//!   Redis ones ([`admission::Policy`]), `on_error`, the penalty box, settling, and the
//!   Redis calls no answer waits for.
//! - [`shared`]: zones kept in Redis behind [`shared::Backend`]: one Lua script per
//!   algorithm, connections, leases, the heartbeat, shared bans.
//! - [`proxy`]: identify, deny, route, allow/deny, limit, forward, respond, log.
//! - [`upstream`]: choosing a server, passive health, pooled keep-alive connections
//!   (plain or TLS, [`upstream::tls`]) spoken to by [`upstream::h1`].
//! - [`wire`]: what both sides speak, knowing neither: HTTP/1.1 codec parts
//!   ([`wire::h1`]), the bodies that cross the gateway ([`wire::body`]), and the
//!   protocols a client connection speaks ([`wire::Protocol`]).
//!
//! Around it:
//! - [`snapshot`]: the one place config meets runtime objects (one per generation).
//! - [`clock`]: the time of the task poll under way, read once per poll.
//! - [`state`]: what the workers and the admin API share for the gateway's life.
//! - [`metrics`]: per-worker counter cells the pipeline writes.
//! - [`log`]: the access log, and [`log::repeats`], which keeps repeated error-log
//!   lines from flooding the error log.
//! - [`tls`]: the runtime rustls setup: SNI, ALPN, resumption across reloads.
//! - [`acme`]: certificates obtained and renewed by ACME, on a thread of its own, and
//!   what it publishes for the listeners (certificates in force, challenge answers).
//! - [`signals`]: unix signals mapped to what the operator means by them.
//! - [`control`]: the pid file, and `tollgate reload` / `stop`, which find the running
//!   gateway by it and read the outcome back.
//! - [`server`]: worker threads, listeners (one kind per [`config::Transport`], and the
//!   admin API's), connections (one module per [`wire::Protocol`]), timeouts, file
//!   descriptors, graceful shutdown.
//! - [`admin`]: `/status`, `/metrics` (added up at scrape time), per-key endpoints, `/bans`.
//!
//! Dependencies point one way, with no cycle: `main` → [`server`] → [`admin`] →
//! [`state`] → [`snapshot`] → [`proxy`] → [`admission`] → [`shared`] → [`upstream`] →
//! [`wire`] → the core; [`config`] sees only the core and [`certs`]; the core sees only
//! itself, and the two crates below it (`crates/limit`, `crates/vars`) cannot reach
//! anything else: their Cargo.toml lists no runtime. A request loads the snapshot
//! exactly once.
//!
//! The public face is what the `tollgate` binary needs: [`load`] (and [`from_str`]) a
//! [`Config`], [`check`] it for `-t`, start a [`Gateway`], follow [`Signals`], and
//! [`reload`] or [`stop`] a running one. Every
//! module is the crate's own, so that the compiler reports code nothing uses; the
//! `testing` feature, which `cargo test` and the benches turn on (Cargo.toml), makes them
//! public to the tests. These docs are for the crate's developers: read them with
//! `cargo doc --document-private-items`.
#![deny(unsafe_code)]
// The docs link freely into the modules the public face leaves out; the links resolve
// with `--document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

/// Declares modules public to the tests and benches (the `testing` feature, which a plain
/// `cargo test` turns on) and the crate's own otherwise, so that without it the compiler
/// reports what nothing in the product uses. Attributes go on both declarations.
macro_rules! inside {
    ($($(#[$attr:meta])* mod $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg(feature = "testing")]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "testing"))]
        pub(crate) mod $name;
    )*};
}

// The public face: what the `tollgate` binary uses (src/main.rs). Everything else is the
// crate's own, public only to its tests and benches (`inside!`).
pub use config::{from_str, load, Config, ConfigErrors};
pub use control::{reload, stop, Outcome};
pub use import::{import, ImportError, Imported, Line, Report, Status};
pub use log::errors::directives as error_log_directives;
pub use server::{check, Checked, Gateway, ReloadError, StartError};
pub use signals::{Intent, Signals};

inside! {
    #[deny(clippy::disallowed_methods)]
    mod access;
    mod acme;
    mod admin;
    mod admission;
    mod certs;
    mod clock;
    mod config;
    mod control;
    mod import;
    mod jwks;
    mod log;
    mod metrics;
    mod proxy;
    #[deny(clippy::disallowed_methods)]
    mod routing;
    mod server;
    mod shared;
    mod signals;
    mod snapshot;
    mod state;
    mod tls;
    mod trace;
    mod upstream;
    mod wire;
}

// The pure crates (crates/limit, crates/vars), under their old paths.
#[cfg(feature = "testing")]
pub use {tollgate_limit as limit, tollgate_vars as vars};
#[cfg(not(feature = "testing"))]
use {tollgate_limit as limit, tollgate_vars as vars};

#[cfg(test)]
mod props;
