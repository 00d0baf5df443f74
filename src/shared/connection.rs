//! A connection to Redis: one server (kept up by the `redis` crate's connection
//! manager) or a Redis Cluster, and how a Redis error counts as a [`Failure`].

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::RedisResult;

use crate::limit::remote::Failure;

/// One server, or a Redis Cluster.
#[derive(Clone)]
pub(super) enum Target {
    // Boxed: both clients are hundreds of bytes, and one of them sits here unused.
    Single {
        client: Box<redis::Client>,
        /// The client's own bound on a connect or an answer (`Backend`'s longest wait).
        wait: Duration,
    },
    Cluster(Box<ClusterClient>),
}

/// The connection manager's settings for one server: its own bounds at `wait`.
pub(super) fn manager_config(wait: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(wait))
        .set_response_timeout(Some(wait))
}

/// A worker's connection: to one server (reconnected by the connection manager), or to
/// every node of a cluster (each command sent to the node holding its key).
#[derive(Clone)]
pub(super) enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Connection::Single(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Connection::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
        }
    }
}

impl Target {
    /// A connection made on the calling task's runtime: to one server (reconnected by
    /// the connection manager), or to every node of a cluster.
    pub(super) async fn connect(&self) -> RedisResult<Connection> {
        match self {
            Target::Single { client, wait } => {
                let config = manager_config(*wait)
                    .set_max_delay(Duration::from_millis(500))
                    .set_number_of_retries(1);
                ConnectionManager::new_with_config(redis::Client::clone(client), config)
                    .await
                    .map(Connection::Single)
            }
            Target::Cluster(client) => client.get_async_connection().await.map(Connection::Cluster),
        }
    }
}

/// How a Redis error counts ([`Failure`]).
pub(crate) fn failure_of(err: &redis::RedisError) -> Failure {
    if err.is_timeout() {
        Failure::Timeout
    } else if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
        Failure::Connection
    } else {
        Failure::Reply
    }
}
