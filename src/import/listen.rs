//! `listen` and `server_name`: the addresses of `[server]` and of each site, and the
//! site's names.

use std::net::IpAddr;

use tollgate_nginx::Directive;

use super::build::Site;
use super::report::Status;
use super::state::Walk;
use crate::routing::sites::SiteName;

/// How tollgate reads the PROXY protocol otherwise than nginx.
const PROXY_PROTOCOL: &str = "the header's client is the client everywhere (nginx: only with `real_ip_header proxy_protocol`), believed only from `[server] proxy_protocol_from` (written from `set_real_ip_from`, else every address: narrow it to the balancers), and a connection without one is closed";

/// How tollgate's HTTP/3 differs from nginx's `listen … quic`.
const QUIC: &str = "`quic = true` on the address's `listen_tls` table: HTTP/3 beside TCP's TLS on the same port, with `Alt-Svc` sent for you ([quic] advertise; nginx needs an `add_header Alt-Svc`)";

/// nginx's address when a server has no `listen` (`*:80`, as root).
const DEFAULT: &str = "0.0.0.0:80";

pub(super) fn listen(w: &mut Walk<'_>, d: &Directive, site: &mut Site) -> Status {
    let Some(first) = d.args.first() else {
        return Status::Unsupported("`listen` without an address".to_owned());
    };
    let (addr, mut differences) = match address(first) {
        Ok(found) => found,
        Err(why) => return Status::Unsupported(why),
    };
    let mut tls = false;
    let mut http2 = false;
    let mut quic = false;
    for param in &d.args[1..] {
        let name = param.split('=').next().unwrap_or_default();
        match name {
            "ssl" => tls = true,
            "http2" => http2 = true,
            "default_server" | "default" => site.default = true,
            "proxy_protocol" => {
                if !w.build.proxy_protocol.contains(&addr) {
                    w.build.proxy_protocol.push(addr.clone());
                }
                differences.push(PROXY_PROTOCOL.to_owned());
            }
            // nginx's QUIC `listen` is a line of its own beside the `ssl` one (UDP and TCP):
            // here one `listen_tls` table with `quic = true`.
            "quic" => quic = true,
            "reuseport" | "deferred" | "bind" | "backlog" | "rcvbuf" | "sndbuf" | "fastopen"
            | "so_keepalive" | "ipv6only" | "accept_filter" | "setfib" => differences.push(
                format!("`{param}` left out: tollgate sets its own socket options"),
            ),
            _ => differences.push(format!("unknown parameter `{param}` left out")),
        }
    }
    let build = &mut w.build;
    if quic {
        if !build.quic.contains(&addr) {
            build.quic.push(addr.clone());
        }
        differences.push(QUIC.to_owned());
        // The address is TLS (QUIC's TLS is always on), served beside its TCP.
        tls = true;
    }
    // TLS is a property of the address in nginx: one `ssl` makes it TLS for every
    // server on it.
    if tls {
        build.listen.retain(|a| *a != addr);
        if !build.listen_tls.contains(&addr) {
            build.listen_tls.push(addr.clone());
        }
    } else if !build.listen_tls.contains(&addr) && !build.listen.contains(&addr) {
        build.listen.push(addr.clone());
    }
    // nginx serves HTTP/2 on an address one of whose `listen`s says `http2`; the
    // others are written `http2 = false`.
    if http2 && !build.http2.contains(&addr) {
        build.http2.push(addr.clone());
    }
    if !site.listen.contains(&addr) {
        site.listen.push(addr);
    }
    match differences.is_empty() {
        true => Status::Exact(None),
        false => Status::Approx(differences.join("; ")),
    }
}

/// `http2 on` in `http {}` or in this server: HTTP/2 on each of the site's addresses.
pub(super) fn http2_directive(w: &mut Walk<'_>, site: &Site) {
    let server = w.build.http2_server.take();
    if server.or(w.build.http2_http) != Some(true) {
        return;
    }
    for addr in &site.listen {
        if !w.build.http2.contains(addr) {
            w.build.http2.push(addr.clone());
        }
    }
}

/// A default site on an address an earlier default site has: nginx refuses two
/// (`a duplicate default server`); tollgate's `default` covers every address of the
/// site, so the later one is not marked, and its `listen` line says so.
pub(super) fn default_once(w: &mut Walk<'_>, site: &mut Site) {
    if !site.default {
        return;
    }
    let shared = w.build.sites.iter().find_map(|earlier| {
        let addr = earlier.listen.iter().find(|a| earlier.default && site.listen.contains(a))?;
        Some(addr.clone())
    });
    let Some(addr) = shared else {
        return;
    };
    site.default = false;
    let why = format!("not the default: an earlier server is the default of {addr} (nginx refuses two; tollgate's `default` covers every address of a site)");
    if let Some(line) = site.default_line.and_then(|i| w.report.get_mut(i)) {
        line.status = Status::Approx(why);
    }
}

/// A server with no `listen`: nginx's `*:80`.
pub(super) fn default_listen(w: &mut Walk<'_>, site: &mut Site) {
    let addr = DEFAULT.to_owned();
    if !w.build.listen.contains(&addr) && !w.build.listen_tls.contains(&addr) {
        w.build.listen.push(addr.clone());
    }
    site.listen.push(addr);
    site.note.push("no listen in nginx: its default, *:80".to_owned());
}

/// `listen`'s address as tollgate writes it, and what differs.
fn address(text: &str) -> Result<(String, Vec<String>), String> {
    if text.starts_with("unix:") {
        return Err("a unix socket: tollgate listens on TCP addresses".to_owned());
    }
    if let Ok(port) = text.parse::<u16>() {
        return Ok((format!("0.0.0.0:{port}"), Vec::new()));
    }
    let (host, port) = split_port(text)?;
    let port = port.unwrap_or(80);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host {
        "*" => Ok((format!("0.0.0.0:{port}"), Vec::new())),
        "localhost" => Ok((
            format!("127.0.0.1:{port}"),
            vec!["`localhost` written as 127.0.0.1 (nginx listens on each address the name has)".to_owned()],
        )),
        _ => match host.parse::<IpAddr>() {
            Ok(IpAddr::V4(ip)) => Ok((format!("{ip}:{port}"), Vec::new())),
            Ok(IpAddr::V6(ip)) => Ok((format!("[{ip}]:{port}"), Vec::new())),
            Err(_) => Err(format!("`{host}` is a host name: tollgate listens on IP addresses; write the address it stands for")),
        },
    }
}

/// `host:port`, `[v6]:port`, `host`, `[v6]`.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let bad = || format!("`{text}` is not an address nginx listens on");
    if text.starts_with('[') {
        let end = text.find(']').ok_or_else(bad)?;
        let rest = &text[end + 1..];
        let port = match rest.strip_prefix(':') {
            Some(port) => Some(port.parse().map_err(|_| bad())?),
            None if rest.is_empty() => None,
            None => return Err(bad()),
        };
        return Ok((&text[..=end], port));
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Ok((host, Some(port.parse().map_err(|_| bad())?))),
        None => Ok((text, None)),
    }
}

/// Each `server_name` directive: its names on the site, but those an earlier site on a
/// shared address has (nginx warns of a conflicting name and ignores it; tollgate
/// refuses it).
pub(super) fn server_names(w: &mut Walk<'_>, directives: &[&Directive], site: &mut Site) {
    for d in directives {
        let mut differences = Vec::new();
        let mut unsupported = Vec::new();
        for name in &d.args {
            let written: Vec<String> = match name.as_str() {
                "" => {
                    differences.push("`\"\"` (requests without Host) left out: a site without a matching name answers them only as the default".to_owned());
                    continue;
                }
                n if n.contains('$') && !n.starts_with('~') => {
                    unsupported.push(format!("`{n}`: a name from a variable; write the name"));
                    continue;
                }
                n if n.starts_with('.') => vec![n[1..].to_owned(), format!("*{n}")],
                n => vec![n.to_owned()],
            };
            for name in written {
                if let Err(why) = SiteName::parse(&name) {
                    unsupported.push(why);
                    continue;
                }
                if let Some(line) = taken(w, site, &name) {
                    differences.push(format!("`{name}` left out: the server at {line} has it on the same address (nginx ignores it too)"));
                    continue;
                }
                if !site.names.contains(&name) {
                    site.names.push(name);
                }
            }
        }
        let status = match (unsupported.is_empty(), differences.is_empty()) {
            (false, _) => Status::Unsupported(unsupported.join("; ")),
            (true, true) => Status::Exact(None),
            (true, false) => Status::Approx(differences.join("; ")),
        };
        w.record(d, status, &mut site.note);
    }
}

/// Where an earlier site on one of `site`'s addresses has `name` (exact or wildcard).
fn taken(w: &Walk<'_>, site: &Site, name: &str) -> Option<String> {
    if name.starts_with('~') {
        return None;
    }
    let key = name.to_ascii_lowercase();
    let key = key.trim_end_matches('.');
    w.build.sites.iter().find_map(|earlier| {
        let shares = earlier.listen.iter().any(|a| site.listen.contains(a));
        let has = earlier
            .names
            .iter()
            .any(|n| n.to_ascii_lowercase().trim_end_matches('.') == key);
        (shares && has).then(|| earlier.note.first().cloned().unwrap_or_default())
    })
}
