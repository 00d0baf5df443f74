//! A URI to the place of its file under the location's directory, or the reason it
//! names none that may be served. Pure: no file is looked at.
//!
//! The URI is already normalized (`routing::normalize_path`: decoded, `//` merged, `.`
//! and `..` resolved, never above `/`, no NUL). What more is refused, before any file is
//! opened (DESIGN §17): a `/` or `\` that arrived %-encoded, a literal `\`, bytes that
//! are not UTF-8 (overlong forms such as `%c0%ae` included) and, unless `dotfiles`, a
//! segment starting `.` other than a leading `/.well-known/` (RFC 8615). nginx refuses
//! none of these (it serves dotfiles; a `%2F` is a separator to it): the first three
//! can only name a file nginx would not find on Unix either, or find under a name the
//! client disguised.

use http::StatusCode;

use crate::config::files::Base;
use crate::routing;

/// Why a path names no file to serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// 400: the path itself is malformed.
    Malformed,
    /// 404: a path that may not name a served file.
    Hidden,
}

impl Refused {
    pub(super) fn status(self) -> StatusCode {
        match self {
            Refused::Malformed => StatusCode::BAD_REQUEST,
            Refused::Hidden => StatusCode::NOT_FOUND,
        }
    }
}

/// The checks only the path as sent allows: an escape that decoded to a separator.
pub(super) fn check_sent(sent: &str) -> Result<(), Refused> {
    // Nothing escaped, and nothing `normalize_marked` would refuse (no NUL, no `..`).
    let mut before = 0;
    let plain = sent.bytes().all(|b| {
        let plain = b != b'%' && b != 0 && !(b == b'.' && before == b'.');
        before = b;
        plain
    });
    if plain && sent.starts_with('/') {
        return Ok(());
    }
    let marked = routing::normalize_marked(sent).map_err(|_| Refused::Malformed)?;
    let disguised = (marked.iter()).any(|b| b.escaped && matches!(b.byte, b'/' | b'\\'));
    if disguised {
        return Err(Refused::Hidden);
    }
    Ok(())
}

/// `uri` as a path relative to the base's directory: the whole URI under `root`, what
/// follows the location's prefix under `alias` (a URI outside the prefix, which only a
/// `try_files` item can make, is taken whole, as nginx does). Without a leading `/`;
/// `""` is the directory itself.
pub(super) fn relative<'a>(base: &Base, uri: &'a [u8], dotfiles: bool) -> Result<&'a str, Refused> {
    if uri.contains(&0) {
        return Err(Refused::Malformed);
    }
    if uri.contains(&b'\\') {
        return Err(Refused::Hidden);
    }
    let text = std::str::from_utf8(uri).map_err(|_| Refused::Hidden)?;
    let from = match base {
        Base::Root(_) => 0,
        Base::Alias { prefix, .. } if text.starts_with(prefix.as_str()) => prefix.len(),
        Base::Alias { .. } => 0,
    };
    let rest = &text[from..];
    let mut offset = from;
    for segment in rest.as_bytes().split(|&b| b == b'/') {
        let hidden = segment.first() == Some(&b'.')
            && !(segment == b".well-known" && offset == 1)
            && !dotfiles;
        if hidden || segment == b"." || segment == b".." {
            return Err(Refused::Hidden);
        }
        offset += segment.len() + 1;
    }
    Ok(rest.trim_start_matches('/'))
}

/// A path a `try_files` item or its last URI renders to, made safe to look up: it
/// must start with `/`; `//` are merged and `.` and `..` resolved (never above `/`),
/// with nothing decoded (the variables in it are decoded already, or are the query's,
/// which a file name never decodes). `None` for a path that cannot be.
pub(super) fn clean(path: &[u8]) -> Option<Vec<u8>> {
    if path.first() != Some(&b'/') || path.contains(&0) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(path.len());
    let segments: Vec<&[u8]> = path[1..].split(|&b| b == b'/').collect();
    let last = segments.len() - 1;
    for (i, segment) in segments.into_iter().enumerate() {
        match segment {
            b"" | b"." => {}
            b".." => {
                if out.is_empty() {
                    return None;
                }
                let parent = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
                out.truncate(parent);
            }
            name => {
                out.push(b'/');
                out.extend_from_slice(name);
                continue;
            }
        }
        // A path ending in a `.`, `..` or empty segment names a directory.
        if i == last {
            out.push(b'/');
            return Some(out);
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn root() -> Base {
        Base::Root(PathBuf::from("/srv"))
    }

    fn alias(prefix: &str) -> Base {
        Base::Alias {
            prefix: prefix.into(),
            dir: PathBuf::from("/srv/assets"),
        }
    }

    #[test]
    fn a_root_takes_the_whole_uri_and_an_alias_what_follows_its_prefix() {
        assert_eq!(relative(&root(), b"/a/b.txt", false), Ok("a/b.txt"));
        assert_eq!(relative(&root(), b"/", false), Ok(""));
        assert_eq!(relative(&root(), b"/docs/", false), Ok("docs/"));
        assert_eq!(relative(&alias("/static/"), b"/static/a.css", false), Ok("a.css"));
        assert_eq!(relative(&alias("/static"), b"/static/a.css", false), Ok("a.css"));
        assert_eq!(relative(&alias("/static/"), b"/static/", false), Ok(""));
        assert_eq!(relative(&alias("/static/"), b"/index.html", false), Ok("index.html"));
    }

    #[test]
    fn backslashes_nul_and_bytes_not_utf8_are_refused() {
        assert_eq!(relative(&root(), b"/..\\secret", false), Err(Refused::Hidden));
        assert_eq!(relative(&root(), b"/a\\b", false), Err(Refused::Hidden));
        assert_eq!(relative(&root(), b"/\xc0\xae\xc0\xae/secret", false), Err(Refused::Hidden));
        assert_eq!(relative(&root(), b"/\xe0\x80\xae", false), Err(Refused::Hidden));
        assert_eq!(relative(&root(), b"/\xff", false), Err(Refused::Hidden));
        assert_eq!(relative(&root(), b"/a\0b", false), Err(Refused::Malformed));
        assert_eq!(relative(&root(), "/café".as_bytes(), false), Ok("café"));
    }

    #[test]
    fn dot_segments_are_hidden_unless_dotfiles_but_well_known_is_not() {
        for uri in ["/.env", "/.git/config", "/a/.htpasswd", "/.well-known/.x", "/a/.well-known/x"] {
            assert_eq!(relative(&root(), uri.as_bytes(), false), Err(Refused::Hidden), "{uri}");
        }
        assert_eq!(relative(&root(), b"/.env", true), Ok(".env"));
        assert_eq!(
            relative(&root(), b"/.well-known/acme-challenge/t", false),
            Ok(".well-known/acme-challenge/t")
        );
        assert_eq!(relative(&root(), b"/a.b/c..d/x.", false), Ok("a.b/c..d/x."), "dots inside names");
        assert_eq!(relative(&root(), b"/a/../b", true), Err(Refused::Hidden), "never normalized here");
        assert_eq!(relative(&alias("/.config/"), b"/.config/a", false), Ok("a"), "the prefix is the operator's");
    }

    #[test]
    fn an_escaped_separator_in_the_sent_path_is_refused() {
        for sent in ["/a%2fb", "/a%2Fb", "/%2e%2e%5csecret", "/a%5Cb", "/a/..%2f..%2fsecret"] {
            assert!(check_sent(sent).is_err(), "{sent}");
        }
        assert_eq!(check_sent("/../secret"), Err(Refused::Malformed));
        assert_eq!(check_sent("/%00"), Err(Refused::Malformed));
        assert_eq!(check_sent("/%zz"), Err(Refused::Malformed));
        assert_eq!(check_sent("/a%20b/%2e/c"), Ok(()));
    }

    #[test]
    fn clean_resolves_dots_without_decoding_and_never_climbs_above_root() {
        let cleaned = |p: &str| clean(p.as_bytes()).map(|c| String::from_utf8(c).unwrap());
        assert_eq!(cleaned("/index.html").as_deref(), Some("/index.html"));
        assert_eq!(cleaned("//a///b").as_deref(), Some("/a/b"));
        assert_eq!(cleaned("/a/./b/../c").as_deref(), Some("/a/c"));
        assert_eq!(cleaned("/a/b/").as_deref(), Some("/a/b/"));
        assert_eq!(cleaned("/a/b/..").as_deref(), Some("/a/"));
        assert_eq!(cleaned("/").as_deref(), Some("/"));
        assert_eq!(cleaned("/%2e%2e/x").as_deref(), Some("/%2e%2e/x"));
        assert_eq!(cleaned("/.."), None);
        assert_eq!(cleaned("/a/../../x"), None);
        assert_eq!(cleaned("a"), None);
        assert_eq!(cleaned("/a\0"), None);
    }
}
