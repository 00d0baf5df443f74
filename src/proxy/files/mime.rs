//! A served file's `Content-Type`, from the extension of the URI (not of the file
//! opened: a precompressed sidecar keeps the original's type), as nginx takes it.

use std::cell::RefCell;

use http::HeaderValue;

/// What a file of no known extension is sent as (Debian nginx's `default_type`).
const DEFAULT: HeaderValue = HeaderValue::from_static("application/octet-stream");

/// The type for `uri` by its extension; unknown ones (and none) are octet streams.
/// mime_guess's table differs from nginx 1.22's `mime.types` here and there (`.js` is
/// `text/javascript`, RFC 9239's choice).
pub(super) fn content_type(uri: &[u8]) -> HeaderValue {
    extension(uri)
        .and_then(|ext| match folded(ext) {
            Some(key) => RECENT.with_borrow_mut(|recent| recent.look_up(key, ext)),
            None => look_up(ext),
        })
        .map_or(DEFAULT, HeaderValue::from_static)
}

fn look_up(ext: &[u8]) -> Option<&'static str> {
    let ext = std::str::from_utf8(ext).ok()?;
    mime_guess::from_ext(ext).first_raw()
}

/// Extensions looked up lately on a thread, and their types: a site serves a handful,
/// and mime_guess's lookup (a case-folding binary search) costs about a thousand
/// instructions. Unknown ones are kept too; a client sending many only evicts.
struct Recent {
    kept: [Option<(u64, Option<&'static str>)>; 8],
    /// The slot the next new extension takes.
    next: usize,
}

impl Recent {
    fn look_up(&mut self, key: u64, ext: &[u8]) -> Option<&'static str> {
        if let Some((_, found)) = self.kept.iter().flatten().find(|(kept, _)| *kept == key) {
            return *found;
        }
        let found = look_up(ext);
        self.kept[self.next] = Some((key, found));
        self.next = (self.next + 1) % self.kept.len();
        found
    }
}

thread_local! {
    static RECENT: RefCell<Recent> = const { RefCell::new(Recent { kept: [None; 8], next: 0 }) };
}

/// A short extension (1 to 8 bytes) lower-cased into one number; `None` for others.
fn folded(ext: &[u8]) -> Option<u64> {
    if ext.is_empty() || ext.len() > 8 {
        return None;
    }
    let mut bytes = [0u8; 8];
    for (to, from) in bytes.iter_mut().zip(ext) {
        *to = from.to_ascii_lowercase();
    }
    Some(u64::from_le_bytes(bytes))
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
        assert_eq!(content_type(b"/a.webmanifest"), "application/manifest+json");
    }

    #[test]
    fn the_recent_extensions_answer_as_the_table_does() {
        let names = ["a.html", "b.css", "c.HTML", "d.js", "e.png", "f.svg", "g.woff2", "h.json"];
        let names = names.iter().chain(&["i.txt", "j.wasm", "k.zz", "l.Css", "m.ico"]);
        for _ in 0..3 {
            for name in names.clone() {
                let uri = format!("/{name}");
                let ext = extension(uri.as_bytes()).unwrap();
                let expected = look_up(ext).map_or(DEFAULT, HeaderValue::from_static);
                assert_eq!(content_type(uri.as_bytes()), expected, "{name}");
            }
        }
    }
}
