//! The three coders behind [`Encoded`](super::Encoded), with one shape: a [`Coder::step`]
//! takes what it can of its input and writes into the spare capacity of an output `Vec`,
//! never past it, so the caller decides how much output is held at once.
//!
//! Parameters are fixed (DESIGN §17 has no level key; the lead's decision 7): gzip level 1
//! (nginx's `gzip_comp_level` default), brotli quality 4 with a 512 KiB window (not the
//! crate's defaults, quality 11 and 4 MiB, tens of MiB per stream), zstd level 3 (its
//! default) with a 512 KiB window (not the 2 MiB level 3 picks for a stream of unknown
//! size). An answer whose length is known gets a smaller window when it fits in one, as
//! nginx shrinks gzip's: the coders' memory grows with the window.
//!
//! Heap per stream, measured with a counting allocator (tests/it/compress_memory.rs, the
//! peak while 1 MiB goes through, coder only):
//! gzip ≈ 262 KiB, brotli ≈ 1.2 MiB, zstd ≈ 1.2 MiB; a 2 KiB answer: gzip ≈ 150 KiB,
//! brotli ≈ 150 KiB, zstd ≈ 150 KiB.

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

/// gzip's level: nginx's `gzip_comp_level` default, and the cheapest.
const GZIP_LEVEL: u32 = 1;
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
            Encoding::Zstd => Coder::Zstd(zstd(window_bits(length, 10, WINDOW_BITS))?),
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

/// A zstd context at `ZSTD_LEVEL` with a window of `bits`.
fn zstd(bits: u32) -> io::Result<CCtx<'static>> {
    let mut cctx = CCtx::try_create().ok_or_else(|| io::Error::other("zstd: out of memory"))?;
    cctx.set_parameter(CParameter::CompressionLevel(ZSTD_LEVEL))
        .map_err(zstd_error)?;
    cctx.set_parameter(CParameter::WindowLog(bits))
        .map_err(zstd_error)?;
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
pub(super) struct Brotli {
    state: Box<BrotliEncoderStateStruct<StandardAlloc>>,
}

impl Brotli {
    fn new(bits: u32) -> io::Result<Brotli> {
        let mut state = Box::new(BrotliEncoderStateStruct::new(StandardAlloc::default()));
        let set = state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_QUALITY, BROTLI_QUALITY)
            && state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_LGWIN, bits);
        if !set {
            return Err(io::Error::other("brotli: parameters refused"));
        }
        Ok(Brotli { state })
    }

    fn step(&mut self, op: Op, input: &[u8], out: &mut Vec<u8>) -> io::Result<Step> {
        let state = &mut self.state;
        let mut consumed = 0;
        // Output still held from the last call goes first; the encoder takes no new
        // operation until it is out.
        if !state.has_more_output() {
            let op = match op {
                Op::Process => BrotliEncoderOperation::BROTLI_OPERATION_PROCESS,
                Op::Flush => BrotliEncoderOperation::BROTLI_OPERATION_FLUSH,
                Op::Finish => BrotliEncoderOperation::BROTLI_OPERATION_FINISH,
            };
            let mut available_in = input.len();
            let (mut available_out, mut at_out) = (0, 0);
            let ok = state.compress_stream(
                op,
                &mut available_in,
                input,
                &mut consumed,
                &mut available_out,
                &mut [],
                &mut at_out,
                &mut None,
                &mut no_metablock_callback,
            );
            if !ok {
                return Err(io::Error::other("brotli: the encoder failed"));
            }
        }
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
