//! Upgraded connections (WebSocket): after a 101, bytes flow both ways untouched until
//! either side closes or nothing moves for the upstream's `read_timeout` (as nginx's
//! `proxy_read_timeout` ends an idle WebSocket).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::time::{sleep, Instant};

use crate::upstream::h1::Upgraded;

const BUF: usize = 16 * 1024;

/// A client connection as a tunnel takes it over: its bytes after the 101, including any
/// the client sent early.
pub(crate) trait ClientIo: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> ClientIo for T {}

/// The client's side of an upgrade, in the request's extensions of an HTTP/1.1 request
/// that asks for one: its connection arrives once the 101 has been written to it. (Clone,
/// as extensions must be; only one clone receives it.)
#[derive(Clone)]
pub(crate) struct ClientUpgrade(Arc<Mutex<Option<Arriving>>>);

/// Where the client's connection arrives.
type Arriving = oneshot::Receiver<Box<dyn ClientIo>>;

/// The connection's side: hands the client connection over after the 101.
pub(crate) struct Handover(oneshot::Sender<Box<dyn ClientIo>>);

impl Handover {
    pub(crate) fn new() -> (Handover, ClientUpgrade) {
        let (tx, rx) = oneshot::channel();
        (Handover(tx), ClientUpgrade(Arc::new(Mutex::new(Some(rx)))))
    }

    pub(crate) fn hand_over(self, io: Box<dyn ClientIo>) {
        // The tunnel may be gone already (the upstream side failed): the client's
        // connection then simply closes.
        let _ = self.0.send(io);
    }
}

pub(crate) async fn run(client: ClientUpgrade, upstream: Upgraded, idle: Duration) {
    let receiver = client.0.lock().ok().and_then(|mut rx| rx.take());
    let client = match receiver {
        Some(receiver) => receiver.await,
        None => return,
    };
    let client = match client {
        Ok(client) => client,
        Err(_) => {
            tracing::debug!("client side of the upgrade did not complete");
            return;
        }
    };
    if let Err(err) = pump(client, upstream, idle).await {
        tracing::debug!(error = %err, "tunnel closed");
    }
}

/// Copies both ways. An EOF on one side is passed on as a write shutdown to the
/// other, and the other direction keeps flowing until it ends too.
async fn pump<A, B>(a: A, b: B, idle: Duration) -> std::io::Result<()>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    let mut a_buf = vec![0u8; BUF];
    let mut b_buf = vec![0u8; BUF];
    let (mut a_open, mut b_open) = (true, true);
    let timer = sleep(idle);
    tokio::pin!(timer);
    while a_open || b_open {
        tokio::select! {
            n = a_read.read(&mut a_buf), if a_open => {
                let n = n?;
                if n == 0 {
                    a_open = false;
                    b_write.shutdown().await?;
                } else {
                    b_write.write_all(&a_buf[..n]).await?;
                    // A TLS upstream may hold written bytes until flushed.
                    b_write.flush().await?;
                }
            }
            n = b_read.read(&mut b_buf), if b_open => {
                let n = n?;
                if n == 0 {
                    b_open = false;
                    a_write.shutdown().await?;
                } else {
                    a_write.write_all(&b_buf[..n]).await?;
                    a_write.flush().await?;
                }
            }
            () = &mut timer => return Ok(()),
        }
        timer.as_mut().reset(Instant::now() + idle);
    }
    Ok(())
}
