//! `include` patterns, as glob(3) expands them for nginx: `*`, `?` and `[…]` (with `!`
//! or `^` to negate, and ranges) in any path component, `\` to escape; a wildcard never
//! matches a leading `.`; the matches sorted by path. No match is no error (nginx sets
//! `gl.test`).

use std::path::{Component, Path, PathBuf};

use crate::Files;

/// Whether `path` has a wildcard, as nginx decides it (`strpbrk(file, "*?[")`).
pub(crate) fn is_pattern(path: &str) -> bool {
    path.contains(['*', '?', '['])
}

/// The paths matching `pattern`, sorted. Directories that cannot be listed match
/// nothing.
pub(crate) fn expand(files: &dyn Files, pattern: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::new()];
    for component in pattern.components() {
        let part = match component {
            Component::Normal(part) => part.to_string_lossy(),
            other => {
                for path in &mut found {
                    path.push(other.as_os_str());
                }
                continue;
            }
        };
        if !is_pattern(&part) {
            for path in &mut found {
                path.push(&*part);
            }
            continue;
        }
        let mut next = Vec::new();
        for dir in &found {
            let Ok(mut names) = files.list(dir) else {
                continue;
            };
            names.sort();
            for name in names {
                if matches(part.as_bytes(), name.as_bytes()) {
                    next.push(dir.join(name));
                }
            }
        }
        found = next;
    }
    found.sort();
    found
}

/// fnmatch(3) for one component, without flags but the leading-dot rule.
pub(crate) fn matches(pattern: &[u8], name: &[u8]) -> bool {
    if name.first() == Some(&b'.') && pattern.first() != Some(&b'.') {
        return false;
    }
    fnmatch(pattern, name)
}

fn fnmatch(pattern: &[u8], name: &[u8]) -> bool {
    // Iterative with one backtrack point for the last `*`, so no input is exponential.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, n));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => class(&pattern[p..], name[n]),
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == name[n]).then_some(2),
            Some(&c) => (c == name[n]).then_some(1),
            None => None,
        };
        match step {
            Some(width) => {
                p += width;
                n += 1;
            }
            None => match star {
                Some((after, from)) => {
                    p = after;
                    n = from + 1;
                    star = Some((after, from + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// `[…]` at the start of `pattern` against `c`: `Some(width of the class)` when it
/// matches. A `[` with no `]` is a plain `[`.
fn class(pattern: &[u8], c: u8) -> Option<usize> {
    let mut i = 1;
    let negate = matches!(pattern.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let Some(&lo) = pattern.get(i) else {
            return (c == b'[').then_some(1);
        };
        if lo == b']' && !first {
            return (matched != negate).then_some(i + 1);
        }
        first = false;
        match (pattern.get(i + 1), pattern.get(i + 2)) {
            (Some(b'-'), Some(&hi)) if hi != b']' => {
                matched |= lo <= c && c <= hi;
                i += 3;
            }
            _ => {
                matched |= lo == c;
                i += 1;
            }
        }
    }
}
