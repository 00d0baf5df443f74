//! The PROXY protocol header a load balancer (HAProxy, an AWS NLB, a GCP proxy) puts before
//! a connection's first byte to say whom it relays: versions 1 (a text line) and 2 (binary),
//! as HAProxy's specification defines them
//! (<https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt>).
//!
//! [`parse`] is pure: it reads the start of a connection's buffer and says whether a whole
//! header is there, how long it is, and what it says, or why it cannot be one. It never
//! copies, so a sender's header costs no memory beyond the read buffer, which the caller
//! bounds by [`MAX_HEADER`]. It is strict, since the header decides the client's address
//! for access rules, keys and logs: a byte the spec does not allow is [`Malformed`] as
//! soon as it is seen, not when the line ends.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest header accepted, in bytes. A v1 line is at most 107 bytes (the spec's
/// worst case); a v2 header is 16 bytes plus its length field, which could say 65,535,
/// but the senders seen in practice add a few hundred bytes of TLVs at most (AWS NLB's
/// endpoint id, GCP's connection id, HAProxy's SSL details), so a longer one is refused
/// rather than buffered.
pub(crate) const MAX_HEADER: usize = 4096;

/// The longest v1 line, CRLF included: `PROXY UNKNOWN` followed by two full IPv6
/// addresses and two 5-digit ports (spec §2.1).
const V1_MAX_LINE: usize = 107;

/// How a v1 line starts.
const V1_PREFIX: &[u8] = b"PROXY ";

/// How a v2 header starts (spec §2.2): chosen to be refused by other protocols' parsers.
const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// The fixed part of a v2 header: the signature, version and command, family and
/// protocol, and the length of what follows.
const V2_FIXED: usize = 16;

/// What the header said. Both addresses are `None` when the sender relays no client:
/// v1 `UNKNOWN`, v2 `LOCAL` (the balancer's own health checks), and v2 families without
/// a TCP address (`AF_UNSPEC`, `AF_UNIX`); the caller then uses the connection's own
/// addresses, as the spec asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The client, as the sender saw it.
    pub source: Option<SocketAddr>,
    /// The address the client connected to, on the sender.
    pub destination: Option<SocketAddr>,
}

impl Header {
    /// A header that relays no client.
    const NONE: Header = Header {
        source: None,
        destination: None,
    };
}

/// What the start of a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A header may still come: read more (up to [`MAX_HEADER`] bytes in all).
    Incomplete,
    /// A whole header, `len` bytes long: the connection's data starts after them.
    Complete { header: Header, len: usize },
}

/// Why the start of a connection is not a PROXY header the gateway accepts. Each means
/// the connection is closed: the spec forbids guessing, and a sender that gets its own
/// header wrong cannot be trusted for the address in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Malformed {
    #[error("not a PROXY protocol header: it starts with neither `PROXY ` nor the v2 signature")]
    NotProxy,
    #[error("PROXY header longer than {limit} bytes")]
    TooLong { limit: usize },
    #[error("PROXY v1: the protocol after `PROXY ` is not `TCP4`, `TCP6` or `UNKNOWN`")]
    V1Protocol,
    #[error("PROXY v1: byte {0:#04x} has no place in the line")]
    V1Byte(u8),
    #[error("PROXY v1: a lone CR or LF; the line ends with CRLF")]
    V1LineEnd,
    #[error("PROXY v1: expected four fields (source, destination, source port, destination port) after single spaces")]
    V1Fields,
    #[error("PROXY v1: an address is not one of the line's family (TCP4: dotted IPv4 without leading zeros, TCP6: IPv6)")]
    V1Address,
    #[error("PROXY v1: a port is not a decimal number from 0 to 65535 without leading zeros")]
    V1Port,
    #[error("PROXY v2: version {0}, where only 2 exists")]
    V2Version(u8),
    #[error("PROXY v2: command {0:#x} is neither LOCAL (0) nor PROXY (1)")]
    V2Command(u8),
    #[error("PROXY v2: address family and protocol {0:#04x} are not defined")]
    V2Family(u8),
    #[error("PROXY v2: family and protocol {0:#04x} relay datagrams, which a TCP connection cannot carry")]
    V2Datagram(u8),
    #[error("PROXY v2: length {len} is shorter than the {need} address bytes of family {family:#04x}")]
    V2Length { family: u8, len: u16, need: u16 },
}

/// Reads a PROXY header, v1 or v2, from the start of `buf`: [`Parsed::Incomplete`] while
/// the bytes so far can still become one, [`Malformed`] as soon as they cannot.
pub(crate) fn parse(buf: &[u8]) -> Result<Parsed, Malformed> {
    if agrees(buf, V2_SIGNATURE) {
        parse_v2(buf)
    } else if agrees(buf, V1_PREFIX) {
        parse_v1(buf)
    } else {
        Err(Malformed::NotProxy)
    }
}

/// Whether `buf` and `prefix` are equal as far as both go: `buf` holds `prefix` or may
/// still become it.
fn agrees(buf: &[u8], prefix: &[u8]) -> bool {
    let n = buf.len().min(prefix.len());
    buf.get(..n) == prefix.get(..n)
}

/// The v1 protocols (spec §2.1), by the word that names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V1Protocol {
    Tcp4,
    Tcp6,
    Unknown,
}

/// Each protocol's word with what must follow it: TCP4 and TCP6 take four fields after
/// a space; UNKNOWN may end the line at once.
const V1_PROTOCOLS: [(&[u8], V1Protocol); 3] = [
    (b"TCP4 ", V1Protocol::Tcp4),
    (b"TCP6 ", V1Protocol::Tcp6),
    (b"UNKNOWN", V1Protocol::Unknown),
];

/// A v1 line (`buf` agrees with `PROXY `). The line is checked as far as it has come,
/// so that a stray byte is refused before the CRLF; its fields are parsed at the CRLF.
/// Bytes are judged in order, so the reason given does not depend on how many arrived.
fn parse_v1(buf: &[u8]) -> Result<Parsed, Malformed> {
    let (line, end) = v1_line(buf);
    let after_prefix = line.get(V1_PREFIX.len()..).unwrap_or_default();
    let Some((protocol, word)) = v1_protocol(after_prefix)? else {
        return match end {
            LineEnd::Crlf => Err(Malformed::V1Protocol),
            LineEnd::Open => Ok(Parsed::Incomplete),
            LineEnd::Bad(reason) => Err(reason),
        };
    };
    let rest = after_prefix.get(word..).unwrap_or_default();
    match protocol {
        // "The receiver must ignore anything presented before the CRLF": past a space.
        V1Protocol::Unknown if rest.first().is_some_and(|&b| b != b' ') => {
            return Err(Malformed::V1Protocol)
        }
        V1Protocol::Unknown => {}
        V1Protocol::Tcp4 | V1Protocol::Tcp6 => v1_check_so_far(protocol, rest)?,
    }
    match end {
        LineEnd::Open => Ok(Parsed::Incomplete),
        LineEnd::Bad(reason) => Err(reason),
        LineEnd::Crlf => {
            let header = match protocol {
                V1Protocol::Unknown => Header::NONE,
                V1Protocol::Tcp4 | V1Protocol::Tcp6 => v1_addresses(protocol, rest)?,
            };
            let len = line.len() + 2;
            Ok(Parsed::Complete { header, len })
        }
    }
}

/// How a v1 line ends, as far as it has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineEnd {
    /// With CRLF.
    Crlf,
    /// Not yet: no CR or LF so far, or a CR as the last byte.
    Open,
    /// Wrongly: a lone CR or LF, or no CRLF within [`V1_MAX_LINE`].
    Bad(Malformed),
}

/// The v1 line up to its first CR or LF (or as far as it has come), and how it ends. A
/// lone CR or LF is refused (spec: "must not tolerate a single CR or LF character to
/// end the line"), and so is a line whose CRLF would end past [`V1_MAX_LINE`].
fn v1_line(buf: &[u8]) -> (&[u8], LineEnd) {
    let too_long = LineEnd::Bad(Malformed::TooLong { limit: V1_MAX_LINE });
    let window = buf.get(..V1_MAX_LINE).unwrap_or(buf);
    let Some(at) = window.iter().position(|&b| b == b'\r' || b == b'\n') else {
        let end = if buf.len() >= V1_MAX_LINE {
            too_long
        } else {
            LineEnd::Open
        };
        return (window, end);
    };
    let line = window.get(..at).unwrap_or(window);
    let end = if window.get(at) == Some(&b'\n') {
        LineEnd::Bad(Malformed::V1LineEnd)
    } else if at + 2 > V1_MAX_LINE {
        too_long
    } else {
        match buf.get(at + 1) {
            None => LineEnd::Open,
            Some(b'\n') => LineEnd::Crlf,
            Some(_) => LineEnd::Bad(Malformed::V1LineEnd),
        }
    };
    (line, end)
}

/// The protocol word at the start of `after_prefix` and how many bytes it takes; `None`
/// while the bytes so far are the start of one.
fn v1_protocol(after_prefix: &[u8]) -> Result<Option<(V1Protocol, usize)>, Malformed> {
    for (word, protocol) in V1_PROTOCOLS {
        if after_prefix.starts_with(word) {
            return Ok(Some((protocol, word.len())));
        }
    }
    if V1_PROTOCOLS
        .iter()
        .any(|(word, _)| word.starts_with(after_prefix))
    {
        Ok(None)
    } else {
        Err(Malformed::V1Protocol)
    }
}

/// Refuses what no TCP4 or TCP6 line can hold, in the fields seen so far and in their
/// order: a byte outside the family's alphabet, an empty field (two spaces, or a space
/// first), a fifth field.
fn v1_check_so_far(protocol: V1Protocol, fields: &[u8]) -> Result<(), Malformed> {
    let allowed = |b: u8| match protocol {
        V1Protocol::Tcp4 => b.is_ascii_digit() || b == b'.' || b == b' ',
        _ => b.is_ascii_hexdigit() || b == b'.' || b == b':' || b == b' ',
    };
    let mut spaces = 0;
    // The space after the protocol word.
    let mut previous = b' ';
    for &b in fields {
        if !allowed(b) {
            return Err(Malformed::V1Byte(b));
        }
        if b == b' ' {
            spaces += 1;
            if previous == b' ' || spaces > 3 {
                return Err(Malformed::V1Fields);
            }
        }
        previous = b;
    }
    Ok(())
}

/// The four fields of a whole TCP4 or TCP6 line (after the protocol's space, CRLF
/// excluded): `source destination source_port destination_port`.
fn v1_addresses(protocol: V1Protocol, fields: &[u8]) -> Result<Header, Malformed> {
    let mut parts = fields.split(|&b| b == b' ');
    let (Some(source), Some(destination), Some(source_port), Some(destination_port), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(Malformed::V1Fields);
    };
    let source = SocketAddr::new(v1_ip(protocol, source)?, v1_port(source_port)?);
    let destination = SocketAddr::new(v1_ip(protocol, destination)?, v1_port(destination_port)?);
    Ok(Header {
        source: Some(source),
        destination: Some(destination),
    })
}

/// An address of the line's family, as std parses it: IPv4 as exactly four decimal
/// numbers without leading zeros (the spec's rule against octal), IPv6 in any of its
/// text forms.
fn v1_ip(protocol: V1Protocol, field: &[u8]) -> Result<IpAddr, Malformed> {
    let text = std::str::from_utf8(field).map_err(|_| Malformed::V1Address)?;
    let ip = match protocol {
        V1Protocol::Tcp4 => text.parse::<Ipv4Addr>().map(IpAddr::V4),
        _ => text.parse::<Ipv6Addr>().map(IpAddr::V6),
    };
    ip.map_err(|_| Malformed::V1Address)
}

/// A port: 1 to 5 decimal digits, no leading zero but for `0` itself, at most 65535.
fn v1_port(field: &[u8]) -> Result<u16, Malformed> {
    let digits_only = !field.is_empty() && field.len() <= 5 && field.iter().all(u8::is_ascii_digit);
    if !digits_only || (field.len() > 1 && field.first() == Some(&b'0')) {
        return Err(Malformed::V1Port);
    }
    let value = field
        .iter()
        .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
    u16::try_from(value).map_err(|_| Malformed::V1Port)
}

/// A v2 header (`buf` agrees with the signature). Each byte of the fixed part is checked
/// as soon as it arrives, and the length against [`MAX_HEADER`] and the family's address
/// block before any of what it announces is waited for.
fn parse_v2(buf: &[u8]) -> Result<Parsed, Malformed> {
    let Some(&version_command) = buf.get(V2_SIGNATURE.len()) else {
        return Ok(Parsed::Incomplete);
    };
    let version = version_command >> 4;
    if version != 2 {
        return Err(Malformed::V2Version(version));
    }
    let local = match version_command & 0x0f {
        0x0 => true,
        0x1 => false,
        command => return Err(Malformed::V2Command(command)),
    };
    let Some(&family) = buf.get(13) else {
        return Ok(Parsed::Incomplete);
    };
    // LOCAL: "discard the protocol block including the family which is ignored".
    let need = if local { 0 } else { v2_address_block(family)? };
    let Some(&[high, low]) = buf.get(14..V2_FIXED) else {
        return Ok(Parsed::Incomplete);
    };
    let len = u16::from_be_bytes([high, low]);
    let total = V2_FIXED + usize::from(len);
    if total > MAX_HEADER {
        return Err(Malformed::TooLong { limit: MAX_HEADER });
    }
    if len < need {
        return Err(Malformed::V2Length { family, len, need });
    }
    let Some(block) = buf.get(V2_FIXED..total) else {
        return Ok(Parsed::Incomplete);
    };
    let header = if local {
        Header::NONE
    } else {
        v2_addresses(family, block).ok_or(Malformed::V2Length { family, len, need })?
    };
    Ok(Parsed::Complete { header, len: total })
}

/// How many bytes the addresses of a PROXY command's family and protocol take (spec
/// §2.2): TCP over IPv4 12, over IPv6 36, a unix stream 216, AF_UNSPEC none.
///
/// The datagram protocols (UDP, unix datagrams) are refused: the connection being read is
/// TCP, so a sender that says it relays datagrams is misconfigured. (The spec lets a
/// receiver treat them as AF_UNSPEC instead; HAProxy's receiver does.) A unix stream is
/// accepted without an address, since HAProxy may front a unix socket; its paths say
/// nothing the access rules could use.
fn v2_address_block(family: u8) -> Result<u16, Malformed> {
    match family {
        0x00 => Ok(0),
        0x11 => Ok(12),
        0x21 => Ok(36),
        0x31 => Ok(216),
        0x12 | 0x22 | 0x32 => Err(Malformed::V2Datagram(family)),
        _ => Err(Malformed::V2Family(family)),
    }
}

/// The addresses of a PROXY command, from the block after the fixed part (the TLVs after
/// the addresses are skipped); `None` if the block is shorter than its family's addresses,
/// which [`parse_v2`] has already refused.
fn v2_addresses(family: u8, block: &[u8]) -> Option<Header> {
    let (source, destination) = match family {
        0x11 => v2_pair::<4>(block)?,
        0x21 => v2_pair::<16>(block)?,
        _ => return Some(Header::NONE),
    };
    Some(Header {
        source: Some(source),
        destination: Some(destination),
    })
}

/// Source and destination from `source_ip destination_ip source_port destination_port`,
/// each address `N` bytes and each port 2, in network byte order.
fn v2_pair<const N: usize>(block: &[u8]) -> Option<(SocketAddr, SocketAddr)>
where
    IpAddr: From<[u8; N]>,
{
    let source: [u8; N] = block.get(..N)?.try_into().ok()?;
    let destination: [u8; N] = block.get(N..2 * N)?.try_into().ok()?;
    let &[sh, sl, dh, dl] = block.get(2 * N..2 * N + 4)? else {
        return None;
    };
    Some((
        SocketAddr::new(IpAddr::from(source), u16::from_be_bytes([sh, sl])),
        SocketAddr::new(IpAddr::from(destination), u16::from_be_bytes([dh, dl])),
    ))
}

#[cfg(test)]
mod tests;
