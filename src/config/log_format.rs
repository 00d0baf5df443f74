//! `[log] format` as an nginx `log_format` template, and `[log] escape`: the text is read
//! once, at load, into literal pieces and the variables a line names, each checked here
//! (an unknown one is an error at its place, with the nearest name). `log/template.rs`
//! writes the lines.
//!
//! The variables are nginx's of the same names, as its access log writes them, and
//! tollgate's `$limit_status` (nginx's `$limit_req_status` is its other name) and
//! `$upstream_header_time`.

use http::HeaderName;

/// How values are escaped in a line: nginx's `escape=` of `log_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Escape {
    /// `"`, `\`, control bytes and bytes past ASCII as `\xHH`; an absent value as `-`.
    Default,
    /// JSON string escaping; an absent value as nothing.
    Json,
    /// Bytes as they are; an absent value as `-`.
    None,
}

/// One variable a log line names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LogVar {
    RemoteAddr,
    RemoteUser,
    TimeLocal,
    TimeIso8601,
    Msec,
    /// `GET /path?query HTTP/1.1`.
    Request,
    RequestMethod,
    RequestUri,
    Args,
    ServerProtocol,
    Scheme,
    Host,
    Status,
    BodyBytesSent,
    /// The head's bytes and the body's.
    BytesSent,
    RequestTime,
    UpstreamAddr,
    UpstreamStatus,
    UpstreamResponseTime,
    UpstreamHeaderTime,
    LimitStatus,
    /// The zone that decided (the one that refused, else the nearest its limit), its key
    /// as people read it, and what it had left.
    LimitZone,
    LimitKey,
    LimitRemaining,
    /// The site (its label, else its first name) and the location (its match) that
    /// answered.
    Site,
    Location,
    /// `TLSv1.3`, and the cipher suite in OpenSSL's name, over TLS.
    SslProtocol,
    SslCipher,
    /// `h2` for HTTP/2 over TLS, `h2c` without; nothing else.
    Http2,
    RequestId,
    /// `$http_NAME`: the request header NAME (`_` read as `-`).
    Header(HeaderName),
}

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(Box<str>),
    Var(LogVar),
}

/// A `log_format` template, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogTemplate {
    pub pieces: Box<[Piece]>,
    pub escape: Escape,
}

/// The variables a log line may name, by name (without `$`).
const NAMES: &[(&str, LogVar)] = &[
    ("remote_addr", LogVar::RemoteAddr),
    ("remote_user", LogVar::RemoteUser),
    ("time_local", LogVar::TimeLocal),
    ("time_iso8601", LogVar::TimeIso8601),
    ("msec", LogVar::Msec),
    ("request", LogVar::Request),
    ("request_method", LogVar::RequestMethod),
    ("request_uri", LogVar::RequestUri),
    ("args", LogVar::Args),
    ("query_string", LogVar::Args),
    ("server_protocol", LogVar::ServerProtocol),
    ("scheme", LogVar::Scheme),
    ("host", LogVar::Host),
    ("status", LogVar::Status),
    ("body_bytes_sent", LogVar::BodyBytesSent),
    ("bytes_sent", LogVar::BytesSent),
    ("request_time", LogVar::RequestTime),
    ("upstream_addr", LogVar::UpstreamAddr),
    ("upstream_status", LogVar::UpstreamStatus),
    ("upstream_response_time", LogVar::UpstreamResponseTime),
    ("upstream_header_time", LogVar::UpstreamHeaderTime),
    ("limit_status", LogVar::LimitStatus),
    ("limit_req_status", LogVar::LimitStatus),
    ("limit_zone", LogVar::LimitZone),
    ("limit_key", LogVar::LimitKey),
    ("limit_remaining", LogVar::LimitRemaining),
    ("site", LogVar::Site),
    ("location", LogVar::Location),
    ("ssl_protocol", LogVar::SslProtocol),
    ("ssl_cipher", LogVar::SslCipher),
    ("http2", LogVar::Http2),
    ("request_id", LogVar::RequestId),
];

/// nginx's `combined`, with tollgate's limit status, request time and upstream header
/// time after it: `[log] format = "combined"`.
pub(crate) const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status \
     $body_bytes_sent \"$http_referer\" \"$http_user_agent\" $limit_status $request_time $upstream_header_time";

/// Why a template cannot be read: the message, and the byte range of the text it is
/// about.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub message: String,
    pub at: std::ops::Range<usize>,
}

impl LogTemplate {
    /// `text` read as nginx reads a `log_format` string: `$name` or `${name}`, a name
    /// being letters, digits and `_`; any other text as it is.
    pub(crate) fn parse(text: &str, escape: Escape) -> Result<LogTemplate, Problem> {
        let bytes = text.as_bytes();
        let mut pieces = Vec::new();
        let (mut i, mut literal_from) = (0, 0);
        while i < bytes.len() {
            if bytes[i] != b'$' {
                i += 1;
                continue;
            }
            if literal_from < i {
                pieces.push(Piece::Text(text[literal_from..i].into()));
            }
            let (name, end) = name_at(text, i)?;
            pieces.push(Piece::Var(variable(name).map_err(|message| Problem { message, at: i..end })?));
            i = end;
            literal_from = end;
        }
        if literal_from < bytes.len() {
            pieces.push(Piece::Text(text[literal_from..].into()));
        }
        if !pieces.iter().any(|piece| matches!(piece, Piece::Var(_))) {
            let message = format!(
                "a format without variables writes the same line for every request: \
                 \"combined\", \"json\" or a template such as {COMBINED:?}"
            );
            return Err(Problem { message, at: 0..text.len() });
        }
        Ok(LogTemplate {
            pieces: pieces.into(),
            escape,
        })
    }
}

/// The variable name after the `$` at `at`, and where it ends.
fn name_at(text: &str, at: usize) -> Result<(&str, usize), Problem> {
    let rest = &text[at + 1..];
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if let Some(braced) = rest.strip_prefix('{') {
        let Some(close) = braced.find('}') else {
            let message = "a `${` without its `}`".to_owned();
            return Err(Problem { message, at: at..text.len() });
        };
        let name = &braced[..close];
        if name.is_empty() || !name.chars().all(is_name) {
            let message = format!("invalid variable name `${{{name}}}`");
            return Err(Problem { message, at: at..at + close + 3 });
        }
        return Ok((name, at + close + 3));
    }
    let len = rest.find(|c: char| !is_name(c)).unwrap_or(rest.len());
    if len == 0 {
        let message = "a `$` without a variable name (nginx's `log_format` has no way to write `$` itself)".to_owned();
        return Err(Problem { message, at: at..at + 1 });
    }
    Ok((&rest[..len], at + 1 + len))
}

/// The variable `name` (without `$`) means in a log line.
fn variable(name: &str) -> Result<LogVar, String> {
    if let Some((_, var)) = NAMES.iter().find(|(known, _)| *known == name) {
        return Ok(var.clone());
    }
    if let Some(header) = name.strip_prefix("http_") {
        let header = header.replace('_', "-").to_ascii_lowercase();
        return HeaderName::from_bytes(header.as_bytes())
            .map(LogVar::Header)
            .map_err(|_| format!("invalid header name in `${name}`"));
    }
    let names = NAMES.iter().map(|(known, _)| *known).chain(["http_NAME"]);
    let hint = match super::suggest::closest(name, names.clone()) {
        Some(near) => format!("; did you mean `${near}`?"),
        None => String::new(),
    };
    let all: Vec<String> = names.map(|name| format!("${name}")).collect();
    Err(format!(
        "`${name}` is not a log variable{hint} (these are: {})",
        all.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_text_and_variables_plain_or_braced() {
        let template = LogTemplate::parse("$remote_addr [${status}x] $http_x_forwarded_for.", Escape::Default).unwrap();
        let forwarded = HeaderName::from_static("x-forwarded-for");
        assert_eq!(
            &*template.pieces,
            [
                Piece::Var(LogVar::RemoteAddr),
                Piece::Text(" [".into()),
                Piece::Var(LogVar::Status),
                Piece::Text("x] ".into()),
                Piece::Var(LogVar::Header(forwarded)),
                Piece::Text(".".into()),
            ]
        );
        assert!(LogTemplate::parse(COMBINED, Escape::Default).is_ok());
    }

    #[test]
    fn problems_are_told_where_they_are() {
        let problem = |text: &str| LogTemplate::parse(text, Escape::Json).unwrap_err();
        let unknown = problem("$remote_addr $stauts");
        assert_eq!(unknown.at, 13..20);
        assert!(unknown.message.starts_with("`$stauts` is not a log variable; did you mean `$status`?"), "{}", unknown.message);
        assert_eq!(problem("a ${status").at, 2..10);
        assert_eq!(problem("${sta-tus}").message, "invalid variable name `${sta-tus}`");
        assert_eq!(problem("cost $ 5 $status").at, 5..6);
        assert!(problem("jsno").message.starts_with("a format without variables"));
    }
}
