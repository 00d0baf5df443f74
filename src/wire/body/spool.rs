//! A request body read whole before an upstream server is chosen (`request_buffering =
//! "on"`, nginx's `proxy_request_buffering`): what goes past `client_body_buffer_size` in
//! memory is written on to a file in `client_body_temp_path`, then sent from there with
//! its length.
//!
//! The file has no name from the start (`O_TMPFILE`, or made and unlinked at once where
//! the file system lacks it: `tempfile::tempfile_in`), so it goes with the last handle
//! to it, whichever way the request ends (answered, failed, its client gone, the
//! gateway reloaded or killed) and nothing is ever left in the directory. Its size is
//! bounded by `client_max_body_size`, which the body read from the client
//! ([`Timed`]) holds it to.
//!
//! The file is written and read on tokio's blocking threads, never on the worker's
//! own: a slow disk delays that one request, not the worker's other connections
//! (nginx writes its temporary files from its event loop unless `aio threads` is set).

use std::fs::File;
use std::future::{poll_fn, Future};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::task::JoinHandle;

use super::{BodyError, Progress, Streamed, Timed};

/// The most read back from the file for one frame sent upstream.
const READ_CHUNK: u64 = 64 * 1024;
/// The fewest bytes gathered for one write to the file (a client's frames come in
/// pieces of 8–16 KiB).
const MIN_WRITE: usize = 16 * 1024;

/// A whole request body in a file with no name, and its length.
#[derive(Clone)]
pub(super) struct Spool {
    file: Arc<File>,
    len: u64,
    /// The body's upload, as a streamed body's: each chunk read back counts as a frame
    /// sent, so that `read_timeout` waits for the upstream's head from the last one.
    progress: Option<Arc<Progress>>,
}

impl Spool {
    /// Writes what `read_ahead` read of a body to a new file in `dir`, then the rest of
    /// the body as it comes from the client, gathered into writes of at least
    /// `batch` bytes (`client_body_buffer_size`). The client's errors (timeout, too
    /// large, gone) end it as they would a streamed body; the file's are
    /// [`BodyError::Spool`].
    pub(super) async fn write(streamed: Streamed, dir: PathBuf, batch: usize) -> Result<Spool, BodyError> {
        let Streamed { read, mut rest } = streamed;
        let progress = rest.progress.clone();
        let first = read.unwrap_or_default();
        let len = first.len() as u64;
        let file = blocking(move || {
            let file = tempfile::tempfile_in(&dir)?;
            file.write_all_at(&first, 0)?;
            Ok(file)
        })
        .await?;
        let mut spool = Spool {
            file: Arc::new(file),
            len,
            progress,
        };
        let batch = batch.max(MIN_WRITE);
        let mut pending = BytesMut::new();
        loop {
            let ended = next_data(&mut rest, &mut pending).await?;
            if pending.len() >= batch || (ended && !pending.is_empty()) {
                spool.append(pending.split().freeze()).await?;
            }
            if ended {
                return Ok(spool);
            }
        }
    }

    /// Writes `bytes` at the end of the file.
    async fn append(&mut self, bytes: Bytes) -> Result<(), BodyError> {
        let (file, at) = (self.file.clone(), self.len);
        self.len += bytes.len() as u64;
        blocking(move || file.write_all_at(&bytes, at)).await
    }

    /// The body, to be sent from its first byte (reads are positioned, so readers of
    /// one file do not disturb each other).
    pub(super) fn reader(&self) -> Unspool {
        Unspool {
            spool: self.clone(),
            sent: 0,
            reading: None,
        }
    }
}

/// Adds the client's next data frame to `pending`; `true` once the body has ended.
/// Trailers are dropped, as `read_ahead` drops them.
async fn next_data(rest: &mut Timed, pending: &mut BytesMut) -> Result<bool, BodyError> {
    match poll_fn(|cx| Pin::new(&mut *rest).poll_frame(cx)).await {
        Some(Ok(frame)) => {
            if let Ok(data) = frame.into_data() {
                pending.extend_from_slice(&data);
            }
            Ok(rest.is_end_stream())
        }
        Some(Err(err)) => Err(err),
        None => Ok(true),
    }
}

/// Runs `work` on a blocking thread; its I/O error is the spool's.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, BodyError> {
    joined(tokio::task::spawn_blocking(work).await)
}

fn joined<T>(result: Result<io::Result<T>, tokio::task::JoinError>) -> Result<T, BodyError> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(BodyError::Spool(err)),
        Err(err) => Err(BodyError::Spool(io::Error::other(err))),
    }
}

/// A [`Spool`] on its way upstream: frames of at most [`READ_CHUNK`] bytes, each read
/// when the upload asks for it.
pub(crate) struct Unspool {
    spool: Spool,
    /// Bytes handed out so far.
    sent: u64,
    /// The read under way on a blocking thread.
    reading: Option<JoinHandle<io::Result<Bytes>>>,
}

impl Unspool {
    /// The same body from its first byte again, for another try.
    pub(crate) fn again(&self) -> Unspool {
        self.spool.reader()
    }
}

impl Body for Unspool {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.reading.is_none() {
            let left = this.spool.len.saturating_sub(this.sent);
            if left == 0 {
                return Poll::Ready(None);
            }
            let (file, at) = (this.spool.file.clone(), this.sent);
            let want = usize::try_from(left.min(READ_CHUNK)).unwrap_or(usize::MAX);
            this.reading = Some(tokio::task::spawn_blocking(move || {
                let mut chunk = vec![0; want];
                file.read_exact_at(&mut chunk, at)?;
                Ok(Bytes::from(chunk))
            }));
        }
        let Some(reading) = &mut this.reading else {
            return Poll::Ready(None);
        };
        let read = ready!(Pin::new(reading).poll(cx));
        this.reading = None;
        if let Some(progress) = &this.spool.progress {
            progress.record(false);
        }
        Poll::Ready(Some(joined(read).map(|chunk| {
            this.sent += chunk.len() as u64;
            Frame::data(chunk)
        })))
    }

    fn is_end_stream(&self) -> bool {
        self.sent >= self.spool.len && self.reading.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.spool.len.saturating_sub(self.sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MaxBodySize;
    use crate::wire::body::client::feed;
    use crate::wire::body::{BodyLimits, ClientBody};
    use std::time::Duration;

    fn timed(body: ClientBody) -> Timed {
        let limits = BodyLimits {
            timeout: Duration::from_secs(5),
            min_rate: 0,
        };
        Timed::new(body, limits, MaxBodySize::Unlimited)
    }

    async fn collect(mut body: Unspool) -> (Vec<u8>, usize) {
        let (mut all, mut frames) = (Vec::new(), 0);
        while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            all.extend_from_slice(&frame.unwrap().into_data().unwrap());
            frames += 1;
        }
        assert!(body.is_end_stream());
        (all, frames)
    }

    #[tokio::test]
    async fn a_body_goes_through_the_file_whole_and_can_be_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let (feed, fed) = feed(None);
        let rest = timed(ClientBody::Http1(fed));
        let streamed = Streamed {
            read: Some(Bytes::from(vec![b'a'; 1000])),
            rest,
        };
        let writing = tokio::spawn(Spool::write(streamed, dir.path().to_path_buf(), 0));
        for piece in [b'b', b'c', b'd'] {
            while !feed.wanted() {
                tokio::task::yield_now().await;
            }
            feed.push(Bytes::from(vec![piece; 50_000]));
        }
        while !feed.wanted() {
            tokio::task::yield_now().await;
        }
        feed.finish(Ok(()));
        let spool = writing.await.unwrap().unwrap();
        let reader = spool.reader();
        assert_eq!(reader.size_hint().exact(), Some(151_000));
        let (first, frames) = collect(reader).await;
        assert_eq!(first.len(), 151_000);
        assert_eq!(frames, 3, "64 KiB a frame");
        assert!(first[..1000].iter().all(|&b| b == b'a'));
        assert!(first[1000..51_000].iter().all(|&b| b == b'b'));
        assert!(first[101_000..].iter().all(|&b| b == b'd'));
        assert_eq!(
            collect(spool.reader()).await.0,
            first,
            "a second try reads it all"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "the file has a name: {left:?}");
    }

    #[tokio::test]
    async fn a_body_that_breaks_off_ends_the_spool_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let (feed, fed) = feed(None);
        let streamed = Streamed {
            read: Some(Bytes::from_static(b"abc")),
            rest: timed(ClientBody::Http1(fed)),
        };
        feed.finish(Err(crate::wire::body::ClientBodyError::Closed));
        let spooled = Spool::write(streamed, dir.path().to_path_buf(), 0).await;
        assert!(matches!(spooled, Err(BodyError::Stream(_))));
    }

    #[tokio::test]
    async fn a_directory_that_cannot_take_the_file_is_the_spools_error() {
        let dir = tempfile::tempdir().unwrap();
        let (_feed, fed) = feed(None);
        let streamed = Streamed {
            read: None,
            rest: timed(ClientBody::Http1(fed)),
        };
        let missing = dir.path().join("missing");
        let spooled = Spool::write(streamed, missing, 0).await;
        assert!(matches!(spooled, Err(BodyError::Spool(_))));
    }
}
