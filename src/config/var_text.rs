//! A value with variables (`return`'s `body` and `location`, header rule values,
//! `upstream_path`), checked against the location it is written in: its regex must have
//! the captures the value uses (itself: a map's source reads the location's captures as
//! nginx's does, empty where there are none). Used by `location` and `headers` alike;
//! the file's maps are variables there too.

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::maps::Maps;
use super::{Pattern, VarText};

/// A value with variables, each problem reported where it is: an unknown variable, or a
/// capture that the location's regex does not have.
pub(super) fn var_text(
    value: &Spanned<String>,
    pattern: Option<&Pattern>,
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<VarText> {
    let text = match maps.parse(value.get_ref(), |_| None) {
        Ok(text) => text,
        Err(err) => {
            diag.error_in_string(value.span(), value.get_ref(), err.at, err.message);
            return None;
        }
    };
    let wanted = text.max_capture();
    let groups = match pattern {
        _ if wanted == 0 => return Some(text),
        // The pattern's own problem is reported already.
        None => return None,
        Some(Pattern::Regex { regex, .. }) => regex.captures_len() - 1,
        Some(_) => {
            let message = "captures ($1 to $9) need a regex location (`~` or `~*`)";
            diag.error(value.span(), message);
            return None;
        }
    };
    if wanted > groups {
        let message = format!("`${wanted}`: the location's regex has {groups} capture group(s)");
        diag.error(value.span(), message);
        return None;
    }
    Some(text)
}
