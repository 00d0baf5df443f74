//! Internal redirects and error pages in the pipeline: the location is chosen again for
//! the new URI and its allow/deny list checked again, no limit is charged twice, a loop
//! ends in 500 after ten changes, and error pages replace tollgate's own answers, its
//! refusals, and with `intercept_errors` the upstream's (a 401 keeping its challenge).

use std::path::Path;

use crate::support::{self, addr, gateway, get_text, within, Upstream};

fn site(www: &Path, up: std::net::SocketAddr, locations: &str) -> String {
    format!(
        r#"[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[zones.once]
key = "$remote_addr"
rate = "1r/m"
[upstreams.app]
servers = ["{up}"]
[[site]]
default = true
error_pages = {{ "404" = "/pages/404.html", "429" = "/pages/busy.html" }}
[[site.location]]
match = "/pages/"
root = "{www}"
{locations}"#,
        www = www.display()
    )
}

fn www() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path();
    std::fs::create_dir_all(www.join("pages")).unwrap();
    std::fs::create_dir_all(www.join("app")).unwrap();
    std::fs::write(www.join("pages/404.html"), "page: not found\n").unwrap();
    std::fs::write(www.join("pages/busy.html"), "page: busy\n").unwrap();
    std::fs::write(www.join("app/index.html"), "the app\n").unwrap();
    std::fs::write(www.join("private.html"), "private\n").unwrap();
    dir
}

async fn upstream() -> Upstream {
    Upstream::start(|req| async move {
        match req.uri().path() {
            "/api/login" => http::Response::builder()
                .status(401)
                .header("www-authenticate", "Basic realm=\"app\"")
                .body(support::full("upstream 401"))
                .unwrap(),
            path if path.ends_with("/gone") => support::text(404, "upstream 404"),
            _ => support::text(200, "upstream ok"),
        }
    })
    .await
}

#[tokio::test]
async fn a_redirect_is_routed_again_and_checked_against_the_new_location_s_access() {
    let _shared = support::shared();
    let dir = www();
    let up = upstream().await;
    let locations = format!(
        r#"[[site.location]]
match = "/app/"
root = "{www}"
try_files = ["$uri", "/private.html"]
[[site.location]]
match = "= /private.html"
root = "{www}"
access = ["deny all"]
[[site.location]]
match = "/loop/"
root = "{www}"
try_files = ["$uri", "/loop/again"]
"#,
        www = dir.path().display()
    );
    let gw = gateway(&site(dir.path(), up.addr, &locations));
    let at = addr(&gw);
    assert_eq!(
        within(5, get_text(at, "/app/index.html")).await.body,
        "the app\n"
    );
    // The fallback lands in a location that denies everyone: 403, not its file.
    let denied = within(5, get_text(at, "/app/missing")).await;
    assert_eq!(denied.status, 403);
    assert!(!denied.body.contains("private"));
    // Each try falls back to the same location again: ten changes, then 500.
    assert_eq!(within(5, get_text(at, "/loop/x")).await.status, 500);
}

#[tokio::test]
async fn a_redirect_charges_no_limit_again_and_a_refusal_gets_its_page() {
    let _shared = support::shared();
    let dir = www();
    let up = upstream().await;
    let locations = format!(
        r#"[[site.location]]
match = "/app/"
root = "{www}"
try_files = ["$uri", "/app/index.html"]
limit = [{{ zone = "once" }}]
limit_status = 429
"#,
        www = dir.path().display()
    );
    let gw = gateway(&site(dir.path(), up.addr, &locations));
    let at = addr(&gw);
    // The one request the zone allows goes through a redirect into the same location.
    let first = within(5, get_text(at, "/app/a/route")).await;
    assert_eq!(
        (first.status.as_u16(), first.body.as_str()),
        (200, "the app\n")
    );
    // The next is refused; the site's page for 429 answers it, with the status kept.
    let refused = within(5, get_text(at, "/app/index.html")).await;
    assert_eq!(
        (refused.status.as_u16(), refused.body.as_str()),
        (429, "page: busy\n")
    );
    // No location matches: the site's 404 page.
    let missing = within(5, get_text(at, "/nowhere")).await;
    assert_eq!(
        (missing.status.as_u16(), missing.body.as_str()),
        (404, "page: not found\n")
    );
}

#[tokio::test]
async fn intercept_errors_replaces_the_upstream_s_answer_and_keeps_its_challenge() {
    let _shared = support::shared();
    let dir = www();
    let up = upstream().await;
    let locations = r#"[[site.location]]
match = "/api/"
upstream = "app"
intercept_errors = true
error_pages = { "401" = "/pages/404.html", "404" = "/pages/404.html" }
[[site.location]]
match = "/plain/"
upstream = "app"
"#;
    let gw = gateway(&site(dir.path(), up.addr, locations));
    let at = addr(&gw);
    let gone = within(5, get_text(at, "/api/gone")).await;
    assert_eq!(
        (gone.status.as_u16(), gone.body.as_str()),
        (404, "page: not found\n")
    );
    let login = within(5, get_text(at, "/api/login")).await;
    assert_eq!(login.status, 401);
    assert_eq!(login.body, "page: not found\n");
    assert_eq!(login.headers["www-authenticate"], "Basic realm=\"app\"");
    // Without intercept_errors the upstream's own 404 goes through.
    let plain = within(5, get_text(at, "/plain/gone")).await;
    assert_eq!(
        (plain.status.as_u16(), plain.body.as_str()),
        (404, "upstream 404")
    );
    assert_eq!(within(5, get_text(at, "/api/ok")).await.body, "upstream ok");
}
