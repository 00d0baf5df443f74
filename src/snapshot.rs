//! The one place configuration meets run-time objects: [`build`] turns a validated
//! [`Config`] into everything requests need, hung off one [`Snapshot`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;

use crate::config::{self, Config};
use crate::log::AccessLog;
use crate::proxy::{Fixed, Pipeline, RealIp, Route};
use crate::routing::{self, Router};
use crate::upstream::balance::Policy;
use crate::upstream::{Group, GroupSpec};

/// Everything one configuration generation needs at run time.
pub struct Snapshot {
    pub generation: u64,
    pub pipeline: Pipeline,
    pub conn: ConnSettings,
}

/// Per-connection settings, read once when a connection is accepted.
#[derive(Clone, Copy, Debug)]
pub struct ConnSettings {
    pub client_header_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub max_header_bytes: usize,
    pub shutdown_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot open the access log: {0}")]
    AccessLog(std::io::Error),
    #[error("location {0}: invalid redirect target")]
    Location(usize),
}

pub fn build(config: &Config, generation: u64, workers: usize) -> Result<Snapshot, BuildError> {
    let groups: Vec<Arc<Group>> = config
        .upstreams
        .iter()
        .map(|u| Arc::new(Group::new(group_spec(u), workers)))
        .collect();
    let mut patterns = Vec::with_capacity(config.locations.len());
    let mut routes = Vec::with_capacity(config.locations.len());
    for (index, location) in config.locations.iter().enumerate() {
        patterns.push(pattern(&location.pattern));
        routes.push(match &location.action {
            config::Action::Proxy { upstream } => Route::Proxy(groups[*upstream].clone()),
            config::Action::Return(ret) => Route::Return(Fixed {
                status: ret.status,
                body: Bytes::from(ret.body.clone()),
                location: match &ret.location {
                    Some(target) => Some(
                        HeaderValue::from_str(target).map_err(|_| BuildError::Location(index))?,
                    ),
                    None => None,
                },
            }),
        });
    }
    let real_ip = config.real_ip.as_ref().map(|r| RealIp {
        trusted: r.trusted.clone(),
        header: r.header.clone(),
        recursive: r.recursive,
    });
    let access_log = AccessLog::open(&config.log).map_err(BuildError::AccessLog)?;
    let server = &config.server;
    Ok(Snapshot {
        generation,
        pipeline: Pipeline {
            router: Router::new(patterns),
            locations: routes,
            real_ip,
            client_body_timeout: server.client_body_timeout,
            access_log,
        },
        conn: ConnSettings {
            client_header_timeout: server.client_header_timeout,
            keepalive_timeout: server.keepalive_timeout,
            max_header_bytes: server.max_header_bytes,
            shutdown_timeout: server.shutdown_timeout,
        },
    })
}

fn group_spec(u: &config::Upstream) -> GroupSpec {
    GroupSpec {
        name: u.name.clone(),
        servers: u.servers.iter().map(|s| (s.addr, s.weight)).collect(),
        policy: match u.balance {
            config::Balance::RoundRobin => Policy::RoundRobin,
            config::Balance::LeastConn => Policy::LeastConn,
            config::Balance::IpHash => Policy::IpHash,
        },
        connect_timeout: u.connect_timeout,
        read_timeout: u.read_timeout,
        keepalive: u.keepalive,
        max_fails: u.max_fails,
        fail_timeout: u.fail_timeout,
    }
}

fn pattern(p: &config::Pattern) -> routing::Pattern {
    match p {
        config::Pattern::Exact(path) => routing::Pattern::Exact(path.clone()),
        config::Pattern::PriorityPrefix(path) => routing::Pattern::PriorityPrefix(path.clone()),
        config::Pattern::Prefix(path) => routing::Pattern::Prefix(path.clone()),
        config::Pattern::Regex { regex, .. } => routing::Pattern::Regex(regex.clone()),
    }
}
