//! `upstream NAME { server …; }`: an `[upstreams.NAME]` group.

use tollgate_nginx::Directive;

use super::build::Group;
use super::report::Status;
use super::values;
use super::state::Walk;
use crate::config::raw::RawBalance;

pub(super) fn block(w: &mut Walk<'_>, d: &Directive, sink: &mut Vec<String>) {
    let [name] = d.args.as_slice() else {
        let status = Status::Unsupported("`upstream` takes one name".to_owned());
        w.record(d, status.clone(), sink);
        w.record_inside(d, &status);
        return;
    };
    let mut group = Group {
        name: values::name(name),
        note: vec![w.source(d.place)],
        ..Group::default()
    };
    for c in d.block.iter().flatten() {
        let status = directive(c, &mut group);
        let mut note = std::mem::take(&mut group.note);
        w.record(c, status, &mut note);
        group.note = note;
    }
    let status = match group.servers.is_empty() {
        true => Status::Unsupported("no server tollgate can forward to: the group is left out".to_owned()),
        false if group.name != *name => Status::Approx(format!("named `{}`: tollgate's names are letters, digits, `_` and `-`", group.name)),
        false => Status::Exact(None),
    };
    w.record(d, status, sink);
    if !group.servers.is_empty() {
        w.build.groups.push(group);
    }
}

fn directive(c: &Directive, group: &mut Group) -> Status {
    let args = c.args.as_slice();
    match (c.name.as_str(), args) {
        ("server", [addr, params @ ..]) => server(addr, params, group),
        ("keepalive", [n]) => match n.parse() {
            Ok(n) => {
                group.keepalive = Some(n);
                Status::Approx(format!("tollgate keeps {n} idle connections per server and worker thread; nginx {n} per worker process for the whole group"))
            }
            Err(_) => Status::Unsupported(format!("`{n}` is not a number")),
        },
        ("least_conn", []) => {
            group.balance = Some(RawBalance::LeastConn);
            Status::Exact(None)
        }
        ("ip_hash", []) => {
            group.balance = Some(RawBalance::IpHash);
            Status::Approx("a client keeps its server, but not the one nginx's hash would pick".to_owned())
        }
        ("hash" | "random", _) => Status::Approx("round robin instead (tollgate has round_robin, least_conn and ip_hash)".to_owned()),
        ("zone", _) => Status::Exact(Some("tollgate's group state is the process's own".to_owned())),
        ("keepalive_timeout" | "keepalive_requests" | "keepalive_time", _) => Status::Approx("tollgate keeps idle upstream connections by its own rules".to_owned()),
        _ => Status::Unsupported(format!("`{}` in an upstream block is not translated", c.name)),
    }
}

/// `server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down] …`.
fn server(addr: &str, params: &[String], group: &mut Group) -> Status {
    if addr.starts_with("unix:") {
        return Status::Unsupported("a unix socket: tollgate forwards over TCP".to_owned());
    }
    let addr = match addr.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() && !addr.ends_with(']') => addr.to_owned(),
        _ => format!("{addr}:80"),
    };
    let mut weight = 1;
    let mut differences = Vec::new();
    for param in params {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        match key {
            "weight" => match value.parse::<i64>() {
                Ok(n) if (1..=1000).contains(&n) => weight = n,
                _ => differences.push(format!("`{param}` left out: tollgate's weights are 1 to 1000")),
            },
            "max_fails" => match value.parse::<u32>() {
                Ok(n) if group.max_fails.is_none_or(|m| m == n) => group.max_fails = Some(n),
                _ => differences.push(format!("`{param}`: tollgate's max_fails is the group's ({:?})", group.max_fails)),
            },
            // fail_timeout=0: nginx never marks the server failed; tollgate's max_fails = 0.
            "fail_timeout" if values::time_ms(value) == Some(0) => match group.max_fails {
                None | Some(0) => group.max_fails = Some(0),
                Some(_) => differences.push(format!("`{param}`: tollgate's passive health is the group's")),
            },
            "fail_timeout" => match values::duration(value) {
                Some(t) if group.fail_timeout.as_ref().is_none_or(|f| *f == t) => group.fail_timeout = Some(t),
                _ => differences.push(format!("`{param}`: tollgate's fail_timeout is the group's, above zero")),
            },
            "down" => return Status::Exact(Some("left out: nginx sends it nothing".to_owned())),
            "backup" => return Status::Approx("left out: tollgate has no backup servers (nginx sends it requests only while every other server is down)".to_owned()),
            "max_conns" => differences.push("`max_conns` left out: `max_in_flight` limits the whole group".to_owned()),
            _ => differences.push(format!("`{param}` left out")),
        }
    }
    group.servers.push((addr, weight));
    match differences.is_empty() {
        true => Status::Exact(None),
        false => Status::Approx(differences.join("; ")),
    }
}
