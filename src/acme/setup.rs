//! One `[acme]` section made ready: its storage opened, its HTTP client made, and the
//! certificates already stored put in force (a placeholder for each name without one)
//! before any handshake can ask for them. Then, while the section stays the same, the
//! account its orders share, loaded or made on first need.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use instant_acme::{Account, ExternalAccountKey, NewAccount};
use tokio::sync::{OnceCell, Semaphore};

use super::client::Client;
use super::keys;
use super::published::{Published, Served};
use super::status::NameState;
use super::storage::{Storage, Stored};
use crate::config;

/// Orders under way at once, over all names: a site with many names does not
/// flood the CA.
const ORDERS_AT_ONCE: usize = 4;

/// `[acme]`, ready to run.
#[derive(Debug)]
pub(super) struct Setup {
    pub config: config::Acme,
    pub storage: Storage,
    pub client: Client,
}

impl Setup {
    /// Opens storage and makes the client; `Err` says what is wrong, with the path.
    pub(super) fn new(config: &config::Acme) -> Result<Setup, String> {
        let storage =
            Storage::open(&config.storage, &config.directory).map_err(|err| err.to_string())?;
        let client = Client::new(config.ca.as_deref())?;
        Ok(Setup {
            config: config.clone(),
            storage,
            client,
        })
    }

    /// Whether `other` differs only in the names it manages (then the account and the
    /// names that stay are kept).
    pub(super) fn differs_only_in_names(&self, other: &Setup) -> bool {
        let strip = |c: &config::Acme| config::Acme {
            names: Vec::new(),
            covered: Vec::new(),
            ..c.clone()
        };
        strip(&self.config) == strip(&other.config)
    }

    /// Puts each name's stored certificate in force, or a placeholder for a name that
    /// has none (unless it already has an issued one in force).
    pub(super) fn publish_stored(&self, published: &Published) {
        published.keep_only(&self.config.names);
        for name in &self.config.names {
            match self.storage.certificate(name) {
                Ok(Some(stored)) => serve(published, name, &stored),
                Ok(None) | Err(_) if published.has_issued(name) => {}
                Ok(None) | Err(_) => match keys::placeholder(name) {
                    Ok(key) => published.serve(name, Served::placeholder(key)),
                    Err(err) => {
                        tracing::error!(name, error = %err, "cannot make a placeholder certificate")
                    }
                },
            }
        }
    }
}

/// Puts a stored certificate in force for `name`.
pub(super) fn serve(published: &Published, name: &str, stored: &Stored) {
    let certificate = &stored.certificate;
    published.serve(
        name,
        Served::issued(certificate.key.clone(), certificate.not_after),
    );
}

/// What the name tasks of the gateway share for its whole life: each name's state and
/// the order counts.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub states: Mutex<BTreeMap<String, NameState>>,
    pub issued: AtomicU64,
    pub failed: AtomicU64,
}

impl Shared {
    pub(super) fn set(&self, name: &str, state: NameState) {
        if let Ok(mut states) = self.states.lock() {
            states.insert(name.to_owned(), state);
        }
    }

    /// Forgets the states of names no longer managed.
    pub(super) fn keep_only(&self, names: &[String]) {
        if let Ok(mut states) = self.states.lock() {
            states.retain(|name, _| names.contains(name));
        }
    }

    pub(super) fn count(&self, issued: bool) {
        let counter = if issued { &self.issued } else { &self.failed };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the name tasks of one setup share: the setup, the account, the order slots.
pub(super) struct Context {
    pub setup: Arc<Setup>,
    pub published: Arc<Published>,
    pub shared: Arc<Shared>,
    account: OnceCell<Account>,
    pub orders: Semaphore,
}

impl Context {
    pub(super) fn new(setup: Arc<Setup>, published: Arc<Published>, shared: Arc<Shared>) -> Context {
        Context {
            setup,
            published,
            shared,
            account: OnceCell::new(),
            orders: Semaphore::new(ORDERS_AT_ONCE),
        }
    }

    /// The account: the stored one, or one made now (and stored). Instances sharing
    /// storage make one between them: the maker holds `account.lock`.
    pub(super) async fn account(&self) -> Result<&Account, String> {
        self.account.get_or_try_init(|| self.load_or_make()).await
    }

    /// The account if one is stored (or already loaded); none is made.
    pub(super) async fn stored_account(&self) -> Option<&Account> {
        if self.account.get().is_none() && !matches!(self.setup.storage.account(), Ok(Some(_))) {
            return None;
        }
        self.account().await.ok()
    }

    async fn load_or_make(&self) -> Result<Account, String> {
        let storage = &self.setup.storage;
        loop {
            if let Some(credentials) = storage.account()? {
                let account = Account::builder_with_http(Box::new(self.setup.client.clone()))
                    .from_credentials(credentials)
                    .await
                    .map_err(|err| {
                        format!("ACME directory {}: {err}", self.setup.config.directory)
                    })?;
                self.update_contact(&account).await;
                return Ok(account);
            }
            let Some(_lock) = storage.lock("account").map_err(|err| err.to_string())? else {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            };
            if storage.account()?.is_some() {
                continue;
            }
            return self.make().await;
        }
    }

    /// Gives the CA the configured contact if the stored account was made (or last
    /// updated) with another. A failure is logged and tried again at the next start.
    async fn update_contact(&self, account: &Account) {
        let storage = &self.setup.storage;
        let wanted = contact(&self.setup.config);
        if storage.account_contact().as_deref() == Some(wanted.as_str()) {
            return;
        }
        let contacts: Vec<&str> = [wanted.as_str()]
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect();
        match account.update_contacts(&contacts).await {
            Ok(()) => {
                if let Err(err) = storage.save_account_contact(&wanted) {
                    tracing::warn!(error = %err, "cannot store the account's contact");
                }
            }
            Err(err) => tracing::warn!(error = %err, "cannot update the ACME account's contact"),
        }
    }

    async fn make(&self) -> Result<Account, String> {
        let config = &self.setup.config;
        let contact = contact(config);
        let contacts: Vec<&str> = [contact.as_str()]
            .into_iter()
            .filter(|c| !c.is_empty())
            .collect();
        let new = NewAccount {
            contact: &contacts,
            terms_of_service_agreed: true,
            only_return_existing: false,
        };
        let eab = config
            .eab
            .as_ref()
            .map(|eab| ExternalAccountKey::new(eab.kid.clone(), &eab.hmac_key));
        let (account, credentials) =
            Account::builder_with_http(Box::new(self.setup.client.clone()))
                .create(&new, config.directory.clone(), eab.as_ref())
                .await
                .map_err(|err| format!("ACME directory {}: {err}", config.directory))?;
        let storage = &self.setup.storage;
        storage
            .save_account(&credentials)
            .map_err(|err| err.to_string())?;
        if let Err(err) = storage.save_account_contact(&contact) {
            tracing::warn!(error = %err, "cannot store the account's contact");
        }
        tracing::info!(directory = %config.directory, account = account.id(), "ACME account made");
        Ok(account)
    }
}

/// The account's contact URL for `[acme] email` (`""` without one).
fn contact(config: &config::Acme) -> String {
    config
        .email
        .as_ref()
        .map_or_else(String::new, |email| format!("mailto:{email}"))
}
