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

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tollgate::wire::encode::encoded_len;

#[path = "shared/json.rs"]
mod shared_json;
use shared_json::json;

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
