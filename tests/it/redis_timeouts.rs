//! How long a Redis zone's request waits for Redis when Redis does not answer: the whole
//! `[redis] timeout`, however long (the Redis client's own shorter bounds do not end it
//! early), and, against a server that takes connections but never answers, one request
//! per reconnect pause waits, not every one; and once Redis refuses connections, the
//! requests between two reconnect attempts are answered at once.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::redis::{self as server, Redis};
use support::*;

/// `redis_zones`' config (zone `shared` at 1r/m, `on_error = "allow"`: a request that
/// Redis fails is a 200) on one worker, so that every request shares one connection's
/// pauses, with Redis at `url` and `timeout`.
fn config(url: &str, timeout: &str) -> String {
    crate::redis_zones::config(url, "allow", "1r/m", 0)
        .replace("workers = 2", "workers = 1")
        .replace("timeout = \"1s\"", &format!("timeout = \"{timeout}\""))
}

/// A request from `client`, its status, and how long it took.
async fn timed(addr: SocketAddr, client: &str) -> (u16, Duration) {
    let started = Instant::now();
    let status = get_as(addr, "/", client).await.status.as_u16();
    (status, started.elapsed())
}

#[tokio::test]
async fn a_timeout_longer_than_the_redis_clients_own_is_waited_in_full() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let gw = gateway(&config(&redis.url(), "2s"));
    let addr = addr(&gw);
    assert_eq!(timed(addr, "192.0.2.9").await.0, 200);
    redis.pause();
    let (status, took) = timed(addr, "192.0.2.10").await;
    assert_eq!(status, 200, "on_error = \"allow\"");
    // The client library's own bound (500 ms a try, by default) does not end it early.
    assert!(took >= Duration::from_secs(2), "answered in {took:?}");
    redis.resume();
}

#[tokio::test]
async fn a_server_that_never_answers_costs_one_request_per_pause_its_timeout() {
    let _shared = support::shared();
    // Never accepted: the kernel completes each connection, and nothing ever answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", silent.local_addr().unwrap());
    let timeout = Duration::from_secs(1);
    let gw = gateway(&config(&url, "1s"));
    let addr = addr(&gw);
    let started = Instant::now();
    let (mut waited, mut at_once) = (0, 0);
    for i in 0.. {
        if started.elapsed() > timeout * 3 {
            break;
        }
        let (status, took) = timed(addr, &format!("192.0.2.{}", i % 200)).await;
        assert_eq!(status, 200, "on_error = \"allow\"");
        assert!(took < timeout * 2, "answered in {took:?}");
        if took >= timeout {
            waited += 1;
        } else if took < timeout / 2 {
            at_once += 1;
        }
    }
    // The attempt cut short by the timeout pauses the worker's next attempt for a moment
    // from the timeout's end: the requests meanwhile follow `on_error` at once.
    assert!(waited >= 1, "no request waited for the timeout");
    assert!(at_once >= 1, "every request waited ({waited} of them)");
}

/// Redis gone (its port refuses connections) after the worker had connected: the call
/// that finds the connection lost trips the worker's breaker, and the requests until the
/// next probe follow `on_error` at once. (Before, each request waited for the Redis
/// client's own reconnect attempt: 150 ms apiece here, up to `timeout` where a connect
/// hangs.)
#[tokio::test]
async fn a_redis_that_refuses_connections_is_answered_for_at_once() {
    let _shared = support::shared();
    if !server::available() {
        return;
    }
    let redis = Redis::start();
    let gw = gateway(&config(&redis.url(), "2s"));
    let addr = addr(&gw);
    assert_eq!(timed(addr, "192.0.2.9").await.0, 200);
    drop(redis);
    let mut took = Vec::new();
    for i in 0..20 {
        let (status, t) = timed(addr, &format!("192.0.2.{}", 20 + i)).await;
        assert_eq!(status, 200, "on_error = \"allow\"");
        took.push(t);
    }
    let quick = took
        .iter()
        .filter(|t| **t < Duration::from_millis(50))
        .count();
    assert!(quick >= 15, "too few answered at once: {took:?}");
}
