//! QUIC listeners: for each `listen_tls` address with `quic = true`, a UDP socket at the
//! same address and port, and a quinn endpoint on it, served by one worker. Each new
//! connection is accepted with the QUIC config of the snapshot in force (certificates
//! swapped by a reload apply to the next handshake) and served by `server/h3.rs`. The
//! listener stops with its TCP address: a reload that drops the address, or the drain.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::{mpsc, watch};

use super::h3;
use super::listener::Listening;
use super::worker::Work;
use crate::config::{Address, Config, Transport};
use crate::state::GatewayState;

/// A QUIC listener's socket, for the worker that serves it.
pub(super) struct QuicListen {
    pub socket: UdpSocket,
    /// The `listen_tls` address it serves beside.
    pub address: Address,
    /// Turns true when it stops: its TCP address closed, `quic` was taken off it, or the
    /// gateway stops.
    pub stop: watch::Receiver<bool>,
}

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

/// A UDP socket at `addr` (an IPv6 one for IPv6 only, as TCP's).
pub(super) fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
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
    let endpoint = match quinn::Endpoint::new(quinn::EndpointConfig::default(), Some((*initial).clone()), socket, runtime) {
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
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let Some(incoming) = incoming else { break };
        // The config in force now: a reload's certificates serve the next handshake.
        let config = quic_config(&state).unwrap_or_else(|| initial.clone());
        let (alive, setup) = (alive.clone(), setup.clone());
        tokio::spawn(async move {
            h3::serve(incoming, config, setup).await;
            drop(alive);
        });
    }
    // New connections are refused from now on; those open end on their own (GOAWAY).
    endpoint.set_server_config(None);
    let limit = state.snapshot.load().conn.shutdown_timeout;
    let _ = tokio::time::timeout(limit, endpoint.wait_idle()).await;
    drop(alive);
}

/// The QUIC config of the snapshot in force, if it has one.
fn quic_config(state: &GatewayState) -> Option<Arc<quinn::ServerConfig>> {
    state.snapshot.load().tls.as_ref()?.quic.clone()
}
