use std::io::Write;
use std::task::{Context, Waker};

use super::*;

fn file_of(bytes: &[u8]) -> std::fs::File {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(bytes).unwrap();
    file
}

fn count() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// Polls `body` to its end: the bytes sent, and the error it ended with, if any.
fn drain(body: &mut FileBody) -> (Vec<u8>, Option<BodyError>) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match Pin::new(&mut *body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => out.extend_from_slice(&frame.into_data().unwrap()),
            Poll::Ready(Some(Err(err))) => return (out, Some(err)),
            Poll::Ready(None) => return (out, None),
            Poll::Pending => unreachable!("a file body never waits"),
        }
    }
}

#[test]
fn a_range_is_sent_in_chunks_of_at_most_64_kib_with_an_exact_size() {
    let bytes: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    let open = count();
    let permit = Permit::take(&open, 1).unwrap();
    let mut body = FileBody::new(file_of(&bytes), 10, 150_010, permit);
    assert_eq!(body.size_hint().exact(), Some(150_000));
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Some(Ok(first))) = Pin::new(&mut body).poll_frame(&mut cx) else {
        panic!("no first frame");
    };
    assert_eq!(first.into_data().unwrap().len(), 64 * 1024);
    assert_eq!(body.size_hint().exact(), Some(150_000 - 64 * 1024));
    let (rest, err) = drain(&mut body);
    assert!(err.is_none());
    assert_eq!(rest, bytes[10 + 64 * 1024..150_010]);
    assert!(body.is_end_stream());
}

#[test]
fn a_file_that_shrinks_while_sent_ends_the_body_with_an_error() {
    let bytes = vec![7u8; 300_000];
    let file = file_of(&bytes);
    let other = file.try_clone().unwrap();
    let mut body = FileBody::new(file, 0, 300_000, Permit::take(&count(), 1).unwrap());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(
        Pin::new(&mut body).poll_frame(&mut cx),
        Poll::Ready(Some(Ok(_)))
    ));
    other.set_len(100_000).unwrap();
    let (sent, err) = drain(&mut body);
    assert_eq!(sent.len(), 100_000 - 64 * 1024, "what the file still had");
    assert!(matches!(err, Some(BodyError::File(e)) if e.kind() == io::ErrorKind::UnexpectedEof));
    assert!(matches!(
        Pin::new(&mut body).poll_frame(&mut cx),
        Poll::Ready(None)
    ));
}

#[test]
fn a_file_that_grows_while_sent_is_sent_to_its_first_length() {
    let file = file_of(b"0123456789");
    let mut other = file.try_clone().unwrap();
    let mut body = FileBody::new(file, 0, 10, Permit::take(&count(), 1).unwrap());
    other.write_all(b"more bytes").unwrap();
    assert_eq!(drain(&mut body).0, b"0123456789");
}

#[test]
fn multipart_bytes_are_nginx_layout_and_their_length_is_known_up_front() {
    let parts = Parts::new(
        "00000000000000000042".into(),
        Some(b"text/plain"),
        10,
        vec![(0, 2), (5, 10)],
    );
    let length = parts.len();
    let mut body = FileBody::multipart(
        file_of(b"0123456789"),
        parts,
        Permit::take(&count(), 1).unwrap(),
    );
    assert_eq!(body.size_hint().exact(), Some(length));
    let (sent, err) = drain(&mut body);
    assert!(err.is_none());
    let want = "\r\n--00000000000000000042\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n01\
                \r\n--00000000000000000042\r\nContent-Type: text/plain\r\nContent-Range: bytes 5-9/10\r\n\r\n56789\
                \r\n--00000000000000000042--\r\n";
    assert_eq!(String::from_utf8(sent).unwrap(), want);
    assert_eq!(length, want.len() as u64);
    assert!(body.is_end_stream());
}

#[test]
fn a_multipart_part_without_a_type_has_no_content_type_line() {
    let parts = Parts::new("1".into(), None, 3, vec![(0, 1), (2, 3)]);
    let length = parts.len();
    let mut body = FileBody::multipart(file_of(b"abc"), parts, Permit::take(&count(), 1).unwrap());
    let (sent, _) = drain(&mut body);
    let want = "\r\n--1\r\nContent-Range: bytes 0-0/3\r\n\r\na\r\n--1\r\nContent-Range: bytes 2-2/3\r\n\r\nc\r\n--1--\r\n";
    assert_eq!(String::from_utf8(sent).unwrap(), want);
    assert_eq!(length, want.len() as u64);
}

#[test]
fn permits_stop_at_the_limit_and_come_back_when_the_body_drops() {
    let open = count();
    let first = Permit::take(&open, 2).unwrap();
    let body = FileBody::new(file_of(b"x"), 0, 1, Permit::take(&open, 2).unwrap());
    assert!(Permit::take(&open, 2).is_none());
    drop(body);
    assert_eq!(open.load(Ordering::Acquire), 1);
    let again = Permit::take(&open, 2);
    assert!(again.is_some());
    drop((first, again));
    assert_eq!(open.load(Ordering::Acquire), 0);
}

#[test]
fn a_small_body_is_written_whole_and_a_short_file_is_left_to_the_stream() {
    let mut body = FileBody::new(file_of(b"hello"), 1, 5, Permit::take(&count(), 1).unwrap());
    let mut out = b"head".to_vec();
    assert_eq!(body.write_whole(&mut out, 3), None, "longer than most");
    assert_eq!(body.write_whole(&mut out, 8), Some(4));
    assert_eq!(out, b"headello");
    assert!(body.is_end_stream());

    let file = file_of(b"hello");
    let other = file.try_clone().unwrap();
    let mut body = FileBody::new(file, 0, 5, Permit::take(&count(), 1).unwrap());
    other.set_len(2).unwrap();
    let mut out = b"head".to_vec();
    assert_eq!(body.write_whole(&mut out, 8), None);
    assert_eq!(out, b"head", "nothing appended");
    assert!(drain(&mut body).1.is_some());
}
