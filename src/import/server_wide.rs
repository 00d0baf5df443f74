//! What nginx sets per level and tollgate for the whole gateway or per location: the
//! body limit, the client timeouts, `server_tokens`, `underscores_in_headers`, `http2`.

use tollgate_nginx::Directive;

use super::build::loose;
use super::level::{Context, Level};
use super::report::Status;
use super::values;
use super::state::Walk;
use crate::config::raw::RawLocation;

pub(super) fn setting(
    w: &mut Walk<'_>,
    d: &Directive,
    own: &mut Level,
    context: Context,
) -> Option<Status> {
    let args = d.args.as_slice();
    Some(match (d.name.as_str(), args) {
        ("client_max_body_size", [size]) => match values::size(size) {
            Some(size) => {
                own.client_max_body_size = Some(size);
                Status::Exact(None)
            }
            None => Status::Unsupported(format!("`{size}` is not a size")),
        },
        (key @ ("client_body_timeout" | "send_timeout"), [time]) if context != Context::Http => {
            let Some(duration) = values::duration(time) else {
                return Some(Status::Unsupported(format!("`{time}`: tollgate's durations are above zero")));
            };
            // Written on each location that inherits it (nginx: server → location).
            match key {
                "client_body_timeout" => own.client_body_timeout = Some(duration),
                _ => own.send_timeout = Some(duration),
            }
            Status::Exact(None)
        }
        (
            key @ ("client_body_timeout" | "send_timeout" | "keepalive_timeout" | "client_header_timeout"),
            [time, rest @ ..],
        ) => gateway_timeout(w, key, time, rest, context),
        ("underscores_in_headers", [flag]) => match values::flag(flag) {
            Some(on) => {
                w.build.underscores_in_headers.get_or_insert(on);
                Status::Exact(None)
            }
            None => Status::Unsupported(format!("`{flag}`: on or off")),
        },
        ("server_tokens", [flag]) if values::flag(flag).is_some() || flag == "build" => {
            let nginx = match flag.as_str() {
                "off" => "`Server: nginx`",
                _ => "`Server: nginx/1.22.1` (its version)",
            };
            Status::Approx(format!("nginx sends {nginx}, tollgate `Server: tollgate`, with no version either way (`server_header` in [server] names another, \"\" none)"))
        }
        ("server_tokens", _) => Status::Unsupported("`server_tokens` takes on, off or build".to_owned()),
        ("http2", [flag]) => match (values::flag(flag), context) {
            (None, _) => Status::Unsupported(format!("`{flag}`: on or off")),
            (Some(_), Context::Location) => Status::Unsupported("`http2` is not allowed in a location (nginx refuses it)".to_owned()),
            (Some(on), Context::Http) => {
                w.build.http2_http = Some(on);
                Status::Exact(None)
            }
            (Some(on), Context::Server) => {
                w.build.http2_server = Some(on);
                match on {
                    true => Status::Approx("tollgate serves HTTP/2 per address: every site on this server's addresses has it (nginx chooses per server)".to_owned()),
                    false => Status::Exact(None),
                }
            }
        },
        _ => return None,
    })
}

/// The timeouts a proxying location inherits from its `server {}` and `location`
/// (those of `http {}` too, for the upstream's): its own keys, as nginx has them per
/// location.
pub(super) fn write_timeouts(raw: &mut RawLocation, level: &Level) {
    raw.client_body_timeout = level.client_body_timeout.as_deref().map(loose);
    raw.send_timeout = level.send_timeout.as_deref().map(loose);
    raw.read_timeout = level.read_timeout.as_deref().map(loose);
    raw.connect_timeout = level.connect_timeout.as_deref().map(loose);
}

/// A timeout tollgate has once for the whole gateway (`[server]`): the first one met is
/// written, and any other, or one at a server, differs.
fn gateway_timeout(w: &mut Walk<'_>, key: &str, time: &str, rest: &[String], context: Context) -> Status {
    let key: &'static str = match key {
        "client_body_timeout" => "client_body_timeout",
        "send_timeout" => "send_timeout",
        "keepalive_timeout" => "keepalive_timeout",
        _ => "client_header_timeout",
    };
    let Some(duration) = values::duration(time) else {
        return Status::Unsupported(format!(
            "`{time}`: tollgate's durations are above zero (keep-alive cannot be turned off)"
        ));
    };
    let mut differences = Vec::new();
    if !rest.is_empty() {
        differences.push("the `Keep-Alive: timeout=` header is not sent".to_owned());
    }
    let first = w.build.server_durations.entry(key).or_insert_with(|| duration.clone());
    if *first != duration {
        differences.push(format!("tollgate has one `{key}` for the whole gateway: {first}, the first one met"));
    } else if context != Context::Http {
        differences.push(format!("tollgate has one `{key}` for the whole gateway ([server])"));
    }
    match differences.is_empty() {
        true => Status::Exact(None),
        false => Status::Approx(differences.join("; ")),
    }
}
