//! A served file's `Content-Type`, from the extension of the URI (not of the file
//! opened: a precompressed sidecar keeps the original's type), as nginx takes it.

use http::HeaderValue;

/// What a file of no known extension is sent as (Debian nginx's `default_type`).
const DEFAULT: HeaderValue = HeaderValue::from_static("application/octet-stream");

/// The type for `uri` by its extension; unknown ones (and none) are octet streams.
/// mime_guess's table differs from nginx 1.22's `mime.types` here and there (`.js` is
/// `text/javascript`, RFC 9239's choice).
pub(super) fn content_type(uri: &[u8]) -> HeaderValue {
    let guess = extension(uri)
        .and_then(|ext| std::str::from_utf8(ext).ok())
        .and_then(|ext| mime_guess::from_ext(ext).first_raw());
    guess.map_or(DEFAULT, HeaderValue::from_static)
}

/// nginx's `ngx_http_set_exten`: what follows the last `.` of the last segment, unless
/// that `.` begins the segment (`/.env` has none). The first two bytes are not looked at.
fn extension(uri: &[u8]) -> Option<&[u8]> {
    for i in (2..uri.len()).rev() {
        match uri[i] {
            b'.' if uri[i - 1] != b'/' => return Some(&uri[i + 1..]),
            b'/' => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_follows_the_last_dot_of_the_last_segment() {
        assert_eq!(extension(b"/a/b.tar.gz"), Some(&b"gz"[..]));
        assert_eq!(extension(b"/a.d/file"), None);
        assert_eq!(extension(b"/.env"), None);
        assert_eq!(extension(b"/dir/.hidden"), None);
        assert_eq!(extension(b"/x."), Some(&b""[..]));
        assert_eq!(extension(b"/"), None);
    }

    #[test]
    fn types_come_from_the_extension_in_any_case_else_octet_stream() {
        assert_eq!(content_type(b"/index.html"), "text/html");
        assert_eq!(content_type(b"/INDEX.HTML"), "text/html");
        assert_eq!(content_type(b"/a.css"), "text/css");
        assert_eq!(content_type(b"/a.png"), "image/png");
        assert_eq!(content_type(b"/a.json"), "application/json");
        assert_eq!(content_type(b"/a.js"), "text/javascript");
        assert_eq!(content_type(b"/README"), "application/octet-stream");
        assert_eq!(content_type(b"/a.unknownext"), "application/octet-stream");
        assert_eq!(content_type(b"/a.\xff"), "application/octet-stream");
    }
}
