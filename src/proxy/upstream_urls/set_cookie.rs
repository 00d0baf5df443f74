//! A `Set-Cookie` value read as nginx reads it for `proxy_cookie_path` and
//! `proxy_cookie_domain`: parts split at each `;`, each a name and, after its first `=`,
//! a value, spaces (not tabs) around both set aside. The first part is the cookie
//! itself; one without `=` is left alone. Once an attribute is rewritten the value is
//! written anew as nginx writes it: parts joined by `; `, each `name` or `name=value`.
//!
//! One pass over the bytes, plus the rules' work per `Path` or `Domain` attribute;
//! nothing is kept per part, so a value of many parts costs no memory beyond its copy.

/// The attributes rules rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Attribute {
    Path,
    Domain,
}

/// One `;`-separated part.
struct Part<'a> {
    name: &'a [u8],
    /// After the first `=`; `None` without one.
    value: Option<&'a [u8]>,
}

impl Part<'_> {
    /// The attribute it is when a rule may rewrite it: `Path` or `Domain` in any case,
    /// with a value.
    fn attribute(&self) -> Option<Attribute> {
        self.value?;
        if self.name.eq_ignore_ascii_case(b"path") {
            Some(Attribute::Path)
        } else if self.name.eq_ignore_ascii_case(b"domain") {
            Some(Attribute::Domain)
        } else {
            None
        }
    }
}

fn parts(value: &[u8]) -> impl Iterator<Item = Part<'_>> {
    value.split(|&b| b == b';').map(|part| {
        let part = trim_start(part);
        match part.iter().position(|&b| b == b'=') {
            Some(eq) => Part {
                name: trim_end(&part[..eq]),
                value: Some(trim_end(trim_start(&part[eq + 1..]))),
            },
            None => Part {
                name: trim_end(part),
                value: None,
            },
        }
    })
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ').unwrap_or(bytes.len());
    &bytes[start..]
}

fn trim_end(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |at| at + 1);
    &bytes[..end]
}

/// `value` with each `Path` and `Domain` attribute's value replaced by what `rewrite`
/// makes of it (`None`: kept), written anew; `None` when nothing was rewritten.
pub(super) fn rewrite(
    value: &[u8],
    mut rewrite: impl FnMut(Attribute, &[u8]) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    for (i, part) in parts(value).enumerate() {
        if i == 0 {
            part.value?;
        }
        let new = match (i, part.attribute(), part.value) {
            (1.., Some(attribute), Some(old)) => rewrite(attribute, old),
            _ => None,
        };
        if new.is_some() && out.is_none() {
            let mut written = Vec::with_capacity(value.len() + 32);
            for (j, earlier) in parts(value).take(i).enumerate() {
                write(&mut written, j, earlier.name, earlier.value);
            }
            out = Some(written);
        }
        if let Some(written) = &mut out {
            write(written, i, part.name, new.as_deref().or(part.value));
        }
    }
    out
}

fn write(out: &mut Vec<u8>, index: usize, name: &[u8], value: Option<&[u8]>) {
    if index > 0 {
        out.extend_from_slice(b"; ");
    }
    out.extend_from_slice(name);
    if let Some(value) = value {
        out.push(b'=');
        out.extend_from_slice(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_root(value: &str) -> Option<String> {
        let out = rewrite(value.as_bytes(), |attribute, old| {
            (attribute == Attribute::Path && old.starts_with(b"/app/"))
                .then(|| [b"/".as_slice(), &old[5..]].concat())
        })?;
        Some(String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_rewritten_cookie_is_written_anew_as_nginx_writes_it() {
        assert_eq!(
            to_root("id=1;path=/app/x;  HttpOnly ;Secure").as_deref(),
            Some("id=1; path=/x; HttpOnly; Secure")
        );
        assert_eq!(
            to_root(" id = 1 ; Path =  /app/ ; ;").as_deref(),
            Some("id=1; Path=/; ; ")
        );
    }

    #[test]
    fn a_cookie_nothing_matches_is_left_as_it_came() {
        assert_eq!(to_root("id=1;  path=/other/;HttpOnly"), None);
        assert_eq!(to_root("id=1; Max-Age=5"), None);
    }

    #[test]
    fn the_cookie_itself_is_never_an_attribute() {
        assert_eq!(to_root("path=/app/x; HttpOnly"), None);
        assert_eq!(to_root("path=/app/; path=/app/y").as_deref(), Some("path=/app/; path=/y"));
    }

    #[test]
    fn a_cookie_without_equals_sign_is_left_alone() {
        assert_eq!(to_root("noequals; path=/app/x"), None);
        assert_eq!(to_root(""), None);
        assert_eq!(to_root(";;;"), None);
    }

    #[test]
    fn attributes_without_a_value_or_with_odd_names_are_kept() {
        assert_eq!(to_root("a=b; path; pathx=/app/; path=/app/z").as_deref(), Some("a=b; path; pathx=/app/; path=/z"));
        assert_eq!(to_root("a=b;\tpath=/app/z"), None, "a tab is part of the name");
        assert_eq!(to_root("a=b; path==/app/z"), None);
    }

    #[test]
    fn hostile_values_take_bounded_work_and_never_panic() {
        let many = format!("a=b{}", "; path=/app/x".repeat(20_000));
        let out = to_root(&many).unwrap();
        assert_eq!(out.matches("path=/x").count(), 20_000);
        let huge = format!("a={}; path=/app/{}", "v".repeat(1 << 20), "p".repeat(1 << 20));
        assert!(to_root(&huge).unwrap().ends_with(&"p".repeat(1 << 20)));
        for weird in [";", "=", "==;==", "; ; =; path", "a=; path=", "a=b; =/app/"] {
            let _ = to_root(weird);
        }
        assert_eq!(to_root("a=b; path=").as_deref(), None);
    }
}
