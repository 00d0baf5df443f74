//! The rules a site hands down to its locations: header rules merged by name, the body
//! size, access and limits replaced whole by a location's own (as nginx inherits them).

use http::Request;

use super::rules::{config, get_with_host};
use crate::support::{self, addr, empty, full, gateway, send, text, within, Upstream};

#[tokio::test]
async fn a_sites_response_headers_reach_its_locations_unless_they_set_their_own() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[[site]]
names = ["example.com"]
response_headers = { "Strict-Transport-Security" = "max-age=63072000", "X-Site" = "site" }
[[site.location]]
match = "/"
return = { status = 200, body = "inherits" }
[[site.location]]
match = "/own/"
response_headers = { "X-Site" = "location" }
return = { status = 200, body = "own" }
"#,
    ));
    let reply = within(5, send(addr(&gw), get_with_host("example.com"))).await;
    assert_eq!(reply.body, "inherits");
    assert_eq!(
        reply.headers["strict-transport-security"],
        "max-age=63072000"
    );
    assert_eq!(reply.headers["x-site"], "site");
    let req = Request::get("/own/x").header("host", "example.com");
    let reply = within(5, send(addr(&gw), req.body(empty()).unwrap())).await;
    assert_eq!(reply.body, "own");
    // Merged by name: the location's X-Site replaces the site's; the site's HSTS stays.
    let site: Vec<_> = reply.headers.get_all("x-site").iter().collect();
    assert_eq!(site, ["location"]);
    assert_eq!(
        reply.headers["strict-transport-security"],
        "max-age=63072000"
    );
}

#[tokio::test]
async fn a_sites_client_max_body_size_reaches_its_locations_unless_they_set_their_own() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[[site]]
names = ["example.com"]
client_max_body_size = "16"
[[site.location]]
match = "/"
return = { status = 200, body = "inherits" }
[[site.location]]
match = "/upload/"
client_max_body_size = "1k"
return = { status = 200, body = "own" }
"#,
    ));
    let post = |path: &str| {
        Request::post(path)
            .header("host", "example.com")
            .body(full(vec![b'x'; 100]))
            .unwrap()
    };
    let reply = within(5, send(addr(&gw), post("/"))).await;
    assert_eq!(reply.status, 413);
    let reply = within(5, send(addr(&gw), post("/upload/file"))).await;
    assert_eq!((reply.status.as_u16(), reply.body.as_str()), (200, "own"));
}

#[tokio::test]
async fn a_sites_request_headers_and_hidden_headers_merge_with_a_locations() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async {
        let mut response = text(200, "up");
        let headers = response.headers_mut();
        headers.insert("x-powered-by", "PHP/5.4".parse().unwrap());
        headers.insert("server", "Apache".parse().unwrap());
        response
    })
    .await;
    let gw = gateway(&config(&format!(
        r#"
[upstreams.app]
servers = ["{}"]
[[site]]
names = ["example.com"]
request_headers = {{ "X-Site" = "site", "X-Both" = "site" }}
hide_headers = ["X-Powered-By"]
[[site.location]]
match = "/"
upstream = "app"
request_headers = {{ "X-Both" = "location" }}
hide_headers = ["Server"]
"#,
        up.addr
    )));
    let reply = within(5, send(addr(&gw), get_with_host("example.com"))).await;
    assert_eq!(reply.body, "up");
    let seen = up.last();
    assert_eq!(seen.headers["x-site"], "site");
    let both: Vec<_> = seen.headers.get_all("x-both").iter().collect();
    assert_eq!(
        both,
        ["location"],
        "the location's rule replaces the site's"
    );
    // The union: both the site's and the location's hidden headers are gone.
    assert!(
        reply.headers.get("x-powered-by").is_none(),
        "{:?}",
        reply.headers
    );
    // Hidden, and tollgate's own goes out instead (`server_header`).
    assert_eq!(reply.headers["server"], "tollgate", "{:?}", reply.headers);
}

#[tokio::test]
async fn a_sites_access_list_is_replaced_whole_by_a_locations_own() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[[site]]
names = ["example.com"]
access = ["deny all"]
[[site.location]]
match = "/"
return = { status = 200, body = "closed" }
[[site.location]]
match = "/open/"
access = ["allow 127.0.0.1", "deny all"]
return = { status = 200, body = "open" }
"#,
    ));
    let reply = within(5, send(addr(&gw), get_with_host("example.com"))).await;
    assert_eq!(reply.status, 403);
    let req = Request::get("/open/").header("host", "example.com");
    let reply = within(5, send(addr(&gw), req.body(empty()).unwrap())).await;
    assert_eq!((reply.status.as_u16(), reply.body.as_str()), (200, "open"));
}

#[tokio::test]
async fn a_sites_limits_and_status_reach_its_locations_and_an_empty_list_lifts_them() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[[site]]
names = ["example.com"]
limit = [{ zone = "per_ip" }]
limit_status = 503
[[site.location]]
match = "/"
return = { status = 200, body = "limited" }
[[site.location]]
match = "/free/"
limit = []
return = { status = 200, body = "free" }
"#,
    ));
    let statuses = |path: &'static str| {
        let gw = &gw;
        async move {
            let mut statuses = Vec::new();
            for _ in 0..3 {
                let req = Request::get(path).header("host", "example.com");
                let reply = within(5, send(addr(gw), req.body(empty()).unwrap())).await;
                statuses.push(reply.status.as_u16());
            }
            statuses
        }
    };
    // 1r/m without burst: the first passes, the next are rejected with the site's status.
    assert_eq!(statuses("/").await, [200, 503, 503]);
    assert_eq!(statuses("/free/").await, [200, 200, 200]);
}
