//! Numbers, durations and addresses written by hand into a log line: `core::fmt` cost
//! more than the rest of a line.

use std::io::Write as _;

/// `n` in decimal: the one writer the HTTP/1.1 codec uses too.
pub(super) use crate::wire::h1::push_decimal as decimal;

/// Seconds to the millisecond, as nginx writes times: `0.003` (the milliseconds
/// truncated, as nginx counts them).
pub(super) fn seconds(out: &mut Vec<u8>, took: std::time::Duration) {
    let millis = took.as_millis();
    decimal(out, u64::try_from(millis / 1000).unwrap_or(u64::MAX));
    let fraction = (millis % 1000) as u16;
    out.extend_from_slice(&[
        b'.',
        b'0' + (fraction / 100) as u8,
        b'0' + (fraction / 10 % 10) as u8,
        b'0' + (fraction % 10) as u8,
    ]);
}

/// An IP address as nginx writes it (IPv4 by hand; IPv6 by its `Display`, rarer).
pub(super) fn address(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                decimal(out, u64::from(octet));
            }
        }
        std::net::IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}
