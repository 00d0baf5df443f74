//! A location's pattern as tollgate's `match`, and what a location answers with
//! (`proxy_pass`, `return`, a `rewrite` that maps).

use tollgate_nginx::{Directive, Place};

/// Where a location forwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub group: String,
    /// The URI part of `proxy_pass` (`/v2/`), when it has one.
    pub path: Option<String>,
    /// nginx's `$proxy_host`: the group's name, or `host[:port]` (a port other than
    /// the scheme's).
    pub proxy_host: String,
    /// The `proxy_pass` URL as written (nginx's `proxy_redirect default` starts with it).
    pub url: String,
}

/// A location's pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Pattern {
    /// As tollgate's `match` writes it: `= /x`, `^~ /x`, `/x`, `~ re`, `~* re`.
    pub text: String,
    pub kind: Kind,
    /// The path or the regex.
    pub path: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Exact,
    Prefix,
    /// `^~`
    PrefixStop,
    Regex,
}

impl Pattern {
    /// `location`'s arguments (`= /x`, `=/x`, `~* \.php$`, `/x`); why not when it
    /// cannot be written.
    pub(super) fn parse(args: &[String]) -> Result<Pattern, String> {
        let (modifier, path) = match args {
            [m, p] => (m.as_str(), p.as_str()),
            [one] => ["^~", "~*", "=", "~"]
                .iter()
                .find_map(|m| Some((*m, one.strip_prefix(m)?)))
                .filter(|(_, rest)| !rest.is_empty())
                .unwrap_or(("", one.as_str())),
            _ => return Err("`location` takes a modifier and a path".to_owned()),
        };
        if path.starts_with('@') {
            return Err("a named location is translated only in a `server {}`, as the last item of a `try_files` (holding one `proxy_pass`): write the fallback as a location of its own".to_owned());
        }
        let kind = match modifier {
            "" => Kind::Prefix,
            "=" => Kind::Exact,
            "^~" => Kind::PrefixStop,
            "~" | "~*" => Kind::Regex,
            other => return Err(format!("unknown location modifier `{other}`")),
        };
        if kind == Kind::Regex {
            let source = match modifier {
                "~*" => format!("(?i){path}"),
                _ => path.to_owned(),
            };
            if let Err(err) = regex::Regex::new(&source) {
                let first = err.to_string();
                let first = first.lines().last().unwrap_or_default().trim().to_owned();
                return Err(format!("a regex tollgate's engine does not take ({first}): lookaround and backreferences have no equivalent; write it without them"));
            }
        } else if !path.starts_with('/') {
            return Err(format!("`{path}` does not start with `/`: no request path matches it"));
        }
        let text = match modifier {
            "" => path.to_owned(),
            m => format!("{m} {path}"),
        };
        Ok(Pattern {
            text,
            kind,
            path: path.to_owned(),
        })
    }
}

/// What a location answers with.
#[derive(Default)]
pub(super) struct Content<'d> {
    pub proxy: Option<(Target, &'d Directive)>,
    pub ret: Option<Ret>,
    /// A `rewrite … break` that maps to a path for the upstream.
    pub upstream_path: Option<String>,
    /// `if`s and the `return` after them made into one `return` with a map's status:
    /// where each is, and the line of the first `if`.
    pub folded: Vec<(Place, usize)>,
    /// An `if` above was not translated: the ones after it are not either.
    pub if_failed: bool,
}

/// A `return`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Ret {
    pub status: i64,
    /// `$NAME` of the map that chooses the status instead (an `if` made into one).
    pub status_map: Option<String>,
    pub body: Option<String>,
    pub location: Option<String>,
}
