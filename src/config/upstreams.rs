//! `[upstreams.NAME]`: the servers of each group (host names resolved now), their
//! weights, the balancing policy and the timeouts.

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{RawBalance, RawServerItem, RawUpstream, RawUpstreamEntry};
use super::validate::duration;
use super::{values, Balance, Upstream, UpstreamServer};

const MAX_WEIGHT: i64 = 1000;

/// One `[upstreams.NAME]`, or `None` when it had a problem (reported).
pub(super) fn upstream(entry: RawUpstreamEntry, diag: &mut Diagnostics<'_>) -> Option<Upstream> {
    let name = entry.name.get_ref();
    let valid_name = diag
        .check(entry.name.span(), values::table_name("upstream", name))
        .is_some();
    let body = entry.body?;
    let servers = diag
        .required(body.get_ref().servers.as_ref(), &body.span(), "servers")
        .and_then(|list| servers(list, diag));
    let raw: RawUpstream = body.into_inner();
    let connect_timeout = duration(&raw.connect_timeout, 2, diag);
    let read_timeout = duration(&raw.read_timeout, 60, diag);
    let fail_timeout = duration(&raw.fail_timeout, 10, diag);
    let balance = match raw.balance.unwrap_or(RawBalance::RoundRobin) {
        RawBalance::RoundRobin => Balance::RoundRobin,
        RawBalance::LeastConn => Balance::LeastConn,
        RawBalance::IpHash => Balance::IpHash,
    };
    valid_name.then_some(())?;
    Some(Upstream {
        name: name.clone(),
        servers: servers?,
        balance,
        connect_timeout: connect_timeout?,
        read_timeout: read_timeout?,
        keepalive: raw.keepalive.unwrap_or(64),
        max_fails: raw.max_fails.unwrap_or(1),
        fail_timeout: fail_timeout?,
    })
}

/// Every item of `servers`, host names resolved; each address of a name gets the
/// item's weight.
fn servers(
    list: &Spanned<Vec<Spanned<RawServerItem>>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<UpstreamServer>> {
    if list.get_ref().is_empty() {
        diag.error(list.span(), "`servers` must list at least one server");
        return None;
    }
    let mut servers = Vec::new();
    let mut valid = true;
    for item in list.get_ref() {
        let (addr, weight) = match item.get_ref() {
            RawServerItem::Addr(addr) => (Some((addr, item.span())), Some(1)),
            RawServerItem::Table(table) => {
                let weight = table.weight.as_ref().map_or(Some(1), |w| weight(w, diag));
                let addr = diag.required(table.addr.as_ref(), &item.span(), "addr");
                (addr.map(|addr| (addr.get_ref(), addr.span())), weight)
            }
        };
        let addrs = addr.and_then(|(addr, span)| diag.check(span, values::upstream_addrs(addr)));
        match (addrs, weight) {
            (Some(addrs), Some(weight)) => {
                servers.extend(
                    addrs
                        .into_iter()
                        .map(|addr| UpstreamServer { addr, weight }),
                );
            }
            _ => valid = false,
        }
    }
    valid.then_some(servers)
}

fn weight(weight: &Spanned<i64>, diag: &mut Diagnostics<'_>) -> Option<u32> {
    let value = *weight.get_ref();
    if (1..=MAX_WEIGHT).contains(&value) {
        return u32::try_from(value).ok();
    }
    diag.error(
        weight.span(),
        format!("invalid weight {value}: expected 1 to {MAX_WEIGHT}"),
    );
    None
}
