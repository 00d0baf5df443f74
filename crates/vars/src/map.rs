//! nginx's `map` (`[maps.NAME]` in docs/config.md): a variable whose value is chosen by
//! the value of another text. As ngx_http_map_module: the source text is filled in, an
//! exact key equal to it in any ASCII case wins; else the regex keys are tried in the
//! order written (never on an empty source), the first that matches wins and its
//! captures fill in `$1`…`$9` (and its named groups) in its value; else the default
//! (`""` when none is set). A value may hold variables, other maps among them.
//!
//! The regexes are the `regex` crate's, which matches in time linear in the source's
//! length: a hostile header under a map costs one pass per regex, never a backtrack.

use std::borrow::Cow;
use std::collections::HashMap;

use regex::bytes::{Captures, Regex};

use crate::{Piece, Request, Var, VarText};

/// A map's key, as written in its `values`.
#[derive(Clone, Debug)]
pub enum Key {
    /// Compared with the source in any ASCII case (nginx lower-cases both).
    Exact(String),
    /// `~regex` or `~*regex`, compiled with the case it asks for.
    Regex(Regex),
}

/// One map: the variable `$NAME`. Two maps are the same when their names are (a
/// configuration defines each name once).
pub struct Map {
    name: Box<str>,
    source: VarText,
    /// Exact keys, lower case, to the index of their value.
    exact: HashMap<Box<[u8]>, usize>,
    /// Regex keys in the order written, with the index of their value and whether it
    /// uses the captures (else a match is enough, which costs less).
    regexes: Box<[(Regex, usize, bool)]>,
    values: Box<[VarText]>,
    default: VarText,
}

/// The entries in their order (the exact keys lower case), whatever the hash's order.
impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<(usize, String)> = self
            .exact
            .iter()
            .map(|(key, &i)| (i, format!("{:?}", String::from_utf8_lossy(key))))
            .chain(
                self.regexes
                    .iter()
                    .map(|(regex, i, _)| (*i, format!("~{:?}", regex.as_str()))),
            )
            .collect();
        keys.sort();
        let entries: Vec<(&str, &VarText)> = keys
            .iter()
            .filter_map(|(i, key)| Some((key.as_str(), self.values.get(*i)?)))
            .collect();
        f.debug_struct("Map")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("entries", &entries)
            .field("default", &self.default)
            .finish()
    }
}

impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        self.name == other.name
    }
}

impl Eq for Map {}

/// The entry a source selects: its index in the values, and a regex key's captures.
type Found<'s> = Option<(usize, Option<Captures<'s>>)>;

impl Map {
    /// The map `$name` over `source`, with `entries` in the order written. An exact key
    /// written twice (in any case) keeps its first value: the caller refuses it anyway,
    /// as nginx does. In a regex key's value, `$1`… ([`Var::Capture`]) are that regex's
    /// captures; a caller gives named groups their index.
    pub fn new(name: &str, source: VarText, entries: Vec<(Key, VarText)>, default: VarText) -> Map {
        let mut exact = HashMap::new();
        let mut regexes = Vec::new();
        let mut values = Vec::with_capacity(entries.len());
        for (index, (key, value)) in entries.into_iter().enumerate() {
            match key {
                Key::Exact(key) => {
                    let key = key.to_ascii_lowercase().into_bytes().into_boxed_slice();
                    exact.entry(key).or_insert(index);
                }
                Key::Regex(regex) => regexes.push((regex, index, value.max_capture() > 0)),
            }
            values.push(value);
        }
        Map {
            name: name.into(),
            source,
            exact,
            regexes: regexes.into(),
            values: values.into(),
            default,
        }
    }

    /// The name, without `$`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The text whose value selects an entry.
    pub fn source(&self) -> &VarText {
        &self.source
    }

    /// The values, in the order of the entries given to [`Map::new`].
    pub fn values(&self) -> &[VarText] {
        &self.values
    }

    /// The value when no key matches.
    pub fn default_value(&self) -> &VarText {
        &self.default
    }

    /// The index of the value `req` selects; `None` for the default.
    pub fn entry(&self, req: &Request<'_>) -> Option<usize> {
        let mut source = Vec::new();
        self.source.render(req, &mut source);
        self.find(&source).map(|(index, _)| index)
    }

    /// Appends the value `req` selects.
    pub fn append(&self, req: &Request<'_>, out: &mut Vec<u8>) {
        let mut source = Vec::new();
        self.source.render(req, &mut source);
        let (value, captures) = match self.find(&source) {
            Some((index, captures)) => (&self.values[index], captures),
            None => (&self.default, None),
        };
        for piece in value.pieces() {
            match (piece, &captures) {
                (Piece::Text(text), _) => out.extend_from_slice(text.as_bytes()),
                // The regex key's own captures; anywhere else (refused by the
                // configuration) an unset capture is empty, as nginx.
                (Piece::Var(Var::Capture(n)), captures) => {
                    let group = captures.as_ref().and_then(|c| c.get(*n));
                    out.extend_from_slice(group.map_or(&[][..], |m| m.as_bytes()));
                }
                (Piece::Var(var), _) => req.append(var, out),
            }
        }
    }

    /// The entry `source` selects, as nginx's `ngx_http_map_find`.
    fn find<'s>(&self, source: &'s [u8]) -> Found<'s> {
        if !self.exact.is_empty() {
            let key = match source.iter().any(u8::is_ascii_uppercase) {
                true => Cow::Owned(source.to_ascii_lowercase()),
                false => Cow::Borrowed(source),
            };
            if let Some(&index) = self.exact.get(&*key) {
                return Some((index, None));
            }
        }
        // nginx tries no regex on an empty source (not even `~^$`).
        if source.is_empty() {
            return None;
        }
        self.regexes
            .iter()
            .find_map(|(regex, index, captures)| match captures {
                true => regex.captures(source).map(|c| (*index, Some(c))),
                false => regex.is_match(source).then_some((*index, None)),
            })
    }

    /// Calls `f` with every variable the request fills in for this map: the source's and
    /// the values' (through the maps they use), but not a regex key's own captures.
    pub(crate) fn visit_outer(&self, f: &mut dyn FnMut(&Var)) {
        let values = self.values.iter().chain([&self.default]);
        let texts = [&self.source].into_iter().map(|t| (t, false));
        for (text, in_value) in texts.chain(values.map(|t| (t, true))) {
            for piece in text.pieces() {
                match piece {
                    Piece::Var(Var::Capture(_)) if in_value => {}
                    Piece::Var(Var::Map(map)) => map.visit_outer(f),
                    Piece::Var(var) => f(var),
                    Piece::Text(_) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
