//! A warning, not an error: `$server_name` in a redirect or a header value of a site
//! whose first name is a wildcard or a regex. nginx (and tollgate, as nginx) then puts
//! the name in as written, `*.example.com` or `~^www\d+`, which is seldom what the
//! redirect meant (`$host` is the name the client asked for).

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{HeaderTable, RawLocation, RawResponseHeader, RawSite, ResponseHeaderTable};
use super::SiteName;

const VARIABLE: &str = "server_name";

/// Warns of each `$server_name` in `site`'s header values and its locations' `return`
/// and header values, when its first name (`first`, written `written`) is not exact.
pub(super) fn warn(
    first: Option<(&SiteName, &str)>,
    site: &RawSite,
    locations: &[Option<Spanned<RawLocation>>],
    diag: &mut Diagnostics<'_>,
) {
    let Some((name, written)) = first else {
        return;
    };
    if matches!(name, SiteName::Exact(_)) {
        return;
    }
    let mut texts: Vec<Spanned<String>> = Vec::new();
    texts.extend(header_values(&site.request_headers, &site.response_headers));
    for location in locations.iter().flatten().map(Spanned::get_ref) {
        if let Some(ret) = &location.ret {
            texts.extend(ret.get_ref().body.iter().cloned());
            texts.extend(ret.get_ref().location.iter().cloned());
        }
        texts.extend(header_values(&location.request_headers, &location.response_headers));
    }
    for text in texts {
        if uses_server_name(text.get_ref()) {
            let message = format!(
                "`$server_name` is this site's first name as written, \"{written}\", a wildcard or regex (nginx does the same); `$host` is the name the client asked for"
            );
            diag.warn(text.span(), message);
        }
    }
}

/// The values of a table's `request_headers` and `response_headers`, each with its span.
fn header_values(
    request: &Option<Spanned<HeaderTable>>,
    response: &Option<Spanned<ResponseHeaderTable>>,
) -> Vec<Spanned<String>> {
    let mut values: Vec<Spanned<String>> = Vec::new();
    values.extend(request.iter().flat_map(|t| t.get_ref().values()).cloned());
    for written in response.iter().flat_map(|t| t.get_ref().values()) {
        match written.get_ref() {
            RawResponseHeader::Value(value) => {
                values.push(Spanned::new(written.span(), value.clone()))
            }
            RawResponseHeader::Table(table) => values.extend(table.value.iter().cloned()),
        }
    }
    values
}

/// Whether `text` holds `$server_name` or `${server_name}`.
fn uses_server_name(text: &str) -> bool {
    text.match_indices('$').any(|(at, _)| {
        let rest = &text[at + 1..];
        if let Some(braced) = rest.strip_prefix('{') {
            return braced.starts_with("server_name}");
        }
        rest.strip_prefix(VARIABLE).is_some_and(|after| {
            !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_is_found_in_both_forms_and_no_longer_name() {
        assert!(uses_server_name("https://$server_name$request_uri"));
        assert!(uses_server_name("${server_name}x"));
        assert!(uses_server_name("$server_name"));
        assert!(!uses_server_name("$server_names"));
        assert!(!uses_server_name("$host server_name"));
        assert!(!uses_server_name("${server_name"));
    }
}
