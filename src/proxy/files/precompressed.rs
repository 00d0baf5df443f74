//! `precompressed` (nginx's `gzip_static`, for `.br` and `.zst` too): `FILE.gz` and its
//! kind beside `FILE`, sent instead of it to a client that accepts the coding, with
//! `FILE`'s type and the sidecar's own length, mtime and `ETag`. The original need not
//! exist. As with nginx, only GET and HEAD look, only on HTTP/1.1 and later
//! (`gzip_http_version`), and the answer varies on `Accept-Encoding` whenever a sidecar
//! exists, whether it is sent or not.

use http::header::ACCEPT_ENCODING;
use http::{HeaderValue, Version};

use super::open::{Kind, Opened, Root};
use super::Ask;
use crate::config::Encoding;
use crate::proxy::encoding;

/// What the sidecars of a file came to.
pub(super) struct Sidecars {
    /// Some sidecar exists: the answer varies on `Accept-Encoding`.
    pub any: bool,
    /// The one to send, opened.
    pub chosen: Option<(Encoding, Opened)>,
}

/// Looks for `rel`'s sidecars among `offered` (in the order breaking a tie of the
/// client's q-values) and opens the one the client prefers.
pub(super) fn find(root: &Root, rel: &str, offered: &[Encoding], ask: &Ask<'_>) -> Sidecars {
    let name = |coding: Encoding| format!("{rel}{}", coding.extension());
    let existing: Vec<Encoding> = (offered.iter().copied())
        .filter(|&coding| matches!(root.probe(&name(coding)), Ok(meta) if meta.kind == Kind::File))
        .collect();
    let any = !existing.is_empty();
    if !any || ask.version < Version::HTTP_11 {
        return Sidecars { any, chosen: None };
    }
    let accept: Vec<&HeaderValue> = ask.headers.get_all(ACCEPT_ENCODING).iter().collect();
    let chosen = encoding::choose(accept.iter().copied(), &existing).and_then(|coding| {
        let opened = root.open_file(&name(coding)).ok()?;
        (opened.meta.kind == Kind::File).then_some((coding, opened))
    });
    Sidecars { any, chosen }
}
