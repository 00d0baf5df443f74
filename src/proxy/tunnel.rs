//! Upgraded connections (WebSocket): after a 101, bytes flow both ways untouched until
//! either side closes or nothing moves for the upstream's `read_timeout` (as nginx's
//! `proxy_read_timeout` ends an idle WebSocket).

use std::time::Duration;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{sleep, Instant};

use crate::upstream::h1::Upgraded;

const BUF: usize = 16 * 1024;

pub async fn run(client: OnUpgrade, upstream: Upgraded, idle: Duration) {
    let client = match client.await {
        Ok(client) => client,
        Err(err) => {
            tracing::debug!(error = %err, "client side of the upgrade did not complete");
            return;
        }
    };
    if let Err(err) = pump(TokioIo::new(client), upstream, idle).await {
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
