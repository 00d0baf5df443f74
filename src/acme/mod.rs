//! Certificates by themselves: ACME (RFC 8555) for the names of `acme = true` sites.
//!
//! [`Manager`] runs on a thread of its own for the gateway's whole life. It keeps each
//! name's certificate in `[acme] storage` ([`storage`]), orders one when a name has
//! none or it is due ([`lifecycle`], one [`order`] per try, with [`schedule`] saying
//! when), and publishes what the listeners serve in [`Published`]: the certificate in
//! force for each name (a self-signed placeholder until the first), the http-01 answers
//! the pipeline gives on plain listeners, and the tls-alpn-01 certificates the TLS
//! resolver gives to `acme-tls/1` handshakes. A new certificate is in force for the
//! next handshake, without a reload. [`client`] is the HTTP client it speaks to the CA
//! with; [`keys`] makes keys, CSRs and the self-signed certificates.

mod client;
mod keys;
mod lifecycle;
mod order;
mod published;
mod schedule;
mod setup;
mod status;
mod storage;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub(crate) use published::{Published, HTTP01_PREFIX};
pub(crate) use status::{rfc3339, NameState};

use crate::config;
use setup::{Context, Setup, Shared};

/// The ALPN protocol of tls-alpn-01 handshakes (RFC 8737).
pub(crate) const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// What the manager thread is told.
#[derive(Clone)]
enum Control {
    /// Manage what this setup names (`None`: nothing).
    Run(Option<Arc<Setup>>),
    Stop,
}

/// The ACME manager; see the module docs. Dropping it stops the thread (an order under
/// way is abandoned and its lock released).
pub(crate) struct Manager {
    published: Arc<Published>,
    shared: Arc<Shared>,
    control: watch::Sender<Control>,
    /// Closed when the thread has ended, its tasks dropped (locks released, answers
    /// withdrawn).
    ended: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager").finish_non_exhaustive()
    }
}

impl Manager {
    /// Starts managing what `acme` names. Storage is opened (made if missing) and the
    /// stored certificates put in force before this returns, so the first handshake
    /// finds them; `Err` says why storage cannot be used.
    pub(crate) fn start(acme: Option<&config::Acme>) -> Result<Manager, String> {
        let published = Arc::new(Published::default());
        let setup = prepare(acme, &published)?;
        let shared = Arc::new(Shared::default());
        let (control, receiver) = watch::channel(Control::Run(setup));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("cannot start the ACME thread: {err}"))?;
        let (thread_published, thread_shared) = (published.clone(), shared.clone());
        let (end, ended) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("tollgate-acme".into())
            .spawn(move || {
                runtime.block_on(run(receiver, thread_published, thread_shared));
                // The tasks are dropped with the runtime, before the end is told.
                drop(runtime);
                drop(end);
            })
            .map_err(|err| format!("cannot start the ACME thread: {err}"))?;
        Ok(Manager {
            published,
            shared,
            control,
            ended: std::sync::Mutex::new(ended),
        })
    }

    /// Takes a reloaded `[acme]`: names added are managed, names removed are no longer
    /// served, and a changed CA, account or storage starts over with it. `Err` (storage
    /// unusable) changes nothing.
    pub(crate) fn update(&self, acme: Option<&config::Acme>) -> Result<(), String> {
        let setup = prepare(acme, &self.published)?;
        // At once, so `/status` agrees with the reload as soon as it is done.
        self.shared
            .keep_only(acme.map_or(&[][..], |acme| &acme.names));
        self.control.send_replace(Control::Run(setup));
        Ok(())
    }

    /// What the listeners serve for managed names.
    pub(crate) fn published(&self) -> &Arc<Published> {
        &self.published
    }

    /// Each managed name and its state, by name.
    pub(crate) fn states(&self) -> Vec<(String, NameState)> {
        let Ok(states) = self.shared.states.lock() else {
            return Vec::new();
        };
        states.iter().map(|(n, s)| (n.clone(), s.clone())).collect()
    }

    /// Orders that ended with a certificate, and orders that failed.
    pub(crate) fn orders(&self) -> (u64, u64) {
        let issued = self.shared.issued.load(Ordering::Relaxed);
        (issued, self.shared.failed.load(Ordering::Relaxed))
    }
}

impl Manager {
    /// Tells the thread to stop: an order under way is abandoned; what is in force
    /// stays served.
    pub(crate) fn stop(&self) {
        self.control.send_replace(Control::Stop);
    }

    /// Stops the thread and waits for it to end (at most `limit`), so an order under
    /// way has released its lock and withdrawn its answers before the process exits.
    pub(crate) fn stop_and_wait(&self, limit: std::time::Duration) {
        self.stop();
        if let Ok(ended) = self.ended.lock() {
            let _ = ended.recv_timeout(limit);
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Opens `acme`'s storage and puts what it holds in force.
fn prepare(
    acme: Option<&config::Acme>,
    published: &Published,
) -> Result<Option<Arc<Setup>>, String> {
    let Some(acme) = acme else {
        published.keep_only(&[]);
        return Ok(None);
    };
    let setup = Setup::new(acme)?;
    setup.publish_stored(published);
    Ok(Some(Arc::new(setup)))
}

/// How often the answers in storage are read (see [`mirror`]).
const MIRROR_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Reads the challenge answers that instances sharing storage publish there, so that
/// this one answers too when the CA reaches it instead.
async fn mirror(context: Arc<Context>) {
    let storage = &context.setup.storage;
    loop {
        let tokens = storage.answers(config::Challenge::Http01);
        let alpn = storage.answers(config::Challenge::TlsAlpn01);
        context.published.mirror(tokens, alpn);
        tokio::time::sleep(MIRROR_EVERY).await;
    }
}

/// The manager thread: one task per name (and the mirror), redone as the control says.
async fn run(
    mut control: watch::Receiver<Control>,
    published: Arc<Published>,
    shared: Arc<Shared>,
) {
    let mut tasks = Tasks {
        by_name: HashMap::new(),
        mirror: None,
        context: None,
        published,
        shared,
    };
    loop {
        let told = control.borrow_and_update().clone();
        let Control::Run(setup) = told else {
            break;
        };
        tasks.reconcile(setup);
        if control.changed().await.is_err() {
            break;
        }
    }
    tasks.abort_all();
}

/// The manager's tasks: one per name, and the mirror of answers in storage.
struct Tasks {
    by_name: HashMap<String, JoinHandle<()>>,
    mirror: Option<JoinHandle<()>>,
    context: Option<Arc<Context>>,
    published: Arc<Published>,
    shared: Arc<Shared>,
}

impl Tasks {
    /// Makes the tasks match `setup`: when only its names changed, the tasks that stay
    /// go on and share the context in force (account and all) with the new ones; any
    /// other change starts every task over.
    fn reconcile(&mut self, setup: Option<Arc<Setup>>) {
        let keep = match (&self.context, &setup) {
            (Some(current), Some(next)) => current.setup.differs_only_in_names(next),
            _ => false,
        };
        let names: Vec<String> = setup.iter().flat_map(|s| s.config.names.clone()).collect();
        // Again once the tasks of names gone are aborted: one may have set a state since.
        self.shared.keep_only(&names);
        if keep {
            self.by_name.retain(|name, task| {
                let stays = names.contains(name);
                if !stays {
                    task.abort();
                }
                stays
            });
        } else {
            self.abort_all();
            self.context = setup.map(|setup| {
                let (published, shared) = (self.published.clone(), self.shared.clone());
                Arc::new(Context::new(setup, published, shared))
            });
            if let Some(context) = &self.context {
                self.mirror = Some(tokio::spawn(mirror(context.clone())));
            }
        }
        let Some(context) = &self.context else {
            return;
        };
        for name in names {
            if let std::collections::hash_map::Entry::Vacant(free) = self.by_name.entry(name) {
                let task = lifecycle::manage(context.clone(), free.key().clone());
                free.insert(tokio::spawn(task));
            }
        }
    }

    fn abort_all(&mut self) {
        self.by_name.drain().for_each(|(_, task)| task.abort());
        if let Some(mirror) = self.mirror.take() {
            mirror.abort();
        }
    }
}
