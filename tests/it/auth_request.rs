//! `auth = { request = … }` (nginx's `auth_request`, Traefik's ForwardAuth) through the
//! real gateway: what the service is sent (never the client's own forwarding headers),
//! what its answers become, a service that hangs, refuses or babbles (503, never a
//! pass), pooled connections and `max_in_flight`, `satisfy = "any"`, an internal
//! redirect, and nginx itself as the auth service.

use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use support::nginx::Nginx;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A gateway in front of `app` whose `/app/` asks the service at `auth` (`extra` goes in
/// that location's table).
fn config(app: SocketAddr, auth: &str, extra: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[upstreams.app]
servers = ["{app}"]
[[location]]
match = "/app/"
upstream = "app"
auth = {{ request = {{ url = "{auth}", copy_headers = ["X-Auth-Request-User", "X-Auth-Request-Groups"], timeout = "1s" }} }}
{extra}
[[location]]
match = "/"
upstream = "app"
"#
    )
}

/// Raw bytes to `addr`; the status, head and body of the answer.
async fn raw(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let reply = raw_exchange(addr, request).await;
    (reply.status, reply.head, reply.body)
}

fn get(path: &str, headers: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n")
}

/// An auth service answering by the request's `X-Want` header: `pass` (200 with the user
/// and two groups), or the status it names with headers a login flow uses.
async fn service() -> Upstream {
    Upstream::start(|req: Request<hyper::body::Incoming>| async move {
        let want = req
            .headers()
            .get("x-want")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("pass")
            .to_owned();
        let answer = Response::builder();
        let answer = match want.as_str() {
            "pass" => answer
                .status(200)
                .header("X-Auth-Request-User", "alice")
                .header("X-Auth-Request-Groups", "admins")
                .header("X-Auth-Request-Groups", "staff")
                .header("X-Other", "not copied"),
            "401" => answer
                .status(401)
                .header("WWW-Authenticate", "Bearer realm=\"app\"")
                .header("WWW-Authenticate", "Basic realm=\"app\""),
            "302" => answer
                .status(302)
                .header("Location", "https://login.test/start?rd=%2Fapp%2F")
                .header("Set-Cookie", "csrf=abc; Path=/; HttpOnly")
                .header("Server", "authsvc")
                .header("Connection", "X-Hop")
                .header("X-Hop", "for tollgate alone"),
            status => answer.status(status.parse::<u16>().unwrap()),
        };
        answer.body(full(format!("service says {want}\n"))).unwrap()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_copies_the_service_headers_and_the_service_never_sees_forged_ones() {
    let _shared = shared();
    let auth = service().await;
    let app = Upstream::start(|_| async { text(200, "app") }).await;
    let url = format!("http://{}/check?from=tollgate", auth.addr);
    let gateway = gateway(&config(app.addr, &url, ""));
    let addr = addr(&gateway);
    let forged = "X-Auth-Request-User: mallory\r\nX-Forwarded-Uri: /public\r\n\
                  X-Original-URL: http://evil.test/public\r\nX-Forwarded-For: 10.9.9.9\r\n\
                  X-Forwarded-Method: GET\r\nCookie: session=s1\r\nAuthorization: Bearer t0k3n\r\n\
                  Content-Type: text/plain\r\nContent-Length: 5\r\n";
    let request = format!(
        "POST /app/items?page=2 HTTP/1.1\r\nHost: t\r\n{forged}Connection: close\r\n\r\nhello"
    );
    let (status, _, body) = raw(addr, &request).await;
    assert_eq!((status, body.as_str()), (200, "app"));

    let asked = auth.last();
    assert_eq!(
        asked.method,
        http::Method::GET,
        "a GET, as nginx and Traefik send"
    );
    assert_eq!(asked.uri, "/check?from=tollgate");
    let header = |name: &str| -> Vec<String> {
        let values = asked.headers.get_all(name).iter();
        values.map(|v| v.to_str().unwrap().to_owned()).collect()
    };
    assert_eq!(header("host"), [auth.addr.to_string()]);
    assert_eq!(header("x-forwarded-method"), ["POST"]);
    assert_eq!(header("x-original-method"), ["POST"]);
    assert_eq!(header("x-forwarded-uri"), ["/app/items?page=2"]);
    assert_eq!(header("x-original-uri"), ["/app/items?page=2"]);
    assert_eq!(header("x-original-url"), ["http://t/app/items?page=2"]);
    assert_eq!(header("x-forwarded-host"), ["t"]);
    assert_eq!(header("x-forwarded-proto"), ["http"]);
    assert_eq!(header("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(header("cookie"), ["session=s1"]);
    assert_eq!(header("authorization"), ["Bearer t0k3n"]);
    assert_eq!(
        header("x-auth-request-user"),
        ["mallory"],
        "the client's headers go as they are"
    );
    assert!(header("content-length").is_empty() && header("transfer-encoding").is_empty());

    let forwarded = app.last();
    assert_eq!(forwarded.method, http::Method::POST);
    let values = |name: &str| -> Vec<String> {
        let values = forwarded.headers.get_all(name).iter();
        values.map(|v| v.to_str().unwrap().to_owned()).collect()
    };
    assert_eq!(
        values("x-auth-request-user"),
        ["alice"],
        "the service's, never the client's"
    );
    assert_eq!(values("x-auth-request-groups"), ["admins", "staff"]);
    assert!(values("x-other").is_empty(), "only copy_headers go on");
    assert_eq!(
        values("content-length"),
        ["5"],
        "the body goes upstream untouched"
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_redirects_are_answered_as_the_service_answered_and_others_are_500() {
    let _shared = shared();
    let auth = service().await;
    let app = Upstream::start(|_| async { text(200, "app") }).await;
    let gateway = gateway(&config(
        app.addr,
        &format!("http://{}/check", auth.addr),
        "",
    ));
    let addr = addr(&gateway);

    let (status, head, body) = raw(addr, &get("/app/", "X-Want: 401\r\n")).await;
    assert_eq!(status, 401);
    assert!(
        head.contains("www-authenticate: Bearer realm=\"app\""),
        "{head}"
    );
    assert!(
        head.contains("www-authenticate: Basic realm=\"app\""),
        "{head}"
    );
    assert_eq!(body, "service says 401\n");

    let (status, _, body) = raw(addr, &get("/app/", "X-Want: 403\r\n")).await;
    assert_eq!((status, body.as_str()), (403, "service says 403\n"));

    let (status, head, _) = raw(addr, &get("/app/", "X-Want: 302\r\n")).await;
    assert_eq!(status, 302, "a browser login goes to the login page");
    assert!(
        head.contains("location: https://login.test/start?rd=%2Fapp%2F"),
        "{head}"
    );
    assert!(
        head.contains("set-cookie: csrf=abc; Path=/; HttpOnly"),
        "{head}"
    );
    assert!(
        !head.contains("authsvc"),
        "tollgate's own Server line: {head}"
    );
    let hop = "what the service's Connection names stays with the hop";
    assert!(!head.contains("x-hop"), "{hop}: {head}");

    for odd in ["500", "404", "418"] {
        let (status, _, body) = raw(addr, &get("/app/", &format!("X-Want: {odd}\r\n"))).await;
        assert_eq!(status, 500, "{odd}: {body}");
        assert!(
            !body.contains("service says"),
            "{odd}: the service's page stays with it"
        );
    }
    let (status, _, _) = raw(addr, &get("/app/", "X-Want: 204\r\n")).await;
    assert_eq!(status, 200, "any 2xx passes");
    assert_eq!(app.count(), 1, "only the pass reached the application");
    gateway.stop().await;
}

/// A listener that answers each connection with `answer` and closes, or (empty) never
/// answers at all.
async fn babbler(answer: &'static [u8]) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).await;
            if answer.is_empty() {
                held.push(stream);
                continue;
            }
            let _ = stream.write_all(answer).await;
            let _ = stream.shutdown().await;
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_hangs_refuses_babbles_or_floods_is_a_503_never_a_pass() {
    let _shared = shared();
    let app = Upstream::start(|_| async { text(200, "app") }).await;
    let huge = {
        let head = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 10000000\r\n\r\n";
        let mut bytes = head.as_bytes().to_vec();
        bytes.resize(head.len() + 10_000_000, b'x');
        Box::leak(bytes.into_boxed_slice())
    };
    let lying = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort";
    let services = [
        ("hangs", babbler(b"").await),
        ("refuses", closed_port()),
        ("babbles", babbler(b"HELLO THERE\r\n\r\n").await),
        ("floods", babbler(huge).await),
        ("lies about its length", babbler(lying).await),
        ("says nothing", babbler(b"\r\n").await),
    ];
    for (what, service) in services {
        let gateway = gateway(&config(app.addr, &format!("http://{service}/check"), ""));
        let started = std::time::Instant::now();
        let (status, _, _) = raw(addr(&gateway), &get("/app/", "")).await;
        assert_eq!(status, 503, "a service that {what}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            started.elapsed()
        );
        gateway.stop().await;
    }
    assert_eq!(app.count(), 0, "nothing passed");
}

/// An auth service that counts its connections and the requests it holds at once (each
/// for 100 ms), answering 204.
struct Counting {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
}

async fn counting() -> Counting {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let most_at_once = Arc::new(AtomicUsize::new(0));
    let now = Arc::new(AtomicUsize::new(0));
    let (count, most) = (connections.clone(), most_at_once.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (now, most) = (now.clone(), most.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| {
                    let (now, most) = (now.clone(), most.clone());
                    async move {
                        let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(at_once, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        now.fetch_sub(1, Ordering::SeqCst);
                        Ok::<_, std::convert::Infallible>(text(204, ""))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    Counting {
        addr,
        connections,
        most_at_once,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_to_the_service_are_reused_and_at_most_max_in_flight_ask_at_once() {
    let _shared = shared();
    let app = Upstream::start(|_| async { text(200, "app") }).await;
    let auth = counting().await;
    let toml = config(app.addr, &format!("http://{}/check", auth.addr), "")
        .replace("timeout = \"1s\"", "timeout = \"10s\", max_in_flight = 3");
    let gateway = gateway(&toml);
    let addr = addr(&gateway);
    for _ in 0..5 {
        assert_eq!(raw(addr, &get("/app/", "")).await.0, 200);
    }
    assert_eq!(
        auth.connections.load(Ordering::SeqCst),
        1,
        "one connection, kept alive"
    );
    let asks = (0..12).map(|_| tokio::spawn(async move { raw(addr, &get("/app/", "")).await.0 }));
    for ask in asks.collect::<Vec<_>>() {
        assert_eq!(ask.await.unwrap(), 200);
    }
    let most = auth.most_at_once.load(Ordering::SeqCst);
    assert!(
        (2..=3).contains(&most),
        "at most max_in_flight at once: {most}"
    );
    assert!(auth.connections.load(Ordering::SeqCst) <= 3);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn satisfy_any_lets_an_allowed_client_in_unasked_but_not_with_forged_headers() {
    let _shared = shared();
    let auth = service().await;
    let app = Upstream::start(|_| async { text(200, "app") }).await;
    let url = format!("http://{}/check", auth.addr);
    let allowed = config(
        app.addr,
        &url,
        "access = [\"allow 127.0.0.1\", \"deny all\"]\nsatisfy = \"any\"",
    );
    let first = gateway(&allowed);
    let (status, _, _) = raw(
        addr(&first),
        &get("/app/", "X-Want: 401\r\nX-Auth-Request-User: mallory\r\n"),
    )
    .await;
    assert_eq!(status, 200, "an allowed address needs no login");
    assert_eq!(auth.count(), 0, "the service was not asked");
    assert!(
        app.last().headers.get("x-auth-request-user").is_none(),
        "the forged header was dropped"
    );
    first.stop().await;

    let denied = config(
        app.addr,
        &url,
        "access = [\"deny 127.0.0.1\"]\nsatisfy = \"any\"",
    );
    let gateway = gateway(&denied);
    let (status, _, _) = raw(addr(&gateway), &get("/app/", "X-Want: 401\r\n")).await;
    assert_eq!(status, 401, "not allowed by address: the service decides");
    assert_eq!(raw(addr(&gateway), &get("/app/", "")).await.0, 200);
    assert_eq!(auth.count(), 2);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_into_a_location_with_another_auth_request_is_a_500() {
    let _shared = shared();
    let auth = service().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("private")).unwrap();
    std::fs::write(dir.path().join("private/page.html"), "private page\n").unwrap();
    let toml = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[location]]\nmatch = \"/\"\nroot = \"{0}\"\ntry_files = [\"$uri\", \"/private/page.html\"]\n\
         [[location]]\nmatch = \"/private/\"\nroot = \"{0}\"\n\
         auth = {{ request = {{ url = \"http://{1}/check\" }} }}\n",
        dir.path().display(),
        auth.addr
    );
    let gateway = gateway(&toml);
    let addr = addr(&gateway);
    assert_eq!(
        raw(addr, &get("/private/page.html", "")).await.0,
        200,
        "asked directly: it passes"
    );
    assert_eq!(
        raw(addr, &get("/missing", "")).await.0,
        500,
        "a redirect cannot wait for the service"
    );
    assert_eq!(auth.count(), 1);
    gateway.stop().await;
}

/// The lines of an htpasswd file for alice (password `secret`, apr1, as Debian's
/// `htpasswd -m` writes it).
const ALICE: &str = "alice:$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk/\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_as_the_auth_service_logs_alice_in() {
    if !support::nginx::available("nginx as an auth service") {
        return;
    }
    let _shared = shared();
    let service = Nginx::start(
        |prefix, port| {
            std::fs::write(prefix.join("users"), ALICE).unwrap();
            let users = prefix.join("users");
            // A file, not `return`: nginx's `return` answers before its access phase asks
            // for the login.
            let server = format!(
                "server {{ listen 127.0.0.1:{port}; location = /auth {{ root {}/www; auth_basic \"Team\"; \
                 auth_basic_user_file {}; add_header X-Auth-Request-User $remote_user always; }} }}\n",
                prefix.display(),
                users.display()
            );
            support::nginx::http(prefix, &server)
        },
        &["auth".to_owned()],
    );
    let app = Upstream::start(|_| async { text(200, "app") }).await;
    let gateway = gateway(&config(
        app.addr,
        &format!("http://{}/auth", service.addr),
        "",
    ));
    let addr = addr(&gateway);
    let login = |password: &str| {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("alice:{password}"));
        get("/app/", &format!("Authorization: Basic {token}\r\n"))
    };
    let (status, head, _) = raw(addr, &get("/app/", "")).await;
    assert_eq!(status, 401);
    assert!(
        head.contains("www-authenticate: Basic realm=\"Team\""),
        "nginx's challenge: {head}"
    );
    assert_eq!(raw(addr, &login("wrong")).await.0, 401);
    assert_eq!(raw(addr, &login("secret")).await.0, 200);
    let user = app.last().headers.get("x-auth-request-user").cloned();
    assert_eq!(user.unwrap(), "alice");
    assert_eq!(app.count(), 1);
    gateway.stop().await;
}
