//! What a connection makes of an answer before sending it, whichever protocol it speaks.

use http::{HeaderMap, Response, StatusCode};

use super::timeouts::ConnState;
use crate::proxy::response::Unanswered;
use crate::proxy::Logged;
use crate::wire::Protocol;

/// A 101 turns the connection into a tunnel, an HTTP/1.x answer that closes it lingers
/// ([`closes`]), and a `return 444` is not sent at all. Dropping that response logs the
/// request; the error makes the connection close (HTTP/1.1) or reset the stream (HTTP/2)
/// unanswered.
pub(super) fn settle(
    response: &Response<Logged>,
    state: &ConnState,
    protocol: Protocol,
) -> Result<(), Unanswered> {
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        state.set_upgraded();
    }
    let ends_connection = match protocol {
        Protocol::Http1 => !response.headers().is_empty() && closes(response.headers()),
        // A stream's answer never ends its connection.
        Protocol::Http2 | Protocol::Http3 => false,
    };
    if ends_connection {
        state.linger_on_close();
    }
    // `return 444` marks its answer; a limited request's 444 is a flag of its body.
    match response.body().is_unanswered() || response.extensions().get::<Unanswered>().is_some() {
        true => Err(Unanswered),
        false => Ok(()),
    }
}

/// Whether an HTTP/1.x answer ends its connection (`Connection: close`: tollgate's
/// refusals, which may leave the request's body unread).
fn closes(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONNECTION)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"close"))
}

/// Over HTTP/2 and HTTP/3, what `$bytes_sent` counts for an answer's head when its line
/// writes it: the size the head would have as HTTP/1.1 text (`HTTP/1.1 200 OK`, each
/// `name: value`, the blank line). Their frames are compressed by the connection, which
/// tells no sizes.
/// `hyper`: the connection adds the `Date` and `Content-Length` headers the map does not
/// have (HTTP/2's does).
pub(super) fn measure_head(status: StatusCode, headers: &HeaderMap, hyper: bool, body: &mut Logged) {
    use http_body::Body as _;
    if !body.wants_head_size() {
        return;
    }
    let reason = status.canonical_reason().map_or(0, str::len);
    let lines: usize = headers.iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum();
    let mut added = 0;
    if hyper && !headers.contains_key(http::header::DATE) {
        // `date: Sun, 29 Nov 2026 19:24:55 GMT` and its CRLF.
        added += 37;
    }
    if let (true, false, Some(length)) = (hyper, headers.contains_key(http::header::CONTENT_LENGTH), body.size_hint().exact()) {
        let digits = length.checked_ilog10().map_or(1, |log| log as usize + 1);
        added += "content-length: \r\n".len() + digits;
    }
    // "HTTP/1.1 200 " + reason + CRLF, the lines, CRLF.
    body.head_sent((13 + reason + 2 + lines + added + 2) as u64);
}
