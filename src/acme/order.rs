//! One order (RFC 8555 §7.4): a certificate for one name, proved with one challenge
//! type. The answers are published for the listeners while the CA validates and are
//! withdrawn when the order ends, however it ends.

use std::sync::Arc;

use rustls::sign::CertifiedKey;
use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Identifier, NewOrder, Order, OrderStatus,
    RetryPolicy,
};

use super::keys;
use super::published::Published;
use super::storage::Storage;
use crate::config::Challenge;

/// How long an answer is published before the CA is told to validate: instances sharing
/// storage read answers twice in this time, so whichever the CA reaches can answer.
const SHARE_ANSWERS: Duration = Duration::from_millis(1200);

/// How long the CA may take to validate, and then to issue.
const POLL: RetryPolicy = RetryPolicy::new()
    .initial_delay(Duration::from_millis(250))
    .timeout(Duration::from_secs(90));

/// A certificate the CA issued: the chain (PEM, leaf first) and its key (PEM).
pub(super) struct Issued {
    pub chain: String,
    pub key: String,
}

/// Why an order failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum OrderError {
    /// The CA could not validate the challenge: another type may work.
    #[error("{0}")]
    Validation(String),
    /// Anything else: the CA is down or refused, or an answer made no sense.
    #[error("{0}")]
    Other(String),
}

impl From<instant_acme::Error> for OrderError {
    fn from(err: instant_acme::Error) -> OrderError {
        OrderError::Other(err.to_string())
    }
}

/// Orders a certificate for `name`, answering `challenge` through `published` (and
/// `storage`, for sibling instances).
pub(super) async fn issue(
    account: &Account,
    name: &str,
    challenge: Challenge,
    published: &Published,
    storage: &Storage,
) -> Result<Issued, OrderError> {
    let identifiers = [Identifier::Dns(name.to_owned())];
    let mut order = account.new_order(&NewOrder::new(&identifiers)).await?;
    let mut answers = Answers {
        published,
        storage,
        tokens: Vec::new(),
        alpn: None,
    };
    answer(&mut order, name, challenge, &mut answers).await?;
    match order.poll_ready(&POLL).await {
        Ok(OrderStatus::Ready) => {}
        Ok(status) => {
            let why = failed_validation(&mut order).await;
            return Err(OrderError::Validation(
                why.unwrap_or_else(|| format!("order is {status:?}")),
            ));
        }
        Err(err) => {
            return Err(match failed_validation(&mut order).await {
                Some(why) => OrderError::Validation(why),
                None => err.into(),
            })
        }
    }
    drop(answers);
    let (key, csr) = keys::key_and_csr(name).map_err(|err| OrderError::Other(err.to_string()))?;
    order.finalize_csr(&csr).await?;
    let chain = order.poll_certificate(&POLL).await?;
    Ok(Issued {
        chain,
        key: key.serialize_pem(),
    })
}

/// Publishes the answer to each pending authorization, waits for instances sharing
/// storage to see them, and tells the CA they are ready.
async fn answer(
    order: &mut Order,
    name: &str,
    challenge: Challenge,
    answers: &mut Answers<'_>,
) -> Result<(), OrderError> {
    let kind = match challenge {
        Challenge::Http01 => ChallengeType::Http01,
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };
    let mut ready = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization = authorization?;
        match authorization.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            status => {
                let why = format!("authorization of {name} is {status:?}");
                return Err(OrderError::Validation(why));
            }
        }
        let Some(handle) = authorization.challenge(kind.clone()) else {
            let why = format!("the CA offers no {} challenge", challenge.as_str());
            return Err(OrderError::Validation(why));
        };
        let key_authorization = handle.key_authorization();
        match challenge {
            Challenge::Http01 => answers.http01(&handle.token, key_authorization.as_str()),
            Challenge::TlsAlpn01 => {
                let cert = keys::tls_alpn01(name, key_authorization.digest().as_ref())
                    .map_err(OrderError::Other)?;
                answers.tls_alpn01(name, key_authorization.as_str(), cert);
            }
        }
        ready.push(handle.url.clone());
    }
    if !ready.is_empty() {
        tokio::time::sleep(SHARE_ANSWERS).await;
        tell_ready(order, kind, &ready).await?;
    }
    Ok(())
}

/// Tells the CA the challenges at `urls` can be validated.
async fn tell_ready(
    order: &mut Order,
    kind: ChallengeType,
    urls: &[String],
) -> Result<(), OrderError> {
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization = authorization?;
        let Some(mut handle) = authorization.challenge(kind.clone()) else {
            continue;
        };
        if urls.contains(&handle.url) {
            handle.set_ready().await?;
        }
    }
    Ok(())
}

/// What the CA said of the challenge that failed, if one did.
async fn failed_validation(order: &mut Order) -> Option<String> {
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authorization)) = authorizations.next().await {
        let Ok(state) = authorization.refresh().await else {
            continue;
        };
        if state.status != AuthorizationStatus::Invalid {
            continue;
        }
        let problem = state.challenges.iter().find_map(|c| c.error.as_ref());
        return Some(match problem {
            Some(problem) => problem
                .detail
                .clone()
                .unwrap_or_else(|| problem.to_string()),
            None => "the CA could not validate the challenge".to_owned(),
        });
    }
    None
}

/// The answers one order published, here and in storage; withdrawn when dropped.
struct Answers<'a> {
    published: &'a Published,
    storage: &'a Storage,
    tokens: Vec<String>,
    alpn: Option<String>,
}

impl Answers<'_> {
    fn http01(&mut self, token: &str, key_authorization: &str) {
        self.published.answer_http01(token, key_authorization);
        self.share(Challenge::Http01, token, key_authorization);
        self.tokens.push(token.to_owned());
    }

    fn tls_alpn01(&mut self, name: &str, key_authorization: &str, cert: Arc<CertifiedKey>) {
        self.published.answer_tls_alpn01(name, cert);
        self.share(Challenge::TlsAlpn01, name, key_authorization);
        self.alpn = Some(name.to_owned());
    }

    /// Sibling instances answer from storage; this one answers without it.
    fn share(&self, challenge: Challenge, key: &str, key_authorization: &str) {
        if let Err(err) = self
            .storage
            .publish_answer(challenge, key, key_authorization)
        {
            tracing::warn!(error = %err, "cannot share a challenge answer with other instances");
        }
    }
}

impl Drop for Answers<'_> {
    fn drop(&mut self) {
        for token in &self.tokens {
            self.published.withdraw_http01(token);
            self.storage.withdraw_answer(Challenge::Http01, token);
        }
        if let Some(name) = &self.alpn {
            self.published.withdraw_tls_alpn01(name);
            self.storage.withdraw_answer(Challenge::TlsAlpn01, name);
        }
    }
}
