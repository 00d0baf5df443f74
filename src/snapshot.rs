//! The one place configuration meets run-time objects: [`build`] turns a validated
//! [`Config`] into everything requests need, hung off one [`Snapshot`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;

use crate::access;
use crate::admission::policy::{Policy, ZoneLeases};
use crate::config::{self, Config};
use crate::limit::decision::{self, LimitRule};
use crate::limit::zone::Zone;
use crate::limit::Algorithm;
use crate::log::Logs;
use crate::metrics::cells::{Counter, PerWorker};
use crate::metrics::Metrics;
use crate::proxy::auth::Checks as AuthChecks;
use crate::proxy::files::{Files, OpenFiles};
use crate::proxy::limit_response;
use crate::proxy::response::Filled;
use crate::proxy::rewrite::{Replaces, Rewrite};
use crate::proxy::upstream_urls::UpstreamUrls;
use crate::proxy::tarpit::{Held, Tarpit};
use crate::proxy::timeouts::Timeouts;
use crate::proxy::{ApiKeys, Fixed, HeaderRules, Location, Pipeline, Route, Site, Sites};
use crate::routing::sites::Selector;
use crate::routing::{Pattern, Router};
use crate::shared;
use crate::upstream::Group;

mod auths;
mod groups;
mod redis;
mod texts;
mod tls;
mod zones;

pub(crate) use self::tls::{QuicAdmission, TlsServer};

/// Everything one configuration generation needs at run time.
pub(crate) struct Snapshot {
    pub generation: u64,
    /// SHA-256 of the configuration file in force, hex.
    pub config_sha256: String,
    /// Every zone, in config order: the next generation takes over their state.
    pub zones: Vec<Arc<Zone>>,
    /// Every upstream group, in config order (for `/status`).
    pub upstreams: Vec<Arc<Group>>,
    /// The groups that reach the `auth.request` services.
    pub auth_services: Vec<Arc<Group>>,
    pub pipeline: Pipeline,
    pub conn: ConnSettings,
    /// The listeners that read a PROXY protocol header first, and from whom.
    pub proxy_protocol: config::ProxyProtocol,
    /// What `listen_tls` connections are served with; `None` without `[tls]`.
    pub tls: Option<Arc<TlsServer>>,
    /// `[redis]`, connected per worker; `None` without the section.
    pub redis: Option<Arc<shared::Backend>>,
    /// This instance announced in each Redis zone: held (never read) so that the
    /// announcement lasts while the generation does, and ends when it is dropped.
    pub _announced: Option<shared::Announcement>,
    /// `[admin]` as this generation has it: its token and `protect_reads` take effect on
    /// a reload (its `listen`, on a restart).
    pub admin: Option<config::Admin>,
}

/// What outlives a generation: handed from one snapshot to the next.
pub(crate) struct Lasting<'a> {
    /// The zones in force (empty at start): zones that stay take their state over.
    pub zones: &'a [Arc<Zone>],
    /// Counters, by label.
    pub metrics: &'a Metrics,
    /// TLS session tickets and cache, so clients resume across reloads.
    pub sessions: &'a crate::tls::Sessions,
    /// The Redis backend in force: kept, connections and all, while `[redis]` names the
    /// same server with the same timeout.
    pub redis: Option<&'a Arc<shared::Backend>>,
    /// What ACME serves: managed names' certificates and challenge answers.
    pub acme: &'a Arc<crate::acme::Published>,
    /// The upstream groups in force (empty at start): a group whose gate keys are
    /// unchanged keeps its gate, so both generations count against one limit.
    pub upstreams: &'a [Arc<Group>],
    /// The requests the tarpit holds (`None` at start): the count goes on.
    pub held: Option<&'a Arc<Held>>,
    /// The bound on files answers hold open: one count across generations.
    pub open_files: &'a OpenFiles,
}

/// Per-connection settings, read once when a connection is accepted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnSettings {
    pub client_header_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub send_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_uri_bytes: usize,
    pub max_headers: usize,
    pub http2_max_concurrent_streams: u32,
    pub shutdown_timeout: Duration,
    /// `sendfile`: files go to plain TCP connections without being copied.
    pub sendfile: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot open the access log: {0}")]
    AccessLog(std::io::Error),
    #[error("cannot make client_body_temp_path {}: {source}", path.display())]
    TempPath {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("location {0}: invalid redirect target")]
    Location(usize),
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("Redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    #[error("auth: {0}")]
    Auth(String),
}

/// Builds generation `generation` of the run-time objects. A zone in force whose name,
/// key, algorithm and size are unchanged passes its keys and their state on
/// ([`Zone::succeed`]); any other zone starts empty. Counters come from the lasting
/// metrics by label, so a location, zone or upstream that keeps its name keeps its
/// counts.
pub(crate) fn build(
    config: &Config,
    generation: u64,
    workers: usize,
    lasting: &Lasting<'_>,
) -> Result<Snapshot, BuildError> {
    let metrics = lasting.metrics;
    let groups = groups::build(config, metrics, workers, lasting.upstreams);
    let plans = zones::plan_ids(config);
    let zones = zones::zones(config, &plans, lasting.zones);
    // Before the locations: their Redis zones decide through it.
    let redis = redis::backend(config.redis.as_ref(), lasting.redis, workers)?;
    let leases = redis::leases(&zones);
    let auths = auths::Auths::default();
    let logs = Logs::open(config).map_err(BuildError::AccessLog)?;
    let built = Built {
        groups: &groups,
        zones: &zones,
        redis: redis.as_ref(),
        leases: &leases,
        metrics,
        open_files: lasting.open_files,
        auths: &auths,
        logs: &logs,
        workers,
    };
    let (tls, client_auths) = tls::server(config, lasting)?;
    // Shared: each handshake takes a reference, not a copy of its lists.
    let tls = tls.map(Arc::new);
    let sites = sites(config, &built, client_auths)?;
    make_temp_path(&config.server.client_body_temp_path)?;
    let held = lasting.held.cloned().unwrap_or_default();
    let mut pipeline = pipeline(config, sites, &plans, logs, metrics, held);
    pipeline.open_files = lasting.open_files.clone();
    pipeline.acme = config.acme.as_ref().map(|_| lasting.acme.clone());
    // Last, once nothing can fail: a kept table is the generation in force's too.
    zones::size_bans(config, &zones);
    let announced = redis.as_ref().map(|backend| {
        let shared = zones.iter().filter(|zone| zone.redis.is_some());
        backend
            .fleet()
            .announce(shared.map(|zone| Box::from(&*zone.name)).collect())
    });
    Ok(Snapshot {
        generation,
        config_sha256: config.sha256.clone(),
        zones,
        upstreams: groups,
        auth_services: auths.groups(),
        pipeline,
        conn: conn_settings(&config.server),
        proxy_protocol: config.server.proxy_protocol(),
        tls,
        redis,
        _announced: announced,
        admin: config.admin.clone(),
    })
}

/// What a location is built from, besides its own settings.
struct Built<'a> {
    groups: &'a [Arc<Group>],
    zones: &'a [Arc<Zone>],
    redis: Option<&'a Arc<shared::Backend>>,
    leases: &'a ZoneLeases,
    metrics: &'a Metrics,
    open_files: &'a OpenFiles,
    /// The runtime `auth` of each `auth` as written, shared by the locations inheriting it.
    auths: &'a auths::Auths,
    /// Every access log, by what the file writes.
    logs: &'a Logs,
    workers: usize,
}

/// Every site, ready to serve, and how to pick one per address.
fn sites(config: &Config, built: &Built<'_>, client_auths: Vec<Option<Arc<crate::tls::ClientAuth>>>) -> Result<Sites, BuildError> {
    let mut index = 0;
    let mut sites = Vec::with_capacity(config.sites.len());
    for (site, client_auth) in config.sites.iter().zip(client_auths) {
        let server_name: Arc<str> = Arc::from(site.server_name.as_str());
        let mut locations = Vec::with_capacity(site.locations.len());
        for l in &site.locations {
            let label = match &site.label {
                Some(site) => format!("{site} {}", l.pattern),
                None => l.pattern.to_string(),
            };
            let named = Named {
                label: &label,
                site: site.label.as_deref().unwrap_or(crate::metrics::NO_SITE),
                server_name: &server_name,
            };
            locations.push(location(config, index, l, named, built)?);
            index += 1;
        }
        let patterns = site.locations.iter().map(|l| l.pattern.clone()).collect();
        let proxies = |i: usize| {
            let action = site.locations.get(i).map(|l| &l.action);
            matches!(action, Some(config::Action::Proxy { .. }))
        };
        sites.push(Site {
            router: Router::new(patterns).redirect_slashless(proxies),
            locations,
            headers: HeaderRules::new(&site.headers),
            server_name,
            error_pages: site.error_pages.clone(),
            client_auth,
            log: built.logs.of(&config.log.with(site.log.as_ref())),
        });
    }
    let one_everywhere = config.sites.len() == 1 && config.sites[0].listen.is_none();
    let addresses = if one_everywhere {
        Vec::new()
    } else {
        let addresses = config.server.addresses();
        addresses
            .map(|a| (a, selector(config, |site| site.listens_on(a))))
            .collect()
    };
    Ok(Sites { sites, addresses })
}

/// The selector over the sites `here` accepts, by their index in the file.
fn selector(config: &Config, here: impl Fn(&config::Site) -> bool) -> Selector {
    let sites = config.sites.iter().enumerate().filter(|(_, s)| here(s));
    let default = sites.clone().find(|(_, s)| s.default).map(|(i, _)| i);
    Selector::new(sites.map(|(i, s)| (i, s.names.as_slice())), default)
}

/// What a location is called: the label of its counters, and its site's first name.
struct Named<'a> {
    label: &'a str,
    /// The `site` label of its metrics (the site's label, `-` for none).
    site: &'a str,
    server_name: &'a Arc<str>,
}

/// Location `index` of the file (counting through every site), ready to serve: its
/// route, limit policy, access rules and counters.
fn location(
    config: &Config,
    index: usize,
    location: &config::Location,
    named: Named<'_>,
    built: &Built<'_>,
) -> Result<Location, BuildError> {
    let (groups, zones, metrics) = (built.groups, built.zones, built.metrics);
    let label = named.label;
    let route = route(&location.action, index, groups, built.open_files)?;
    let rules = limit_rules(location, zones);
    let limit_status = location.limit_status.unwrap_or(config.server.limit_status);
    let upstream = match location.action {
        config::Action::Proxy { upstream }
        | config::Action::Files {
            upstream: Some(upstream),
            ..
        } => config.upstreams.get(upstream),
        config::Action::Return(_) | config::Action::Files { upstream: None, .. } => None,
    };
    let upstream_urls = UpstreamUrls::new(location, upstream);
    let (check_first, claims_read) = texts::claims(location, &rules, upstream_urls.per_request());
    let headers = HeaderRules::new(&location.headers);
    let timeouts = Timeouts::resolve(&config.server, &location.timeouts, &route);
    Ok(Location {
        route,
        prewritten: limit_response::Prewritten::new(
            &rules,
            limit_status,
            config.server.ratelimit_headers,
            &headers.own_lines(limit_status),
        ),
        limits: Policy::new(rules, location.cost, built.redis, built.leases),
        cost_from: location.cost_from.clone(),
        zone_stats: location
            .limits
            .iter()
            .map(|l| metrics.zone(&config.zones[l.zone].name))
            .collect(),
        stats: metrics.site_location(named.site, &location.pattern.to_string(), label),
        denied: denied_counters(&location.access, label, metrics),
        access: access::Rules::new(location.access.clone()),
        limit_status,
        limit_action: location
            .limit_action
            .unwrap_or(config.server.limit_action),
        headers,
        forwarded: location.forwarded,
        captures: texts::captures(location, upstream_urls.location_captures()),
        rewrite: rewrite(location),
        needs_vars: texts::texts(location).any(|text| text.as_literal().is_none())
            || upstream_urls.per_request(),
        client_max_body_size: location
            .client_max_body_size
            .unwrap_or(config.server.client_max_body_size),
        request_buffering: location
            .request_buffering
            .unwrap_or(config.server.request_buffering),
        server_name: Arc::clone(named.server_name),
        names: log_names(&named, location),
        upstream_urls,
        timeouts,
        error_pages: location.error_pages.clone(),
        intercept_errors: location.intercept_errors,
        expires: location.expires,
        compress: location.compress.clone(),
        auth: (location.auth.as_ref())
            .map(|check| built.auths.of(check, built.metrics, built.workers))
            .transpose()
            .map_err(BuildError::Auth)?,
        satisfy: location.satisfy,
        log: built.logs.of(&config.log.with(location.log.as_ref())),
        claims_read,
        check_first,
    })
}

/// `$site` and `$location` of a location's log lines: its site's label, else the site's
/// first name, and its match.
fn log_names(named: &Named<'_>, location: &config::Location) -> (Arc<str>, Arc<str>) {
    let site = match named.site {
        crate::metrics::NO_SITE => Arc::clone(named.server_name),
        site => Arc::from(site),
    };
    (site, Arc::from(location.pattern.to_string()))
}

/// The location's `limit` list, each item with its zone.
fn limit_rules(location: &config::Location, zones: &[Arc<Zone>]) -> Vec<LimitRule> {
    let rule = |l: &config::Limit| {
        let zone = Arc::clone(&zones[l.zone]);
        // A `concurrency` zone gives its count back when the answer ends anyway.
        let settles = (l.count.is_some() || location.cost_from.is_some())
            && zone.algorithm != Algorithm::Concurrency;
        LimitRule {
            zone,
            burst: l.burst,
            delay: decision::delay_of(l.delay),
            dry_run: l.dry_run,
            count: l.count,
            settles,
            ban: l.ban,
            elastic: l.elastic,
            soft: l.soft,
        }
    };
    location.limits.iter().map(rule).collect()
}

/// What location `index` does with a request: forward it to a group, or answer itself.
fn route(
    action: &config::Action,
    index: usize,
    groups: &[Arc<Group>],
    open_files: &OpenFiles,
) -> Result<Route, BuildError> {
    Ok(match action {
        config::Action::Proxy { upstream } => Route::Proxy(groups[*upstream].clone()),
        config::Action::Files { files, upstream } => Route::Files {
            files: Files::new(files, open_files.clone()),
            upstream: upstream.map(|upstream| groups[upstream].clone()),
        },
        config::Action::Return(ret) => Route::Return(Fixed {
            status: ret.status.clone(),
            body: match ret.body.as_literal() {
                Some(body) => Filled::Once(Bytes::from(body.to_owned())),
                None => Filled::PerRequest(ret.body.clone()),
            },
            location: match &ret.location {
                Some(target) => Some(match target.as_literal() {
                    Some(target) => Filled::Once(
                        HeaderValue::from_str(target).map_err(|_| BuildError::Location(index))?,
                    ),
                    None => Filled::PerRequest(target.clone()),
                }),
                None => None,
            },
        }),
    })
}

/// `upstream_path`: a prefix location's prefix is replaced, any other location's whole path.
fn rewrite(location: &config::Location) -> Option<Rewrite> {
    let replaces = match &location.pattern {
        Pattern::Prefix(prefix) | Pattern::PriorityPrefix(prefix) => Replaces::Prefix(prefix.len()),
        Pattern::Exact(_) | Pattern::Regex { .. } => Replaces::Whole,
    };
    let to = location.upstream_path.clone()?;
    Some(Rewrite::new(to, replaces))
}

/// One counter per `deny` rule of a location (`None` for `allow` rules), in rule order.
fn denied_counters(
    rules: &[config::AccessRule],
    label: &str,
    metrics: &Metrics,
) -> Vec<Option<Arc<PerWorker<Counter>>>> {
    rules
        .iter()
        .map(|r| {
            let net = r
                .net
                .map_or_else(|| "all".to_owned(), |net| net.to_string());
            (!r.allow).then(|| metrics.denied(&format!("location {label}: deny {net}")))
        })
        .collect()
}

/// The request pipeline: the router over every location's pattern, the locations
/// themselves, and what applies before routing (real IP, `[access]`, API keys).
fn pipeline(
    config: &Config,
    sites: Sites,
    plans: &[&str],
    logs: Logs,
    metrics: &Metrics,
    held: Arc<Held>,
) -> Pipeline {
    let server = &config.server;
    Pipeline {
        sites,
        real_ip: config.real_ip.clone(),
        deny: config.access.deny.clone(),
        denied: metrics.denied("[access] deny"),
        unrouted: metrics.location(UNROUTED),
        exempt: config.access.exempt.clone(),
        api_keys: config.api_keys.as_ref().map(|keys| api_keys(keys, plans)),
        ratelimit_headers: server.ratelimit_headers,
        server_header: server.server_header.clone(),
        client_body_buffer_size: server.client_body_buffer_size,
        client_body_temp_path: server.client_body_temp_path.clone(),
        underscores_in_headers: server.underscores_in_headers,
        logs,
        acme: None,
        open_files: OpenFiles::default(),
        auth_checks: AuthChecks::new(std::thread::available_parallelism().map_or(1, usize::from)),
        explain: (config.admin.as_ref())
            .filter(|admin| admin.explain)
            .and_then(|admin| admin.token.clone()),
        tracer: (config.trace.as_ref())
            .map(|trace| Arc::new(crate::trace::Tracer::start(trace, Arc::clone(metrics.trace())))),
        tarpit: Tarpit {
            hold: server.tarpit.hold,
            max: server.tarpit.max,
            held,
        },
    }
}

/// Makes `client_body_temp_path` if it is missing (owner only, as nginx makes its
/// temporary directories): at start, and on a reload that names another. The files
/// in it have no name, so there is nothing to clear out of it.
fn make_temp_path(path: &std::path::Path) -> Result<(), BuildError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|source| BuildError::TempPath {
            path: path.to_path_buf(),
            source,
        })
}

/// `[api_keys]` with each plan named by its id in `plans`; a key whose plan no zone
/// defines is dropped.
fn api_keys(keys: &config::ApiKeys, plans: &[&str]) -> ApiKeys {
    ApiKeys {
        header: keys.header.clone(),
        plans: keys
            .keys
            .iter()
            .filter_map(|(key, plan)| {
                let id = plans.binary_search(&plan.as_str()).ok()?;
                Some((Box::from(key.as_bytes()), id))
            })
            .collect::<HashMap<_, _>>(),
        priorities: plans
            .iter()
            .map(|plan| keys.priority.get(*plan).copied().unwrap_or(0))
            .collect(),
    }
}

fn conn_settings(server: &config::Server) -> ConnSettings {
    ConnSettings {
        client_header_timeout: server.client_header_timeout,
        keepalive_timeout: server.keepalive_timeout,
        send_timeout: server.send_timeout,
        max_header_bytes: server.max_header_bytes,
        max_uri_bytes: server.max_uri_bytes,
        max_headers: server.max_headers,
        http2_max_concurrent_streams: server.http2_max_concurrent_streams,
        shutdown_timeout: server.shutdown_timeout,
        sendfile: server.sendfile,
    }
}

/// The `location` label of requests no location matched (and of those denied before
/// routing).
const UNROUTED: &str = "-";
