//! Nothing outside `root` is ever served, whatever bytes the client sends: raw requests
//! (no client library normalizes them first) with dots, encoded dots and slashes,
//! backslashes, NUL, overlong and invalid UTF-8, absolute-form targets, symlinks leading
//! out, and dotfiles, each answered 400 or 404 and never with the secret's bytes; a
//! symlink inside the root, `follow_symlinks` and `dotfiles` do what they say. Also: a
//! file that shrinks while it is sent ends the connection short of its length instead of
//! sending other bytes, and the next connection is served.

use std::net::SocketAddr;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::raw::read_response;
use crate::support::{self, addr, gateway, within};

const SECRET: &str = "the secret outside the root";

/// `T/www` (the root) beside `T/secret` and `T/secret-dir/passwd`, with links out of the
/// root and one inside it.
fn tree(top: &Path) -> std::path::PathBuf {
    let www = top.join("www");
    std::fs::create_dir_all(www.join("a")).unwrap();
    std::fs::create_dir_all(top.join("secret-dir")).unwrap();
    std::fs::write(top.join("secret"), SECRET).unwrap();
    std::fs::write(top.join("secret-dir/passwd"), SECRET).unwrap();
    std::fs::write(www.join("index.html"), "the index\n").unwrap();
    std::fs::write(www.join("a/b.txt"), "b\n").unwrap();
    std::fs::write(www.join(".env"), SECRET).unwrap();
    std::fs::create_dir_all(www.join(".git")).unwrap();
    std::fs::write(www.join(".git/config"), SECRET).unwrap();
    std::fs::create_dir_all(www.join(".well-known")).unwrap();
    std::fs::write(www.join(".well-known/security.txt"), "Contact: x\n").unwrap();
    std::os::unix::fs::symlink("../secret", www.join("out")).unwrap();
    std::os::unix::fs::symlink(top.join("secret-dir"), www.join("dirout")).unwrap();
    std::os::unix::fs::symlink("index.html", www.join("in")).unwrap();
    www
}

fn config(www: &Path, extra: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[location]]\nmatch = \"/\"\nroot = \"{}\"\n{extra}\n",
        www.display()
    )
}

/// Sends `target` raw (`GET <target> HTTP/1.1`) and gives the status and body.
async fn raw_get(at: SocketAddr, target: &[u8]) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(at).await.unwrap();
    let mut request = b"GET ".to_vec();
    request.extend_from_slice(target);
    request.extend_from_slice(b" HTTP/1.1\r\nHost: files.test\r\nConnection: close\r\n\r\n");
    stream.write_all(&request).await.unwrap();
    match within(5, read_response(&mut stream)).await {
        Some(response) => (response.status, response.body),
        None => (0, String::new()),
    }
}

const ATTACKS: [&[u8]; 22] = [
    b"/../secret",
    b"/%2e%2e/secret",
    b"/%2E%2e%2fsecret",
    b"/a/..%2f..%2fsecret",
    b"//../secret",
    b"/./../secret",
    b"/%2e%2e%5csecret",
    b"/..\\secret",
    b"/a\\..\\..\\secret",
    b"/%00",
    b"/index.html%00.txt",
    b"/%c0%ae%c0%ae/secret",
    b"/%e0%80%ae%e0%80%ae/secret",
    b"/%ff",
    b"/out",
    b"/dirout/passwd",
    b"/.env",
    b"/.git/config",
    b"/%2eenv",
    b"/a/%2e%2e/.env",
    b"http://files.test/../secret",
    b"/a/b.txt/../../../secret",
];

#[tokio::test]
async fn no_request_reads_outside_the_root() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let www = tree(dir.path());
    let gw = gateway(&config(&www, ""));
    let at = addr(&gw);
    let mut leaks = Vec::new();
    for target in ATTACKS {
        let (status, body) = raw_get(at, target).await;
        if !matches!(status, 400 | 404) || body.contains(SECRET) {
            leaks.push(format!(
                "{}: {status} {body:?}",
                String::from_utf8_lossy(target)
            ));
        }
    }
    assert!(leaks.is_empty(), "{leaks:#?}");
    // A literal NUL in the target is refused before routing.
    let (status, _) = raw_get(at, b"/index.html\0").await;
    assert!(matches!(status, 0 | 400), "{status}");
    // What is inside the root is served, through a symlink too.
    assert_eq!(raw_get(at, b"/in").await, (200, "the index\n".into()));
    assert_eq!(
        raw_get(at, b"/a/../index.html").await,
        (200, "the index\n".into())
    );
    assert_eq!(raw_get(at, b"/.well-known/security.txt").await.0, 200);
}

#[tokio::test]
async fn follow_symlinks_and_dotfiles_open_what_they_name() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let www = tree(dir.path());
    let gw = gateway(&config(&www, "follow_symlinks = true\ndotfiles = true"));
    let at = addr(&gw);
    assert_eq!(raw_get(at, b"/out").await, (200, SECRET.into()));
    assert_eq!(raw_get(at, b"/dirout/passwd").await, (200, SECRET.into()));
    assert_eq!(raw_get(at, b"/.env").await, (200, SECRET.into()));
    // Still never above the root by `..`.
    assert_eq!(raw_get(at, b"/../secret").await.0, 400);
}

#[tokio::test]
async fn a_file_that_shrinks_while_it_is_sent_ends_the_connection_short() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let www = tree(dir.path());
    let big = www.join("big.bin");
    let size = 8 << 20;
    std::fs::write(&big, vec![b'x'; size]).unwrap();
    let gw = gateway(&config(&www, ""));
    let at = addr(&gw);
    let mut stream = tokio::net::TcpStream::connect(at).await.unwrap();
    stream
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: files.test\r\n\r\n")
        .await
        .unwrap();
    // Read the head and a little of the body, then cut the file short.
    let mut got = vec![0u8; 64 * 1024];
    let mut read = 0;
    while read < 4096 {
        read += within(5, stream.read(&mut got[read..])).await.unwrap();
    }
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&got[..head_end]).to_string();
    assert!(head.contains(&format!("content-length: {size}")), "{head}");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(1024)
        .unwrap();
    let mut total = read - head_end;
    loop {
        match within(10, stream.read(&mut got)).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                // The file's own bytes, or zeros: with `sendfile` the socket holds pages
                // of the file itself, and truncating it zeroes the tail of the page it
                // now ends in (nginx's sendfile does the same). Never other bytes.
                assert!(
                    got[..n].iter().all(|&b| b == b'x' || b == 0),
                    "only the file's own bytes"
                );
                total += n;
            }
        }
    }
    assert!(
        total < size,
        "the connection ended short of the length ({total} of {size})"
    );
    // The gateway goes on serving.
    assert_eq!(raw_get(at, b"/index.html").await.0, 200);
}
