//! The admin page in a real browser (headless Chromium, `support::chromium`): what a
//! person sees while clients are limited (the gateway's traffic history by status class,
//! with a time axis, there at once in a new tab), a reload failing then succeeding,
//! pressing reset with and without the token, and a hostile key that must show as text. The screenshot is left in
//! `target/tmp/admin-page.png`.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use support::chromium::{self, Browser};
use support::*;

/// A key a client chose: markup, with script that would say it ran (short enough to be
/// shown whole: the top-keys sketch keeps 46 bytes of a key).
const HOSTILE: &str = r#"<img src=x onerror="window.pwned=1"><b>b</b>"#;

fn config() -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
token = "{ADMIN_TOKEN}"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[zones.api]
key = "$http_x_api_key"
rate = "1r/m"
[[location]]
match = "/ip"
limit = [{{ zone = "per_ip", nodelay = true }}]
return = {{ status = 200 }}
[[location]]
match = "/api"
limit = [{{ zone = "api", nodelay = true }}]
return = {{ status = 200 }}
"#
    )
}

/// `script` over the row of `zone`'s limited keys whose key reads `key` (as `row`).
fn on_row(zone: &str, key: &str, script: &str) -> String {
    let key = serde_json::to_string(key).unwrap();
    format!(
        r#"(() => {{
            const rows = [...document.querySelectorAll('[data-zone="{zone}"] tr.limited')];
            const row = rows.find(r => r.querySelector('td.key').textContent === {key});
            return row ? ({script}) : false;
        }})()"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_who_is_limited_and_frees_a_key_with_the_token() {
    let _shared = support::shared();
    if !chromium::available("the admin page test") {
        return;
    }
    let gw = gateway(&config());
    let (admin, at) = (gw.admin_addr().expect("admin"), addr(&gw));
    assert_eq!(get_as(at, "/ip", "10.0.0.1").await.status, 200);
    assert_eq!(get_as(at, "/ip", "10.0.0.1").await.status, 429);
    let hostile = || {
        http::Request::get("/api")
            .header("host", "example.test")
            .header("x-api-key", HOSTILE)
            .body(empty())
            .unwrap()
    };
    assert_eq!(within(5, send(at, hostile())).await.status, 200);
    assert_eq!(within(5, send(at, hostile())).await.status, 429);
    // A client limited all along, so that the chart has something to draw.
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = tokio::spawn({
        let stop = stop.clone();
        async move {
            while !stop.load(Relaxed) {
                get_as(at, "/ip", "10.0.0.9").await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });

    let mut browser = Browser::start().await;
    browser.open(&format!("http://{admin}/")).await;
    browser
        .until(
            30,
            "the per_ip chart drawing rejections",
            r#"(() => { const c = document.querySelector('canvas[data-zone="per_ip"]');
                 return !!c && Number(c.dataset.points) >= 2
                     && JSON.parse(c.dataset.totals)[2] > 0; })()"#,
        )
        .await;
    browser
        .until(10, "10.0.0.1 listed", &on_row("per_ip", "10.0.0.1", "true"))
        .await;
    // The overall charts: the gateway's own samples (one every 5 s), by status class, with
    // clock labels under them.
    let drawn = |chart: &str, series: usize| {
        format!(
            r#"(() => {{ const c = document.querySelector('canvas[data-chart="{chart}"]');
                 if (!c || Number(c.dataset.points) < 1) return false;
                 const labels = JSON.parse(c.dataset.labels);
                 return JSON.parse(c.dataset.totals)[{series}] > 0 && labels.length > 0
                     && labels.every(l => /^\d\d:\d\d/.test(l)); }})()"#
        )
    };
    // 4xx (the 429s) and the zones' rejections.
    browser
        .until(
            30,
            "the status-class chart drawing 4xx",
            &drawn("requests", 3),
        )
        .await;
    browser
        .until(
            5,
            "the limits chart drawing rejections",
            &drawn("limits", 1),
        )
        .await;
    let headline = "document.getElementById('traffic-headline').textContent";
    let headline = browser.eval(headline).await;
    assert!(
        headline.as_str().is_some_and(|h| h.contains("requests/s")),
        "{headline}"
    );
    // A tab opened now draws the history at once, from its first poll.
    browser.open(&format!("http://{admin}/")).await;
    browser
        .until(5, "the history drawn in a new tab", &drawn("requests", 3))
        .await;

    // A failed reload shows a banner; a good one after it clears the banner, and the
    // failure stays listed as past, with its time.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("gateway.toml");
    std::fs::write(&broken, "[server]\nlisten = 3\n").unwrap();
    assert!(gw.reload_file(&broken).is_err());
    browser
        .until(
            10,
            "the failure banner",
            "!!document.getElementById('reload-failing') \
             && document.getElementById('reload-error').textContent.includes('gateway.toml:2:10')",
        )
        .await;
    gw.reload(&support::parse(&config())).expect("reload");
    browser
        .until(
            10,
            "the banner gone and the failure listed as past",
            "!document.getElementById('reload-failing') \
             && /past failure at 20/.test(document.getElementById('reload-past').textContent)",
        )
        .await;
    // The hostile key is listed as the text it is, and none of it ran.
    browser
        .until(
            10,
            "the hostile key listed",
            &on_row("api", HOSTILE, "true"),
        )
        .await;
    let ran =
        "window.pwned !== undefined || document.querySelectorAll('main img, main b').length > 0";
    assert_eq!(browser.eval(ran).await, false);

    // Reset without the token: the page says it needs one, and nothing changed.
    let click = on_row(
        "per_ip",
        "10.0.0.1",
        "row.querySelector('button').click() || true",
    );
    assert_eq!(browser.eval(&click).await, true);
    browser
        .until(
            10,
            "the page asking for the token",
            "document.getElementById('problem').textContent.includes('token')",
        )
        .await;
    assert_eq!(get_as(at, "/ip", "10.0.0.1").await.status, 429);

    // With the token typed in, reset frees the key: its next request passes.
    let token = serde_json::to_string(ADMIN_TOKEN).unwrap();
    let typed = format!(
        "document.getElementById('token').value = {token}; \
         document.getElementById('token-form').requestSubmit(); true"
    );
    browser.eval(&typed).await;
    browser
        .until(
            10,
            "10.0.0.1 listed again",
            &on_row(
                "per_ip",
                "10.0.0.1",
                "!row.querySelector('button').disabled",
            ),
        )
        .await;
    assert_eq!(browser.eval(&click).await, true);
    let mut freed = false;
    for _ in 0..50 {
        let shown = browser
            .eval("document.getElementById('problem').textContent")
            .await;
        assert_eq!(shown, "", "the page reported a problem");
        let state = within(5, send(admin, get("/zones/per_ip/keys/10.0.0.1"))).await;
        if state.status == 404 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(freed, "the key was never reset");
    browser
        .until(
            5,
            "the button saying done",
            &on_row(
                "per_ip",
                "10.0.0.1",
                "row.querySelector('button').textContent === 'done'",
            ),
        )
        .await;
    assert_eq!(get_as(at, "/ip", "10.0.0.1").await.status, 200);

    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("admin-page.png");
    browser.screenshot(&shot).await;
    skip_note(&format!("admin page screenshot: {}", shot.display()));
    stop.store(true, Relaxed);
    traffic.await.expect("traffic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_looked_up_shows_each_zones_state_and_what_its_next_request_gets() {
    let _shared = support::shared();
    let gw = gateway(&config());
    let (admin, at) = (gw.admin_addr().expect("admin"), addr(&gw));
    assert_eq!(get_as(at, "/ip", "10.0.0.1").await.status, 200);
    // The JSON: stored in per_ip, refused next at /ip; never seen in api, passed there.
    let looked = within(5, send(admin, get("/keys/10.0.0.1"))).await;
    let doc: serde_json::Value = serde_json::from_str(&looked.body).unwrap();
    let zone = |name: &str| {
        doc["zones"]
            .as_array()
            .unwrap()
            .iter()
            .find(|z| z["zone"] == name)
            .unwrap()
            .clone()
    };
    let per_ip = zone("per_ip");
    assert_eq!(per_ip["stored"], true, "{doc}");
    assert_eq!(per_ip["next"][0]["location"], "/ip");
    assert_eq!(per_ip["next"][0]["verdict"], "reject");
    assert!(per_ip["next"][0]["wait_ms"].as_u64().unwrap() > 50_000);
    let api = zone("api");
    assert_eq!(
        (api["stored"].clone(), api["next"][0]["verdict"].clone()),
        (false.into(), "pass".into())
    );
    // Looking changed nothing: the client's next request is refused once, as it was.
    assert_eq!(get_as(at, "/ip", "10.0.0.1").await.status, 429);
    if !chromium::available("the admin page key look-up") {
        return;
    }
    let mut browser = Browser::start().await;
    browser.open(&format!("http://{admin}/")).await;
    let submit = |key: &str| {
        let key = serde_json::to_string(key).unwrap();
        format!(
            "(() => {{ document.getElementById('lookup-key').value = {key};
                 document.getElementById('lookup-form').requestSubmit(); return true; }})()"
        )
    };
    browser.eval(&submit("10.0.0.1")).await;
    browser
        .until(
            10,
            "per_ip's row saying the next request is refused",
            r#"[...document.querySelectorAll('#lookup tbody tr')].some(r =>
                 r.textContent.includes('per_ip') && r.textContent.includes('reject'))"#,
        )
        .await;
    // A hostile key is shown as text, never run as markup.
    browser.eval(&submit(HOSTILE)).await;
    let shown = format!(
        "document.querySelector('#lookup code') && document.querySelector('#lookup code').textContent === {}",
        serde_json::to_string(HOSTILE).unwrap()
    );
    browser
        .until(10, "the hostile key shown as text", &shown)
        .await;
    assert_eq!(
        browser.eval("window.pwned === undefined").await,
        serde_json::Value::Bool(true)
    );
}
