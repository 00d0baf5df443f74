//! One fetch of a JWK set: a `GET` on a new connection (a set is fetched every few
//! minutes at most), TLS with the system's roots for `https://`, the whole exchange
//! within 10 seconds, the answer a 200 of at most 256 KiB holding a set with a usable
//! key. Redirects are not followed. HMAC secrets are never taken from the network.

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CACHE_CONTROL, HOST};
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::access::jwt::KeySet;
use crate::config::{JwksEndpoint, JWKS_TIMEOUT};

/// The largest answer read.
const MAX_ANSWER: usize = 256 * 1024;

/// The set at `endpoint`, and how long it stays fresh (`Cache-Control: max-age`; zero for
/// `no-cache` or `no-store`; `None` when the answer says nothing).
pub(super) async fn fetch(endpoint: &JwksEndpoint) -> Result<(KeySet, Option<Duration>), String> {
    match tokio::time::timeout(JWKS_TIMEOUT, exchange(endpoint)).await {
        Ok(fetched) => fetched,
        Err(_) => Err(format!("no answer within {JWKS_TIMEOUT:?}")),
    }
}

async fn exchange(endpoint: &JwksEndpoint) -> Result<(KeySet, Option<Duration>), String> {
    let io = crate::upstream::dial::dial(&endpoint.upstream).await?;
    round_trip(io, endpoint).await
}

async fn round_trip<S>(io: S, endpoint: &JwksEndpoint) -> Result<(KeySet, Option<Duration>), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|err| format!("HTTP: {err}"))?;
    let driver = tokio::spawn(conn);
    let mut request = Request::new(Empty::<Bytes>::new());
    *request.uri_mut() = endpoint.target.as_str().parse().map_err(|err| format!("{err}"))?;
    request.headers_mut().insert(HOST, endpoint.host.clone());
    request.headers_mut().insert(ACCEPT, HeaderValue::from_static("application/jwk-set+json, application/json"));
    let answer = sender.send_request(request).await.map_err(|err| format!("HTTP: {err}"))?;
    let (parts, body) = answer.into_parts();
    if parts.status != StatusCode::OK {
        driver.abort();
        return Err(format!("answered {}", parts.status));
    }
    let body = Limited::new(body, MAX_ANSWER).collect().await;
    driver.abort();
    let body = body.map_err(|err| format!("reading the answer (at most {MAX_ANSWER} bytes): {err}"))?.to_bytes();
    let set = KeySet::parse(&body, false)?;
    Ok((set, fresh_for(parts.headers.get(CACHE_CONTROL))))
}

/// How long `Cache-Control` says the answer stays fresh.
fn fresh_for(value: Option<&HeaderValue>) -> Option<Duration> {
    let text = value?.to_str().ok()?;
    let mut max_age = None;
    for directive in text.split(',').map(str::trim) {
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        match name.to_ascii_lowercase().as_str() {
            "no-cache" | "no-store" => return Some(Duration::ZERO),
            "max-age" => max_age = value.trim_matches('"').parse::<u64>().ok().map(Duration::from_secs),
            _ => {}
        }
    }
    max_age
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_comes_from_max_age_and_no_cache_means_none() {
        let fresh = |text: &'static str| fresh_for(Some(&HeaderValue::from_static(text)));
        assert_eq!(fresh("public, max-age=3600"), Some(Duration::from_secs(3600)));
        assert_eq!(fresh("max-age=\"120\", must-revalidate"), Some(Duration::from_secs(120)));
        assert_eq!(fresh("no-cache"), Some(Duration::ZERO));
        assert_eq!(fresh("max-age=60, no-store"), Some(Duration::ZERO));
        assert_eq!(fresh("public"), None);
        assert_eq!(fresh("max-age=soon"), None);
        assert_eq!(fresh_for(None), None);
    }
}
