//! `proxy_pass` and the `proxy_*` directives: the upstream group and path of a
//! location, the headers sent up and hidden on the way down, the group's timeouts.

use std::collections::BTreeMap;

use tollgate_nginx::Directive;

use super::build::{sp, Group};
use super::level::{Context, Level};
use super::pattern::Target;
use super::redirects;
use super::report::Status;
use super::values;
use super::server_wide;
use super::state::Walk;
use crate::config::RESERVED_DOWN;
use crate::config::raw::RawLocation;
use crate::config::{Passed, RequestBuffering};

/// The forwarding headers tollgate writes itself (`forwarded_headers`), each with the
/// nginx value that means what tollgate writes. Another value is a `request_headers` rule.
const FORWARDED: [(&str, &str); 4] = [
    ("X-Forwarded-For", "$proxy_add_x_forwarded_for"),
    ("X-Real-IP", "$remote_addr"),
    ("X-Forwarded-Proto", "$scheme"),
    // The Host the client sent, port and case as sent (`$host` is a rule: lower case,
    // without the port).
    ("X-Forwarded-Host", "$http_host"),
];

/// The `forwarded_headers` name `proxy_set_header NAME VALUE` stands for, if any.
fn forwarding(name: &str, value: &str) -> Option<&'static str> {
    // `${scheme}` is `$scheme`.
    let braced = value.strip_prefix("${").and_then(|v| v.strip_suffix('}'));
    let value = braced.map_or_else(|| value.to_owned(), |v| format!("${v}"));
    FORWARDED
        .iter()
        .find(|(h, v)| h.eq_ignore_ascii_case(name) && *v == value)
        .map(|(h, _)| *h)
}

/// What differs in tollgate's `X-Forwarded-For` from nginx's `$proxy_add_x_forwarded_for`.
fn xff_difference(real_ip: bool) -> String {
    let mut why = "a client's own X-Forwarded-For is replaced by its address unless it comes from a `[real_ip] trusted` peer (nginx appends to any)".to_owned();
    if real_ip {
        why.push_str("; from a trusted peer tollgate appends that peer's address (nginx the client's, as realip found it)");
    }
    why
}

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
        ("proxy_set_header", [name, value]) => {
            set_header(own, name, value, !w.build.real_ip_trusted.is_empty())
        }
        ("proxy_hide_header", [name]) => {
            let list = own.hide_headers.get_or_insert_with(Vec::new);
            match RESERVED_DOWN.contains(&name.to_ascii_lowercase().as_str()) {
                true => Status::Approx(format!("`{name}` frames the answer: tollgate keeps it its own")),
                false => {
                    list.push(name.clone());
                    Status::Exact(None)
                }
            }
        }
        ("proxy_pass_header", [name]) => {
            let list = own.pass_headers.get_or_insert_with(Vec::new);
            match Passed::DROPPED.contains(&name.to_ascii_lowercase().as_str()) {
                true => {
                    list.push(name.clone());
                    Status::Exact(None)
                }
                // nginx's list still replaces the level above's.
                false => Status::Exact(Some(format!("tollgate passes `{name}` anyway: nothing written"))),
            }
        }
        ("proxy_redirect", _) => redirects::redirect(own, args),
        ("proxy_cookie_path" | "proxy_cookie_domain", _) => redirects::cookie(own, &d.name, args),
        ("proxy_connect_timeout" | "proxy_read_timeout", [time]) => {
            let Some(duration) = values::duration(time) else {
                return Some(Status::Unsupported(format!("`{time}` is not a duration above zero")));
            };
            // Written on each proxying location that inherits it (http → server → location).
            match d.name.as_str() {
                "proxy_connect_timeout" => own.connect_timeout = Some(duration),
                _ => own.read_timeout = Some(duration),
            }
            let _ = context;
            Status::Exact(None)
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

/// `proxy_set_header NAME VALUE` at this level; `real_ip`: `[real_ip]` is configured.
fn set_header(own: &mut Level, name: &str, value: &str, real_ip: bool) -> Status {
    let list = own.set_headers.get_or_insert_with(Vec::new);
    let lower = name.to_ascii_lowercase();
    list.push((name.to_owned(), value.to_owned()));
    match forwarding(name, value) {
        Some("X-Forwarded-For") => return Status::Approx(xff_difference(real_ip)),
        Some(_) => return Status::Exact(Some("in `forwarded_headers`: tollgate writes it so".to_owned())),
        // Another value: a `request_headers` rule, below.
        None => {}
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

/// The location forwards to `target`: its group, path, forwarding headers, headers up,
/// hidden and passed, and its timeouts. The report of its `proxy_pass`.
pub(super) fn forward(
    _w: &mut Walk<'_>,
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
    // nginx writes none of the four unless `proxy_set_header` does.
    let mut forwarded: Vec<&str> = set.iter().filter_map(|(n, v)| forwarding(n, v)).collect();
    forwarded.sort_by_key(|h| FORWARDED.iter().position(|(f, _)| f == h));
    forwarded.dedup();
    for (name, value) in &set {
        let lower = name.to_ascii_lowercase();
        let is_forwarding = FORWARDED.iter().any(|(h, _)| h.eq_ignore_ascii_case(name));
        if forwarded.iter().any(|h| h.eq_ignore_ascii_case(name))
            || lower == "upgrade"
            || FRAMING.contains(&lower.as_str())
        {
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
        } else if is_forwarding {
            // Not translated (reported): the client's own copy must not pass instead.
            headers.insert(sp(name.clone()), sp(String::new()));
        }
    }
    raw.forwarded_headers = Some(sp(forwarded.iter().map(|h| sp((*h).to_owned())).collect()));
    let mut notes = Vec::new();
    if !is_set("Host") {
        headers.insert(sp("Host".to_owned()), sp(target.proxy_host.clone()));
        notes.push(format!("Host: \"{}\" written, nginx's default $proxy_host", target.proxy_host));
    }
    raw.request_headers = (!headers.is_empty()).then(|| sp(headers));
    // nginx's proxy_pass_header wins over its proxy_hide_header.
    let mut pass: Vec<String> = Vec::new();
    for name in level.pass_headers.iter().flatten() {
        if !pass.iter().any(|p| p.eq_ignore_ascii_case(name)) {
            pass.push(name.clone());
        }
    }
    let passed = |h: &String| pass.iter().any(|p| p.eq_ignore_ascii_case(h));
    let hide: Vec<String> = level.hide_headers.iter().flatten().filter(|h| !passed(h)).cloned().collect();
    raw.hide_headers = (!hide.is_empty()).then(|| sp(hide.into_iter().map(sp).collect()));
    raw.pass_headers = (!pass.is_empty()).then(|| sp(pass.into_iter().map(sp).collect()));
    server_wide::write_timeouts(raw, level);
    let mut differences = Vec::new();
    if target.path.is_some() {
        // nginx sends its decoded, normalised URI when proxy_pass has a path; tollgate
        // keeps the bytes the client sent in the path (routing/normalize.rs).
        differences.push("an encoded delimiter in the client's path (`%2F`) goes upstream encoded; nginx decodes it when proxy_pass has a path".to_owned());
    }
    if differences.is_empty() {
        return Status::Exact((!notes.is_empty()).then(|| notes.join("; ")));
    }
    differences.extend(notes);
    Status::Approx(differences.join("; "))
}
