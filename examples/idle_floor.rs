//! The least memory a tokio server can hold per idle keep-alive connection: what tollgate's
//! per-connection bytes are measured against (issue 34). One thread (a current-thread
//! runtime, as a tollgate worker); each connection is one task holding its `TcpStream` and
//! one timer (its keep-alive timeout), no buffer while it waits: a request is read on the
//! stack once the socket is readable and answered with a fixed `200` (`Content-Length: 2`).
//!
//! ```text
//! cargo run --release --example idle_floor -- 127.0.0.1:8080
//! ```
//!
//! Not a server anyone should run: a request is whatever one read brings, and it must end
//! its head with that read; there is no parsing, no body, no log. What remains per
//! connection is the task (its header and this future), the socket's registration with
//! the I/O driver, and the timer's entry, besides the kernel's own socket memory (not in
//! the process's PSS).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const KEEPALIVE: Duration = Duration::from_secs(300);

fn main() {
    let Some(listen) = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse::<SocketAddr>().ok())
    else {
        eprintln!("usage: idle_floor LISTEN_IP:PORT");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let listener = TcpListener::bind(listen).await.expect("bound");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve(stream));
        }
    });
}

/// Answers each request until the client closes or stays quiet for [`KEEPALIVE`].
async fn serve(mut stream: TcpStream) {
    let idle = tokio::time::sleep(KEEPALIVE);
    tokio::pin!(idle);
    loop {
        tokio::select! {
            ready = stream.readable() => {
                if ready.is_err() {
                    return;
                }
            }
            () = &mut idle => return,
        }
        // On the stack, and out of scope before the next await: not in the task.
        let read = {
            let mut head = [0u8; 4096];
            stream.try_read(&mut head)
        };
        match read {
            Ok(0) => return,
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        }
        if stream.write_all(ANSWER).await.is_err() {
            return;
        }
        idle.as_mut().reset(tokio::time::Instant::now() + KEEPALIVE);
    }
}
