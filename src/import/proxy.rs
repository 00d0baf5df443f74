//! `proxy_pass` and the `proxy_*` directives: the upstream group and path of a
//! location, the headers sent up and hidden on the way down, the group's timeouts.

use std::collections::BTreeMap;

use tollgate_nginx::Directive;

use super::build::{sp, Group};
use super::level::{Context, Level};
use super::redirects;
use super::report::Status;
use super::values;
use super::state::Walk;
use crate::config::raw::RawLocation;
use crate::config::RequestBuffering;

/// Where a location forwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub group: String,
    /// The URI part of `proxy_pass` (`/v2/`), when it has one.
    pub path: Option<String>,
    /// nginx's `$proxy_host`: the group's name, or `host[:port]` (a port other than
    /// the scheme's).
    pub proxy_host: String,
    /// The `proxy_pass` URL as written (nginx's `proxy_redirect default` starts with it).
    pub url: String,
}

/// The forwarding headers tollgate writes itself, as nginx would with these values.
const FORWARDED: [(&str, &str); 4] = [
    ("X-Forwarded-For", "$proxy_add_x_forwarded_for"),
    ("X-Real-IP", "$remote_addr"),
    ("X-Forwarded-Proto", "$scheme"),
    // The Host the client sent, port and case as sent.
    ("X-Forwarded-Host", "$http_host"),
];

/// Headers that frame a request: tollgate writes them, a rule may not.
const FRAMING: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "te",
    "keep-alive",
    "proxy-connection",
    "trailer",
    "expect",
    "connection",
];

/// Headers that frame a response: not hidden by a rule.
const FRAMING_DOWN: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// `proxy_pass URL`: the group it names (made for a host of its own), and its path.
pub(super) fn pass(w: &mut Walk<'_>, d: &Directive) -> Result<Target, Status> {
    let [url] = d.args.as_slice() else {
        return Err(Status::Unsupported("`proxy_pass` takes one URL".to_owned()));
    };
    let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => {
            return Err(Status::Unsupported(format!("`{url}`: tollgate forwards to http:// and https:// upstreams (not grpc://, fastcgi or a variable)")))
        }
    };
    if rest.starts_with("unix:") {
        return Err(Status::Unsupported("a unix socket upstream: tollgate forwards over TCP; listen on 127.0.0.1 instead".to_owned()));
    }
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], Some(rest[at..].to_owned())),
        None => (rest, None),
    };
    if authority.contains('$') {
        return Err(Status::Unsupported("the upstream comes from a variable: tollgate forwards to a group named in the file ([upstreams.NAME]); write one location per upstream, or a `[maps.*]` when maps come".to_owned()));
    }
    if let Some(path) = &path {
        values::vars(path).map_err(Status::Unsupported)?;
    }
    if w.build.group(authority).is_some() {
        if tls {
            https(w, authority);
        }
        return Ok(Target {
            group: authority.to_owned(),
            path,
            proxy_host: authority.to_owned(),
            url: url.clone(),
        });
    }
    let (host, port) = host_port(authority, if tls { 443 } else { 80 })
        .ok_or_else(|| Status::Unsupported(format!("`{authority}` is not a host and port")))?;
    let default_port = port == if tls { 443 } else { 80 };
    let proxy_host = match default_port {
        true => host.clone(),
        false => format!("{host}:{port}"),
    };
    let server = match tls {
        true => format!("https://{host}:{port}"),
        false => format!("{host}:{port}"),
    };
    let name = values::name(&format!("{host}_{port}").replace(['[', ']'], ""));
    if w.build.group(&name).is_none() {
        let note = vec![format!("{}: proxy_pass {url}", w.source(d.place))];
        w.build.groups.push(Group {
            name: name.clone(),
            servers: vec![(server, 1)],
            note,
            ..Group::default()
        });
    }
    Ok(Target {
        group: name,
        path,
        proxy_host,
        url: url.clone(),
    })
}

/// `proxy_pass https://GROUP`: the group's servers are written `https://`.
fn https(w: &mut Walk<'_>, name: &str) {
    if let Some(group) = w.build.group(name) {
        for (addr, _) in &mut group.servers {
            if !addr.starts_with("https://") {
                *addr = format!("https://{addr}");
            }
        }
    }
}

fn host_port(authority: &str, default: u16) -> Option<(String, u16)> {
    if authority.is_empty() {
        return None;
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None => default,
        };
        return Some((format!("[{host}]"), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default)),
    }
}

/// The `proxy_*` settings a level passes down; `None` for another directive.
pub(super) fn setting(
    w: &mut Walk<'_>,
    d: &Directive,
    own: &mut Level,
    context: Context,
) -> Option<Status> {
    let args = d.args.as_slice();
    Some(match (d.name.as_str(), args) {
        ("proxy_set_header", [name, value]) => set_header(own, name, value),
        ("proxy_hide_header", [name]) => {
            let list = own.hide_headers.get_or_insert_with(Vec::new);
            match FRAMING_DOWN.contains(&name.to_ascii_lowercase().as_str()) {
                true => Status::Approx(format!("`{name}` frames the answer: tollgate keeps it its own")),
                false => {
                    list.push(name.clone());
                    Status::Exact(None)
                }
            }
        }
        ("proxy_pass_header", [name]) => {
            own.pass_headers.get_or_insert_with(Vec::new).push(name.clone());
            Status::Exact(Some("tollgate passes the upstream's headers; `Server` is then not hidden".to_owned()))
        }
        ("proxy_redirect", _) => redirects::redirect(own, args),
        ("proxy_cookie_path" | "proxy_cookie_domain", _) => redirects::cookie(own, &d.name, args),
        ("proxy_connect_timeout" | "proxy_read_timeout", [time]) => {
            let Some(duration) = values::duration(time) else {
                return Some(Status::Unsupported(format!("`{time}` is not a duration above zero")));
            };
            let key = match d.name.as_str() {
                "proxy_connect_timeout" => {
                    own.connect_timeout = Some(duration);
                    "connect_timeout"
                }
                _ => {
                    own.read_timeout = Some(duration);
                    "read_timeout"
                }
            };
            match context {
                Context::Http => Status::Exact(Some(format!("`{key}` of the groups it applies to"))),
                _ => Status::Approx(format!("tollgate sets it per upstream group (`{key}`): written on the group this location uses (the first such location's value, when several share a group; per-location timeouts are coming)")),
            }
        }
        ("proxy_send_timeout", _) => Status::Approx("no timeout of its own for sending to the upstream: tollgate's read_timeout counts from the last byte sent".to_owned()),
        ("proxy_http_version", [v]) if v == "1.1" => Status::Exact(None),
        ("proxy_http_version", _) => Status::Approx("tollgate speaks HTTP/1.1 to upstreams".to_owned()),
        ("proxy_request_buffering", [flag]) => match values::flag(flag) {
            Some(on) => {
                own.request_buffering = Some(if on { RequestBuffering::On } else { RequestBuffering::Off });
                Status::Exact(None)
            }
            None => Status::Unsupported(format!("`{flag}`: on or off")),
        },
        ("proxy_buffering" | "proxy_buffers" | "proxy_buffer_size" | "proxy_busy_buffers_size"
        | "proxy_max_temp_file_size" | "proxy_temp_file_write_size" | "proxy_temp_path", _) => {
            Status::Approx("tollgate streams answers through buffers of its own".to_owned())
        }
        ("proxy_next_upstream" | "proxy_next_upstream_tries" | "proxy_next_upstream_timeout", _) => Status::Approx("tollgate's retry rules: the next server after a failed connect, or for a request that can be sent again (docs/config.md, [upstreams.NAME])".to_owned()),
        ("proxy_intercept_errors", [flag]) if flag == "off" => Status::Exact(None),
        ("proxy_intercept_errors", _) => Status::Unsupported("`intercept_errors` with `error_pages` (DESIGN §17)".to_owned()),
        ("proxy_ssl_server_name", [flag]) if flag == "on" => Status::Exact(None),
        ("proxy_ssl_verify", [flag]) if flag == "on" => Status::Exact(None),
        ("proxy_ssl_server_name", _) => Status::Approx("tollgate always sends the server's name (SNI)".to_owned()),
        ("proxy_ssl_verify", _) => Status::Approx("tollgate always verifies upstream certificates (nginx's default is off): a self-signed upstream needs `tls = { ca = \"…\" }` on its group".to_owned()),
        ("proxy_ssl_name" | "proxy_ssl_trusted_certificate" | "proxy_ssl_certificate" | "proxy_ssl_certificate_key", _) => Status::Unsupported("write it on the group: `tls = { server_name, ca, cert, key }` ([upstreams.NAME])".to_owned()),
        (name, _) if name.starts_with("proxy_cache") || name == "proxy_store" => Status::Unsupported("tollgate has no cache".to_owned()),
        _ => {
            let _ = w;
            return None;
        }
    })
}

/// `proxy_set_header NAME VALUE` at this level.
fn set_header(own: &mut Level, name: &str, value: &str) -> Status {
    let list = own.set_headers.get_or_insert_with(Vec::new);
    let lower = name.to_ascii_lowercase();
    list.push((name.to_owned(), value.to_owned()));
    if let Some((header, same)) = FORWARDED.iter().find(|(h, _)| h.eq_ignore_ascii_case(name)) {
        return match value == *same {
            true => Status::Exact(Some("tollgate writes it so itself".to_owned())),
            false if lower == "x-forwarded-host" => Status::Approx("tollgate writes X-Forwarded-Host itself: the Host the client sent".to_owned()),
            false => Status::Approx(format!("tollgate writes {header} itself, as `{same}` (`forwarded_headers`, coming, chooses which)")),
        };
    }
    if lower == "upgrade" || (lower == "connection" && value != "close") {
        return Status::Exact(Some("tollgate carries WebSocket upgrades and keeps upstream connections alive itself".to_owned()));
    }
    if FRAMING.contains(&lower.as_str()) {
        return Status::Approx(format!("{name} frames the request: tollgate writes it itself"));
    }
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Status::Unsupported(format!("`{name}` is not a header name"));
    }
    if value.bytes().any(|b| b.is_ascii_control()) {
        return Status::Unsupported("a control character in the value".to_owned());
    }
    let value = value.replace("${proxy_host}", "x").replace("$proxy_host", "x");
    match values::vars(&value) {
        Ok(_) => Status::Exact(None),
        Err(why) => Status::Unsupported(why),
    }
}

/// The location forwards to `target`: its group, path, headers up and hidden, and
/// the group's timeouts. The report of its `proxy_pass`.
pub(super) fn forward(
    w: &mut Walk<'_>,
    raw: &mut RawLocation,
    level: &Level,
    target: &Target,
    path: Option<String>,
) -> Status {
    raw.upstream = Some(sp(target.group.clone()));
    raw.upstream_path = path.map(sp);
    let set = level.set_headers.clone().unwrap_or_default();
    let mut headers = BTreeMap::new();
    let is_set = |h: &str| set.iter().any(|(n, _)| n.eq_ignore_ascii_case(h));
    for (name, value) in &set {
        let lower = name.to_ascii_lowercase();
        let forwarded = FORWARDED.iter().any(|(h, _)| h.eq_ignore_ascii_case(name));
        if forwarded || lower == "upgrade" || FRAMING.contains(&lower.as_str()) {
            continue;
        }
        let value = value
            .replace("${proxy_host}", &target.proxy_host)
            .replace("$proxy_host", &target.proxy_host);
        if http::HeaderName::from_bytes(name.as_bytes()).is_ok()
            && !value.bytes().any(|b| b.is_ascii_control())
            && values::vars(&value).is_ok()
        {
            headers.insert(sp(name.clone()), sp(value));
        }
    }
    let mut notes = Vec::new();
    if !is_set("Host") {
        headers.insert(sp("Host".to_owned()), sp(target.proxy_host.clone()));
        notes.push(format!("Host: \"{}\" written, nginx's default $proxy_host", target.proxy_host));
    }
    raw.request_headers = (!headers.is_empty()).then(|| sp(headers));
    let passes_server = level
        .pass_headers
        .iter()
        .flatten()
        .any(|h| h.eq_ignore_ascii_case("server"));
    let mut hide: Vec<String> = level.hide_headers.clone().unwrap_or_default();
    if !passes_server && !hide.iter().any(|h| h.eq_ignore_ascii_case("server")) {
        // nginx never passes the upstream's Server (it sends its own).
        hide.push("Server".to_owned());
    }
    raw.hide_headers = Some(sp(hide.into_iter().map(sp).collect()));
    if let Some(group) = w.build.group(&target.group) {
        if group.connect_timeout.is_none() {
            group.connect_timeout.clone_from(&level.connect_timeout);
        }
        if group.read_timeout.is_none() {
            group.read_timeout.clone_from(&level.read_timeout);
        }
    }
    let mut differences = Vec::new();
    let unset: Vec<&str> = FORWARDED
        .iter()
        .map(|(h, _)| *h)
        .filter(|h| !is_set(h))
        .collect();
    if !unset.is_empty() {
        differences.push(format!("tollgate also sends {} upstream, which nginx sends only when proxy_set_header says so (`forwarded_headers`, coming, chooses)", unset.join(", ")));
    }
    differences.push("the upstream's Server header is hidden, and tollgate sends none of its own (nginx sends its own)".to_owned());
    differences.extend(notes);
    Status::Approx(differences.join("; "))
}
