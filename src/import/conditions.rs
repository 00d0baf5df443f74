//! The `if` real configs use for redirects: `if ($request_method = GET) { return 301
//! URL; } return 308 URL;`. When every `if` holds only a `return`, tests one variable
//! and the `return` after them answers with the same text, they become one `return`
//! whose status a generated `[maps.NAME]` over that variable chooses. Any other `if` is
//! reported, with what to do instead.

use tollgate_nginx::Directive;

use super::build::sp;
use super::other;
use super::pattern::{Content, Ret};
use super::report::Status;
use super::rewrite;
use super::state::Walk;
use super::values;
use crate::config::raw::{MapValues, RawMap};

/// What an `if` becomes when it is not translated.
const INSTEAD: &str = "only an `if` holding a `return` before the location's own `return` with the same text is translated (into a `[maps.NAME]` choosing the status): write a location per case (`match`), or a `[maps.NAME]` for a value chosen per request";

/// One `if (…) { return …; }`: its map key and the return's status.
struct Case {
    key: String,
    status: i64,
    negated: bool,
}

/// An `if` in a location or server block, `rest` the directives after it in that block.
pub(super) fn at_if(w: &mut Walk<'_>, d: &Directive, rest: &[Directive], content: &mut Content<'_>, sink: &mut Vec<String>) {
    if let Some((_, first)) = content.folded.iter().find(|(p, _)| *p == d.place) {
        let status = Status::Exact(Some(format!("with the `if` at line {first}: one `return` whose status a map chooses")));
        record_all(w, d, &status, sink);
        return;
    }
    let outcome = match (content.ret.is_some(), content.if_failed) {
        (true, _) => Err("never reached: a return above answers first".to_owned()),
        (_, true) => Err(format!("after an `if` that is not translated; {INSTEAD}")),
        _ => fold(w, d, rest, content),
    };
    match outcome {
        Ok(status) => record_all(w, d, &status, sink),
        Err(why) if why.starts_with("never reached") => record_all(w, d, &Status::Exact(Some(why)), sink),
        Err(why) => {
            content.if_failed = true;
            w.record(d, Status::Unsupported(why), sink);
            for inner in d.block.iter().flatten() {
                let status = other::inside(d, inner);
                w.record(inner, status.clone(), &mut Vec::new());
                w.record_inside(inner, &status);
            }
        }
    }
}

fn record_all(w: &mut Walk<'_>, d: &Directive, status: &Status, sink: &mut Vec<String>) {
    w.record(d, status.clone(), sink);
    w.record_inside(d, status);
}

/// The `if`s from `d` on and the `return` after them as one `return`; why not.
fn fold(w: &mut Walk<'_>, d: &Directive, rest: &[Directive], content: &mut Content<'_>) -> Result<Status, String> {
    let mut ifs = vec![d];
    let mut last = None;
    for next in rest {
        match next.name.as_str() {
            "if" => ifs.push(next),
            "return" => {
                last = Some(next);
                break;
            }
            "rewrite" | "set" | "break" => return Err(format!("a `{}` between the `if` and the `return`; {INSTEAD}", next.name)),
            _ => {}
        }
    }
    let Some(last) = last else {
        return Err(format!("no `return` after it in the block, so it answers only some requests; {INSTEAD}"));
    };
    let mut otherwise = Content::default();
    if let Status::Unsupported(why) = rewrite::ret(last, &mut otherwise) {
        return Err(format!("the `return` after it: {why}"));
    }
    let Some(fallback) = otherwise.ret else {
        return Err(INSTEAD.to_owned());
    };
    let mut var = None;
    let mut cases = Vec::new();
    for one in &ifs {
        let (source, case) = case(one, &fallback)?;
        if var.get_or_insert_with(|| source.clone()) != &source {
            return Err(format!("the `if`s test different variables; {INSTEAD}"));
        }
        cases.push(case);
    }
    let var = var.unwrap_or_default();
    if cases.len() > 1 && cases.iter().any(|c| c.negated) {
        return Err(format!("a negated test among several `if`s; {INSTEAD}"));
    }
    let (entries, default) = match cases.as_slice() {
        [one] if one.negated => (vec![(one.key.clone(), fallback.status.to_string())], one.status.to_string()),
        _ => {
            let mut entries: Vec<(String, String)> = Vec::new();
            for case in &cases {
                // The first `if` that matches answers: a later same key is never used.
                if !entries.iter().any(|(k, _)| *k == case.key) {
                    entries.push((case.key.clone(), case.status.to_string()));
                }
            }
            (entries, fallback.status.to_string())
        }
    };
    let name = map_name(w, &var);
    let map = RawMap {
        source: Some(sp(var.clone())),
        values: Some(sp(MapValues(entries.into_iter().map(|(k, v)| (sp(k), sp(v))).collect()))),
        default: Some(sp(default)),
    };
    let note = vec![format!("{}: the `if` there", w.source(d.place))];
    w.build.maps.push((name.clone(), map, note));
    content.ret = Some(Ret {
        status_map: Some(name.clone()),
        ..fallback
    });
    let first = d.place.line;
    content.folded.extend(ifs.iter().skip(1).map(|i| (i.place, first)));
    content.folded.push((last.place, first));
    Ok(Status::Exact(Some(format!("`return` with `status = \"${name}\"`, a map over `{var}`"))))
}

/// The `if`'s variable and case; why not, when it is not `if ($var OP value) { return
/// CODE TEXT; }` with the text of `fallback`.
fn case(d: &Directive, fallback: &Ret) -> Result<(String, Case), String> {
    let args = condition(&d.args);
    let (var, op, value) = match args.as_slice() {
        [var, op, value] => (var, op.as_str(), value.as_str()),
        _ => return Err(format!("a test other than `($variable OP value)`; {INSTEAD}")),
    };
    let simple = var.strip_prefix('$').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    if !simple {
        return Err(format!("a test of `{var}`, not of one variable; {INSTEAD}"));
    }
    values::vars(var).map_err(|why| format!("{why}; {INSTEAD}"))?;
    let (key, negated) = match op {
        "=" | "!=" if value.contains('$') => return Err(format!("a comparison with a variable; {INSTEAD}")),
        "=" | "!=" if value.is_empty() => (String::new(), op == "!="),
        // A map's plain key ignores case; nginx's `=` does not: an anchored regex.
        "=" | "!=" => (format!("~^{}$", regex::escape(value)), op == "!="),
        "~" | "!~" => (format!("~{value}"), op == "!~"),
        "~*" | "!~*" => (format!("~*{value}"), op == "!~*"),
        _ => return Err(format!("the test `{op}`; {INSTEAD}")),
    };
    if let Some(regex) = key.strip_prefix('~') {
        let source = match regex.strip_prefix('*') {
            Some(rest) => format!("(?i){rest}"),
            None => regex.to_owned(),
        };
        if regex::Regex::new(&source).is_err() {
            return Err("a regex tollgate's engine does not take (lookaround and backreferences have no equivalent)".to_owned());
        }
    }
    let ret = match d.block.as_deref() {
        Some([one]) if one.name == "return" => one,
        _ => return Err(format!("the `if` holds more than a `return`; {INSTEAD}")),
    };
    let mut inner = Content::default();
    if let Status::Unsupported(why) = rewrite::ret(ret, &mut inner) {
        return Err(format!("its `return`: {why}"));
    }
    let Some(answer) = inner.ret else {
        return Err(INSTEAD.to_owned());
    };
    let text = |r: &Ret| r.location.clone().or_else(|| r.body.clone());
    if answer.location != fallback.location || answer.body != fallback.body {
        return Err(format!("its `return` answers with another text than the `return` after it ({:?} and {:?}): a map chooses the status only; write a location per case", text(&answer).unwrap_or_default(), text(fallback).unwrap_or_default()));
    }
    let redirect = |s: i64| matches!(s, 301 | 302 | 303 | 307 | 308);
    if fallback.location.is_none() && (redirect(answer.status) || redirect(fallback.status)) {
        return Err(format!("a redirect without a URL; {INSTEAD}"));
    }
    if [answer.status, fallback.status].contains(&444) {
        return Err(format!("a 444 (the connection closed) has no status a map can choose; {INSTEAD}"));
    }
    Ok((var.clone(), Case { key, status: answer.status, negated }))
}

/// The condition's words, its parentheses taken off as nginx takes them: a `(` that
/// starts the first, a `)` that ends the last.
fn condition(args: &[String]) -> Vec<String> {
    let mut words = args.to_vec();
    match words.first().map(String::as_str) {
        Some("(") => drop(words.remove(0)),
        Some(first) if first.starts_with('(') => words[0] = first[1..].to_owned(),
        _ => {}
    }
    match words.last().map(String::as_str) {
        Some(")") => drop(words.pop()),
        Some(last) if last.ends_with(')') => {
            let at = words.len() - 1;
            words[at] = last[..last.len() - 1].to_owned();
        }
        _ => {}
    }
    words
}

/// A name for the map over `$var`'s statuses that no other map has.
fn map_name(w: &Walk<'_>, var: &str) -> String {
    let base = format!("status_by_{}", var.trim_start_matches('$'));
    let taken = |n: &str| w.build.maps.iter().any(|(m, _, _)| m == n) || values::is_map(n);
    let mut name = base.clone();
    let mut n = 2;
    while taken(&name) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}
