//! The access log: one line per request, combined or JSON, written to a file.

mod support;

use std::time::Duration;

use support::*;

fn config(up: std::net::SocketAddr, path: &std::path::Path, format: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "{}"
format = "{format}"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "= /demo"
return = {{ status = 200, body = "hello\n" }}
"#,
        path.display()
    )
}

#[tokio::test]
async fn combined_lines_carry_status_bytes_and_times() {
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let gw = gateway(&config(up.addr, &path, "combined"));
    let req = http::Request::get("/page?x=1")
        .header("host", "example.test")
        .header("user-agent", "test-agent/1.0")
        .header("referer", "http://ref.test/")
        .body(empty())
        .unwrap();
    within(5, send(addr(&gw), req)).await;
    within(5, get_text(addr(&gw), "/demo")).await;
    let lines = log_lines(&path, 2).await;
    let first = &lines[0];
    assert!(first.starts_with("127.0.0.1 - - ["), "{first}");
    assert!(
        first.contains(
            "] \"GET /page?x=1 HTTP/1.1\" 200 11 \"http://ref.test/\" \"test-agent/1.0\" - "
        ),
        "{first}"
    );
    let fields: Vec<&str> = first.rsplit(' ').take(2).collect();
    let upstream_time: f64 = fields[0].parse().expect("upstream time is a number");
    let request_time: f64 = fields[1].parse().expect("request time is a number");
    assert!(upstream_time <= request_time);
    assert!(
        lines[1].contains("\"GET /demo HTTP/1.1\" 200 6 \"-\" \"-\" - "),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].ends_with(" -"),
        "no upstream time for a return: {}",
        lines[1]
    );
}

#[tokio::test]
async fn json_lines_are_one_object_per_request() {
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.json");
    let gw = gateway(&config(up.addr, &path, "json"));
    within(5, get_text(addr(&gw), "/a\"b")).await;
    let lines = log_lines(&path, 1).await;
    let line = &lines[0];
    assert!(line.starts_with("{\"time\":\""), "{line}");
    assert!(line.ends_with('}'), "{line}");
    assert!(line.contains("\"remote_addr\":\"127.0.0.1\""), "{line}");
    assert!(
        line.contains("\"status\":200,\"body_bytes_sent\":11"),
        "{line}"
    );
    assert!(
        line.contains(&format!("\"upstream_addr\":\"{}\"", up.addr)),
        "{line}"
    );
}

#[tokio::test]
async fn client_gone_before_the_response_is_logged_as_499() {
    let up = Upstream::start(|_req| async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        text(200, "too late")
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let gw = gateway(&config(up.addr, &path, "combined"));
    {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: example.test\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lines = log_lines(&path, 1).await;
    assert!(
        lines[0].contains("\"GET /slow HTTP/1.1\" 499 0"),
        "{}",
        lines[0]
    );
}

#[tokio::test]
async fn http2_requests_are_logged_with_the_path_as_nginx() {
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let gw = gateway(&config(up.addr, &path, "combined"));
    let req = http::Request::get("http://example.test/h2/page?x=1")
        .body(empty())
        .unwrap();
    within(5, send_h2(addr(&gw), req)).await;
    let lines = log_lines(&path, 1).await;
    assert!(
        lines[0].contains("\"GET /h2/page?x=1 HTTP/2.0\" 200 "),
        "{}",
        lines[0]
    );
}
