//! `compress`'s coders on a 100 KB JSON answer, as an upstream sends one (16 KiB frames,
//! its length known): CPU per byte of each coding, the whole stream (coder made, fed,
//! finished, output handed on in chunks) per iteration. benches/proxy_vs_nginx.sh's
//! `gzip_json` scenario puts gzip's figure beside nginx's, through the whole proxy.
//!
//! ```text
//! cargo bench --bench compress
//! ```
//!
//! Criterion reports time per stream and throughput (input bytes per second); each coding's
//! output size is printed once before its runs. On a busy 2-core machine (bench profile
//! without LTO): gzip 277 µs (2.8 ns a byte) → 25,941 bytes, br 2.38 ms (24 ns) → 13,734,
//! zstd 400 µs (4.0 ns) → 15,079; zlib 1.2.13 at level 1, nginx's, about 540 µs → 19,212.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tollgate::wire::encode::encoded_len;

/// The JSON answer: `len` bytes of records such as an API lists, with ids, names, numbers
/// and flags that vary, so that it shrinks as real JSON does (not as a repeated line
/// would). examples/bench_upstream.rs answers `/json` with the same 100,000 bytes.
fn json(len: usize) -> Bytes {
    let mut out = String::from("[");
    let mut i = 0u64;
    while out.len() < len {
        let city = ["Oslo", "Lyon", "Porto", "Graz"][i as usize % 4];
        out.push_str(&format!(
            "{{\"id\":{i},\"user\":\"user{}\",\"city\":\"{city}\",\"score\":{},\"active\":{},\"tags\":[\"t{}\",\"t{}\"]}},",
            i * 31 % 977,
            (i * 7919) % 10_007,
            i % 3 == 0,
            i % 13,
            i % 7
        ));
        i += 1;
    }
    out.truncate(len - 1);
    out.push(']');
    Bytes::from(out)
}

fn coders(c: &mut Criterion) {
    let input = json(100_000);
    let mut group = c.benchmark_group("compress_json_100k");
    group.throughput(Throughput::Bytes(input.len() as u64));
    for token in ["gzip", "br", "zstd"] {
        let size = encoded_len(token, &input, 16 * 1024, false, true).expect("encodes");
        println!("{token}: {} bytes -> {size}", input.len());
        group.bench_function(token, |b| {
            b.iter(|| {
                encoded_len(black_box(token), &input, 16 * 1024, false, true).expect("encodes")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, coders);
criterion_main!(benches);
