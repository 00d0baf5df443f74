//! Who may call the admin API (`[admin] token`, `protect_reads`): a call that changes
//! state needs `Authorization: Bearer TOKEN`, and so does every view with
//! `protect_reads`; `/healthz` and the admin page's files (which hold no data) never do.
//! Without a token configured, calls that change state are refused. The token travels in
//! a header, never in a cookie, so a page of another site cannot make a browser send it
//! (no cross-site request forgery), and no `GET` changes anything.

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;

use super::reply;
use crate::config::Admin;
use crate::access::constant_time::same;

/// The 401 or 403 to send instead of answering `req` under `admin` (the generation's
/// `[admin]`; `None` when a reload removed it); `None` when it may be answered.
pub(super) fn refusal<B>(req: &Request<B>, admin: Option<&Admin>) -> Option<Response<Full<Bytes>>> {
    let path = req.uri().path();
    let reads = req.method() == Method::GET || req.method() == Method::HEAD;
    if reads && path == "/healthz" {
        return None;
    }
    // A reload removed `[admin]`: its listener stays until a restart, answering nothing
    // but `/healthz`, not opening what `protect_reads` closed.
    let Some(admin) = admin else {
        return Some(reply(
            StatusCode::FORBIDDEN,
            "text/plain",
            "the configuration in force has no [admin]: the admin API closes on restart\n",
        ));
    };
    if reads && super::page::is_asset(path) {
        return None;
    }
    if reads && !admin.protect_reads {
        return None;
    }
    let Some(token) = admin.token.as_ref() else {
        return Some(reply(
            StatusCode::FORBIDDEN,
            "text/plain",
            "calls that change state need `[admin] token` (or `token_file`) in the configuration\n",
        ));
    };
    let mut given = req.headers().get_all(header::AUTHORIZATION).iter();
    let bearer = match (given.next(), given.next()) {
        (Some(value), None) => bearer(value.as_bytes()),
        _ => None,
    };
    if bearer.is_some_and(|bearer| same(bearer, token.as_bytes())) {
        return None;
    }
    let mut denied = reply(
        StatusCode::UNAUTHORIZED,
        "text/plain",
        "this call needs `Authorization: Bearer` with the admin token\n",
    );
    denied.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"tollgate admin\""),
    );
    Some(denied)
}

/// The credentials of `Bearer CREDENTIALS` (the scheme is case-insensitive, RFC 9110
/// §11.1).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123";

    fn admin(protect_reads: bool) -> Admin {
        let text = format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n[admin]\nlisten = \"127.0.0.1:0\"\n\
             token = \"{TOKEN}\"\nprotect_reads = {protect_reads}\n"
        );
        let config =
            crate::config::from_str(&text, std::path::Path::new("/x.toml")).expect("valid");
        config.admin.expect("admin")
    }

    fn call(method: Method, path: &str, authorization: &[&str]) -> Request<()> {
        let mut req = Request::builder().method(method).uri(path);
        for value in authorization {
            req = req.header(header::AUTHORIZATION, *value);
        }
        req.body(()).unwrap()
    }

    fn status(req: &Request<()>, admin: Option<&Admin>) -> u16 {
        refusal(req, admin).map_or(200, |denied| denied.status().as_u16())
    }

    #[test]
    fn changes_need_the_token_and_views_do_not() {
        let admin = admin(false);
        let delete = |auth: &[&str]| status(&call(Method::DELETE, "/bans/z/k", auth), Some(&admin));
        assert_eq!(delete(&[]), 401);
        assert_eq!(delete(&[&format!("Bearer {TOKEN}")]), 200);
        assert_eq!(delete(&[&format!("bearer {TOKEN}")]), 200);
        for wrong in [
            format!("Bearer {TOKEN}x"),
            format!("Bearer {}", &TOKEN[1..]),
            format!("Basic {TOKEN}"),
            format!("Bearer  {TOKEN}"),
            TOKEN.to_owned(),
            "Bearer".to_owned(),
            String::new(),
        ] {
            assert_eq!(delete(&[&wrong]), 401, "{wrong:?}");
        }
        // Two headers are one too many, whichever is right.
        let right = format!("Bearer {TOKEN}");
        assert_eq!(delete(&[&right, &right]), 401);
        assert_eq!(
            status(&call(Method::GET, "/status", &[]), Some(&admin)),
            200
        );
        assert_eq!(
            status(&call(Method::POST, "/status", &[]), Some(&admin)),
            401
        );
    }

    #[test]
    fn protected_reads_need_it_too_but_healthz_never() {
        let admin = admin(true);
        assert_eq!(
            status(&call(Method::GET, "/status", &[]), Some(&admin)),
            401
        );
        let right = format!("Bearer {TOKEN}");
        assert_eq!(
            status(&call(Method::GET, "/metrics", &[&right]), Some(&admin)),
            200
        );
        assert_eq!(
            status(&call(Method::GET, "/healthz", &[]), Some(&admin)),
            200
        );
    }

    #[test]
    fn without_a_token_changes_are_refused() {
        let text = "[server]\nlisten = [\"127.0.0.1:0\"]\n[admin]\nlisten = \"127.0.0.1:0\"\n";
        let config = crate::config::from_str(text, std::path::Path::new("/x.toml")).unwrap();
        let admin = config.admin.expect("admin");
        let delete = call(
            Method::DELETE,
            "/zones/z/keys/k",
            &["Bearer anything-at-all-here"],
        );
        assert_eq!(status(&delete, Some(&admin)), 403);
        assert_eq!(
            status(&call(Method::GET, "/status", &[]), Some(&admin)),
            200
        );
    }

    #[test]
    fn with_admin_removed_by_a_reload_only_healthz_answers() {
        for path in ["/status", "/metrics", "/", "/app.js", "/zones/z/keys/k"] {
            assert_eq!(status(&call(Method::GET, path, &[]), None), 403, "{path}");
        }
        let delete = call(
            Method::DELETE,
            "/bans/z/k",
            &["Bearer anything-at-all-here"],
        );
        assert_eq!(status(&delete, None), 403);
        assert_eq!(status(&call(Method::GET, "/healthz", &[]), None), 200);
    }
}
