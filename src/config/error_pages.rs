//! `error_pages` (nginx `error_page`): statuses to the page that replaces their answer.
//!
//! A key is one or more statuses, 300 to 599, apart by spaces (`"500 502 503 504"`); no
//! status has two pages. A value is nginx's argument list: `"/50x.html"` (the status
//! kept), `"=200 /index.html"` (the status set), `"= /x"` (the page's own status), or an
//! absolute URL (a 302 redirect; `"=301 https://…"` for another redirect status). nginx's
//! `@name` targets are not supported: tollgate has no named locations.

use http::{HeaderValue, StatusCode};
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::files::{ErrorPage, ErrorPages, PageStatus, PageTarget};
use super::raw::ErrorPagesTable;

const VALUE_HINT: &str =
    r#"expected "/page.html", "=200 /page.html", "= /page.html" or "https://…" (a redirect)"#;

/// The pages of `table`, by status; every problem reported (a status twice at its
/// second key in file order).
pub(super) fn error_pages(
    table: &Spanned<ErrorPagesTable>,
    diag: &mut Diagnostics<'_>,
) -> Option<ErrorPages> {
    let mut entries: Vec<_> = table.get_ref().iter().collect();
    entries.sort_by_key(|(key, _)| key.span().start);
    let mut pages: Vec<(StatusCode, ErrorPage)> = Vec::new();
    let mut valid = true;
    for (key, value) in entries {
        let statuses = statuses(key, &pages, diag);
        let page = diag.check(value.span(), page(value.get_ref()));
        match (statuses, page) {
            (Some(statuses), Some(page)) => {
                pages.extend(statuses.into_iter().map(|status| (status, page.clone())));
            }
            _ => valid = false,
        }
    }
    // By status: the order of a table's keys is no part of its meaning.
    pages.sort_by_key(|(status, _)| *status);
    valid.then_some(ErrorPages { pages })
}

/// The statuses of one key; one that already has a page (in `pages`) is a problem.
fn statuses(
    key: &Spanned<String>,
    pages: &[(StatusCode, ErrorPage)],
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<StatusCode>> {
    let written = key.get_ref();
    let mut statuses: Vec<StatusCode> = Vec::new();
    for word in written.split_whitespace() {
        let status = word
            .parse::<u16>()
            .ok()
            .filter(|code| (300..=599).contains(code))
            .and_then(|code| StatusCode::from_u16(code).ok());
        let Some(status) = status else {
            let message = format!(
                r#"invalid status "{word}" in `error_pages`: expected statuses 300 to 599, apart by spaces ("500 502")"#
            );
            diag.error(key.span(), message);
            return None;
        };
        if statuses.contains(&status) || pages.iter().any(|(listed, _)| *listed == status) {
            let message = format!("status {status_code} has two pages in `error_pages`", status_code = status.as_u16());
            diag.error(key.span(), message);
            return None;
        }
        statuses.push(status);
    }
    if statuses.is_empty() {
        diag.error(key.span(), r#"an `error_pages` key lists statuses: "404", "500 502""#);
        return None;
    }
    Some(statuses)
}

/// One value: `[=[CODE]] TARGET`.
pub(crate) fn page(written: &str) -> Result<ErrorPage, String> {
    let invalid = |why: &str| format!(r#"invalid error page "{written}": {why}"#);
    let text = written.trim();
    let (status, target) = match text.strip_prefix('=') {
        None => (PageStatus::Keep, text),
        Some(rest) => {
            let (code, target) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let status = match code {
                "" => PageStatus::Target,
                code => code
                    .parse::<u16>()
                    .ok()
                    .filter(|code| (200..=599).contains(code))
                    .and_then(|code| StatusCode::from_u16(code).ok())
                    .map(PageStatus::Set)
                    .ok_or_else(|| invalid(r#"the status after "=" must be 200 to 599"#))?,
            };
            (status, target.trim_start())
        }
    };
    if target.is_empty() || target.contains(char::is_whitespace) {
        return Err(invalid(VALUE_HINT));
    }
    if target.starts_with('@') {
        return Err(invalid(
            "named locations (nginx `@name`) are not supported: point it at a URI such as \"/50x.html\"",
        ));
    }
    if target.starts_with('/') {
        if target.bytes().any(|b| b.is_ascii_control()) {
            return Err(invalid("a URI has no control characters"));
        }
        return Ok(ErrorPage {
            target: PageTarget::Uri(target.to_owned()),
            status,
        });
    }
    let url = target.starts_with("http://") || target.starts_with("https://");
    let value = HeaderValue::from_str(target).ok().filter(|_| url);
    let Some(value) = value else {
        return Err(invalid(VALUE_HINT));
    };
    let status = match status {
        PageStatus::Keep | PageStatus::Target => PageStatus::Keep,
        PageStatus::Set(code) if [301, 302, 303, 307, 308].contains(&code.as_u16()) => status,
        PageStatus::Set(_) => {
            return Err(invalid(
                "a URL is a redirect: its status is =301, =302, =303, =307 or =308 (302 when left out)",
            ))
        }
    };
    Ok(ErrorPage {
        target: PageTarget::Url(value),
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(target: &str, status: PageStatus) -> ErrorPage {
        ErrorPage {
            target: PageTarget::Uri(target.to_owned()),
            status,
        }
    }

    #[test]
    fn values_take_nginx_forms() {
        assert_eq!(page("/404.html"), Ok(uri("/404.html", PageStatus::Keep)));
        assert_eq!(
            page("=200 /index.html?from=err"),
            Ok(uri("/index.html?from=err", PageStatus::Set(StatusCode::OK)))
        );
        assert_eq!(page("= /x"), Ok(uri("/x", PageStatus::Target)));
        let redirect = page("https://example.com/oops").unwrap();
        assert_eq!(redirect.status, PageStatus::Keep);
        assert!(matches!(redirect.target, PageTarget::Url(_)));
        let moved = page("=301 https://example.com/").unwrap();
        assert_eq!(moved.status, PageStatus::Set(StatusCode::MOVED_PERMANENTLY));
    }

    #[test]
    fn bad_values_say_what_is_expected() {
        for bad in ["", "404.html", "=abc /x", "=99 /x", "=200", "/a b", "ftp://x/"] {
            let err = page(bad).unwrap_err();
            assert!(err.starts_with("invalid error page"), "{bad}: {err}");
        }
        assert!(page("@fallback").unwrap_err().contains("named locations"));
        assert!(page("=200 https://x/").unwrap_err().contains("=301"));
    }
}
