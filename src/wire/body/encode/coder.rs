//! The three coders behind [`Encoded`](super::Encoded), with one shape: a [`Coder::step`]
//! takes what it can of its input and writes into the spare capacity of an output `Vec`,
//! never past it, so the caller decides how much output is held at once.
//!
//! Parameters are fixed (DESIGN §17 has no level key): gzip level 2 (what nginx's default
//! level 1 makes with zlib; see [`GZIP_LEVEL`]), brotli quality 4 with a 512 KiB window (not the
//! crate's defaults, quality 11 and 4 MiB, tens of MiB per stream), zstd level 3 (its
//! default) with a 512 KiB window (not the 2 MiB level 3 picks for a stream of unknown
//! size). An answer whose length is known gets a smaller window when it fits in one, as
//! nginx shrinks gzip's: the coders' memory grows with the window.
//!
//! Heap per stream, measured with a counting allocator (tests/it/compress_memory.rs: the
//! peak while 1 MiB goes through in 16 KiB frames, with `Encoded`'s 32 KiB of output):
//!
//! | coding | length unknown | a 2 KiB answer of known length | what it is |
//! |---|---|---|---|
//! | gzip | 403 KiB | 283 KiB | zlib-rs: 2 × 32 KiB window, 64 KiB chain, a 128 KiB hash head (zlib-rs's is always 2^16 entries), 112 KiB of pending and symbol buffers (memLevel 8, which flate2 does not let us lower); nginx's zlib ≈ 264 KiB |
//! | br | 2.5 MiB (1.9 MiB when every 16 KiB is flushed) | 600 KiB | a 1 MiB ring buffer (twice the window), the quality-4 hasher (512 KiB), one metablock's commands |
//! | zstd | 2.0 MiB | 94 KiB | level 3's tables (512 + 256 KiB), the window's copy of the input (512 + 128 KiB), the output block |
//!
//! Random input costs the same. (zlib-rs's level 1, `deflate_quick` with static Huffman
//! codes, would grow it by about 5 %, where nginx's zlib stores it as it is.)

use std::io;

use brotli::enc::encode::{
    BrotliEncoderDestroyInstance, BrotliEncoderOperation, BrotliEncoderParameter,
    BrotliEncoderStateStruct,
};
use brotli::enc::interface::PredictionModeContextMap;
use brotli::enc::{InputPair, InputReferenceMut, StandardAlloc, StaticCommand};
use flate2::{Compress, Compression, FlushCompress, Status};
use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd::zstd_safe::{self, CCtx, CParameter, InBuffer, OutBuffer};

use crate::config::Encoding;

/// gzip's level: 2, the one that matches what nginx's default (`gzip_comp_level 1` with the
/// zlib it links) makes, for less CPU. zlib-rs's level 1 is zlib-ng's `deflate_quick`, a
/// looser algorithm than zlib's level 1: on benches/compress.rs's 100 KB of JSON it gives
/// 25.9 KB in 277 µs, its level 2 18.0 KB in 483 µs, and zlib 1.2.13 at level 1 19.2 KB in
/// about 540 µs (one busy 2-core machine). Level 2 is smaller and cheaper than nginx's.
const GZIP_LEVEL: u32 = 2;
/// brotli's quality: the fast end (ngx_brotli's default is 6), where it still beats gzip.
const BROTLI_QUALITY: u32 = 4;
/// zstd's level: its own default, Caddy's `encode zstd`.
const ZSTD_LEVEL: i32 = 3;
/// The largest window of brotli and zstd, log2: 512 KiB (ngx_brotli's `brotli_window`).
const WINDOW_BITS: u32 = 19;

/// What a step is asked to do besides taking input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// Take input; output comes when the coder has some.
    Process,
    /// Write out everything taken so far, so the client can decode it (a sync flush).
    Flush,
    /// End the stream (gzip's trailer, brotli's last block, zstd's epilogue).
    Finish,
}

/// What one step did.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    /// Bytes of the input taken.
    pub consumed: usize,
    /// `Process`: all the input taken; `Flush`, `Finish`: all their output written.
    pub done: bool,
}

/// One stream's coder.
pub(super) enum Coder {
    Gzip(Compress),
    Br(Brotli),
    Zstd(CCtx<'static>),
}

impl Coder {
    /// A coder for `coding`; `length`, the whole input's length when known, bounds its
    /// window.
    pub(super) fn new(coding: Encoding, length: Option<u64>) -> io::Result<Coder> {
        Ok(match coding {
            Encoding::Gzip => {
                // 9 is zlib's smallest window; 15 its largest and nginx's.
                let bits = window_bits(length, 9, 15) as u8;
                Coder::Gzip(Compress::new_gzip(Compression::new(GZIP_LEVEL), bits))
            }
            Encoding::Br => Coder::Br(Brotli::new(window_bits(length, 10, WINDOW_BITS))?),
            Encoding::Zstd => Coder::Zstd(zstd(length)?),
        })
    }

    /// One call into the coder: takes what it can of `input` (`Process` only; the others
    /// are given none) and writes into `out`'s spare capacity, never growing it.
    pub(super) fn step(&mut self, op: Op, input: &[u8], out: &mut Vec<u8>) -> io::Result<Step> {
        match self {
            Coder::Gzip(deflate) => gzip_step(deflate, op, input, out),
            Coder::Br(brotli) => brotli.step(op, input, out),
            Coder::Zstd(cctx) => zstd_step(cctx, op, input, out),
        }
    }
}

/// The window, log2, for an input of `length` bytes: the smallest within `min..=max` that
/// holds it all, or `max` when the length is unknown.
fn window_bits(length: Option<u64>, min: u32, max: u32) -> u32 {
    match length {
        Some(n) => (u64::BITS - n.saturating_sub(1).leading_zeros()).clamp(min, max),
        None => max,
    }
}

fn gzip_step(deflate: &mut Compress, op: Op, input: &[u8], out: &mut Vec<u8>) -> io::Result<Step> {
    let flush = match op {
        Op::Process => FlushCompress::None,
        Op::Flush => FlushCompress::Sync,
        Op::Finish => FlushCompress::Finish,
    };
    let before = deflate.total_in();
    let status = deflate
        .compress_vec(input, out, flush)
        .map_err(io::Error::other)?;
    let consumed = usize::try_from(deflate.total_in() - before).unwrap_or(usize::MAX);
    let done = match op {
        Op::Process => consumed >= input.len(),
        // zlib: a flush is complete when it left output space unused.
        Op::Flush => out.len() < out.capacity(),
        Op::Finish => status == Status::StreamEnd,
    };
    Ok(Step { consumed, done })
}

/// A zstd context at `ZSTD_LEVEL`, its window at most `WINDOW_BITS`. For an input of
/// known length the window and the match tables shrink to fit it, as zstd's own
/// `ZSTD_adjustCParams` would with a pledged size: the tables (512 KiB and 256 KiB at
/// level 3) are most of what a small answer costs. The size itself is not pledged: a body
/// longer than it said would then fail the stream.
fn zstd(length: Option<u64>) -> io::Result<CCtx<'static>> {
    let mut cctx = CCtx::try_create().ok_or_else(|| io::Error::other("zstd: out of memory"))?;
    let bits = window_bits(length, 10, WINDOW_BITS);
    let mut parameters = vec![
        CParameter::CompressionLevel(ZSTD_LEVEL),
        CParameter::WindowLog(bits),
    ];
    if length.is_some() {
        // Level 3's hashLog 17 and chainLog 16, no larger than the window wants.
        parameters.push(CParameter::HashLog((bits + 1).min(17)));
        parameters.push(CParameter::ChainLog(bits.min(16)));
    }
    for parameter in parameters {
        cctx.set_parameter(parameter).map_err(zstd_error)?;
    }
    Ok(cctx)
}

fn zstd_step(cctx: &mut CCtx<'static>, op: Op, input: &[u8], out: &mut Vec<u8>) -> io::Result<Step> {
    let directive = match op {
        Op::Process => ZSTD_EndDirective::ZSTD_e_continue,
        Op::Flush => ZSTD_EndDirective::ZSTD_e_flush,
        Op::Finish => ZSTD_EndDirective::ZSTD_e_end,
    };
    let mut source = InBuffer::around(input);
    let at = out.len();
    let mut sink = OutBuffer::around_pos(out, at);
    // What is left to write out: 0 once a flush or the end is complete.
    let left = cctx
        .compress_stream2(&mut sink, &mut source, directive)
        .map_err(zstd_error)?;
    let consumed = source.pos;
    let done = match op {
        Op::Process => consumed >= input.len(),
        Op::Flush | Op::Finish => left == 0,
    };
    Ok(Step { consumed, done })
}

fn zstd_error(code: zstd_safe::ErrorCode) -> io::Error {
    io::Error::other(format!("zstd: {}", zstd_safe::get_error_name(code)))
}

/// A brotli encoder. Its output is taken from the encoder's own buffer
/// (`take_output`, the C library's `BrotliEncoderTakeOutput`) rather than written into
/// ours, which would have to be zeroed first.
///
/// From quality 4 the encoder merges input blocks into one metablock of up to twice the
/// window (1 MiB here) before writing anything, holding every command found meanwhile:
/// 4.5-6.5 MiB per stream for 1 MiB of input, measured. So a metablock is closed (a flush,
/// a few bytes) after every [`METABLOCK`] bytes of input: 2.5 MiB, for output 0.5 %
/// larger on JSON (32 KiB: 2.1 MiB and 1.1 %).
pub(super) struct Brotli {
    state: Box<BrotliEncoderStateStruct<StandardAlloc>>,
    /// Input taken since the last metablock was closed.
    open: usize,
}

/// The most input one brotli metablock holds: one input block of quality 4 (`lgblock` 16).
const METABLOCK: usize = 64 * 1024;

impl Brotli {
    fn new(bits: u32) -> io::Result<Brotli> {
        let mut state = Box::new(BrotliEncoderStateStruct::new(StandardAlloc::default()));
        let set = state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_QUALITY, BROTLI_QUALITY)
            && state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_LGWIN, bits);
        if !set {
            return Err(io::Error::other("brotli: parameters refused"));
        }
        Ok(Brotli { state, open: 0 })
    }

    fn step(&mut self, op: Op, input: &[u8], out: &mut Vec<u8>) -> io::Result<Step> {
        let mut consumed = 0;
        // Output still held from the last call goes first; the encoder takes no new
        // operation until it is out.
        if !self.state.has_more_output() {
            let (operation, input) = match op {
                Op::Process if self.open >= METABLOCK => {
                    (BrotliEncoderOperation::BROTLI_OPERATION_FLUSH, &[][..])
                }
                Op::Process => {
                    let room = METABLOCK - self.open;
                    let input = &input[..input.len().min(room)];
                    (BrotliEncoderOperation::BROTLI_OPERATION_PROCESS, input)
                }
                Op::Flush => (BrotliEncoderOperation::BROTLI_OPERATION_FLUSH, &[][..]),
                Op::Finish => (BrotliEncoderOperation::BROTLI_OPERATION_FINISH, &[][..]),
            };
            consumed = self.compress(operation, input)?;
            self.open = match operation {
                BrotliEncoderOperation::BROTLI_OPERATION_PROCESS => self.open + consumed,
                _ => 0,
            };
        }
        let state = &mut self.state;
        // At most the spare capacity (a size of 0 would mean "all of it"). The slice
        // returned runs past the output to the end of the encoder's buffer: `size`, set
        // to what was taken, says how much of it is output.
        let mut size = out.capacity() - out.len();
        if size > 0 && state.has_more_output() {
            let taken = state.take_output(&mut size);
            out.extend_from_slice(&taken[..size.min(taken.len())]);
        }
        let done = !state.has_more_output()
            && match op {
                Op::Process => consumed >= input.len(),
                Op::Flush => true,
                Op::Finish => state.is_finished(),
            };
        Ok(Step { consumed, done })
    }

    /// One call of the encoder with `operation` on `input`, its output left in its own
    /// buffer: how much of `input` it took.
    fn compress(&mut self, operation: BrotliEncoderOperation, input: &[u8]) -> io::Result<usize> {
        let mut available_in = input.len();
        let mut consumed = 0;
        let (mut available_out, mut at_out) = (0, 0);
        let ok = self.state.compress_stream(
            operation,
            &mut available_in,
            input,
            &mut consumed,
            &mut available_out,
            &mut [],
            &mut at_out,
            &mut None,
            &mut no_metablock_callback,
        );
        match ok {
            true => Ok(consumed),
            false => Err(io::Error::other("brotli: the encoder failed")),
        }
    }
}

impl Drop for Brotli {
    fn drop(&mut self) {
        BrotliEncoderDestroyInstance(&mut self.state);
    }
}

/// The encoder's hook for each metablock, which tollgate has no use for.
fn no_metablock_callback(
    _: &mut PredictionModeContextMap<InputReferenceMut>,
    _: &mut [StaticCommand],
    _: InputPair,
    _: &mut StandardAlloc,
) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_holds_a_known_length_within_the_bounds() {
        assert_eq!(window_bits(None, 10, 19), 19);
        assert_eq!(window_bits(Some(0), 10, 19), 10);
        assert_eq!(window_bits(Some(1024), 10, 19), 10);
        assert_eq!(window_bits(Some(1025), 10, 19), 11);
        assert_eq!(window_bits(Some(100_000), 9, 15), 15);
        assert_eq!(window_bits(Some(u64::MAX), 10, 19), 19);
    }
}
