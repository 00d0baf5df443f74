//! What nginx sets per level and tollgate for the whole gateway or per location: the
//! body limit, the client timeouts, `server_tokens`, `underscores_in_headers`.

use tollgate_nginx::Directive;

use super::level::{Context, Level};
use super::report::Status;
use super::values;
use super::state::Walk;

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
        (
            key @ ("client_body_timeout" | "send_timeout" | "keepalive_timeout" | "client_header_timeout"),
            [time, rest @ ..],
        ) => {
            let key: &'static str = match key {
                "client_body_timeout" => "client_body_timeout",
                "send_timeout" => "send_timeout",
                "keepalive_timeout" => "keepalive_timeout",
                _ => "client_header_timeout",
            };
            let Some(duration) = values::duration(time) else {
                return Some(Status::Unsupported(format!("`{time}`: tollgate's durations are above zero (keep-alive cannot be turned off)")));
            };
            let mut differences = Vec::new();
            if !rest.is_empty() {
                differences.push("the `Keep-Alive: timeout=` header is not sent".to_owned());
            }
            let first = w.build.server_durations.entry(key).or_insert_with(|| duration.clone());
            if *first != duration {
                differences.push(format!("tollgate has one `{key}` for the whole gateway: {first}, the first one met"));
            } else if context != Context::Http {
                differences.push(format!("tollgate has one `{key}` for the whole gateway ([server]); per-site and per-location values are coming"));
            }
            match differences.is_empty() {
                true => Status::Exact(None),
                false => Status::Approx(differences.join("; ")),
            }
        }
        ("underscores_in_headers", [flag]) => match values::flag(flag) {
            Some(on) => {
                w.build.underscores_in_headers.get_or_insert(on);
                Status::Exact(None)
            }
            None => Status::Unsupported(format!("`{flag}`: on or off")),
        },
        ("server_tokens", _) => Status::Approx("tollgate sends no Server header of its own and hides the upstream's (`server_header`, coming, names one)".to_owned()),
        _ => return None,
    })
}
