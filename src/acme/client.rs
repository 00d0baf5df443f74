//! The HTTP client instant-acme speaks to the CA through: one connection per request
//! (ACME makes few), TLS with rustls and ring like the rest of the gateway, the system's
//! roots or `[acme] ca`, a deadline on every request and a cap on every answer.
//!
//! It also reads `Retry-After`, which instant-acme's errors drop. On a refusal (429, 503)
//! the wait is noted for the order that got it ([`noting_retry_after`]), and a 503 (the
//! CA overloaded) makes every order wait. Every `Retry-After` is capped before
//! instant-acme sees it.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{HOST, RETRY_AFTER};
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use hyper_util::rt::TokioIo;
use instant_acme::{BodyWrapper, BytesResponse, Error, HttpClient};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Longest an ACME request may take, connect to last byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from the CA (a certificate chain is a few KiB).
const MAX_ANSWER: usize = 1024 * 1024;
/// Longest wait a `Retry-After` may ask for: a CA's day-long rate limit is honoured,
/// a nonsense value is not.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest wait a 503 imposes on every order (the CA overloaded, not refusing one name).
const MAX_QUIET: Duration = Duration::from_secs(3600);

tokio::task_local! {
    /// The longest `Retry-After` of a refusal during [`noting_retry_after`].
    static ASKED: Cell<Option<Duration>>;
}

/// Runs `work`, and says how long the CA asked to wait in any refusal (429 or 503) it got
/// meanwhile.
pub(super) async fn noting_retry_after<F: Future>(work: F) -> (F::Output, Option<Duration>) {
    let noted = async {
        let output = work.await;
        (output, ASKED.with(Cell::get))
    };
    ASKED.scope(Cell::new(None), noted).await
}

/// The client, shared by every order of one `[acme]` setup.
#[derive(Clone, Debug)]
pub(super) struct Client {
    tls: Arc<rustls::ClientConfig>,
    /// Until when the CA asked not to be asked again.
    quiet_until: Arc<Mutex<Option<Instant>>>,
}

impl Client {
    /// A client trusting `ca` (DER certificates), or the system's roots without it.
    pub(super) fn new(
        ca: Option<&[rustls::pki_types::CertificateDer<'static>]>,
    ) -> Result<Client, String> {
        let mut roots = rustls::RootCertStore::empty();
        match ca {
            Some(ca) => {
                for cert in ca {
                    roots
                        .add(cert.clone())
                        .map_err(|err| format!("`ca`: {err}"))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err("no system root certificates found to trust the ACME server: name its CA with `ca`".into());
                }
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(crate::certs::provider()))
            .with_safe_default_protocol_versions()
            .map_err(|err| err.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Client {
            tls: Arc::new(tls),
            quiet_until: Arc::default(),
        })
    }

    /// Until when the overloaded CA asked every order to wait, if that is still ahead.
    pub(super) fn quiet_until(&self, now: Instant) -> Option<Instant> {
        let until = *self.quiet_until.lock().ok()?;
        until.filter(|&until| until > now)
    }

    /// Caps the answer's `Retry-After` (or drops one that does not read) and notes it
    /// when the answer is a refusal.
    fn note_retry_after(&self, answer: &mut http::response::Parts) {
        let Some(value) = answer.headers.get(RETRY_AFTER) else {
            return;
        };
        let wait = value
            .to_str()
            .ok()
            .and_then(|value| retry_after(value, SystemTime::now()))
            .map(|wait| wait.min(MAX_RETRY_AFTER));
        let Some(wait) = wait else {
            answer.headers.remove(RETRY_AFTER);
            return;
        };
        answer
            .headers
            .insert(RETRY_AFTER, http::HeaderValue::from(wait.as_secs()));
        let status = answer.status.as_u16();
        if !matches!(status, 429 | 503) {
            return;
        }
        let _ = ASKED.try_with(|asked| asked.set(Some(asked.get().map_or(wait, |w| w.max(wait)))));
        if status == 503 {
            let until = Instant::now() + wait.min(MAX_QUIET);
            if let Ok(mut quiet) = self.quiet_until.lock() {
                *quiet = Some(quiet.map_or(until, |old| old.max(until)));
            }
        }
    }

    async fn send(&self, req: Request<BodyWrapper<Bytes>>) -> Result<BytesResponse, Error> {
        let (mut parts, body) =
            match tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(req)).await {
                Ok(answer) => answer?,
                Err(_) => return Err(other(format!("no answer within {REQUEST_TIMEOUT:?}"))),
            };
        self.note_retry_after(&mut parts);
        Ok(BytesResponse {
            parts,
            body: Box::new(body),
        })
    }

    async fn exchange(
        &self,
        mut req: Request<BodyWrapper<Bytes>>,
    ) -> Result<(http::response::Parts, Bytes), Error> {
        let uri = req.uri().clone();
        let host = uri
            .host()
            .ok_or_else(|| other(format!("no host in {uri}")))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(other(format!("not an http(s) URL: {uri}"))),
        };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        // The request line is the path alone, as HTTP/1.1 origin servers expect.
        let authority = uri.authority().map(|a| a.as_str().to_owned());
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        *req.uri_mut() = path.parse().map_err(Error::from)?;
        if let Some(authority) = authority {
            let value = http::HeaderValue::from_str(&authority).map_err(http::Error::from)?;
            req.headers_mut().insert(HOST, value);
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|err| other(format!("cannot connect to {host}:{port}: {err}")))?;
        if !https {
            return round_trip(tcp, req).await;
        }
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| other(format!("not a server name: {host}")))?;
        let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|err| other(format!("TLS with {host}:{port}: {err}")))?;
        round_trip(tls, req).await
    }
}

impl HttpClient for Client {
    fn request(
        &self,
        req: Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, Error>> + Send>> {
        let client = self.clone();
        Box::pin(async move { client.send(req).await })
    }
}

/// One request on a fresh HTTP/1.1 connection, the answer read whole (at most
/// [`MAX_ANSWER`]).
async fn round_trip<S>(
    io: S,
    req: Request<BodyWrapper<Bytes>>,
) -> Result<(http::response::Parts, Bytes), Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|err| other(format!("HTTP: {err}")))?;
    let driver = tokio::spawn(conn);
    let answer: Response<hyper::body::Incoming> = sender
        .send_request(req)
        .await
        .map_err(|err| other(format!("HTTP: {err}")))?;
    let (parts, body) = answer.into_parts();
    let body = Limited::new(body, MAX_ANSWER)
        .collect()
        .await
        .map_err(|err| other(format!("reading the answer: {err}")))?
        .to_bytes();
    driver.abort();
    Ok((parts, body))
}

fn other(message: String) -> Error {
    Error::Other(message.into())
}

/// A `Retry-After` value: seconds, or an HTTP date (after `now`).
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let format = time::format_description::well_known::Rfc2822;
    let date =
        time::OffsetDateTime::parse(value.trim().replace("GMT", "+0000").as_str(), &format).ok()?;
    let at = SystemTime::from(date);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, retry_after: &str) -> http::response::Parts {
        let answer = Response::builder()
            .status(status)
            .header(RETRY_AFTER, retry_after)
            .body(())
            .unwrap();
        answer.into_parts().0
    }

    #[tokio::test]
    async fn a_refusal_s_retry_after_is_capped_noted_for_its_order_and_a_503_s_for_all() {
        let client = Client::new(Some(&[])).unwrap();
        // Past u64 seconds: instant-acme would overflow adding it to the clock.
        let mut huge = answer(429, "18446744073709551615");
        let ((), asked) = noting_retry_after(async { client.note_retry_after(&mut huge) }).await;
        assert_eq!(asked, Some(MAX_RETRY_AFTER));
        assert_eq!(
            huge.headers[RETRY_AFTER],
            MAX_RETRY_AFTER.as_secs().to_string().as_str()
        );
        assert_eq!(
            client.quiet_until(Instant::now()),
            None,
            "a 429 concerns its order only"
        );
        // A success's Retry-After (ARI's next poll) is no refusal.
        let mut ari = answer(200, "21600");
        let ((), asked) = noting_retry_after(async { client.note_retry_after(&mut ari) }).await;
        assert_eq!(asked, None);
        let mut nonsense = answer(429, "soon");
        client.note_retry_after(&mut nonsense);
        assert!(
            nonsense.headers.get(RETRY_AFTER).is_none(),
            "dropped, not passed on"
        );
        let mut overloaded = answer(503, "86400");
        client.note_retry_after(&mut overloaded);
        let quiet = client
            .quiet_until(Instant::now())
            .expect("every order waits");
        assert!(quiet <= Instant::now() + MAX_QUIET);
    }

    #[test]
    fn retry_after_in_seconds_and_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
        let later = retry_after("Tue, 14 Nov 2023 22:15:20 GMT", now);
        assert_eq!(later, Some(Duration::from_secs(120)));
        let earlier = retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now);
        assert_eq!(earlier, Some(Duration::ZERO));
        assert_eq!(retry_after("soon", now), None);
    }
}
