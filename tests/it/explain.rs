//! `[admin] explain`: a request carrying the admin token in `X-Tollgate-Explain` gets a
//! `Tollgate-Decision` header naming the site, location and what decided, with each
//! zone's numbers; without the token (or with a wrong one) nothing is told, and the
//! header never reaches the upstream or the access log.

use crate::support;

use support::*;

const TOKEN: &str = "explain-token-0123456789";

fn ask(path: &str, token: Option<&str>) -> http::Request<Body> {
    let mut req = http::Request::get(path).header("host", "a.test");
    if let Some(token) = token {
        req = req.header("x-tollgate-explain", token);
    }
    req.body(empty()).unwrap()
}

#[tokio::test]
async fn the_token_gets_the_decision_and_nothing_else_does() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let up = Upstream::named("app").await;
    let gw = gateway(&format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\naccess = \"{}\"\nformat = '$status $http_x_tollgate_explain'\n\
         [admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\nexplain = true\n\
         [zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n\
         [[site]]\nnames = [\"a.test\"]\ndefault = true\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\nlimit = [{{ zone = \"per_ip\", burst = 1, nodelay = true }}]\n\
         [[site.location]]\nmatch = \"/private/\"\nreturn = {{ status = 200 }}\naccess = [\"allow 10.0.0.0/8\", \"deny all\"]\n",
        log.display(),
        up.addr
    ));
    let at = addr(&gw);
    let first = send(at, ask("/", Some(TOKEN))).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.headers["tollgate-decision"],
        "answer=200; site=\"a.test\"; location=\"/\"; decided-by=\"none\"; zones=\"per_ip key=127.0.0.1 passed remaining=1\""
    );
    // Never forwarded: the upstream saw no token.
    assert!(up
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|seen| !seen.headers.contains_key("x-tollgate-explain")));
    // Without the token, or with a wrong one: the plain answer.
    let plain = send(at, ask("/", None)).await;
    assert!(!plain.headers.contains_key("tollgate-decision"));
    let wrong = send(at, ask("/", Some("explain-token-0123456788"))).await;
    assert_eq!(wrong.status, 429);
    assert!(!wrong.headers.contains_key("tollgate-decision"));
    let refused = send(at, ask("/", Some(TOKEN))).await;
    assert_eq!(refused.status, 429);
    let decision = refused.headers["tollgate-decision"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        decision.starts_with("answer=429; site=\"a.test\"; location=\"/\"; decided-by=\"zone per_ip\"; zones=\"per_ip key=127.0.0.1 rejected remaining=0 retry-after="),
        "{decision}"
    );
    let denied = send(at, ask("/private/x", Some(TOKEN))).await;
    assert_eq!(denied.status, 403);
    assert_eq!(
        denied.headers["tollgate-decision"],
        "answer=403; site=\"a.test\"; location=\"/private/\"; decided-by=\"access rule 2: deny all\""
    );
    // Nor logged: the header is gone before the line captures it.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let lines = std::fs::read_to_string(&log).unwrap();
    assert_eq!(lines, "200 -\n200 -\n429 -\n429 -\n403 -\n");
}

#[tokio::test]
async fn without_explain_the_header_is_any_other_header() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\naccess = \"off\"\n\
         [admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n[[location]]\nmatch = \"/\"\nupstream = \"app\"\n",
        up.addr
    ));
    let reply = send(addr(&gw), ask("/", Some(TOKEN))).await;
    assert!(!reply.headers.contains_key("tollgate-decision"));
    assert!(up.seen.lock().unwrap()[0]
        .headers
        .contains_key("x-tollgate-explain"));
}
