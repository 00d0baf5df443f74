//! `[server]`: listeners (`listeners`), client timeouts and the limits a client is held
//! to.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use http::StatusCode;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Loose, RawRateLimitHeaders, RawServer, Section, Span};
use super::values::duration_or;
use super::{compress, headers, limits, listeners, values};
use super::{Forwarded, MaxBodySize, RateLimitHeaders, RequestBuffering, Server, Tarpit};
use super::limit_action::DEFAULT_HOLD_SECS;

const MIN_HEADER_BYTES: u64 = 1 << 10;
const MAX_HEADER_BYTES: u64 = 1 << 20;
/// Bodies buffered before forwarding are held in memory, one per request in flight.
const MAX_BODY_BUFFER: u64 = 16 << 20;
/// `client_max_body_size` when absent: nginx's 1m.
const DEFAULT_MAX_BODY: u64 = 1 << 20;
/// hyper keeps up to 100 header slots inline; more cost it two allocations per request.
const MAX_HEADERS: i64 = 10_000;
/// RFC 9113 §6.5.2 recommends no fewer than 100; nginx's default is 128.
const MAX_STREAMS: i64 = 1 << 16;

/// A numeric key of `[server]`: its name (for messages), its value when absent, and the
/// values it may take.
struct Bounded<T> {
    key: &'static str,
    default: T,
    range: RangeInclusive<T>,
}

const HEADER_BYTES: Bounded<u64> = Bounded {
    key: "max_header_bytes",
    default: 16 << 10,
    range: MIN_HEADER_BYTES..=MAX_HEADER_BYTES,
};
const URI_BYTES: Bounded<u64> = Bounded {
    key: "max_uri_bytes",
    default: 8 << 10,
    range: MIN_HEADER_BYTES..=MAX_HEADER_BYTES,
};
const BODY_BUFFER: Bounded<u64> = Bounded {
    key: "client_body_buffer_size",
    default: 16 << 10,
    range: 0..=MAX_BODY_BUFFER,
};
const HEADERS: Bounded<i64> = Bounded {
    key: "max_headers",
    default: 256,
    range: 1..=MAX_HEADERS,
};
const TARPIT_MAX: Bounded<i64> = Bounded {
    key: "tarpit_max",
    default: 1024,
    range: 1..=1 << 20,
};
const STREAMS: Bounded<i64> = Bounded {
    key: "http2_max_concurrent_streams",
    default: 128,
    range: 1..=MAX_STREAMS,
};

/// `[server]`. `certificates` tells whether `[tls]` lists any or a site orders them
/// with `acme = true` (`listen_tls` needs one); `base` is the directory relative paths
/// start from.
pub(super) fn server(
    section: Section<RawServer>,
    certificates: Option<bool>,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Server> {
    let (span, raw) = present(section, diag)?;
    let listeners = listeners::listeners(&raw, &span, certificates, diag);
    let workers = match &raw.workers {
        Some(value) => diag.check(value.span(), values::workers(value.get_ref())),
        None => Some(values::auto_workers()),
    };
    let max_header_bytes = bytes(&raw.max_header_bytes, &HEADER_BYTES, diag);
    let max_uri_bytes = bytes(&raw.max_uri_bytes, &URI_BYTES, diag);
    let client_body_buffer_size = bytes(&raw.client_body_buffer_size, &BODY_BUFFER, diag);
    let client_max_body_size = match &raw.client_max_body_size {
        Some(value) => diag.check(value.span(), values::max_body_size(value.get_ref())),
        None => Some(MaxBodySize::Bytes(DEFAULT_MAX_BODY)),
    };
    let client_body_min_rate = match &raw.client_body_min_rate {
        Some(value) => diag.check(value.span(), values::size(value.get_ref())),
        None => Some(1 << 10),
    };
    let client_body_temp_path = temp_path(raw.client_body_temp_path.as_ref(), base, diag);
    let pid_file = pid_file(raw.pid_file.as_ref(), base, diag);
    let max_headers = count(&raw.max_headers, &HEADERS, diag);
    let streams = count(&raw.http2_max_concurrent_streams, &STREAMS, diag);
    let client_header_timeout = duration_or(&raw.client_header_timeout, 10, diag);
    let client_body_timeout = duration_or(&raw.client_body_timeout, 60, diag);
    let send_timeout = duration_or(&raw.send_timeout, 60, diag);
    let keepalive_timeout = duration_or(&raw.keepalive_timeout, 75, diag);
    let shutdown_timeout = duration_or(&raw.shutdown_timeout, 30, diag);
    let limit_status = match &raw.limit_status {
        Some(value) => limits::limit_status(value, diag),
        None => Some(StatusCode::TOO_MANY_REQUESTS),
    };
    let tarpit_hold = duration_or(&raw.tarpit_hold, DEFAULT_HOLD_SECS, diag);
    let tarpit_max = count(&raw.tarpit_max, &TARPIT_MAX, diag);
    let server_header = server_header(raw.server_header.as_ref(), diag);
    let forwarded_headers = match &raw.forwarded_headers {
        Some(list) => headers::forwarded_headers(list, diag),
        None => Some(Forwarded::ALL),
    };
    let compress = match &raw.compress {
        Some(written) => compress::compress(written, diag).map(Some),
        None => Some(None),
    };
    // Every key above has been checked (and its errors reported) before any `?`.
    let listeners = listeners?;
    Some(Server {
        listen: listeners.listen,
        listen_tls: listeners.listen_tls,
        workers: workers?,
        client_header_timeout: client_header_timeout?,
        client_body_timeout: client_body_timeout?,
        client_body_min_rate: client_body_min_rate?,
        client_body_buffer_size: client_body_buffer_size?,
        client_max_body_size: client_max_body_size?,
        request_buffering: raw.request_buffering.unwrap_or(RequestBuffering::On),
        client_body_temp_path: client_body_temp_path?,
        send_timeout: send_timeout?,
        keepalive_timeout: keepalive_timeout?,
        max_header_bytes: max_header_bytes?,
        max_uri_bytes: max_uri_bytes?,
        max_headers: max_headers?,
        underscores_in_headers: raw.underscores_in_headers.unwrap_or(false),
        http2_max_concurrent_streams: u32::try_from(streams?).ok()?,
        shutdown_timeout: shutdown_timeout?,
        limit_status: limit_status?,
        limit_action: raw.limit_action.unwrap_or_default(),
        tarpit: Tarpit {
            hold: tarpit_hold?,
            max: tarpit_max?,
        },
        ratelimit_headers: ratelimit_headers(raw.ratelimit_headers),
        server_header: server_header?,
        forwarded_headers: forwarded_headers?,
        pid_file: pid_file?,
        compress: compress?,
        sendfile: raw.sendfile.as_ref().is_none_or(|on| *on.get_ref()),
        proxy_protocol_from: listeners.proxy_protocol_from,
    })
}

/// The section's span and keys; absent, it is reported (there is no listener).
fn present(section: Section<RawServer>, diag: &mut Diagnostics<'_>) -> Option<(Span, RawServer)> {
    match section {
        Section::Absent => {
            listeners::none(diag);
            None
        }
        Section::Invalid => None,
        Section::Present(span, raw) => Some((span, raw)),
    }
}

/// `pid_file`, relative to `base`; none by default (a service manager that watches the
/// process needs none, and `tollgate reload` and `stop` need one).
fn pid_file(
    written: Option<&Spanned<String>>,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<PathBuf>> {
    match written {
        None => Some(None),
        Some(path) if path.get_ref().is_empty() || path.get_ref().ends_with('/') => {
            let message = "`pid_file` must name a file (or be left out for none)";
            diag.error(path.span(), message);
            None
        }
        Some(path) => Some(Some(base.join(path.get_ref()))),
    }
}

/// `server_header`: tollgate's `Server` value, `"tollgate"` by default (no version, as
/// nginx with `server_tokens off` names only itself); `""` sends none.
fn server_header(
    written: Option<&Spanned<String>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<http::HeaderValue>> {
    let Some(written) = written else {
        return Some(Some(http::HeaderValue::from_static("tollgate")));
    };
    let text = written.get_ref().trim();
    if text.is_empty() {
        return Some(None);
    }
    match http::HeaderValue::from_str(text) {
        Ok(value) if !text.bytes().any(|b| b.is_ascii_control()) => Some(Some(value)),
        _ => {
            let message = "`server_header` must be visible ASCII text (or \"\" for none)";
            diag.error(written.span(), message);
            None
        }
    }
}

/// `client_body_temp_path`, relative to `base`; by default `tollgate-body` in the
/// system's temporary directory (`TMPDIR`, else `/tmp`), where nginx has a directory
/// of its build. Nothing is made here: the gateway makes it when it starts.
fn temp_path(
    written: Option<&Spanned<String>>,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<PathBuf> {
    match written {
        None => Some(std::env::temp_dir().join("tollgate-body")),
        Some(path) if path.get_ref().is_empty() => {
            let message = "`client_body_temp_path` is empty: name a directory, or leave it out for \"tollgate-body\" in the system's temporary directory";
            diag.error(path.span(), message);
            None
        }
        Some(path) => Some(base.join(path.get_ref())),
    }
}

/// `ratelimit_headers`: the IETF draft's by default.
fn ratelimit_headers(written: Option<RawRateLimitHeaders>) -> RateLimitHeaders {
    match written.unwrap_or(RawRateLimitHeaders::Draft) {
        RawRateLimitHeaders::Draft => RateLimitHeaders::Draft,
        RawRateLimitHeaders::Legacy => RateLimitHeaders::Legacy,
        RawRateLimitHeaders::Both => RateLimitHeaders::Both,
        RawRateLimitHeaders::None => RateLimitHeaders::None,
    }
}

/// A size key within its bounds, or its default when absent.
fn bytes(
    value: &Option<Loose>,
    bounds: &Bounded<u64>,
    diag: &mut Diagnostics<'_>,
) -> Option<usize> {
    let Some(value) = value else {
        return usize::try_from(bounds.default).ok();
    };
    let size = diag.check(value.span(), values::size(value.get_ref()))?;
    if bounds.range.contains(&size) {
        return usize::try_from(size).ok();
    }
    let message = format!(
        r#"invalid {} {}: expected a size from "{}" to "{}""#,
        bounds.key,
        value.get_ref(),
        written(*bounds.range.start()),
        written(*bounds.range.end())
    );
    diag.error(value.span(), message);
    None
}

/// A size as a file would write it: `"16k"`, `"1m"`, `"0"`.
fn written(size: u64) -> String {
    match size {
        0 => "0".to_owned(),
        s if s % (1 << 20) == 0 => format!("{}m", s >> 20),
        s if s % (1 << 10) == 0 => format!("{}k", s >> 10),
        s => s.to_string(),
    }
}

/// A whole-number key within its bounds, or its default when absent.
fn count(
    value: &Option<Spanned<i64>>,
    bounds: &Bounded<i64>,
    diag: &mut Diagnostics<'_>,
) -> Option<usize> {
    let Some(value) = value else {
        return usize::try_from(bounds.default).ok();
    };
    if bounds.range.contains(value.get_ref()) {
        return usize::try_from(*value.get_ref()).ok();
    }
    let message = format!(
        "invalid {} {}: expected a whole number from {} to {}",
        bounds.key,
        value.get_ref(),
        bounds.range.start(),
        bounds.range.end()
    );
    diag.error(value.span(), message);
    None
}
