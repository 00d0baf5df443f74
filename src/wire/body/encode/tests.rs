//! `Encoded` against real decoders: every coding round-trips whatever the inner body's
//! framing and pauses, output comes in bounded chunks, a pause flushes what came so far,
//! and trailers and errors pass through.

use std::collections::VecDeque;
use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame};

use super::{Encoded, OUT_CAPACITY};
use crate::config::Encoding;
use crate::wire::body::BodyError;

const CODINGS: [Encoding; 3] = [Encoding::Gzip, Encoding::Br, Encoding::Zstd];

/// What a scripted inner body does at each poll.
enum Item {
    Data(Bytes),
    Pending,
    Trailers(HeaderMap),
    Fail,
}

/// An inner body that plays `items`, then ends; `length` is the exact size it claims.
struct Script {
    items: VecDeque<Item>,
    length: Option<u64>,
}

impl Script {
    /// `data` in frames of the sizes `sizes` gives in turn, with a pause after every
    /// `pause_every`-th frame.
    fn framed(data: &[u8], sizes: &[usize], pause_every: usize) -> Script {
        let mut items = VecDeque::new();
        let (mut at, mut n) = (0, 0);
        while at < data.len() {
            let size = sizes[n % sizes.len()].min(data.len() - at);
            items.push_back(Item::Data(Bytes::copy_from_slice(&data[at..at + size])));
            at += size;
            n += 1;
            if n % pause_every == 0 {
                items.push_back(Item::Pending);
            }
        }
        Script {
            items,
            length: None,
        }
    }
}

impl Body for Script {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut().items.pop_front() {
            None => Poll::Ready(None),
            Some(Item::Data(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Some(Item::Trailers(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Some(Item::Fail) => Poll::Ready(Some(Err(BodyError::Timeout))),
            Some(Item::Pending) => {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self.length {
            Some(n) => http_body::SizeHint::with_exact(n),
            None => http_body::SizeHint::default(),
        }
    }
}

/// Everything `body` gives until it ends: its data chunks, its trailers, its error, and
/// how many polls were `Pending`.
#[derive(Default)]
struct Drained {
    chunks: Vec<Bytes>,
    trailers: Option<HeaderMap>,
    error: Option<BodyError>,
    pending: usize,
}

impl Drained {
    fn data(&self) -> Vec<u8> {
        self.chunks.concat()
    }
}

fn drain(mut body: Encoded<Script>) -> Drained {
    let mut cx = Context::from_waker(Waker::noop());
    let mut drained = Drained::default();
    assert!(!body.is_end_stream());
    loop {
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(None) => break,
            Poll::Pending => drained.pending += 1,
            Poll::Ready(Some(Err(err))) => drained.error = Some(err),
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => drained.chunks.push(data),
                Err(frame) => drained.trailers = frame.into_trailers().ok(),
            },
        }
        assert!(drained.pending < 100_000, "the body never ends");
    }
    assert!(body.is_end_stream());
    drained
}

/// What a decoder reads from `encoded` before it ends or finds the stream cut short.
fn decode(coding: Encoding, encoded: &[u8]) -> (Vec<u8>, bool) {
    let mut reader: Box<dyn Read + '_> = match coding {
        Encoding::Gzip => Box::new(flate2::read::GzDecoder::new(encoded)),
        Encoding::Br => Box::new(brotli::Decompressor::new(encoded, 4096)),
        Encoding::Zstd => Box::new(zstd::stream::read::Decoder::new(encoded).expect("decoder")),
    };
    let mut out = Vec::new();
    let mut buf = [0; 8192];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

/// Bytes no coder can shrink (xorshift64).
fn random(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// JSON that shrinks a lot, as API answers do.
fn compressible(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut i = 0;
    while out.len() < len {
        out.extend_from_slice(format!("{{\"id\":{i},\"name\":\"item\",\"ok\":true}},").as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

fn round_trip(coding: Encoding, data: &[u8], sizes: &[usize], pause_every: usize) -> Drained {
    let drained = drain(Encoded::new(Script::framed(data, sizes, pause_every), coding));
    assert!(drained.error.is_none(), "{coding:?}: {:?}", drained.error);
    let (decoded, whole) = decode(coding, &drained.data());
    assert!(whole, "{coding:?}: the stream is complete");
    assert!(decoded == data, "{coding:?}: {} bytes in, {} out", data.len(), decoded.len());
    for chunk in &drained.chunks {
        assert!(!chunk.is_empty() && chunk.len() <= OUT_CAPACITY, "{coding:?}: {}", chunk.len());
    }
    drained
}

#[test]
fn every_coding_round_trips_whatever_the_framing_and_pauses() {
    let inputs = [
        Vec::new(),
        b"hello".to_vec(),
        random(1 << 20),
        compressible(1 << 20),
    ];
    let framings: [(&[usize], usize); 3] = [(&[1 << 20], 1), (&[1, 7, 4093, 65_537], 3), (&[16_384], 1)];
    for coding in CODINGS {
        for input in &inputs {
            for (sizes, pause_every) in framings {
                round_trip(coding, input, sizes, pause_every);
            }
        }
    }
}

#[test]
fn a_large_frame_comes_out_in_bounded_chunks() {
    for coding in CODINGS {
        let drained = round_trip(coding, &random(1 << 20), &[1 << 20], 1);
        // 1 MiB that does not shrink: at least 32 chunks, none above OUT_CAPACITY.
        assert!(drained.chunks.len() >= 32, "{coding:?}: {}", drained.chunks.len());
    }
}

#[test]
fn a_pause_of_the_inner_body_hands_on_what_came_so_far() {
    for coding in CODINGS {
        let mut script = Script::framed(b"{\"first\":1}", &[64], 1);
        script.items.push_back(Item::Data(Bytes::from_static(b"{\"second\":2}")));
        let mut body = Encoded::new(script, coding);
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut body).poll_frame(&mut cx) else {
            panic!("{coding:?}: the first piece is handed on at the pause");
        };
        let first = frame.into_data().expect("data");
        assert_eq!(decode(coding, &first).0, b"{\"first\":1}", "{coding:?}");
        let mut rest = drain(body);
        rest.chunks.insert(0, first);
        assert_eq!(decode(coding, &rest.data()), (b"{\"first\":1}{\"second\":2}".to_vec(), true));
    }
}

#[test]
fn trailers_follow_the_encoded_data() {
    for coding in CODINGS {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", HeaderValue::from_static("abc"));
        let mut script = Script::framed(b"some text", &[4], 10);
        script.items.push_back(Item::Trailers(trailers.clone()));
        let drained = drain(Encoded::new(script, coding));
        assert_eq!(drained.trailers, Some(trailers), "{coding:?}");
        assert_eq!(decode(coding, &drained.data()), (b"some text".to_vec(), true));
    }
}

#[test]
fn an_error_of_the_inner_body_passes_through_and_ends_the_stream() {
    for coding in CODINGS {
        let mut script = Script::framed(b"partial", &[7], 1);
        script.items.push_back(Item::Fail);
        script.items.push_back(Item::Data(Bytes::from_static(b"never read")));
        let drained = drain(Encoded::new(script, coding));
        assert!(matches!(drained.error, Some(BodyError::Timeout)), "{coding:?}");
        let (decoded, whole) = decode(coding, &drained.data());
        assert_eq!((decoded, whole), (b"partial".to_vec(), false), "{coding:?}");
    }
}

#[test]
fn a_known_length_still_round_trips_with_its_smaller_window() {
    for coding in CODINGS {
        for len in [1000, 5000, 70_000] {
            let data = compressible(len);
            let mut script = Script::framed(&data, &[999], 2);
            script.length = Some(len as u64);
            let drained = drain(Encoded::new(script, coding));
            assert_eq!(decode(coding, &drained.data()), (data, true), "{coding:?} {len}");
        }
    }
}

#[test]
fn a_body_never_read_makes_no_coder_and_its_length_is_unknown() {
    let body = Encoded::new(Script::framed(b"abc", &[3], 1), Encoding::Br);
    assert!(body.coder.is_none() && body.out.capacity() == 0);
    assert_eq!(body.size_hint().exact(), None);
    assert!(!body.is_end_stream());
}
