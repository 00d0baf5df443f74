//! `compress`'s memory per stream (src/wire/body/encode/coder.rs states the figures): the
//! most a coder and its output buffer hold at once while 1 MiB goes through, read in
//! 16 KiB frames as an upstream's body comes, with and without a pause (a flush) after each,
//! and with a small answer whose known length shrinks the window. The counting allocator is
//! limit_memory.rs's; libzstd's own allocations go through it too (the `with-rust-allocator`
//! feature of zstd, turned on for the tests in Cargo.toml's dev-dependencies). Nothing is
//! left allocated when a stream ends.

use bytes::Bytes;
use tollgate::wire::encode::encoded_len;

use crate::limit_memory::measured_peak;

const KIB: isize = 1024;

/// Bytes no coder can shrink (xorshift64): the most output per input, and for brotli the
/// most work in its block buffers.
fn random(len: usize) -> Bytes {
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let bytes = (0..len).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    });
    bytes.collect::<Vec<u8>>().into()
}

/// JSON that shrinks a lot, as API answers do.
fn json(len: usize) -> Bytes {
    let mut out = Vec::with_capacity(len + 64);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(
            format!("{{\"id\":{i},\"name\":\"item {}\",\"ok\":true}},", i % 97).as_bytes(),
        );
        i += 1;
    }
    out.truncate(len);
    out.into()
}

/// The peak heap of one stream of `input` with `token`, checking nothing stays allocated.
fn peak(token: &str, input: &Bytes, pauses: bool, known: bool) -> isize {
    // The first clone of a `Bytes` made from a `Vec` allocates its shared count: not the
    // stream's.
    drop(input.clone());
    let (encoded, peak, left) =
        measured_peak(|| encoded_len(token, input, 16 * 1024, pauses, known));
    let encoded = encoded.expect("the stream encodes");
    assert!(encoded > 0);
    assert!(
        left <= 0,
        "{token}: {left} bytes left allocated after the stream"
    );
    let kib = input.len() / 1024;
    println!(
        "{token}, {kib} KiB in ({encoded} out), pauses {pauses}, known {known}: peak {} KiB",
        peak / KIB
    );
    peak
}

#[test]
fn each_coder_stays_within_its_stated_memory_per_stream() {
    let _shared = crate::support::shared();
    // coder.rs's figures (403 KiB, 2.6 MiB, 2.0 MiB), with a little room.
    for (token, bound) in [
        ("gzip", 420 * KIB),
        ("br", 2700 * KIB),
        ("zstd", 2150 * KIB),
    ] {
        for input in [random(1 << 20), json(1 << 20)] {
            for pauses in [false, true] {
                let peak = peak(token, &input, pauses, false);
                assert!(peak <= bound, "{token}: peak {peak} bytes, above {bound}");
            }
        }
    }
}

#[test]
fn a_small_answer_of_known_length_takes_a_smaller_window() {
    let _shared = crate::support::shared();
    // coder.rs's figures for 2 KiB (283 KiB, 600 KiB, 94 KiB), with a little room.
    for (token, bound) in [("gzip", 300 * KIB), ("br", 640 * KIB), ("zstd", 110 * KIB)] {
        let input = json(2048);
        let small = peak(token, &input, false, true);
        let unknown = peak(token, &input, false, false);
        assert!(
            small <= unknown && small <= bound,
            "{token}: {small} known, {unknown} unknown"
        );
    }
}
