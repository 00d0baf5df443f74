//! The I/O shell: worker threads, listeners, connections, timeouts and graceful
//! shutdown. [`Gateway`] is what `main` and the tests start and stop.

mod conn;
mod listener;
mod timeouts;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::config::Config;
use crate::snapshot::{self, Snapshot};

/// What every worker shares: the configuration in force.
pub struct Shared {
    pub snapshot: ArcSwap<Snapshot>,
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{0}")]
    Build(#[from] snapshot::BuildError),
    #[error("cannot start worker thread: {0}")]
    Thread(std::io::Error),
}

/// A running gateway. Dropping it starts a graceful shutdown without waiting.
pub struct Gateway {
    addrs: Vec<SocketAddr>,
    /// The `listen` addresses as configured (port 0 unresolved), and the worker count: a
    /// reload cannot change them yet.
    listen: Vec<SocketAddr>,
    worker_count: usize,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
}

impl Gateway {
    /// Binds every listener (so port 0 is resolved and a busy port fails here), then
    /// starts `server.workers` worker threads. Must not be called from inside a
    /// current-thread runtime that it would block; it does not block at all.
    pub fn start(config: Config) -> Result<Gateway, StartError> {
        let workers = config.server.workers.max(1);
        let snapshot = snapshot::build(&config, 1, workers, &[])?;
        let mut addrs = Vec::new();
        let mut per_worker: Vec<Vec<std::net::TcpListener>> =
            (0..workers).map(|_| Vec::new()).collect();
        for &addr in &config.server.listen {
            let (actual, listeners) = listener::bind(addr, workers)
                .map_err(|source| StartError::Listen { addr, source })?;
            addrs.push(actual);
            for (slot, listener) in per_worker.iter_mut().zip(listeners) {
                slot.push(listener);
            }
        }
        let shared = Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(snapshot),
        });
        let (shutdown, _) = watch::channel(false);
        let mut handles = Vec::with_capacity(workers);
        for (id, listeners) in per_worker.into_iter().enumerate() {
            let (shared, rx) = (shared.clone(), shutdown.subscribe());
            let handle = std::thread::Builder::new()
                .name(format!("tollgate-worker-{id}"))
                .spawn(move || {
                    if let Err(err) = worker::run(id, listeners, shared, rx) {
                        tracing::error!(worker = id, error = %err, "worker failed");
                    }
                })
                .map_err(StartError::Thread)?;
            handles.push(handle);
        }
        for addr in &addrs {
            tracing::info!(%addr, workers, "listening");
        }
        Ok(Gateway {
            addrs,
            listen: config.server.listen.clone(),
            worker_count: workers,
            shared,
            shutdown,
            workers: handles,
        })
    }

    /// The addresses actually listened on, in `listen` order (port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Puts `config` in force (SIGHUP): builds the next generation, zones that keep
    /// their name, key, algorithm and size keeping their state too, and swaps it in.
    /// Requests already under way finish on the generation they started with. Returns
    /// the new generation; on an error nothing changes.
    pub fn reload(&self, config: &Config) -> Result<u64, snapshot::BuildError> {
        let current = self.shared.snapshot.load();
        if config.server.listen != self.listen || config.server.workers.max(1) != self.worker_count
        {
            tracing::warn!(
                "reload: `listen` and `workers` changes take effect on restart; the other changes apply now"
            );
        }
        let generation = current.generation + 1;
        let next = snapshot::build(config, generation, self.worker_count, &current.zones)?;
        for zone in &next.zones {
            let kept = current.zones.iter().any(|old| old.shares_state_with(zone));
            tracing::info!(zone = %zone.name, kept_state = kept, generation, "reload");
        }
        self.shared.snapshot.store(Arc::new(next));
        Ok(generation)
    }

    /// Opens the access-log file again by its path (SIGUSR1, after logrotate moved it).
    pub fn reopen_logs(&self) -> std::io::Result<()> {
        match &self.shared.snapshot.load().pipeline.access_log {
            Some(log) => log.reopen(),
            None => Ok(()),
        }
    }

    /// The configuration generation in force (1 at start, one more per reload).
    pub fn generation(&self) -> u64 {
        self.shared.snapshot.load().generation
    }

    /// Stops accepting at once; open connections finish their requests and close.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Waits (blocking the calling thread) until every worker has finished draining.
    pub fn wait(mut self) {
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
        if let Some(log) = &self.shared.snapshot.load().pipeline.access_log {
            log.flush();
        }
    }

    /// [`Gateway::shutdown`] then wait, from async code (the wait runs off-runtime).
    pub async fn stop(self) {
        self.shutdown();
        let _ = tokio::task::spawn_blocking(move || self.wait()).await;
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}
