//! `[api_keys]`: which plan each API key is on, inline and from a key file.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use http::HeaderName;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::suggest::unknown_name;
use super::raw::{RawApiKeys, Span};
use super::ApiKeys;

/// `[api_keys]`, with its `file` read and merged. Every plan named must be defined by
/// some zone's `plans`.
pub(super) fn api_keys(
    raw: RawApiKeys,
    span: &Span,
    base: &Path,
    plans: &[&str],
    diag: &mut Diagnostics<'_>,
) -> Option<ApiKeys> {
    let header = match &raw.header {
        None => Some(HeaderName::from_static("x-api-key")),
        Some(header) => {
            let name = HeaderName::from_bytes(header.get_ref().as_bytes()).map_err(|_| {
                format!(
                    r#"invalid header name "{}": expected e.g. "X-API-Key""#,
                    header.get_ref()
                )
            });
            diag.check(header.span(), name)
        }
    };
    let mut keys = HashMap::new();
    let mut valid = true;
    if let Some(inline) = &raw.inline {
        for (key, plan) in inline.get_ref() {
            valid &= known_plan(plan.get_ref(), plan.span(), plans, diag);
            keys.insert(key.clone(), plan.get_ref().clone());
        }
    }
    let file = raw.file.as_ref().map(|file| base.join(file.get_ref()));
    if let (Some(written), Some(path)) = (&raw.file, &file) {
        match read_key_file(path) {
            Ok(entries) => {
                for (key, plan) in entries {
                    if !plans.contains(&plan.as_str()) {
                        let none = "no zone defines `plans`";
                        let message = format!(
                            r#"{}: key "{key}": {}"#,
                            path.display(),
                            unknown_name("plan", &plan, plans, none)
                        );
                        diag.error(written.span(), message);
                        valid = false;
                    }
                    keys.insert(key, plan);
                }
            }
            Err(message) => {
                diag.error(written.span(), message);
                valid = false;
            }
        }
    }
    let priority = priorities(raw.priority.as_ref(), plans, diag);
    valid &= priority.is_some();
    if raw.inline.is_none() && raw.file.is_none() {
        diag.error(span.clone(), "`[api_keys]` needs `inline` or `file`");
        valid = false;
    }
    valid.then_some(())?;
    Some(ApiKeys {
        header: header?,
        keys,
        priority: priority.unwrap_or_default(),
    })
}

/// The highest `priority`.
const MAX_PRIORITY: i64 = 100;

/// `priority = { pro = 10, free = 0 }`: each a known plan, from 0 to 100.
fn priorities(
    raw: Option<&Spanned<BTreeMap<String, Spanned<i64>>>>,
    plans: &[&str],
    diag: &mut Diagnostics<'_>,
) -> Option<BTreeMap<String, u8>> {
    let Some(raw) = raw else {
        return Some(BTreeMap::new());
    };
    let mut valid = true;
    let mut priority = BTreeMap::new();
    for (plan, value) in raw.get_ref() {
        valid &= known_plan(plan, value.span(), plans, diag);
        let n = *value.get_ref();
        match u8::try_from(n) {
            Ok(n) if i64::from(n) <= MAX_PRIORITY => {
                priority.insert(plan.clone(), n);
            }
            _ => {
                diag.error(
                    value.span(),
                    format!("invalid priority {n}: expected 0 to {MAX_PRIORITY}"),
                );
                valid = false;
            }
        }
    }
    valid.then_some(priority)
}

/// A key file: `"key" = "plan"` lines.
pub(super) fn read_key_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read the API key file {}: {err}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|err| format!("{}: {}", path.display(), err.message()))?;
    table
        .into_iter()
        .map(|(key, plan)| match plan {
            toml::Value::String(plan) => Ok((key, plan)),
            other => Err(format!(
                r#"{}: key "{key}": expected a plan name string, found {}"#,
                path.display(),
                other.type_str()
            )),
        })
        .collect()
}

fn known_plan(plan: &str, span: Span, plans: &[&str], diag: &mut Diagnostics<'_>) -> bool {
    if plans.contains(&plan) {
        return true;
    }
    let message = unknown_name("plan", plan, plans, "no zone defines `plans`");
    diag.error(span, message);
    false
}
