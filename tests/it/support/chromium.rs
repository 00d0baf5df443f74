//! Headless Chromium driven over the DevTools protocol (a WebSocket; no driver binary):
//! enough to open a page, run a line of script in it and read the answer, and take a
//! screenshot. Debian's `chromium` package; without it a test is skipped (saying so),
//! except under `CI`, where it fails: `.ci/run` installs it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const CHROMIUM: &str = "/usr/bin/chromium";

/// Whether Chromium is there for `what` (see the module docs).
pub fn available(what: &str) -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !in_ci,
        "{CHROMIUM} not found: CI must install it (`apt-get install -y chromium` in .ci/run)"
    );
    super::skip_note(&format!("{CHROMIUM} not found; skipping {what}"));
    false
}

/// One headless browser with one tab; killed when dropped.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
}

impl Browser {
    /// Starts Chromium (a fresh profile, a window of 1280 × 1000) and opens a blank tab.
    pub async fn start() -> Browser {
        Browser::start_with(&[]).await
    }

    /// [`Browser::start`] with more command-line switches (`--host-resolver-rules=…`).
    pub async fn start_with(switches: &[&str]) -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new(CHROMIUM)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                "--window-size=1280,1000",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
            ])
            .args(switches)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        let stderr = child.stderr.take().expect("stderr");
        let url = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stderr).lines();
            let url = lines.by_ref().map_while(Result::ok).find_map(|line| {
                line.split_once("DevTools listening on ")
                    .map(|(_, url)| url.trim().to_owned())
            });
            // Keep draining, or Chromium blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            url
        });
        let url = tokio::time::timeout(Duration::from_secs(30), url)
            .await
            .expect("chromium said where DevTools listen within 30 s")
            .expect("reader")
            .expect("a DevTools address");
        let (socket, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .expect("DevTools socket");
        let mut browser = Browser {
            child,
            _profile: profile,
            socket,
            session: String::new(),
            next_id: 0,
        };
        let target = browser
            .command(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let target_id = target["targetId"].as_str().expect("a target").to_owned();
        let attached = browser
            .command(
                None,
                "Target.attachToTarget",
                json!({"targetId": target_id, "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned();
        browser.page("Page.enable", json!({})).await;
        browser
    }

    /// Opens `url` in the tab and waits for its `load` event (at most 20 s).
    pub async fn open(&mut self, url: &str) {
        self.page("Page.navigate", json!({"url": url})).await;
        let loaded = async {
            while let Some(message) = self.socket.next().await {
                let Ok(Message::Text(text)) = message else {
                    continue;
                };
                let event: Value = serde_json::from_str(&text).unwrap_or_default();
                if event["method"] == "Page.loadEventFired" {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), loaded)
            .await
            .expect("the page loads within 20 s");
    }

    /// The value of `expression`, run in the page (a promise is awaited).
    pub async fn eval(&mut self, expression: &str) -> Value {
        let answer = self
            .page(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(
            answer.get("exceptionDetails").is_none(),
            "{expression}: {answer}"
        );
        answer["result"]["value"].clone()
    }

    /// Polls `expression` every 100 ms until it is `true`; panics with `what` after
    /// `secs`.
    pub async fn until(&mut self, secs: u64, what: &str, expression: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        while self.eval(expression).await != Value::Bool(true) {
            assert!(std::time::Instant::now() < deadline, "never {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A PNG of the tab as it shows now, written to `path`.
    pub async fn screenshot(&mut self, path: &Path) {
        use base64::Engine;
        let shot = self
            .page("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let data = shot["data"].as_str().expect("image data");
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64");
        std::fs::write(path, png).expect("screenshot written");
    }

    async fn page(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.command(Some(&session), method, params).await
    }

    /// Sends one command and waits for its answer (events in between are dropped).
    async fn command(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::Text(message.to_string().into()))
            .await
            .expect("DevTools send");
        let answer = async {
            while let Some(message) = self.socket.next().await {
                let Ok(Message::Text(text)) = message else {
                    continue;
                };
                let reply: Value = serde_json::from_str(&text).unwrap_or_default();
                if reply["id"] == id {
                    return reply;
                }
            }
            panic!("DevTools closed during {method}");
        };
        let reply = tokio::time::timeout(Duration::from_secs(20), answer)
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer within 20 s"));
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
