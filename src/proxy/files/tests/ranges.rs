//! `Range` and `If-Range` on a served file.

use super::*;

#[test]
fn one_range_is_a_206_with_its_content_range() {
    let tree = Tree::new();
    let answer = Req::get("/a.txt").header("range", "bytes=2-4").answer(&tree.files());
    assert_eq!(answer.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(answer.body, b"234");
    assert_eq!(answer.header("content-range"), Some("bytes 2-4/10"));
    assert_eq!(answer.header("content-length"), Some("3"));
    assert_eq!(answer.header("content-type"), Some("text/plain"));
    assert_eq!(answer.header("accept-ranges"), None);
    let suffix = Req::get("/a.txt").header("range", "bytes=-3").answer(&tree.files());
    assert_eq!(suffix.body, b"789");
    let head = Req::get("/a.txt").method(Method::HEAD).header("range", "bytes=2-4");
    let head = head.answer(&tree.files());
    assert_eq!((head.status, head.header("content-length")), (StatusCode::PARTIAL_CONTENT, Some("3")));
}

#[test]
fn several_ranges_are_multipart_in_nginx_layout_with_the_length_up_front() {
    let tree = Tree::new();
    tree.write("www/big.txt", &(0..5000u32).map(|i| b'a' + (i % 26) as u8).collect::<Vec<u8>>());
    let answer = Req::get("/big.txt").header("range", "bytes=0-1, 26-27").answer(&tree.files());
    assert_eq!(answer.status, StatusCode::PARTIAL_CONTENT);
    let content_type = answer.header("content-type").unwrap();
    let boundary = content_type.strip_prefix("multipart/byteranges; boundary=").unwrap();
    assert_eq!(boundary.len(), 20);
    let want = format!(
        "\r\n--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/5000\r\n\r\nab\
         \r\n--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes 26-27/5000\r\n\r\nab\
         \r\n--{boundary}--\r\n"
    );
    assert_eq!(String::from_utf8(answer.body.clone()).unwrap(), want);
    assert_eq!(answer.header("content-length"), Some(want.len().to_string().as_str()));
    assert_eq!(answer.length, Some(want.len() as u64));
}

#[test]
fn an_unsatisfiable_range_is_a_416_with_the_length() {
    let tree = Tree::new();
    for range in ["bytes=10-", "bytes=abc", "bytes=99999999999999999999-", "bytes=-0"] {
        let answer = Req::get("/a.txt").header("range", range).answer(&tree.files());
        assert_eq!(answer.status, StatusCode::RANGE_NOT_SATISFIABLE, "{range}");
        assert_eq!(answer.header("content-range"), Some("bytes */10"));
        assert_eq!(answer.header("etag"), None);
    }
}

#[test]
fn ranges_that_overlap_past_the_length_get_the_whole_file() {
    let tree = Tree::new();
    let answer = Req::get("/a.txt").header("range", "bytes=0-9,0-9").answer(&tree.files());
    assert_eq!((answer.status, answer.body.len()), (StatusCode::OK, 10));
}

#[test]
fn if_range_must_match_exactly_or_the_whole_file_is_sent() {
    let tree = Tree::new();
    let files = tree.files();
    let range = |if_range: &str| {
        Req::get("/a.txt").header("range", "bytes=0-0").header("if-range", if_range).answer(&files).status
    };
    assert_eq!(range(&etag_of(10)), StatusCode::PARTIAL_CONTENT);
    assert_eq!(range(DATE), StatusCode::PARTIAL_CONTENT);
    assert_eq!(range("\"stale\""), StatusCode::OK);
    assert_eq!(range(&format!("W/{}", etag_of(10))), StatusCode::OK);
    assert_eq!(range("Sun, 13 Sep 2020 12:26:41 GMT"), StatusCode::OK);
    let ignored = Req::get("/a.txt").header("range", "lines=1-2").answer(&files);
    assert_eq!(ignored.status, StatusCode::OK);
}
