//! What `tollgate reload` reads of the running gateway: the reload counts of the admin
//! API's `GET /status`, over one HTTP/1.1 connection (hyper's client, as the ACME client
//! speaks), with the bearer token when the file has one (`protect_reads` wants it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, HOST};
use http::{HeaderValue, Request};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::config::Admin;

/// Longest one call may take, connect to last byte.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest `/status` read: it lists every zone, group and address, far below this.
const MAX_ANSWER: usize = 16 << 20;

/// The part of `/status` that tells how reloads went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reloads {
    /// The generation in force.
    pub generation: u64,
    pub ok: u64,
    pub failed: u64,
    /// The last failed reload's error text.
    pub last_failure: Option<String>,
}

/// `GET /status` of the admin API `admin` describes.
pub(super) async fn read(admin: &Admin) -> Result<Reloads, String> {
    let addr = reachable(admin.listen);
    let call = get(addr, admin.token.as_ref().map(|t| t.as_bytes()));
    let body = match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(body) => body?,
        Err(_) => return Err(format!("no answer from the admin API at {addr} within {CALL_TIMEOUT:?}")),
    };
    parse(&body).ok_or_else(|| format!("the admin API at {addr} answered /status without its reload counts"))
}

/// Where to call an admin API that listens on `listen`: the loopback address of its
/// family when it listens on all addresses.
fn reachable(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

async fn get(addr: SocketAddr, token: Option<&[u8]>) -> Result<Bytes, String> {
    let fail = |what: &str, err: &dyn std::fmt::Display| {
        format!("the admin API at {addr}: {what}: {err}")
    };
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|err| fail("cannot connect", &err))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|err| fail("HTTP", &err))?;
    let driver = tokio::spawn(conn);
    let mut request = Request::get("/status").body(Empty::<Bytes>::new()).map_err(|err| fail("request", &err))?;
    if let Ok(host) = HeaderValue::from_str(&addr.to_string()) {
        request.headers_mut().insert(HOST, host);
    }
    if let Some(token) = token {
        let value = HeaderValue::from_bytes(&[b"Bearer ", token].concat())
            .map_err(|err| fail("the token", &err))?;
        request.headers_mut().insert(AUTHORIZATION, value);
    }
    let answer = sender
        .send_request(request)
        .await
        .map_err(|err| fail("HTTP", &err))?;
    let status = answer.status();
    let body = Limited::new(answer.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|err| fail("reading /status", &err))?
        .to_bytes();
    driver.abort();
    match status.is_success() {
        true => Ok(body),
        false => Err(format!("the admin API at {addr} answered /status with {status}")),
    }
}

/// The reload counts of a `/status` document.
fn parse(body: &[u8]) -> Option<Reloads> {
    let document: serde_json::Value = serde_json::from_slice(body).ok()?;
    let reloads = document.get("reloads")?;
    let last_failure = reloads
        .get("last_failure")
        .and_then(|failure| failure.get("error"))
        .and_then(|error| error.as_str())
        .map(str::to_owned);
    Some(Reloads {
        generation: document.get("generation")?.as_u64()?,
        ok: reloads.get("ok")?.as_u64()?,
        failed: reloads.get("failed")?.as_u64()?,
        last_failure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_generation_and_the_reload_counts() {
        let body = br#"{"generation":3,"sha256":"ab","reloads":{"ok":2,"failed":1,
            "last_failure":{"at":"2026-01-01T00:00:00Z","error":"f.toml:1:1: bad"}},"zones":{}}"#;
        let want = Reloads {
            generation: 3,
            ok: 2,
            failed: 1,
            last_failure: Some("f.toml:1:1: bad".into()),
        };
        assert_eq!(parse(body), Some(want));
        assert_eq!(parse(br#"{"generation":1}"#), None);
        assert_eq!(parse(b"<html>"), None);
    }

    #[test]
    fn an_admin_api_on_every_address_is_called_on_loopback() {
        let all: SocketAddr = "0.0.0.0:9901".parse().unwrap();
        assert_eq!(reachable(all), "127.0.0.1:9901".parse().unwrap());
        let all6: SocketAddr = "[::]:9901".parse().unwrap();
        assert_eq!(reachable(all6), "[::1]:9901".parse().unwrap());
        let one: SocketAddr = "10.0.0.1:9901".parse().unwrap();
        assert_eq!(reachable(one), one);
    }
}
