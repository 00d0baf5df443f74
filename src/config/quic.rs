//! `[quic]` and a `listen_tls` table's `quic = true`: HTTP/3 on UDP beside TCP's TLS, on
//! the same port, with the same certificates and sites. `advertise` puts `Alt-Svc:
//! h3=":PORT"; ma=86400` on the answers over TCP TLS, so that browsers come back over
//! HTTP/3; `advertised_port` names another port than the listener's own (a port mapped by
//! a balancer); `max_idle_timeout` closes a connection that went quiet. `retry_above` and
//! `refuse_above` admit new connections before their handshake (`server/quic.rs`), as
//! `per_address` and `per_address_burst` do each client address's, and
//! `host_key_file` keeps QUIC's keys across restarts (`tls::host_key`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::limit::Rate;

use super::diag::Diagnostics;
use super::raw::RawQuic;
use super::values;

/// `max_idle_timeout` when absent, in seconds.
const MAX_IDLE_TIMEOUT: u64 = 30;

/// `[quic]`, with its defaults when the file has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Quic {
    /// `Alt-Svc` on answers over TCP TLS, where the address serves HTTP/3 too.
    pub advertise: bool,
    /// The port `Alt-Svc` names; `None`: the listener's own.
    pub advertised_port: Option<u16>,
    /// A connection silent this long is closed (QUIC's idle timeout, the least of both
    /// sides').
    pub max_idle_timeout: Duration,
    /// New connections past this rate get a Retry first (address validation), unless
    /// they come back with a token.
    pub retry_above: Option<Rate>,
    /// New connections past this rate are refused.
    pub refuse_above: Option<Rate>,
    /// New connections per client address (per /64 for IPv6): past it, a Retry for a
    /// client that has not proven its address, a refusal for one that has.
    pub per_address: Option<PerAddress>,
    /// Where the stateless-reset and token keys live (relative to the file's directory).
    pub host_key_file: Option<PathBuf>,
    /// `segmentation_offload`: datagrams sent in batches the kernel cuts (GSO) where it can.
    pub segmentation_offload: bool,
    /// `early_data`: 0-RTT taken, for safe methods only (`server/h3.rs`).
    pub early_data: bool,
}

/// `per_address` and `per_address_burst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PerAddress {
    pub rate: Rate,
    /// New connections allowed above the rate at once (a zone's `burst`).
    pub burst: u64,
}

/// The largest `per_address_burst`.
const MAX_PER_ADDRESS_BURST: i64 = 1_000_000;

impl Default for Quic {
    fn default() -> Quic {
        Quic {
            advertise: true,
            advertised_port: None,
            max_idle_timeout: Duration::from_secs(MAX_IDLE_TIMEOUT),
            retry_above: None,
            refuse_above: None,
            per_address: None,
            host_key_file: None,
            segmentation_offload: true,
            early_data: false,
        }
    }
}

/// `[quic]` as written, checked (`host_key_file` relative to `base`); `None` when a key
/// has a problem (reported).
pub(super) fn quic(raw: RawQuic, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Quic> {
    let mut valid = true;
    let rate = |value: &Option<serde_spanned::Spanned<String>>, diag: &mut Diagnostics<'_>| match value {
        None => Some(None),
        Some(text) => diag.check(text.span(), super::zones::parse_rate(text.get_ref())).map(Some),
    };
    let retry_above = rate(&raw.retry_above, diag);
    let refuse_above = rate(&raw.refuse_above, diag);
    if let (Some(Some(retry)), Some(Some(refuse)), Some(at)) = (retry_above, refuse_above, &raw.refuse_above) {
        if refuse.per_second() < retry.per_second() {
            diag.error(at.span(), "`refuse_above` is below `retry_above`: no connection would ever get a Retry");
            valid = false;
        }
    }
    let advertised_port = match &raw.advertised_port {
        None => Some(None),
        Some(port) => match u16::try_from(*port.get_ref()) {
            Ok(p) if p > 0 => Some(Some(p)),
            _ => {
                diag.error(port.span(), format!("invalid advertised_port {}: expected 1 to 65535", port.get_ref()));
                None
            }
        },
    };
    let per_address = per_address(&raw, diag);
    let max_idle_timeout = values::duration_or(&raw.max_idle_timeout, MAX_IDLE_TIMEOUT, diag);
    let quic = Quic {
        advertise: raw.advertise.unwrap_or(true),
        advertised_port: advertised_port?,
        max_idle_timeout: max_idle_timeout?,
        retry_above: retry_above?,
        refuse_above: refuse_above?,
        per_address: per_address?,
        host_key_file: raw.host_key_file.map(|path| base.join(path.get_ref())),
        segmentation_offload: raw.segmentation_offload.unwrap_or(true),
        early_data: raw.early_data.unwrap_or(false),
    };
    valid.then_some(quic)
}

/// `per_address` with `per_address_burst` (0 when absent; an error without `per_address`).
fn per_address(raw: &RawQuic, diag: &mut Diagnostics<'_>) -> Option<Option<PerAddress>> {
    let burst = match &raw.per_address_burst {
        None => 0,
        Some(burst) => match *burst.get_ref() {
            value @ 0..=MAX_PER_ADDRESS_BURST if raw.per_address.is_some() => value.unsigned_abs(),
            _ if raw.per_address.is_none() => {
                diag.error(burst.span(), "`per_address_burst` without `per_address`: a burst above which rate?");
                return None;
            }
            value => {
                let message = format!("invalid per_address_burst {value}: expected 0 to {MAX_PER_ADDRESS_BURST}");
                diag.error(burst.span(), message);
                return None;
            }
        },
    };
    let Some(text) = &raw.per_address else {
        return Some(None);
    };
    let rate = diag.check(text.span(), super::zones::parse_rate(text.get_ref()))?;
    Some(Some(PerAddress { rate, burst }))
}
