//! A single-page app served by tollgate, in headless Chromium: its routes fall back to
//! `index.html` (`try_files`), its script comes precompressed (`precompressed`) and its
//! data compressed on the fly (`compress`) from an upstream beside it, and navigating and
//! reloading on a client-side route keep the app.

use std::io::Write as _;

use crate::support::chromium::{self, Browser};
use crate::support::{self, addr, gateway, Upstream};

const INDEX: &str = r#"<!doctype html>
<html><head><title>spa</title><link rel="stylesheet" href="/app.css">
<script src="/app.js" defer></script></head>
<body><nav><a id="to-settings" href="/settings">settings</a></nav><main id="view"></main></body></html>
"#;

/// A pushState router: `/` and `/settings` render into `#view`; the data comes from the
/// API through the same origin.
const SCRIPT: &str = r#"
const show = async () => {
  const view = document.getElementById('view');
  const data = await (await fetch('/api/items')).json();
  view.dataset.route = location.pathname;
  view.dataset.items = String(data.items.length);
  document.title = 'spa ' + location.pathname;
  window.appReady = true;
};
document.getElementById('to-settings').addEventListener('click', (event) => {
  event.preventDefault();
  history.pushState({}, '', '/settings');
  show();
});
show();
"#;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_page_app_loads_navigates_and_reloads_on_its_routes() {
    let _shared = support::shared();
    if !chromium::available("the single-page app test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path();
    // Padding makes the script worth compressing.
    let script = format!("{SCRIPT}\n/* {} */\n", "padding ".repeat(400));
    std::fs::write(www.join("index.html"), INDEX).unwrap();
    std::fs::write(www.join("app.js"), &script).unwrap();
    std::fs::write(www.join("app.js.gz"), gzip(script.as_bytes())).unwrap();
    std::fs::write(www.join("app.css"), "main { padding: 1em; }\n").unwrap();
    let up = Upstream::start(|_req| async {
        let items: Vec<String> = (0..200).map(|i| format!("{{\"id\":{i}}}")).collect();
        let body = format!("{{\"items\":[{}]}}", items.join(","));
        http::Response::builder()
            .header("content-type", "application/json")
            .body(support::full(body))
            .unwrap()
    })
    .await;
    let config = format!(
        r#"[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[upstreams.api]
servers = ["{}"]
[[location]]
match = "/api/"
upstream = "api"
compress = {{ encodings = ["gzip"], types = ["application/json"], min_length = "100" }}
[[location]]
match = "/"
root = "{}"
try_files = ["$uri", "/index.html"]
precompressed = ["gzip"]
"#,
        up.addr,
        www.display()
    );
    let gw = gateway(&config);
    let origin = format!("http://{}", addr(&gw));
    let mut browser = Browser::start().await;
    browser.open(&format!("{origin}/")).await;
    browser
        .until(20, "the app ready at /", "window.appReady === true")
        .await;
    assert_eq!(
        browser
            .eval("document.getElementById('view').dataset.items")
            .await,
        "200"
    );
    // The script came precompressed, the API's answer compressed on the fly.
    let encoded = r#"(() => {
        const of = (name) => performance.getEntriesByType('resource').find((e) => e.name.endsWith(name));
        const js = of('/app.js'), api = of('/api/items');
        return [js.encodedBodySize < js.decodedBodySize, api.encodedBodySize < api.decodedBodySize];
    })()"#;
    assert_eq!(browser.eval(encoded).await, serde_json::json!([true, true]));
    browser
        .eval("document.getElementById('to-settings').click()")
        .await;
    browser
        .until(
            10,
            "the app on /settings",
            "document.title === 'spa /settings'",
        )
        .await;
    // Reloading on a client-side route gets the app again (try_files), not a 404.
    browser.open(&format!("{origin}/settings")).await;
    browser
        .until(
            20,
            "the app ready after a reload",
            "window.appReady === true",
        )
        .await;
    assert_eq!(browser.eval("document.title").await, "spa /settings");
}
