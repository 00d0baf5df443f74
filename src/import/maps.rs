//! `map SOURCE $NAME { … }` in `http {}`: a `[maps.NAME]` with the same source, keys in
//! the order written (exact, `~regex`, `~*regex`) and default.

use tollgate_nginx::Directive;

use super::build::sp;
use super::report::Status;
use super::state::Walk;
use super::values;
use crate::config::raw::{MapValues, RawMap};

/// The names of the `map`s in `block` that are written (`$NAME` without its `$`), for
/// [`values::MapsInScope`]: a map whose source uses one that is not, is not either.
pub(super) fn names(block: &[Directive]) -> Vec<String> {
    let mut maps: Vec<(String, &String)> = block
        .iter()
        .filter(|d| d.name == "map")
        .filter_map(|d| match d.args.as_slice() {
            [source, name] => Some((name.strip_prefix('$')?.to_owned(), source)),
            _ => None,
        })
        .filter(|(name, _)| bad_name(name).is_none())
        .collect();
    loop {
        let names: Vec<String> = maps.iter().map(|(n, _)| n.clone()).collect();
        let scope = values::MapsInScope::set(names);
        let before = maps.len();
        maps.retain(|(_, source)| values::vars(source).is_ok());
        drop(scope);
        if maps.len() == before {
            return maps.into_iter().map(|(n, _)| n).collect();
        }
    }
}

/// A `map` block: the map written (with what of it can be), each line reported.
pub(super) fn block(w: &mut Walk<'_>, d: &Directive, tail: &mut Vec<String>) {
    let (source, name) = match d.args.as_slice() {
        [source, name] => (source, name.strip_prefix('$').unwrap_or(name)),
        _ => {
            let status = Status::Unsupported("`map` takes a source and a `$variable`".to_owned());
            w.record(d, status.clone(), tail);
            w.record_inside(d, &status);
            return;
        }
    };
    if let Some(why) = bad_name(name).or_else(|| values::vars(source).err()) {
        let status = Status::Unsupported(why);
        w.record(d, status, tail);
        let inside = Status::Unsupported(format!("inside the map at line {}, which is not translated", d.place.line));
        w.record_inside(d, &inside);
        return;
    }
    let mut map = RawMap {
        source: Some(sp(source.clone())),
        ..RawMap::default()
    };
    let mut entries: Vec<(String, String)> = Vec::new();
    let mut hostnames = false;
    let mut left_out = 0;
    for line in d.block.iter().flatten() {
        let status = entry(line, &mut map, &mut entries, &mut hostnames);
        if matches!(status, Status::Unsupported(_)) {
            left_out += 1;
        }
        match line.name.as_str() {
            "include" if line.args.len() == 1 => w.include(line, tail),
            _ => w.record(line, status, tail),
        }
    }
    let values = entries.into_iter().map(|(k, v)| (sp(k), sp(v))).collect();
    map.values = Some(sp(MapValues(values)));
    let status = match left_out {
        0 => Status::Exact(Some(format!("`[maps.{name}]`"))),
        n => Status::Approx(format!("`[maps.{name}]`, without the {n} line(s) reported unsupported")),
    };
    w.record(d, status, tail);
    w.build.maps.push((name.to_owned(), map, vec![w.source(d.place)]));
}

/// Why `name` cannot be a tollgate map's.
fn bad_name(name: &str) -> Option<String> {
    let readable = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !readable {
        return Some(format!("`${name}`: a tollgate map's name is letters, digits and `_`"));
    }
    crate::vars::is_builtin(name).then(|| format!("`${name}` is a tollgate variable already: name the map otherwise"))
}

/// One line of a map: the entry it adds, or why not.
fn entry(line: &Directive, map: &mut RawMap, entries: &mut Vec<(String, String)>, hostnames: &mut bool) -> Status {
    let key = line.name.as_str();
    match (key, line.args.as_slice()) {
        ("hostnames", []) => {
            *hostnames = true;
            return Status::Unsupported("no `hostnames` matching: its plain names are written as exact keys, its wildcards left out".to_owned());
        }
        ("volatile", []) => return Status::Exact(Some("tollgate has no cache of map values to turn off".to_owned())),
        ("include", [_]) => return Status::Exact(None),
        (_, [_]) => {}
        _ => return Status::Unsupported("a map line is a key and a value".to_owned()),
    }
    let value = &line.args[0];
    if let Err(why) = values::vars(value) {
        return Status::Unsupported(why);
    }
    let captures = max_capture(value);
    let regex_groups = key.strip_prefix('~').map(|r| {
        let r = r.strip_prefix('*').unwrap_or(r);
        regex::Regex::new(r).map_or(0, |re| re.captures_len() - 1)
    });
    if captures > regex_groups.unwrap_or(0) {
        return Status::Unsupported(format!("`${captures}`: a capture the key has not (nginx takes the last regex's)"));
    }
    if key == "default" {
        map.default = Some(sp(value.clone()));
        return Status::Exact(None);
    }
    if *hostnames && (key.starts_with('.') || key.starts_with("*.") || key.ends_with(".*")) {
        return Status::Unsupported("a wildcard host name: write a `~regex` key".to_owned());
    }
    if let Some(regex) = key.strip_prefix('~') {
        let source = match regex.strip_prefix('*') {
            Some(rest) => format!("(?i){rest}"),
            None => regex.to_owned(),
        };
        if regex::Regex::new(&source).is_err() {
            return Status::Unsupported("a regex tollgate's engine does not take (lookaround and backreferences have no equivalent)".to_owned());
        }
    }
    let exact = |k: &str| !k.starts_with('~');
    let duplicate = entries.iter().any(|(k, _)| match exact(k) && exact(key) {
        true => k.eq_ignore_ascii_case(key),
        false => k == key,
    });
    if duplicate {
        return Status::Exact(Some("never used: a line above has the same key".to_owned()));
    }
    entries.push((key.to_owned(), value.clone()));
    Status::Exact(None)
}

/// The highest `$1`…`$9` in `text`, 0 for none.
fn max_capture(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut max = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b != b'$' {
            continue;
        }
        let digit = match bytes.get(i + 1) {
            Some(b'{') => bytes.get(i + 2),
            other => other,
        };
        if let Some(d) = digit.filter(|d| d.is_ascii_digit()) {
            max = max.max(usize::from(d - b'0'));
        }
    }
    max
}
