//! `[maps.NAME]` (nginx `map`): the variables a file defines, each `$NAME` chosen by the
//! value of its `source` ([`crate::vars::Map`] says how). Checked before every section
//! whose texts may use them; a map may use another, but never itself through any chain
//! (nginx finds such a cycle only at run time, answering 500).
//!
//! A key is exact (matched in any ASCII case), `~regex` or `~*regex` (without case), or
//! `\…` for an exact key that starts with `~`; the keys keep the order written, which is
//! the order regexes are tried in.

use std::collections::HashMap;
use std::sync::Arc;

use http::StatusCode;
use regex::bytes::RegexBuilder;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Named, RawMap, Span};
use crate::vars::{self, Key, Map, Piece, Var, VarText};

/// The file's maps, by name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Maps {
    by_name: HashMap<String, Arc<Map>>,
}

impl Maps {
    /// Stands an empty map in for each of `names` (maps with a problem, reported): the
    /// texts that use one then report only their own problems.
    fn stand_in(&mut self, names: impl IntoIterator<Item = String>) {
        for name in names {
            let empty = Map::new(&name, VarText::default(), Vec::new(), VarText::default());
            self.by_name.entry(name).or_insert_with(|| Arc::new(empty));
        }
    }
}

impl Maps {
    /// `$name` when a map defines it.
    pub(super) fn var(&self, name: &str) -> Option<Var> {
        self.by_name.get(name).map(|map| Var::Map(Arc::clone(map)))
    }

    /// Parses `text`, where the maps' names are variables too (see
    /// [`VarText::parse_with`]).
    pub(super) fn parse(
        &self,
        text: &str,
        refuse: impl Fn(&Var) -> Option<String>,
    ) -> Result<VarText, vars::UnknownVar> {
        VarText::parse_with(text, |name| self.var(name), refuse)
    }
}

/// The maps of the file, and whether all are valid. A map with a problem (reported) is
/// an empty stand-in in what is returned, so that the texts using it report only their
/// own problems.
pub(super) fn maps(raw: Vec<Named<RawMap>>, diag: &mut Diagnostics<'_>) -> (Maps, bool) {
    let mut valid = true;
    let mut tables = Vec::new();
    let mut every = Vec::new();
    for entry in raw {
        valid &= name_is_free(&entry.name, diag);
        every.push(entry.name.get_ref().clone());
        match entry.body {
            Some(body) => tables.push((entry.name, body)),
            None => valid = false,
        }
    }
    let names: Vec<&str> = tables.iter().map(|(name, _)| name.get_ref().as_str()).collect();
    let uses: Vec<Vec<usize>> = tables.iter().map(|(_, body)| uses(body.get_ref(), &names)).collect();
    let order = order(&uses, |i, cycle| {
        let path: Vec<String> = cycle.iter().map(|&j| format!("${}", names[j])).collect();
        let message = format!(
            "map `${}` uses itself: {} (a map may use another map, but not itself)",
            names[i],
            path.join(" → ")
        );
        diag.error(tables[i].0.span(), message);
    });
    valid &= order.len() == tables.len();
    let mut maps = Maps::default();
    for &i in &order {
        let (name, body) = &tables[i];
        let name = name.get_ref();
        match map(name, body, &maps, diag) {
            Some(map) => {
                maps.by_name.insert(name.clone(), Arc::new(map));
            }
            None => valid = false,
        }
        // A map using this one finds it, or its stand-in.
        maps.stand_in([name.clone()]);
    }
    maps.stand_in(every);
    (maps, valid)
}

/// Whether `$name` can be a map's: a name `$` reads whole, and no built-in variable's.
fn name_is_free(name: &Spanned<String>, diag: &mut Diagnostics<'_>) -> bool {
    let text = name.get_ref();
    let readable = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !text.starts_with(|c: char| c.is_ascii_digit());
    let message = if !readable {
        format!(r#"invalid map name "{text}": letters, digits and `_`, not starting with a digit"#)
    } else if vars::is_builtin(text) {
        format!("map `${text}` would hide the built-in variable of that name")
    } else {
        return true;
    };
    diag.error(name.span(), message);
    false
}

/// The indexes of the maps among `names` that `map`'s texts use.
fn uses(map: &RawMap, names: &[&str]) -> Vec<usize> {
    let found = std::cell::RefCell::new(Vec::new());
    let texts = [map.source.as_ref(), map.default.as_ref()].into_iter().flatten();
    let values = map.values.iter().flat_map(|values| &values.get_ref().0);
    for text in texts.chain(values.map(|(_, value)| value)) {
        // Every name parses (as a stand-in) so that none stops the search; the real parse
        // reports what is unknown.
        let _ = VarText::parse_with(
            text.get_ref(),
            |name| {
                let index = names.iter().position(|known| *known == name);
                found.borrow_mut().extend(index);
                Some(Var::Args)
            },
            |_| None,
        );
    }
    let mut found = found.into_inner();
    found.sort_unstable();
    found.dedup();
    found
}

/// The maps in an order where each comes after those it uses; a map on a cycle (or
/// using one) is left out, and `cycle` told of each cycle once, with its path.
fn order(uses: &[Vec<usize>], mut cycle: impl FnMut(usize, &[usize])) -> Vec<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
        Failed,
    }
    fn visit(
        i: usize,
        uses: &[Vec<usize>],
        marks: &mut [Mark],
        path: &mut Vec<usize>,
        out: &mut Vec<usize>,
        cycle: &mut dyn FnMut(usize, &[usize]),
    ) -> bool {
        match marks[i] {
            Mark::Done => return true,
            Mark::Failed => return false,
            Mark::Open => {
                let start = path.iter().position(|&j| j == i).unwrap_or(0);
                let mut ring = path[start..].to_vec();
                ring.push(i);
                cycle(i, &ring);
                return false;
            }
            Mark::New => {}
        }
        marks[i] = Mark::Open;
        path.push(i);
        let mut ok = true;
        for &j in &uses[i] {
            ok &= visit(j, uses, marks, path, out, cycle);
        }
        path.pop();
        marks[i] = if ok { Mark::Done } else { Mark::Failed };
        if ok {
            out.push(i);
        }
        ok
    }
    let mut marks = vec![Mark::New; uses.len()];
    let mut out = Vec::with_capacity(uses.len());
    for i in 0..uses.len() {
        visit(i, uses, &mut marks, &mut Vec::new(), &mut out, &mut cycle);
    }
    out
}

/// One map, checked; `maps` holds those it may use.
fn map(name: &str, body: &Spanned<RawMap>, maps: &Maps, diag: &mut Diagnostics<'_>) -> Option<Map> {
    let raw = body.get_ref();
    let source = diag
        .required(raw.source.as_ref(), &body.span(), "source")
        .and_then(|source| parsed(source, maps, |_| None, diag));
    let default = match &raw.default {
        None => Some(VarText::default()),
        Some(default) => parsed(default, maps, |_| None, diag)
            .and_then(|text| no_capture(text, default, "`default`", diag)),
    };
    let mut entries = Some(Vec::new());
    let mut exact: HashMap<String, usize> = HashMap::new();
    for (key, value) in raw.values.iter().flat_map(|values| &values.get_ref().0) {
        let entry = entry(key, value, maps, &mut exact, diag);
        match (&mut entries, entry) {
            (Some(entries), Some(entry)) => entries.push(entry),
            _ => entries = None,
        }
    }
    Some(Map::new(name, source?, entries?, default?))
}

/// One key and its value; `exact` maps the exact keys before it (lower case) to their
/// lines.
fn entry(
    key: &Spanned<String>,
    value: &Spanned<String>,
    maps: &Maps,
    exact: &mut HashMap<String, usize>,
    diag: &mut Diagnostics<'_>,
) -> Option<(Key, VarText)> {
    let written = key.get_ref();
    let regex = match written.strip_prefix('~') {
        Some(rest) => match rest.strip_prefix('*') {
            Some(rest) => Some((rest, true)),
            None => Some((rest, false)),
        },
        None => None,
    };
    let Some((source, caseless)) = regex else {
        let key_text = written.strip_prefix('\\').unwrap_or(written);
        let lower = key_text.to_ascii_lowercase();
        if let Some(line) = exact.get(&lower) {
            let message = format!(r#"conflicting key "{written}": already written at line {line}"#);
            diag.error(key.span(), message);
            return None;
        }
        exact.insert(lower, diag.line_of(key.span().start));
        let text = parsed(value, maps, |_| None, diag)?;
        let text = no_capture(text, value, "an exact key's value", diag)?;
        return Some((Key::Exact(key_text.to_owned()), text));
    };
    let compiled = match RegexBuilder::new(source).case_insensitive(caseless).build() {
        Ok(regex) if !source.is_empty() => regex,
        Ok(_) => {
            diag.error(key.span(), format!(r#"invalid key "{written}": a regex must follow `~`"#));
            return None;
        }
        Err(err) => {
            let reason = super::values::regex_reason(&err);
            diag.error(key.span(), format!(r#"invalid regex "{source}": {reason}"#));
            return None;
        }
    };
    let groups: Vec<(String, usize)> = compiled
        .capture_names()
        .enumerate()
        .filter_map(|(i, name)| Some((name?.to_owned(), i)))
        .collect();
    for (group, _) in &groups {
        if vars::is_builtin(group) || maps.var(group).is_some() {
            let message = format!("the named group `{group}` would hide the variable `${group}`");
            diag.error(key.span(), message);
            return None;
        }
    }
    let named = |name: &str| {
        let group = groups.iter().find(|(group, _)| group == name);
        group.map(|(_, i)| Var::Capture(*i)).or_else(|| maps.var(name))
    };
    let text = match VarText::parse_with(value.get_ref(), named, |_| None) {
        Ok(text) => text,
        Err(err) => {
            diag.error_in_string(value.span(), value.get_ref(), err.at, err.message);
            return None;
        }
    };
    // Named groups are numbered too, so every capture the value uses is in range.
    let groups = compiled.captures_len() - 1;
    let wanted = text.max_capture();
    if wanted > groups {
        let message = format!("`${wanted}`: the key's regex has {groups} capture group(s)");
        diag.error(value.span(), message);
        return None;
    }
    Some((Key::Regex(compiled), text))
}

fn parsed(
    text: &Spanned<String>,
    maps: &Maps,
    refuse: impl Fn(&Var) -> Option<String>,
    diag: &mut Diagnostics<'_>,
) -> Option<VarText> {
    match maps.parse(text.get_ref(), refuse) {
        Ok(parsed) => Some(parsed),
        Err(err) => {
            diag.error_in_string(text.span(), text.get_ref(), err.at, err.message);
            None
        }
    }
}

/// `text`, unless it uses a capture: only a regex key's value has any.
fn no_capture(
    text: VarText,
    written: &Spanned<String>,
    what: &str,
    diag: &mut Diagnostics<'_>,
) -> Option<VarText> {
    if text.max_capture() == 0 {
        return Some(text);
    }
    let message = format!("captures ($1 to $9) in {what}: only a regex key (`~` or `~*`) has any");
    diag.error(written.span(), message);
    None
}

/// A `return`'s status chosen by a map (`status = "$redirect_status"`): the status of
/// each of its values, and of its default.
#[derive(Clone, Debug)]
pub(crate) struct StatusMap {
    map: Arc<Map>,
    statuses: Box<[StatusCode]>,
    default: StatusCode,
    /// `$NAME` as a text, for the callers that ask what a location's texts read.
    text: VarText,
}

impl StatusMap {
    /// The status for `req`.
    pub(crate) fn status(&self, req: &vars::Request<'_>) -> StatusCode {
        let entry = self.map.entry(req);
        entry.and_then(|i| self.statuses.get(i)).copied().unwrap_or(self.default)
    }

    /// The status when no key matches.
    pub(crate) fn default_status(&self) -> StatusCode {
        self.default
    }

    /// `$NAME` as a text.
    pub(crate) fn text(&self) -> &VarText {
        &self.text
    }

    /// Every status it may answer with.
    pub(super) fn statuses(&self) -> impl Iterator<Item = StatusCode> + '_ {
        self.statuses.iter().copied().chain([self.default])
    }
}

/// `status = "$NAME"`: a map whose every value and default is a status `check` accepts
/// (and holds no variable).
pub(super) fn status_map(
    written: &str,
    span: Span,
    maps: &Maps,
    check: impl Fn(&str) -> Result<StatusCode, String>,
    diag: &mut Diagnostics<'_>,
) -> Option<StatusMap> {
    let var = match maps.parse(written, |_| None) {
        Ok(text) => match text.pieces() {
            [Piece::Var(Var::Map(map))] => Some(Arc::clone(map)),
            _ => None,
        },
        Err(_) => None,
    };
    let Some(map) = var else {
        let message = format!(
            r#"invalid status "{written}": expected a number, or a map variable alone such as "$redirect_status""#
        );
        diag.error(span, message);
        return None;
    };
    let status = |text: &VarText, what: String| -> Result<StatusCode, String> {
        let literal = text.as_literal().ok_or_else(|| "a status holds no variable".to_owned());
        literal.and_then(&check).map_err(|reason| {
            format!(r#"`${}` is no status for `return`: its {what} "{text}": {reason}"#, map.name())
        })
    };
    let statuses: Result<Vec<StatusCode>, String> = map
        .values()
        .iter()
        .enumerate()
        .map(|(i, value)| status(value, format!("value {}", i + 1)))
        .collect();
    let default = status(map.default_value(), "default".to_owned());
    let (statuses, default) = match (statuses, default) {
        (Ok(statuses), Ok(default)) => (statuses, default),
        (Err(message), _) | (_, Err(message)) => {
            diag.error(span, message);
            return None;
        }
    };
    let text = VarText::from_pieces(vec![Piece::Var(Var::Map(Arc::clone(&map)))]);
    Some(StatusMap {
        map,
        statuses: statuses.into(),
        default,
        text,
    })
}
