//! What the workers and the admin API share for the gateway's whole life: the
//! generation in force, the addresses listened on, reload counts, every
//! generation's counters and the ACME manager. `server` writes it; `admin` reads it.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::metrics::Metrics;
use crate::snapshot::Snapshot;

/// The configuration in force, and what `/status` and `/metrics` tell of the gateway
/// around it.
pub struct GatewayState {
    pub snapshot: ArcSwap<Snapshot>,
    /// The addresses listened on (for `/status`).
    pub listeners: ArcSwap<Listeners>,
    /// Reloads that took effect, and those that changed nothing.
    pub reloads_ok: AtomicU64,
    pub reloads_failed: AtomicU64,
    /// Every generation's counters (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// Certificates by ACME: what it serves and each managed name's state.
    pub acme: crate::acme::Manager,
}

/// The addresses actually listened on (port 0 resolved), each list in config order.
#[derive(Debug, Default)]
pub struct Listeners {
    pub plain: Vec<SocketAddr>,
    pub tls: Vec<SocketAddr>,
}
