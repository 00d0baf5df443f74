//! The `json` access-log format: one object per line, with `null` for what a request did
//! not have (tollgate's own; a `log_format` template with `escape = "json"` writes
//! nginx-style JSON instead).

use std::io::Write as _;
use std::time::SystemTime;

use http::header::{REFERER, USER_AGENT};
use http::HeaderName;

use super::line::{escape, place};
use super::{time, Record};
use crate::config::Escape;

/// The places of `Referer` and `User-Agent` in [`Record::headers`], those not yet in
/// `captured` added: what a `json` line reads.
pub(super) fn headers(captured: &mut Vec<HeaderName>) -> [usize; 2] {
    [place(captured, &REFERER), place(captured, &USER_AGENT)]
}

/// Appends `r`'s line (without its newline), written at `now`; `at` is where [`headers`]
/// put the two headers it reads.
pub(super) fn write(out: &mut Vec<u8>, r: &Record, now: SystemTime, at: [usize; 2]) {
    let string = |out: &mut Vec<u8>, value: Option<&[u8]>| {
        out.push(b'"');
        escape(out, value.unwrap_or_default(), Escape::Json);
        out.push(b'"');
    };
    let header = |at: usize| r.headers.get(at).map(|v| v.as_bytes());
    let [referer, user_agent] = at;
    out.extend_from_slice(b"{\"time\":\"");
    time::iso_millis(out, now);
    let _ = write!(out, "\",\"remote_addr\":\"{}\",\"method\":", r.client);
    string(out, Some(r.method.as_str().as_bytes()));
    out.extend_from_slice(b",\"uri\":");
    string(out, Some(r.target().as_bytes()));
    let _ = write!(
        out,
        ",\"protocol\":\"{:?}\",\"status\":{},\"body_bytes_sent\":{},\"referer\":",
        r.version,
        r.status.as_u16(),
        r.body_bytes
    );
    string(out, header(referer));
    out.extend_from_slice(b",\"user_agent\":");
    string(out, header(user_agent));
    out.extend_from_slice(b",\"remote_user\":");
    string(out, r.remote_user().as_deref());
    let _ = write!(
        out,
        ",\"limit_status\":\"{}\",\"request_time\":{:.3},\"upstream_time\":",
        r.limit_status,
        r.request_time.as_secs_f64()
    );
    match r.upstream_time {
        Some(t) => {
            let _ = write!(out, "{:.3}", t.as_secs_f64());
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"upstream_addr\":");
    match r.upstream_addr {
        Some(addr) => {
            let _ = write!(out, "\"{addr}\"");
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"request_id\":");
    match &r.request_id {
        Some(id) => string(out, Some(id)),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b'}');
}
