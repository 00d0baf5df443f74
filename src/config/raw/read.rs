//! Reading the text into [`RawConfig`]: toml's recovering parser yields every syntax
//! error and a spanned tree. Each section, each `[upstreams.NAME]` and each
//! `[[location]]` is then deserialized on its own, so a problem in one does not hide
//! the problems in the others. Within one table serde stops at the first problem, so
//! the entry holding it is left out and the table read again, until every problem of
//! the table is reported (see [`deserialize`]).

use serde::de::DeserializeOwned;
use serde_spanned::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::{Named, RawConfig, RawLocation, RawSiteEntry, Section, Span};
use crate::config::diag::Diagnostics;

/// The sections of this release; the order of the hint in "unknown section".
const SECTIONS: &[&str] = &[
    "server",
    "real_ip",
    "access",
    "log",
    "upstreams",
    "maps",
    "zones",
    "api_keys",
    "location",
    "site",
    "admin",
    "tls",
    "redis",
    "acme",
    "quic",
    "trace",
];

/// Parses `text` into raw sections, reporting syntax errors, unknown and not yet
/// supported keys, and values of the wrong type.
pub(crate) fn parse(text: &str, diag: &mut Diagnostics<'_>) -> RawConfig {
    let (root, syntax_errors) = DeTable::parse_recoverable(text);
    for err in &syntax_errors {
        diag.syntax(err);
    }
    let mut raw = RawConfig::default();
    for (key, value) in root.into_inner() {
        let name: &str = key.get_ref();
        match name {
            "server" => raw.server = section(value, diag),
            "real_ip" => raw.real_ip = section(value, diag),
            "access" => raw.access = section(value, diag),
            "log" => raw.log = section(value, diag),
            "admin" => raw.admin = section(value, diag),
            "tls" => raw.tls = section(value, diag),
            "redis" => raw.redis = section(value, diag),
            "acme" => raw.acme = section(value, diag),
            "quic" => raw.quic = section(value, diag),
            "trace" => raw.trace = section(value, diag),
            "upstreams" => raw.upstreams = named(value, UPSTREAMS_HINT, diag),
            "maps" => raw.maps = named(value, MAPS_HINT, diag),
            "zones" => raw.zones = named(value, ZONES_HINT, diag),
            "api_keys" => raw.api_keys = section(value, diag),
            "location" => raw.locations = locations(value, diag),
            "site" => raw.sites = Some((key.span(), sites(value, diag))),
            _ => {
                if let Some(hint) = crate::config::nginx_names::hint(name) {
                    let message = format!("unknown section `{name}`: in nginx a directive; here {hint}");
                    diag.error(key.span(), message);
                    continue;
                }
                let known = SECTIONS
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>();
                let message = format!(
                    "unknown section `{name}`, expected one of {}",
                    known.join(", ")
                );
                diag.error(key.span(), message);
            }
        }
    }
    raw
}

fn section<T: DeserializeOwned>(
    value: Spanned<DeValue<'_>>,
    diag: &mut Diagnostics<'_>,
) -> Section<T> {
    let span = value.span();
    match deserialize(value, diag) {
        Some(raw) => Section::Present(span, raw),
        None => Section::Invalid,
    }
}

/// Deserializes one table.
///
/// serde stops at the first problem. When it lies in a key/value entry (of this table or
/// of a table nested in it), the problem is reported, the innermost such entry left out
/// (and recorded in `diag`), and the table read again; each round removes an entry, so
/// this ends. `None` when a problem lies in no entry, e.g. the value is not a table.
fn deserialize<T: DeserializeOwned>(
    mut value: Spanned<DeValue<'_>>,
    diag: &mut Diagnostics<'_>,
) -> Option<T> {
    let span = value.span();
    loop {
        let err = match T::deserialize(ValueDeserializer::from(value.clone())) {
            Ok(raw) => return Some(raw),
            Err(err) => err,
        };
        let meant = diag.serde(&err, span.clone());
        let (table, key) = err
            .span()
            .and_then(|at| remove_entry_at(&mut value, at.start))?;
        if let Some(meant) = meant {
            diag.leave_out(table.clone(), meant);
        }
        diag.leave_out(table, key);
    }
}

/// Removes the innermost key/value entry that holds `offset` in its key, else in its
/// value, looking into `value` and every table and array below it; returns the span of
/// the entry's table and its key. Nested tables are searched whatever their span says: a
/// table opened by a header or by dotted keys does not span all its entries.
fn remove_entry_at(value: &mut Spanned<DeValue<'_>>, offset: usize) -> Option<(Span, String)> {
    let span = value.span();
    match value.get_mut() {
        DeValue::Table(table) => {
            let mut found = None;
            for (key, value) in table.iter_mut() {
                if holds(&key.span(), offset) {
                    found = Some(key.get_ref().to_string());
                    break;
                }
                if let Some(nested) = remove_entry_at(value, offset) {
                    return Some(nested);
                }
            }
            let key = found.or_else(|| {
                table
                    .iter()
                    .find(|(_, value)| holds(&value.span(), offset))
                    .map(|(key, _)| key.get_ref().to_string())
            })?;
            table.remove(key.as_str());
            Some((span, key))
        }
        DeValue::Array(items) => items
            .iter_mut()
            .find_map(|item| remove_entry_at(item, offset)),
        _ => None,
    }
}

/// Whether `offset` lies in `span` (an empty span holds its start).
fn holds(span: &Span, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

const UPSTREAMS_HINT: &str =
    "`upstreams` must be a table of upstream groups, e.g. `[upstreams.app]`";
const MAPS_HINT: &str = "`maps` must be a table of maps, e.g. `[maps.redirect_status]`";
const ZONES_HINT: &str = "`zones` must be a table of zones, e.g. `[zones.per_ip]`";

/// `[upstreams.NAME]` or `[zones.NAME]` tables, one at a time, in file order.
fn named<T: DeserializeOwned>(
    value: Spanned<DeValue<'_>>,
    hint: &str,
    diag: &mut Diagnostics<'_>,
) -> Vec<Named<T>> {
    let span = value.span();
    let DeValue::Table(table) = value.into_inner() else {
        diag.error(span, hint);
        return Vec::new();
    };
    // Without toml's `preserve_order` the table iterates by name; spans give file order.
    let mut entries: Vec<_> = table.into_iter().collect();
    entries.sort_by_key(|(_, body)| body.span().start);
    entries
        .into_iter()
        .map(|(name, body)| {
            let span = body.span();
            Named {
                name: Spanned::new(name.span(), name.get_ref().to_string()),
                body: deserialize(body, diag).map(|raw| Spanned::new(span, raw)),
            }
        })
        .collect()
}

/// `[[location]]` tables, one at a time.
fn locations(
    value: Spanned<DeValue<'_>>,
    diag: &mut Diagnostics<'_>,
) -> Vec<Option<Spanned<RawLocation>>> {
    let span = value.span();
    let DeValue::Array(items) = value.into_inner() else {
        diag.error(
            span,
            "`location` must be an array of tables, written `[[location]]`",
        );
        return Vec::new();
    };
    items
        .into_iter()
        .map(|item| {
            let span = item.span();
            deserialize(item, diag).map(|raw| Spanned::new(span, raw))
        })
        .collect()
}

/// `[[site]]` tables: each site's own keys, then its `[[site.location]]`s one at a time
/// (a problem in one location hides neither the site nor its other locations).
fn sites(value: Spanned<DeValue<'_>>, diag: &mut Diagnostics<'_>) -> Vec<Option<RawSiteEntry>> {
    let span = value.span();
    let DeValue::Array(items) = value.into_inner() else {
        diag.error(
            span,
            "`site` must be an array of tables, written `[[site]]`",
        );
        return Vec::new();
    };
    items
        .into_iter()
        .map(|mut item| {
            let span = item.span();
            let inner = match item.get_mut() {
                DeValue::Table(table) => table.remove("location"),
                _ => None,
            };
            let site = deserialize(item, diag)?;
            let locations = inner.map_or_else(Vec::new, |value| locations(value, diag));
            Some(RawSiteEntry {
                span,
                site,
                locations,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// `(line, col, message)` of every problem `parse` reports.
    fn problems(text: &str) -> Vec<(usize, usize, String)> {
        let mut diag = Diagnostics::new(text);
        parse(text, &mut diag);
        let errors = diag.finish(Path::new("t.toml")).errors;
        errors
            .into_iter()
            .map(|e| (e.line, e.col, e.message))
            .collect()
    }

    #[test]
    fn unknown_key_is_reported_at_the_key_with_the_valid_keys() {
        let got = problems("[server]\nlisten = [\"80\"]\n  bogus = 1\n");
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, got[0].1), (3, 3));
        assert!(
            got[0]
                .2
                .starts_with("unknown key `bogus`, expected one of `listen`"),
            "{}",
            got[0].2
        );
    }

    #[test]
    fn an_nginx_directive_as_a_key_says_what_does_its_job_here() {
        let got = problems("[[location]]\nmatch = \"/\"\nproxy_pass = \"http://app\"\ngzip = true\n");
        assert_eq!((got[0].0, got[0].1), (3, 1));
        assert!(
            got[0].2.starts_with("unknown key `proxy_pass`: in nginx a directive; here a location's `upstream = \"NAME\"`"),
            "{}",
            got[0].2
        );
        assert_eq!((got[1].0, got[1].1), (4, 1));
        assert!(got[1].2.contains("here `compress = {"), "{}", got[1].2);
        let got = problems("[server]\nlisten = [\"80\"]\nserver_name = \"a.test\"\n");
        assert!(got[0].2.contains("a `[[site]]`'s `names = ["), "{}", got[0].2);
        let got = problems("[[site]]\nserver_name = \"a.test\"\n");
        assert!(got[0].2.contains("`names = ["), "{}", got[0].2);
        let got = problems("[upstreams.app]\nservers = [{ addr = \"a:1\", wieght = 2 }]\n");
        assert_eq!(got[0].2, "unknown key `wieght`: did you mean `weight`?");
    }

    #[test]
    fn an_nginx_block_as_a_section_says_what_does_its_job_here() {
        let got = problems("[http]\n[upstream.app]\n");
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].2.starts_with("unknown section `http`: in nginx"), "{}", got[0].2);
        assert!(got[1].2.contains("`[upstreams.NAME]`"), "{}", got[1].2);
    }

    #[test]
    fn wrong_type_is_reported_at_the_value() {
        let got = problems("[server]\nlisten = [\"80\", 81]\n");
        assert_eq!((got[0].0, got[0].1), (2, 17));
        assert_eq!(got[0].2, r#"invalid type: integer `81`, expected an "IP:PORT" string or a table like { addr = "IP:PORT", http2 = false }"#);
    }

    #[test]
    fn required_keys_are_left_to_validation() {
        assert_eq!(problems("\n[[location]]\nupstream = \"app\"\n"), []);
    }

    #[test]
    fn bad_entries_are_left_out_and_the_rest_of_the_table_kept() {
        let text = "[server]\nbogus = 1\nlisten = 80\nworkers = 2\nlisen = 3\n";
        let mut diag = Diagnostics::new(text);
        let raw = parse(text, &mut diag);
        let Section::Present(span, server) = raw.server else {
            panic!("the rest of [server] is lost");
        };
        assert!(server.listen.is_none());
        assert_eq!(server.workers.map(|w| w.into_inner()), Some(2.into()));
        for key in ["bogus", "listen", "lisen"] {
            assert!(diag.was_left_out(&span, key), "{key}");
        }
        assert!(!diag.was_left_out(&span, "workers"));
        let errors = diag.finish(Path::new("t.toml")).errors;
        let at: Vec<_> = errors.iter().map(|e| (e.line, e.col)).collect();
        assert_eq!(at, [(2, 1), (3, 10), (5, 1)]);
    }

    #[test]
    fn a_problem_in_no_entry_makes_the_table_invalid() {
        let text = "server = 5\n";
        let mut diag = Diagnostics::new(text);
        let raw = parse(text, &mut diag);
        assert!(matches!(raw.server, Section::Invalid));
        let errors = diag.finish(Path::new("t.toml")).errors;
        assert_eq!(errors.len(), 1);
        assert_eq!((errors[0].line, errors[0].col), (1, 10));
    }

    #[test]
    fn server_item_table_problems_point_inside_the_inline_table() {
        let text =
            "[upstreams.app]\nservers = [{ addr = \"a:1\", wieght = 2 }, { weight = \"2\" }]\n";
        let got = problems(text);
        let at: Vec<_> = got.iter().map(|(l, c, _)| (*l, *c)).collect();
        assert_eq!(at, [(2, 28), (2, 53)]);
        assert!(got[0].2.starts_with("unknown key `wieght`"), "{}", got[0].2);
        assert_eq!(got[1].2, r#"invalid type: string "2", expected i64"#);
    }

    #[test]
    fn server_item_of_wrong_type_says_what_is_expected() {
        let got = problems("[upstreams.app]\nservers = [3000]\n");
        assert_eq!((got[0].0, got[0].1), (2, 12));
        assert!(
            got[0]
                .2
                .contains(r#"expected a "HOST:PORT" string or a table"#),
            "{}",
            got[0].2
        );
    }

    #[test]
    fn unknown_section_lists_the_valid_sections() {
        let got = problems("[sever]\n");
        assert_eq!((got[0].0, got[0].1), (1, 2));
        assert_eq!(
            got[0].2,
            "unknown section `sever`, expected one of `server`, `real_ip`, `access`, `log`, `upstreams`, `maps`, `zones`, `api_keys`, `location`, `site`, `admin`, `tls`, `redis`, `acme`, `quic`, `trace`"
        );
    }

    #[test]
    fn upstreams_keep_file_order() {
        let text =
            "[upstreams.zeta]\nservers = [\"a:1\"]\n[upstreams.alpha]\nservers = [\"a:1\"]\n";
        let mut diag = Diagnostics::new(text);
        let raw = parse(text, &mut diag);
        let names: Vec<_> = raw
            .upstreams
            .iter()
            .map(|u| u.name.get_ref().as_str())
            .collect();
        assert_eq!(names, ["zeta", "alpha"]);
    }

    #[test]
    fn problems_of_every_location_are_reported() {
        let text = "[[location]]\nmatch = 1\n[[location]]\nmatch = \"/\"\nupstream = 2\n";
        let got = problems(text);
        let at: Vec<_> = got.iter().map(|(l, c, _)| (*l, *c)).collect();
        assert_eq!(at, [(2, 9), (5, 12)]);
    }

    #[test]
    fn location_written_as_a_single_table_is_rejected() {
        let got = problems("[location]\nmatch = \"/\"\n");
        assert_eq!((got[0].0, got[0].1), (1, 1));
        assert!(got[0].2.contains("[[location]]"));
    }
}
