//! `sendfile` (`[server] sendfile`, on by default): a file goes to a plain TCP client
//! byte for byte as it goes with `sendfile = false`, over several calls (it is larger
//! than one call sends), from an offset for a range, and the access log counts it.

use std::time::Duration;

use http_body_util::BodyExt;

use crate::support::{self, addr, gateway, log_lines, within};

/// 5 MiB and a bit: three `sendfile` calls of at most 2 MiB.
const SIZE: usize = (5 << 20) + 12_345;

fn contents() -> Vec<u8> {
    (0..SIZE).map(|i| (i * 7 % 251) as u8).collect()
}

async fn get(at: std::net::SocketAddr, range: Option<&str>) -> (u16, Vec<u8>) {
    let stream = tokio::net::TcpStream::connect(at).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::get("/big.bin").header("host", "files.test");
    if let Some(range) = range {
        req = req.header("range", range);
    }
    let response = sender
        .send_request(req.body(support::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body)
}

#[tokio::test]
async fn a_file_sent_with_sendfile_is_the_same_bytes_and_counted_in_the_log() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let bytes = contents();
    std::fs::write(dir.path().join("big.bin"), &bytes).unwrap();
    let log = dir.path().join("access.log");
    for sendfile in [true, false] {
        let config = format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nsendfile = {sendfile}\n\
             [log]\naccess = \"{}\"\n[[location]]\nmatch = \"/\"\nroot = \"{}\"\n",
            log.display(),
            dir.path().display()
        );
        let gw = gateway(&config);
        let at = addr(&gw);
        let (status, body) = within(20, get(at, None)).await;
        assert_eq!(status, 200);
        assert!(body == bytes, "sendfile = {sendfile}: the file's own bytes");
        let (status, body) = within(20, get(at, Some("bytes=3000000-3999999"))).await;
        assert_eq!(status, 206);
        assert!(
            body[..] == bytes[3_000_000..4_000_000],
            "sendfile = {sendfile}: the range"
        );
        drop(gw);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lines = log_lines(&log, 4).await;
    let full = format!(" 200 {SIZE} ");
    assert_eq!(
        lines.iter().filter(|l| l.contains(&full)).count(),
        2,
        "{lines:#?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains(" 206 1000000 ")).count(),
        2,
        "{lines:#?}"
    );
}
