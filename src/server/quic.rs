//! QUIC listeners: for each `listen_tls` address with `quic = true`, a UDP socket at the
//! same address and port, and a quinn endpoint on it, served by one worker (its packets
//! and their crypto), which hands each connection's HTTP/3 and requests to the workers in
//! turn. Each new
//! connection is accepted with the QUIC config of the snapshot in force (certificates
//! swapped by a reload apply to the next handshake) and served by `server/h3.rs`. The
//! listener stops with its TCP address: a reload that drops the address, or the drain.
//!
//! Before any handshake, each new connection is admitted by the rate of new connections
//! ([`Admission`], `[quic] retry_above` and `refuse_above`): past the first, a client that
//! has not proven its address gets a Retry (a round trip, and a token it must echo);
//! past the second, a refusal; past twice the second, silence, so that a flood of
//! Initials costs neither a handshake nor an answer of ours. `per_address` does the same
//! for each client address (`quic/admission.rs`).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Instant;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::{mpsc, watch};

mod admission;

use admission::{Admission, Admit};

use super::h3;
use super::listener::Listening;
use super::work::{QuicListen, Work};
use crate::config::{Config, Transport};
use crate::snapshot::QuicAdmission;
use crate::state::GatewayState;

/// The QUIC listeners in force: for each, the TCP address (actual) it is beside and
/// what stops it.
#[derive(Default)]
pub(super) struct QuicListeners(Vec<(SocketAddr, watch::Sender<bool>)>);

impl QuicListeners {
    /// Makes the listeners those `config` asks for beside `listening` (the TCP addresses
    /// in force): opens one, served by `worker`, beside each `listen_tls` address with
    /// `quic = true` that has none, and stops those beside an address that is gone or no
    /// longer says `quic` (their connections finish first). Stops at the first address
    /// whose UDP port cannot be bound, naming it.
    pub(super) fn sync(
        &mut self,
        config: &Config,
        listening: &[Listening],
        worker: &mpsc::UnboundedSender<Work>,
    ) -> Result<(), (SocketAddr, io::Error)> {
        let wanted: Vec<&Listening> = listening
            .iter()
            .filter(|l| {
                let address = l.configured;
                let quic = config.server.listen_tls.iter().any(|t| t.addr == address.addr && t.quic);
                address.transport == Transport::Tls && quic
            })
            .collect();
        self.0.retain(|(actual, stop)| {
            let kept = wanted.iter().any(|l| l.actual == *actual);
            if !kept {
                tracing::info!(addr = %actual, "no longer listening for HTTP/3 (QUIC)");
                stop.send_replace(true);
            }
            kept
        });
        for listening in wanted {
            if self.0.iter().any(|(actual, _)| *actual == listening.actual) {
                continue;
            }
            let socket = bind(listening.actual).map_err(|err| (listening.actual, err))?;
            tracing::info!(addr = %listening.actual, "listening for HTTP/3 (QUIC)");
            let (stop, stopped) = watch::channel(false);
            // A worker that has ended (shutting down) no longer needs it.
            let _ = worker.send(Work::Quic(QuicListen {
                socket,
                address: listening.configured,
                stop: stopped,
            }));
            self.0.push((listening.actual, stop));
        }
        Ok(())
    }

    /// Stops every listener (the gateway stops).
    pub(super) fn close(&self) {
        for (_, stop) in &self.0 {
            stop.send_replace(true);
        }
    }
}

/// The socket buffers a QUIC listener asks for: a burst of a few thousand datagrams
/// (quinn's own advice is several megabytes), where Linux's default is 208 KiB.
const SOCKET_BUFFER: usize = 4 * 1024 * 1024;

/// A UDP socket at `addr` (an IPv6 one for IPv6 only, as TCP's), with buffers of
/// [`SOCKET_BUFFER`]; where the kernel caps them lower, a warning says which sysctl lifts it.
pub(super) fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    // Linux reports twice what it keeps for its own bookkeeping.
    let got = |size: io::Result<usize>| size.map_or(0, |size| size / 2);
    for (buffer, size, sysctl) in [
        ("receive", got(socket.recv_buffer_size()), "net.core.rmem_max"),
        ("send", got(socket.send_buffer_size()), "net.core.wmem_max"),
    ] {
        if size < SOCKET_BUFFER {
            tracing::warn!(
                %addr,
                buffer,
                size,
                wanted = SOCKET_BUFFER,
                "the kernel caps QUIC's UDP {buffer} buffer: a burst may be dropped; `sysctl -w {sysctl}={SOCKET_BUFFER}` lifts it"
            );
        }
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Accepts QUIC connections on `listen` until it stops or the worker drains; then
/// refuses new ones and lets those open finish. `alive` is held until they have.
pub(super) async fn run(listen: QuicListen, worker: usize, state: Arc<GatewayState>, alive: mpsc::Sender<()>) {
    let QuicListen {
        socket,
        address,
        mut stop,
    } = listen;
    let Some(initial) = quic_config(&state) else {
        tracing::error!(addr = %address.addr, "QUIC listener without a QUIC config");
        return;
    };
    let runtime = Arc::new(quinn::TokioRuntime);
    let Some(reset) = state.snapshot.load().tls.as_ref().map(|tls| tls.quic_reset.clone()) else {
        return;
    };
    let endpoint_config = quinn::EndpointConfig::new(reset);
    let endpoint = match quinn::Endpoint::new(endpoint_config, Some((*initial).clone()), socket, runtime) {
        Ok(endpoint) => endpoint,
        Err(err) => {
            tracing::error!(addr = %address.addr, error = %err, "cannot serve QUIC");
            return;
        }
    };
    let port = endpoint.local_addr().map_or(address.addr.port(), |a| a.port());
    let setup = h3::Setup {
        state: state.clone(),
        address,
        port,
        worker,
        stop: stop.clone(),
    };
    let mut handing = Handing {
        admission: Admission::default(),
        turn: 0,
        initial,
        setup,
        alive,
    };
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let Some(incoming) = incoming else { break };
        handing.take(incoming);
    }
    // New connections are refused from now on; those open end on their own (GOAWAY).
    endpoint.set_server_config(None);
    let limit = state.snapshot.load().conn.shutdown_timeout;
    let _ = tokio::time::timeout(limit, endpoint.wait_idle()).await;
    drop(handing);
}

/// What a QUIC listener does with each new connection.
struct Handing {
    admission: Admission,
    /// Connections handed to the workers so far: whose turn is next.
    turn: usize,
    /// The config the endpoint started with, should the snapshot have none.
    initial: Arc<quinn::ServerConfig>,
    setup: h3::Setup,
    /// The listener's worker's drain count, held by each connection.
    alive: mpsc::Sender<()>,
}

impl Handing {
    /// Admits `incoming` (or answers it with a Retry or a refusal, or not at all) and
    /// hands it to the next worker in turn, where its handshake, HTTP/3 and requests run
    /// (the packets stay with this endpoint), as TCP's connections spread.
    fn take(&mut self, incoming: quinn::Incoming) {
        let state = &self.setup.state;
        let counts = state.metrics.quic();
        match self.admission.admit(
            Instant::now(),
            incoming.remote_address(),
            incoming.remote_address_validated(),
            &limits(state),
        ) {
            Admit::Accept => {}
            Admit::Retry => {
                counts.retried.add(1);
                // Refused only for an address already validated, which is not retried.
                let _ = incoming.retry();
                return;
            }
            Admit::Refuse => {
                counts.refused.add(1);
                incoming.refuse();
                return;
            }
            Admit::Drop => {
                counts.dropped.add(1);
                incoming.ignore();
                return;
            }
        }
        // The config in force now: a reload's certificates serve the next handshake.
        let config = quic_config(state).unwrap_or_else(|| self.initial.clone());
        let turn = state.runtimes.nth(self.turn);
        self.turn = self.turn.wrapping_add(1);
        let (alive, mut setup) = (self.alive.clone(), self.setup.clone());
        match turn {
            Some((there, runtime, alive_there)) => {
                setup.worker = there;
                runtime.spawn(async move {
                    h3::serve(incoming, config, setup).await;
                    drop((alive, alive_there));
                });
            }
            None => {
                tokio::spawn(async move {
                    h3::serve(incoming, config, setup).await;
                    drop(alive);
                });
            }
        }
    }
}

/// The admission limits of the snapshot in force.
fn limits(state: &GatewayState) -> QuicAdmission {
    state.snapshot.load().tls.as_ref().map(|tls| tls.quic_admission).unwrap_or_default()
}

/// The QUIC config of the snapshot in force, if it has one.
fn quic_config(state: &GatewayState) -> Option<Arc<quinn::ServerConfig>> {
    state.snapshot.load().tls.as_ref()?.quic.clone()
}
