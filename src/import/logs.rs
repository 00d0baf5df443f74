//! nginx's `log_format` and `access_log`: `http {}`'s access log becomes `[log]`, a
//! server's its site's `log` and a location's the location's, each format a template of
//! the same text (nginx's `combined` written out, as tollgate's own `combined` adds three
//! fields). tollgate writes a request's line to one log: where a block names several,
//! the first is kept and the others are told.

use tollgate_nginx::Directive;

use super::build::{LogFormat, LogSetting};
use super::level::{Context, Level};
use super::report::Status;
use super::state::Walk;
use crate::config::{Escape, LogPiece, LogTemplate, LogVar};

/// nginx's predefined `combined`.
const NGINX_COMBINED: &str =
    "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

pub(super) fn setting(w: &mut Walk<'_>, d: &Directive, own: &mut Level, context: Context) -> Option<Status> {
    match (d.name.as_str(), d.args.as_slice()) {
        ("log_format", [name, rest @ ..]) if !rest.is_empty() => Some(log_format(w, name, rest)),
        ("access_log", [first, rest @ ..]) => Some(access_log(w, first, rest, own, context)),
        _ => None,
    }
}

fn log_format(w: &mut Walk<'_>, name: &str, rest: &[String]) -> Status {
    let (escape, strings) = match rest[0].strip_prefix("escape=") {
        Some(escape) => (Some(escape.to_owned()), &rest[1..]),
        None => (None, rest),
    };
    let text = strings.concat();
    let template = match LogTemplate::parse(&text, escape_of(escape.as_deref())) {
        Ok(template) => template,
        Err(problem) => return Status::Unsupported(format!("its template: {}", problem.message)),
    };
    let differences = differences(&template);
    w.build.log_formats.push(LogFormat {
        name: name.to_owned(),
        escape,
        text,
    });
    match differences.is_empty() {
        true => Status::Exact(Some("a template of `[log] format` once an `access_log` names it".to_owned())),
        false => Status::Approx(differences.join("; ")),
    }
}

/// Where a line of `template` is written otherwise than nginx writes it (docs/config.md,
/// "Log format templates").
fn differences(template: &LogTemplate) -> Vec<&'static str> {
    let names = |wanted: &[LogVar]| template.pieces.iter().any(|piece| matches!(piece, LogPiece::Var(var) if wanted.contains(var)));
    let mut differences = Vec::new();
    if names(&[LogVar::TimeLocal, LogVar::TimeIso8601]) {
        differences.push("times are written in UTC (+0000); nginx writes its local time");
    }
    if names(&[LogVar::UpstreamAddr, LogVar::UpstreamStatus, LogVar::UpstreamResponseTime, LogVar::UpstreamHeaderTime]) {
        differences.push("`$upstream_*` name the server that answered; nginx lists every try, comma-separated");
    }
    if names(&[LogVar::BytesSent]) {
        differences.push("over HTTP/2 and HTTP/3 `$bytes_sent` counts the head as HTTP/1.1 text; nginx counts its frames");
    }
    if template.escape == Escape::Json {
        differences.push("with escape=json a value that is not UTF-8 has its bytes past ASCII written \\u00HH, so the line stays JSON (nginx writes them raw)");
    }
    differences
}

fn escape_of(escape: Option<&str>) -> Escape {
    match escape {
        Some("json") => Escape::Json,
        Some("none") => Escape::None,
        _ => Escape::Default,
    }
}

fn access_log(w: &mut Walk<'_>, first: &str, rest: &[String], own: &mut Level, context: Context) -> Status {
    let mut differences = Vec::new();
    let log = match first {
        "off" => LogSetting {
            access: "off".to_owned(),
            format: None,
        },
        path if path.starts_with("syslog:") => return Status::Unsupported("syslog: tollgate writes its access log to a file or stdout".to_owned()),
        path => {
            let access = match path {
                "/dev/stdout" => "stdout".to_owned(),
                path => {
                    if !path.starts_with('/') {
                        differences.push(format!("`{path}` is read from the directory of gateway.toml, nginx's from its prefix"));
                    }
                    path.to_owned()
                }
            };
            let (name, options) = match rest.split_first() {
                Some((name, options)) if !name.contains('=') && name != "gzip" => (name.as_str(), options),
                _ => ("combined", rest),
            };
            let format = match name {
                "combined" => {
                    differences.push("`combined`'s time is written in UTC (+0000); nginx writes its local time".to_owned());
                    (NGINX_COMBINED.to_owned(), None)
                }
                name => match w.build.log_formats.iter().find(|f| f.name == name) {
                    Some(found) => (found.text.clone(), found.escape.clone()),
                    None => return Status::Unsupported(format!("no `log_format {name}` before it (or it could not be read)")),
                },
            };
            for option in options {
                differences.push(match option.split_once('=').map_or(option.as_str(), |(key, _)| key) {
                    "if" => format!("`{option}`: tollgate logs every request"),
                    _ => format!("`{option}`: tollgate buffers lines itself and writes them every 100 ms"),
                });
            }
            LogSetting {
                access,
                format: Some(format),
            }
        }
    };
    let kept = match context {
        Context::Http => &mut w.build.log,
        Context::Server | Context::Location => &mut own.log,
    };
    match kept {
        None => *kept = Some(log),
        Some(kept) if *kept == log => {}
        Some(kept) => differences.push(format!(
            "tollgate writes a request's line to one log: `{}`, the first of this block, takes them",
            kept.access
        )),
    }
    match differences.is_empty() {
        true => Status::Exact(None),
        false => Status::Approx(differences.join("; ")),
    }
}
