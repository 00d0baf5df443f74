//! The I/O shell: worker threads, listeners, connections, timeouts and graceful
//! shutdown. [`Gateway`] is what `main` and the tests start and stop.
//!
//! - `worker`, `listener`: threads with their own runtimes and `SO_REUSEPORT` sockets
//!   (an address another process listens on is refused).
//! - `descriptors`, `shed`: the process's file descriptors and the share client
//!   connections may hold; beyond it a worker closes its oldest idle connections.
//! - `admin_listener`: the admin API's listener and thread, its connections bounded.
//! - `conn`: one connection: its protocol told from its first bytes (`preface`, which
//!   also refuses a broken HTTP/2 preface), then served by that protocol's module.
//! - `h1`: HTTP/1.1, served by tollgate's own codec: strict heads (refusing ambiguous
//!   framing and overlong request lines as nginx does), bodies decoded as the pipeline
//!   reads them, answers framed and written with few copies.
//! - `h2`: HTTP/2, served by hyper, with `send_timeout` for each stream.
//! - `answer`: what a connection of either makes of an answer before sending it.
//! - `timeouts`: what a connection's reads and writes may wait for (header, keep-alive,
//!   `send_timeout`).
//! - `check`: `tollgate -t` past the file (the access log, certificates, directories).
//! - `adapt`: the adaptive tick, a thread that reads the upstream groups' load signals
//!   and steps the controllers that follow them.

pub(crate) mod adapt;
mod admin_listener;
mod answer;
mod beside;
mod check;
mod conn;
mod date;
mod descriptors;
mod h1;
mod h2;
mod h3;
mod handshake;
mod listener;
mod preface;
mod proxy_protocol;
mod quic;
mod shed;
mod timeouts;
mod zero_copy;
mod work;
mod worker;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, watch};

pub use self::check::{check, Checked};

use self::admin_listener::AdminListener;
use self::descriptors::Descriptors;
use crate::proxy::files::OpenFiles;
use self::listener::{Bound, Listening, Sharing};
use self::work::Work;
use crate::config::{self, Address, Config, ConfigErrors};
use crate::control::PidFile;
use crate::metrics::Metrics;
use crate::snapshot::{self, Lasting};
use crate::state::{GatewayState, Listeners};
use crate::tls;

/// The addresses in `listening`, as `/status` shows them.
fn listeners_of(listening: &[Listening]) -> Listeners {
    let actual = |l: &Listening| Address {
        addr: l.actual,
        transport: l.configured.transport,
        http2: l.configured.http2,
    };
    Listeners {
        addresses: listening.iter().map(actual).collect(),
    }
}

/// Why the gateway could not start, or a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{at}cannot listen on {addr}: address already in use (is another tollgate running?)")]
    Taken { addr: SocketAddr, at: Place },
    #[error("{at}cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
        at: Place,
    },
    #[error("{0}")]
    Build(#[from] snapshot::BuildError),
    #[error("cannot start worker thread: {0}")]
    Thread(std::io::Error),
    #[error("{0}")]
    Acme(String),
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("[quic] {0}")]
    HostKey(String),
    #[error("cannot write pid_file {}: {source}", path.display())]
    PidFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// Where an address is written in the configuration, `FILE:LINE:COL: `, before a failure
/// to listen on it; empty when not known.
#[derive(Debug, Default)]
pub struct Place(String);

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.is_empty() {
            true => Ok(()),
            false => write!(f, "{}: ", self.0),
        }
    }
}

impl StartError {
    /// This error, naming where `config` writes the address it could not listen on.
    fn placed(mut self, config: &Config) -> StartError {
        if let StartError::Taken { addr, at } | StartError::Listen { addr, at, .. } = &mut self {
            *at = Place(config.place_of(*addr).unwrap_or_default().to_owned());
        }
        self
    }
}

/// Why a reload changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Config(#[from] ConfigErrors),
    #[error("{0}")]
    Start(#[from] StartError),
}

/// A running gateway. Dropping it starts a graceful shutdown without waiting.
pub struct Gateway {
    /// The addresses in force, in `listen` order.
    listening: Mutex<Vec<Listening>>,
    /// Each worker's channel for new listening sockets.
    to_workers: Vec<mpsc::UnboundedSender<Work>>,
    /// The QUIC listeners beside `listening`'s TLS addresses.
    quic: Mutex<quic::QuicListeners>,
    /// A reload cannot change the worker count.
    worker_count: usize,
    state: Arc<GatewayState>,
    shutdown: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
    /// `[admin]`, when configured, and its address as configured: a reload cannot move
    /// it.
    admin: Option<AdminListener>,
    admin_config: Option<SocketAddr>,
    /// TLS ticket keys and session cache, kept across reloads for resumption; QUIC's keys.
    sessions: tls::Sessions,
    /// `[quic] host_key_file` as started with: a reload cannot change QUIC's keys.
    host_key_file: Option<std::path::PathBuf>,
    /// The adaptive tick's thread.
    adapt: adapt::Adapt,
    /// `pid_file`, written once every address was bound and removed at the end of
    /// [`Gateway::wait`]; a reload does not move it (nginx's `pid` neither).
    pid_file: Option<PidFile>,
}

impl Gateway {
    /// Binds every listener (so port 0 is resolved and a busy port fails here, as does
    /// one another process listens on: [`StartError::Taken`]), then starts
    /// `server.workers` worker threads. Must not be called from inside a current-thread
    /// runtime that it would block; it does not block at all.
    pub fn start(config: Config) -> Result<Gateway, StartError> {
        Gateway::start_sharing(config, Sharing::Alone)
    }

    /// [`Gateway::start`] for a binary upgrade (`tollgate --upgrade`): the addresses
    /// (the admin API's too) may be served by the tollgate being replaced; both accept,
    /// each with limits of its own, until it is stopped.
    pub fn start_beside(config: Config) -> Result<Gateway, StartError> {
        Gateway::start_sharing(config, Sharing::Beside)
    }

    fn start_sharing(config: Config, sharing: Sharing) -> Result<Gateway, StartError> {
        let workers = config.server.workers.max(1);
        let metrics = Arc::new(Metrics::new(workers));
        let host_key = match &config.quic.host_key_file {
            Some(path) => Some(tls::host_key(path).map_err(StartError::HostKey)?),
            None => None,
        };
        let sessions = tls::Sessions::new(host_key.as_ref())?;
        // Before the first snapshot: stored certificates are in force for its listeners.
        let acme = crate::acme::Manager::start(config.acme.as_ref()).map_err(StartError::Acme)?;
        let admin_connections = config.admin.as_ref().map_or(0, |a| a.max_connections);
        let descriptors = Arc::new(Descriptors::of_process(admin_connections));
        let open_files = OpenFiles::new(descriptors.files());
        let lasting = Lasting {
            zones: &[],
            metrics: &metrics,
            sessions: &sessions,
            redis: None,
            acme: acme.published(),
            upstreams: &[],
            held: None,
            open_files: &open_files,
        };
        let snapshot = snapshot::build(&config, 1, workers, &lasting)?;
        let bound = bind_all(&addresses(&config), workers, |_| sharing)
            .map_err(|err| err.placed(&config))?;
        let state = Arc::new(GatewayState {
            snapshot: ArcSwap::from_pointee(snapshot),
            listeners: ArcSwap::from_pointee(Listeners::default()),
            reloads_ok: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
            last_reload_failure: std::sync::Mutex::default(),
            metrics,
            acme,
            runtimes: crate::state::Runtimes::default(),
        });
        let admin = match &config.admin {
            Some(admin) => Some(
                start_admin(admin, sharing, &state, &descriptors)
                    .map_err(|err| err.placed(&config))?,
            ),
            None => None,
        };
        let pid_file = match &config.server.pid_file {
            Some(path) => Some(PidFile::write(path).map_err(|source| StartError::PidFile {
                path: path.clone(),
                source,
            })?),
            None => None,
        };
        let adapt = adapt::Adapt::start(state.clone()).map_err(StartError::Thread)?;
        let (shutdown, _) = watch::channel(false);
        let (handles, to_workers) = spawn_workers(workers, &state, &shutdown, &descriptors)?;
        let listening: Vec<Listening> = bound
            .into_iter()
            .map(|b| b.serve(&to_workers, &state.metrics))
            .collect();
        let mut quic = quic::QuicListeners::default();
        quic.sync(&config, &listening, &to_workers[0])
            .map_err(|(addr, err)| listen_error(addr, err).placed(&config))?;
        state.listeners.store(Arc::new(listeners_of(&listening)));
        Ok(Gateway {
            listening: Mutex::new(listening),
            quic: Mutex::new(quic),
            to_workers,
            worker_count: workers,
            state,
            shutdown,
            workers: handles,
            admin,
            admin_config: config.admin.as_ref().map(|a| a.listen),
            sessions,
            host_key_file: config.quic.host_key_file.clone(),
            adapt,
            pid_file,
        })
    }

    /// Puts `config` in force (SIGHUP): binds the addresses `listen` adds, builds the
    /// next generation (zones that keep their name, key, algorithm and size keep their
    /// state too) and swaps it in, then closes the addresses `listen` dropped (their
    /// connections drain). Requests already under way finish on the generation they
    /// started with. Returns the new generation; on an error (a busy port, a file that
    /// cannot be opened) nothing changes.
    pub fn reload(&self, config: &Config) -> Result<u64, StartError> {
        let result = self.put_in_force(config);
        match &result {
            Ok(_) => {
                self.state.reloads_ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => self.state.reload_failed(err),
        }
        result
    }

    /// [`Gateway::reload`] from the file at `path` (SIGHUP): a file that does not
    /// validate changes nothing either, and counts as a failed reload.
    pub fn reload_file(&self, path: &Path) -> Result<u64, ReloadError> {
        match config::load(path) {
            Ok(config) => {
                for warning in config.warnings() {
                    tracing::warn!("reload: {warning}");
                }
                Ok(self.reload(&config)?)
            }
            Err(errors) => {
                self.state.reload_failed(&errors);
                Err(errors.into())
            }
        }
    }

    fn put_in_force(&self, config: &Config) -> Result<u64, StartError> {
        // Held throughout: one reload at a time.
        let mut listening = lock(&self.listening);
        self.warn_of_restart_only(config);
        let wanted = addresses(config);
        let added: Vec<Address> = wanted
            .iter()
            .filter(|addr| !listening.iter().any(|l| l.serves(addr)))
            .copied()
            .collect();
        // An added address that one of ours covers (`0.0.0.0:80` for `127.0.0.1:80`)
        // would fail its probe: it joins our own sockets' port as before.
        let sharing =
            |addr: SocketAddr| match listening.iter().any(|l| listener::covers(l.actual, addr)) {
                true => Sharing::Beside,
                false => Sharing::Alone,
            };
        let bound =
            bind_all(&added, self.worker_count, sharing).map_err(|err| err.placed(config))?;
        let current = self.state.snapshot.load();
        let generation = current.generation + 1;
        let metrics = &self.state.metrics;
        let lasting = Lasting {
            zones: &current.zones,
            metrics,
            sessions: &self.sessions,
            redis: current.redis.as_ref(),
            acme: self.state.acme.published(),
            upstreams: &current.upstreams,
            held: Some(&current.pipeline.tarpit.held),
            open_files: &current.pipeline.open_files,
        };
        let next = snapshot::build(config, generation, self.worker_count, &lasting)?;
        // After the snapshot built (else nothing changes), before it is in force: the
        // names it adds have their stored certificates or placeholders.
        self.state
            .acme
            .update(config.acme.as_ref())
            .map_err(StartError::Acme)?;
        for zone in &next.zones {
            let kept = current.zones.iter().any(|old| old.shares_state_with(zone));
            tracing::info!(zone = %zone.name, kept_state = kept, generation, "reload");
        }
        self.state.snapshot.store(Arc::new(next));
        let serves = |l: &Listening| wanted.iter().find(|addr| l.serves(addr)).copied();
        for gone in listening.iter().filter(|l| serves(l).is_none()) {
            tracing::info!(addr = %gone.actual, "no longer listening; draining its connections");
            gone.close();
        }
        listening.retain(|l| serves(l).is_some());
        for kept in listening.iter_mut() {
            if let Some(addr) = serves(kept) {
                kept.retune(addr);
            }
        }
        listening.extend(
            bound
                .into_iter()
                .map(|b| b.serve(&self.to_workers, metrics)),
        );
        // A UDP port taken now leaves the reload done without HTTP/3 there: said, not fatal.
        if let Err((addr, err)) = lock(&self.quic).sync(config, &listening, &self.to_workers[0]) {
            tracing::error!(%addr, error = %err, "reload: cannot listen for HTTP/3 (QUIC)");
        }
        // Config order, for `local_addrs` and `tls_addrs`.
        listening.sort_by_key(|l| wanted.iter().position(|addr| *addr == l.configured));
        self.state
            .listeners
            .store(Arc::new(listeners_of(&listening)));
        Ok(generation)
    }

    /// Warns of each change in `config` that a reload cannot make (a restart does).
    fn warn_of_restart_only(&self, config: &Config) {
        if config.server.workers.max(1) != self.worker_count {
            tracing::warn!("reload: a `workers` change takes effect on restart");
        }
        if config.admin.as_ref().map(|a| a.listen) != self.admin_config {
            tracing::warn!("reload: an `[admin] listen` change takes effect on restart");
        }
        let admin_connections = |admin: Option<&config::Admin>| admin.map(|a| a.max_connections);
        if admin_connections(config.admin.as_ref())
            != admin_connections(self.state.snapshot.load().admin.as_ref())
        {
            tracing::warn!("reload: an `[admin] max_connections` change takes effect on restart");
        }
        if config.quic.host_key_file != self.host_key_file {
            tracing::warn!("reload: a `[quic] host_key_file` change takes effect on restart");
        }
        if config.server.pid_file.as_deref() != self.pid_file.as_ref().map(PidFile::path) {
            tracing::warn!("reload: a `pid_file` change takes effect on restart");
        }
    }

    /// Opens the access-log file again by its path (SIGUSR1, after logrotate moved it).
    pub fn reopen_logs(&self) -> std::io::Result<()> {
        self.state.snapshot.load().pipeline.logs.reopen()
    }

    /// The configuration generation in force (1 at start, one more per reload).
    pub fn generation(&self) -> u64 {
        self.state.snapshot.load().generation
    }

    /// Stops accepting at once; open connections finish their requests and close.
    pub fn shutdown(&self) {
        for listening in lock(&self.listening).iter() {
            listening.close();
        }
        lock(&self.quic).close();
        self.state.runtimes.clear();
        self.state.acme.stop();
        self.adapt.signal_stop();
        self.shutdown.send_replace(true);
    }

    /// Waits (blocking the calling thread) until every worker has finished draining.
    pub fn wait(mut self) {
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
        // The admin API answers until the workers have drained.
        drop(self.admin.take());
        self.adapt.stop();
        self.state.acme.stop_and_wait(ACME_STOP);
        self.state.snapshot.load().pipeline.logs.flush();
        // Last: `tollgate stop` and a service manager may take its absence as the end.
        drop(self.pid_file.take());
    }

    /// [`Gateway::shutdown`] then wait, from async code (the wait runs off-runtime).
    pub async fn stop(self) {
        self.shutdown();
        let _ = tokio::task::spawn_blocking(move || self.wait()).await;
    }
}

/// Where a running gateway listens, port 0 resolved: how a test finds it. (The binary
/// needs none of it: `/status` lists the addresses.)
#[cfg(feature = "testing")]
impl Gateway {
    /// Where the admin API listens (port 0 resolved), if configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(AdminListener::addr)
    }

    /// The addresses actually listened on, in `listen` order (port 0 resolved).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.state.listeners.load().of(config::Transport::Tcp).collect()
    }

    /// The TLS addresses actually listened on, in `listen_tls` order.
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.state.listeners.load().of(config::Transport::Tls).collect()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Longest wait at exit for the ACME thread to let go of its locks.
const ACME_STOP: std::time::Duration = std::time::Duration::from_secs(2);

/// Every `listen` then `listen_tls` address.
fn addresses(config: &Config) -> Vec<Address> {
    config.server.addresses().collect()
}

/// The worker threads, and each one's channel for new listening sockets.
type Workers = (Vec<JoinHandle<()>>, Vec<mpsc::UnboundedSender<Work>>);

/// Starts the worker threads.
fn spawn_workers(
    workers: usize,
    state: &Arc<GatewayState>,
    shutdown: &watch::Sender<bool>,
    descriptors: &Arc<Descriptors>,
) -> Result<Workers, StartError> {
    let mut handles = Vec::with_capacity(workers);
    let mut to_workers = Vec::with_capacity(workers);
    for id in 0..workers {
        let (tx, rx) = mpsc::unbounded_channel();
        let (state, stop) = (state.clone(), shutdown.subscribe());
        let descriptors = descriptors.clone();
        let handle = std::thread::Builder::new()
            .name(format!("tollgate-worker-{id}"))
            .spawn(move || {
                if let Err(err) = worker::run(id, rx, state, stop, descriptors) {
                    tracing::error!(worker = id, error = %err, "worker failed");
                }
            })
            .map_err(StartError::Thread)?;
        handles.push(handle);
        to_workers.push(tx);
    }
    Ok((handles, to_workers))
}

/// Binds each address for every worker, each shared as `sharing` says; the first that
/// fails fails all (the others are closed again).
fn bind_all(
    addrs: &[Address],
    workers: usize,
    sharing: impl Fn(SocketAddr) -> Sharing,
) -> Result<Vec<Bound>, StartError> {
    addrs
        .iter()
        .map(|&address| {
            Bound::new(address, workers, sharing(address.addr))
                .map_err(|source| listen_error(address.addr, source))
        })
        .collect()
}

/// Why `addr` could not be listened on; an address in use is named as such.
fn listen_error(addr: SocketAddr, source: std::io::Error) -> StartError {
    match source.kind() {
        std::io::ErrorKind::AddrInUse => StartError::Taken {
            addr,
            at: Place::default(),
        },
        _ => StartError::Listen {
            addr,
            source,
            at: Place::default(),
        },
    }
}

/// The admin API on `[admin] listen`, refused as any address another process listens on.
fn start_admin(
    admin: &config::Admin,
    sharing: Sharing,
    state: &Arc<GatewayState>,
    descriptors: &Arc<Descriptors>,
) -> Result<AdminListener, StartError> {
    let addr = admin.listen;
    let (_, mut sockets) =
        listener::bind(addr, 1, sharing).map_err(|source| listen_error(addr, source))?;
    let socket = sockets.pop().ok_or_else(|| {
        let source = std::io::ErrorKind::AddrNotAvailable.into();
        listen_error(addr, source)
    })?;
    let (state, descriptors) = (state.clone(), descriptors.clone());
    AdminListener::start(socket, admin.max_connections, state, descriptors)
        .map_err(|source| listen_error(addr, source))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
