//! A reload rebuilds each address's choice of site: sites that move between addresses,
//! appear, or give way to a file of top-level locations answer where the new file says.

use std::net::SocketAddr;
use std::path::Path;

use super::rules::get_with_host;
use crate::support::{self, free_port, gateway, send, within};

/// `[server]` on `a` and `b`, then `sites`.
fn config(a: SocketAddr, b: SocketAddr, sites: &str) -> String {
    format!("[server]\nlisten = [\"{a}\", \"{b}\"]\nworkers = 2\n[log]\naccess = \"off\"\n{sites}")
}

/// A site answering its id, with its other lines (`names`, `listen`) before the location.
fn site(id: &str, lines: &str) -> String {
    format!(
        "[[site]]\n{lines}\n[[site.location]]\nmatch = \"/\"\n\
         return = {{ status = 200, body = \"{id}\" }}\n"
    )
}

async fn body(addr: SocketAddr, host: &str) -> String {
    within(5, send(addr, get_with_host(host))).await.body
}

#[tokio::test]
async fn a_reload_moves_sites_between_addresses() {
    let _shared = support::shared();
    let a = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let b = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let first = site("default", "") + &site("x", "names = [\"x.test\"]");
    let gw = gateway(&config(a, b, &first));
    assert_eq!(body(a, "x.test").await, "x");
    assert_eq!(body(b, "x.test").await, "x");

    // `x` keeps to `b`; `y` comes on `a` and is its default there.
    let second = site("default", &format!("listen = [\"{b}\"]"))
        + &site("x", &format!("names = [\"x.test\"]\nlisten = [\"{b}\"]"))
        + &site("y", &format!("names = [\"y.test\"]\nlisten = [\"{a}\"]"));
    let parse = |text: &str| {
        tollgate::config::from_str(text, Path::new("/tmp/tollgate-test/gateway.toml"))
            .unwrap_or_else(|errors| panic!("{errors}"))
    };
    gw.reload(&parse(&config(a, b, &second))).expect("reload");
    assert_eq!(body(a, "x.test").await, "y");
    assert_eq!(body(a, "y.test").await, "y");
    assert_eq!(body(b, "x.test").await, "x");
    assert_eq!(body(b, "y.test").await, "default");

    // Back to one site for every name and address.
    let plain = "[[location]]\nmatch = \"/\"\nreturn = { status = 200, body = \"one\" }\n";
    gw.reload(&parse(&config(a, b, plain))).expect("reload");
    assert_eq!(body(a, "x.test").await, "one");
    assert_eq!(body(b, "y.test").await, "one");
}

/// A connection left open on an address a reload removed reaches no site: not even one
/// that listens elsewhere (an internal site must not answer a public listener's
/// clients). It gets 421, and the connection closes so that the client asks again.
#[tokio::test]
async fn a_connection_on_a_removed_address_gets_421_and_reaches_no_site() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _shared = support::shared();
    let a = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let b = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let c = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let first = site("public", &format!("listen = [\"{a}\"]"))
        + &site(
            "internal",
            &format!("names = [\"internal.test\"]\nlisten = [\"{b}\"]"),
        );
    let gw = gateway(&config(a, b, &first));
    let mut stream = tokio::net::TcpStream::connect(a).await.unwrap();
    // Half a head now, the rest after the reload that takes `a` away. Meanwhile the
    // gateway takes the connection and reads that much (a connection still in the
    // listener's queue would be reset when the listener closes).
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: internal.test\r\n")
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let next = format!(
        "[server]\nlisten = [\"{c}\", \"{b}\"]\nworkers = 2\n[log]\naccess = \"off\"\n{}",
        site(
            "internal",
            &format!("names = [\"internal.test\"]\nlisten = [\"{b}\"]")
        ) + &site("public", &format!("listen = [\"{c}\"]"))
    );
    let parsed = tollgate::config::from_str(&next, Path::new("/tmp/tollgate-test/gateway.toml"))
        .unwrap_or_else(|errors| panic!("{errors}"));
    gw.reload(&parsed).expect("reload");
    stream.write_all(b"\r\n").await.unwrap();
    let mut answer = Vec::new();
    within(5, stream.read_to_end(&mut answer)).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 421 "), "{answer}");
    assert!(!answer.contains("internal"), "{answer}");
    assert_eq!(body(b, "internal.test").await, "internal");
}
