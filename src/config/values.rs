//! Scalar values of the file: durations, sizes, worker counts, addresses (and a regex's
//! error, told in one line). Each parser
//! returns the typed value or a message saying what was expected; [`duration_or`] also
//! reports it, for the many keys that are a duration with a default.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use ipnet::IpNet;
use toml::Value;

use super::diag::Diagnostics;
use super::raw::Loose;

/// Most worker threads a file may ask for; `"auto"` is capped here too.
pub(crate) const MAX_WORKERS: usize = 256;
/// The largest `burst` and `delay` of a limit, and `max` of a `concurrency` zone.
pub(crate) const MAX_BURST: i64 = 1_000_000;

const DURATION_HINT: &str = r#"expected a number with a unit (ms, s, m, h), e.g. "10s""#;
const SIZE_HINT: &str =
    r#"expected a number of bytes, optionally with a unit (k, m, g), e.g. "16k""#;

/// `"500ms"`, `"10s"`, `"5m"`, `"1h"`: an integer and a unit, nothing else. A bare
/// number is refused (nginx would read seconds) because `timeout = 10` is too often
/// meant as milliseconds. Zero is refused: every duration of this release is a timeout.
pub(crate) fn duration(value: &Value) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {value}: {DURATION_HINT}");
    let text = value.as_str().ok_or_else(invalid)?;
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(invalid)?;
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().map_err(|_| invalid())?;
    let millis_per_unit = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(invalid()),
    };
    let millis = number
        .checked_mul(millis_per_unit)
        .ok_or_else(|| format!("invalid duration {value}: too large"))?;
    if millis == 0 {
        return Err(format!(
            "invalid duration {value}: must be greater than zero"
        ));
    }
    Ok(Duration::from_millis(millis))
}

/// The duration at `value`, or `default_secs` when the key is absent.
pub(crate) fn duration_or(
    value: &Option<Loose>,
    default_secs: u64,
    diag: &mut Diagnostics<'_>,
) -> Option<Duration> {
    match value {
        Some(value) => diag.check(value.span(), duration(value.get_ref())),
        None => Some(Duration::from_secs(default_secs)),
    }
}

/// `"16k"`, `"1m"`, `"1g"` (1024-based, any case), or a number of bytes written as an
/// integer or a string of digits.
pub(crate) fn size(value: &Value) -> Result<u64, String> {
    let invalid = || format!("invalid size {value}: {SIZE_HINT}");
    let text = match value {
        Value::Integer(n) => return u64::try_from(*n).map_err(|_| invalid()),
        Value::String(text) => text.as_str(),
        _ => return Err(invalid()),
    };
    let (number, shift) = match text.char_indices().last() {
        Some((i, unit)) if unit.is_ascii_alphabetic() => {
            let shift = match unit.to_ascii_lowercase() {
                'k' => 10,
                'm' => 20,
                'g' => 30,
                _ => return Err(invalid()),
            };
            (&text[..i], shift)
        }
        _ => (text, 0),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let number: u64 = number.parse().map_err(|_| invalid())?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("invalid size {value}: too large"))
}

/// `client_max_body_size`: a [`size`], where `"0"` means no limit (nginx's).
pub(crate) fn max_body_size(value: &Value) -> Result<super::MaxBodySize, String> {
    Ok(match size(value)? {
        0 => super::MaxBodySize::Unlimited,
        max => super::MaxBodySize::Bytes(max),
    })
}

/// A positive integer or `"auto"` (see [`auto_workers`]), at most [`MAX_WORKERS`].
pub(crate) fn workers(value: &Value) -> Result<usize, String> {
    match value {
        Value::String(text) if text == "auto" => Ok(auto_workers()),
        Value::Integer(n) if (1..=MAX_WORKERS as i64).contains(n) => Ok(*n as usize),
        _ => Err(format!(
            r#"invalid workers {value}: expected "auto" or a number from 1 to {MAX_WORKERS}"#
        )),
    }
}

/// One worker per CPU the process may use (nginx `worker_processes auto`), capped.
pub(crate) fn auto_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_WORKERS)
}

/// A listener: `"IP:PORT"`, `"[IPv6]:PORT"`, `"*:PORT"` or `"PORT"` (all IPv4 addresses,
/// as nginx's `listen 80`). Port 0 asks the system for a free port.
pub(crate) fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    let any = |port: &str| {
        port.parse()
            .map(|port| SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port))
    };
    let parsed = match text.strip_prefix("*:") {
        Some(port) => any(port).ok(),
        None => any(text).ok().or_else(|| text.parse().ok()),
    };
    parsed.ok_or_else(|| {
        format!(r#"invalid listen address "{text}": expected "IP:PORT", "[IPv6]:PORT", "*:PORT" or "PORT""#)
    })
}

/// An upstream server `"HOST:PORT"`; a host name is resolved now and each of its
/// addresses returned (nginx resolves `server` names once, at load, too).
pub(crate) fn upstream_addrs(text: &str) -> Result<Vec<SocketAddr>, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return nonzero_port(text, vec![addr]);
    }
    let invalid = || {
        format!(r#"invalid server address "{text}": expected "HOST:PORT", e.g. "127.0.0.1:3000""#)
    };
    let (host, port) = text.rsplit_once(':').ok_or_else(invalid)?;
    let port: u16 = port.parse().map_err(|_| invalid())?;
    let host_is_name = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    if !host_is_name {
        return Err(invalid());
    }
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let resolved = (host, port)
        .to_socket_addrs()
        .map_err(|err| format!("cannot resolve server address \"{text}\": {err}"))?;
    for addr in resolved {
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    if addrs.is_empty() {
        return Err(format!(
            "cannot resolve server address \"{text}\": no addresses"
        ));
    }
    nonzero_port(text, addrs)
}

fn nonzero_port(text: &str, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, String> {
    if addrs.iter().any(|addr| addr.port() == 0) {
        return Err(format!(
            "invalid server address \"{text}\": port 0 cannot be connected to"
        ));
    }
    Ok(addrs)
}

/// A trusted network: a CIDR (host bits are dropped, as nginx does) or a single address.
pub(crate) fn network(text: &str) -> Result<IpNet, String> {
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>().map(IpNet::from).map_err(|_| {
        format!(r#"invalid address "{text}": expected an IP address or a CIDR network, e.g. "10.0.0.0/8""#)
    })
}

/// The NAME of `[zones.NAME]` or `[upstreams.NAME]` (`kind` says which): letters,
/// digits, `_` and `-`, as it appears in metrics labels and messages.
pub(crate) fn table_name(kind: &str, name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        return Ok(());
    }
    Err(format!(
        r#"invalid {kind} name "{name}": use letters, digits, "_" and "-""#
    ))
}

/// The regex crate renders a syntax error over several lines (pattern, caret, then
/// `error: ...`); one line per problem needs only the last part.
pub(super) fn regex_reason(err: &regex::Error) -> String {
    let text = err.to_string();
    match text.rsplit_once("error: ") {
        Some((_, reason)) => reason.trim().to_owned(),
        None => text.lines().next().unwrap_or_default().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::String(text.to_owned())
    }

    #[test]
    fn durations_take_an_integer_and_a_unit() {
        assert_eq!(duration(&s("500ms")), Ok(Duration::from_millis(500)));
        assert_eq!(duration(&s("10s")), Ok(Duration::from_secs(10)));
        assert_eq!(duration(&s("5m")), Ok(Duration::from_secs(300)));
        assert_eq!(duration(&s("1h")), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn duration_without_unit_says_what_to_write() {
        let want =
            r#"invalid duration "10": expected a number with a unit (ms, s, m, h), e.g. "10s""#;
        assert_eq!(duration(&s("10")).unwrap_err(), want);
        let want =
            r#"invalid duration 10: expected a number with a unit (ms, s, m, h), e.g. "10s""#;
        assert_eq!(duration(&Value::Integer(10)).unwrap_err(), want);
    }

    #[test]
    fn malformed_and_zero_durations_are_rejected() {
        for bad in ["", "s", "1.5s", "10 s", "10sec", "-1s", "10S", "1d"] {
            assert!(duration(&s(bad)).is_err(), "{bad}");
        }
        assert!(duration(&s("0s"))
            .unwrap_err()
            .contains("greater than zero"));
        assert!(duration(&s("99999999999999999999h")).is_err());
    }

    #[test]
    fn sizes_are_1024_based_and_case_insensitive() {
        assert_eq!(size(&s("16k")), Ok(16 * 1024));
        assert_eq!(size(&s("1M")), Ok(1 << 20));
        assert_eq!(size(&s("1g")), Ok(1 << 30));
        assert_eq!(size(&s("4096")), Ok(4096));
        assert_eq!(size(&Value::Integer(512)), Ok(512));
    }

    #[test]
    fn malformed_sizes_are_rejected() {
        for bad in ["", "k", "16kb", "1.5m", "-1", "16 k", "16t"] {
            assert!(size(&s(bad)).is_err(), "{bad}");
        }
        assert!(size(&Value::Integer(-1)).is_err());
        assert!(size(&Value::Boolean(true))
            .unwrap_err()
            .starts_with("invalid size true:"));
    }

    #[test]
    fn workers_are_auto_or_1_to_256() {
        assert!(workers(&s("auto")).unwrap() >= 1);
        assert_eq!(workers(&Value::Integer(4)), Ok(4));
        assert!(workers(&Value::Integer(0)).is_err());
        assert!(workers(&Value::Integer(257)).is_err());
        assert!(workers(&s("4")).is_err());
    }

    #[test]
    fn listen_accepts_nginx_forms() {
        assert_eq!(
            listen_addr("127.0.0.1:8080"),
            Ok("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(listen_addr("[::1]:8080"), Ok("[::1]:8080".parse().unwrap()));
        assert_eq!(listen_addr("*:80"), Ok("0.0.0.0:80".parse().unwrap()));
        assert_eq!(listen_addr("80"), Ok("0.0.0.0:80".parse().unwrap()));
        assert_eq!(
            listen_addr("127.0.0.1:0"),
            Ok("127.0.0.1:0".parse().unwrap())
        );
    }

    #[test]
    fn listen_rejects_names_and_missing_ports() {
        for bad in [
            "localhost:80",
            "127.0.0.1",
            "*",
            "*:x",
            "::1:80",
            "",
            "70000",
        ] {
            assert!(listen_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn upstream_ip_addresses_need_no_resolver() {
        assert_eq!(
            upstream_addrs("10.0.0.1:3000"),
            Ok(vec!["10.0.0.1:3000".parse().unwrap()])
        );
        assert_eq!(
            upstream_addrs("[::1]:3000"),
            Ok(vec!["[::1]:3000".parse().unwrap()])
        );
    }

    #[test]
    fn upstream_names_resolve_to_every_address() {
        let addrs = upstream_addrs("localhost:3000").unwrap();
        assert!(!addrs.is_empty());
        assert!(addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 3000));
    }

    #[test]
    fn upstream_without_port_or_with_port_zero_is_rejected() {
        for bad in [
            "localhost",
            "10.0.0.1",
            ":80",
            "a b:80",
            "10.0.0.1:0",
            "host:http",
        ] {
            assert!(upstream_addrs(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unresolvable_upstream_says_so() {
        // RFC 6761: `.invalid` never resolves.
        let err = upstream_addrs("no-such-host.invalid:80").unwrap_err();
        assert!(
            err.starts_with(r#"cannot resolve server address "no-such-host.invalid:80""#),
            "{err}"
        );
    }

    #[test]
    fn networks_take_cidrs_and_plain_addresses_and_drop_host_bits() {
        assert_eq!(network("10.0.0.1/8"), Ok("10.0.0.0/8".parse().unwrap()));
        assert_eq!(network("127.0.0.1"), Ok("127.0.0.1/32".parse().unwrap()));
        assert_eq!(network("::1"), Ok("::1/128".parse().unwrap()));
        assert!(network("10.0.0.0/33").is_err());
        assert!(network("example.com").is_err());
    }
}
