//! Whole files through `from_str`: typed values, defaults, and every problem with its
//! exact `line:col`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

const ORIGIN: &str = "/etc/tollgate/gateway.toml";

/// Enough for a valid file; the lines below it start at line 3.
const SERVER: &str = "[server]\nlisten = [\"8080\"]\n";

/// The config of `text`, which must load; it must also load the same once written
/// (`write::same_once_written`), so every file these tests accept is a round-trip case.
fn parse(text: &str) -> Config {
    let config = from_str(text, Path::new(ORIGIN)).unwrap_or_else(|errors| panic!("{errors}"));
    write::same_once_written(text, Path::new(ORIGIN), &config);
    config
}

/// `from_str` at `origin`; a file that loads must also load the same once written.
fn load_at(text: &str, origin: &Path) -> Result<Config, ConfigErrors> {
    from_str(text, origin).inspect(|config| write::same_once_written(text, origin, config))
}

fn errors(text: &str) -> Vec<(usize, usize, String)> {
    let Err(errors) = from_str(text, Path::new(ORIGIN)) else {
        panic!("accepted:\n{text}");
    };
    assert_eq!(errors.origin, Path::new(ORIGIN));
    errors
        .errors
        .into_iter()
        .map(|e| (e.line, e.col, e.message))
        .collect()
}

/// The single problem of `SERVER` + `rest`.
fn error(rest: &str) -> (usize, usize, String) {
    let mut found = errors(&format!("{SERVER}{rest}"));
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0)
}

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// The addresses of a `listen` list.
fn addrs(listeners: &[Listener]) -> Vec<SocketAddr> {
    listeners.iter().map(|l| l.addr).collect()
}

const EXAMPLE: &str = r#"
[server]
listen = ["127.0.0.1:8080"]
client_header_timeout = "10s"
client_body_timeout = "60s"
keepalive_timeout = "75s"
max_header_bytes = "16k"
shutdown_timeout = "30s"

[real_ip]
trusted = ["127.0.0.1/32", "10.0.0.0/8"]
header = "X-Forwarded-For"
recursive = true

[log]
access = "stdout"
format = "combined"

[upstreams.app]
servers = ["127.0.0.1:3000", { addr = "127.0.0.1:3001", weight = 2 }]
balance = "round_robin"
connect_timeout = "2s"
read_timeout = "60s"
keepalive = 64
max_fails = 3
fail_timeout = "10s"

[[location]]
match = "= /login"
upstream = "app"

[[location]]
match = "/api/"
upstream = "app"

[[location]]
match = "^~ /internal/"
upstream = "app"

[[location]]
match = "/demo"
return = { status = 200, body = "hello from tollgate\n" }
"#;

#[test]
fn design_example_parses_into_typed_values() {
    let config = parse(EXAMPLE);
    assert_eq!(addrs(&config.server.listen), [addr("127.0.0.1:8080")]);
    assert_eq!(config.server.client_header_timeout, Duration::from_secs(10));
    assert_eq!(config.server.client_body_timeout, Duration::from_secs(60));
    assert_eq!(config.server.keepalive_timeout, Duration::from_secs(75));
    assert_eq!(config.server.max_header_bytes, 16 * 1024);
    assert_eq!(config.server.shutdown_timeout, Duration::from_secs(30));

    let real_ip = config.real_ip.expect("real_ip");
    let trusted: Vec<ipnet::IpNet> = vec![
        "127.0.0.1/32".parse().unwrap(),
        "10.0.0.0/8".parse().unwrap(),
    ];
    assert_eq!(real_ip.trusted, trusted);
    assert_eq!(real_ip.header.as_str(), "x-forwarded-for");
    assert!(real_ip.recursive);
    assert_eq!(
        config.log,
        Log {
            access: AccessLog::Stdout,
            format: LogFormat::Combined
        }
    );

    let [app] = &config.upstreams[..] else {
        panic!("one upstream")
    };
    assert_eq!(app.name, "app");
    let servers = [
        UpstreamServer {
            addr: addr("127.0.0.1:3000"),
            weight: 1,
            tls_name: None,
        },
        UpstreamServer {
            addr: addr("127.0.0.1:3001"),
            weight: 2,
            tls_name: None,
        },
    ];
    assert_eq!(app.servers, servers);
    assert_eq!(app.balance, Balance::RoundRobin);
    assert_eq!(
        (app.connect_timeout, app.read_timeout),
        (Duration::from_secs(2), Duration::from_secs(60))
    );
    assert_eq!(
        (app.keepalive, app.max_fails, app.fail_timeout),
        (64, 3, Duration::from_secs(10))
    );

    let locations = &config.sites[0].locations;
    assert!(matches!(&locations[0].pattern, Pattern::Exact(p) if p == "/login"));
    assert!(matches!(&locations[1].pattern, Pattern::Prefix(p) if p == "/api/"));
    assert!(matches!(&locations[2].pattern, Pattern::PriorityPrefix(p) if p == "/internal/"));
    assert!(matches!(&locations[3].pattern, Pattern::Prefix(p) if p == "/demo"));
    for location in &locations[..3] {
        assert!(matches!(location.action, Action::Proxy { upstream: 0 }));
    }
    let Action::Return(ret) = &locations[3].action else {
        panic!("return")
    };
    assert!(matches!(ret.status, ReturnStatus::Fixed(http::StatusCode::OK)));
    assert_eq!(ret.body.as_literal(), Some("hello from tollgate\n"));
    assert_eq!(ret.location, None);
}

#[test]
fn omitted_keys_take_their_defaults() {
    let config = parse(&format!(
        "{SERVER}[upstreams.app]\nservers = [\"10.0.0.1:80\"]\n"
    ));
    let server = &config.server;
    assert_eq!(addrs(&server.listen), [addr("0.0.0.0:8080")]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(server.workers, cpus.min(256));
    assert_eq!(server.client_header_timeout, Duration::from_secs(10));
    assert_eq!(server.client_body_timeout, Duration::from_secs(60));
    assert_eq!(server.keepalive_timeout, Duration::from_secs(75));
    assert_eq!(server.max_header_bytes, 16 * 1024);
    assert_eq!(server.shutdown_timeout, Duration::from_secs(30));
    assert!(config.real_ip.is_none());
    assert_eq!(
        config.log,
        Log {
            access: AccessLog::Stdout,
            format: LogFormat::Combined
        }
    );
    assert!(config.sites[0].locations.is_empty());

    let app = &config.upstreams[0];
    assert_eq!(
        app.servers,
        [UpstreamServer {
            addr: addr("10.0.0.1:80"),
            weight: 1,
            tls_name: None,
        }]
    );
    assert_eq!(app.balance, Balance::RoundRobin);
    assert_eq!(app.connect_timeout, Duration::from_secs(2));
    assert_eq!(app.read_timeout, Duration::from_secs(60));
    assert_eq!((app.keepalive, app.max_fails), (64, 1));
    assert_eq!(app.fail_timeout, Duration::from_secs(10));
}

#[test]
fn real_ip_defaults_to_x_forwarded_for_without_recursion() {
    let config = parse(&format!(
        "{SERVER}[real_ip]\ntrusted = [\"10.0.0.1/8\", \"::1\"]\n"
    ));
    let real_ip = config.real_ip.unwrap();
    assert_eq!(
        real_ip.header,
        http::header::HeaderName::from_static("x-forwarded-for")
    );
    assert!(!real_ip.recursive);
    let trusted: Vec<ipnet::IpNet> =
        vec!["10.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
    assert_eq!(real_ip.trusted, trusted);
}

#[test]
fn explicit_values_replace_defaults() {
    let text = r#"
[server]
listen = ["*:80", "[::1]:81"]
workers = 3
max_header_bytes = 2048
[real_ip]
trusted = ["10.0.0.0/8"]
header = "X-Real-IP"
[log]
access = "off"
format = "json"
[upstreams.b]
servers = ["10.0.0.1:80"]
balance = "ip_hash"
keepalive = 0
max_fails = 0
[upstreams.a]
servers = ["10.0.0.2:80"]
balance = "least_conn"
read_timeout = "500ms"
[[location]]
match = '~* \.PNG$'
upstream = "a"
[[location]]
match = "= /old"
return = { status = 301, location = "https://example.com/" }
"#;
    let config = parse(text);
    assert_eq!(
        addrs(&config.server.listen),
        [addr("0.0.0.0:80"), addr("[::1]:81")]
    );
    assert_eq!(
        (config.server.workers, config.server.max_header_bytes),
        (3, 2048)
    );
    assert_eq!(config.real_ip.unwrap().header.as_str(), "x-real-ip");
    assert_eq!(
        config.log,
        Log {
            access: AccessLog::Off,
            format: LogFormat::Json
        }
    );
    let names: Vec<_> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["b", "a"], "file order, not name order");
    let (b, a) = (&config.upstreams[0], &config.upstreams[1]);
    assert_eq!(
        (b.balance, b.keepalive, b.max_fails),
        (Balance::IpHash, 0, 0)
    );
    assert_eq!(
        (a.balance, a.read_timeout),
        (Balance::LeastConn, Duration::from_millis(500))
    );
    let Pattern::Regex {
        regex,
        case_insensitive: true,
    } = &config.sites[0].locations[0].pattern
    else {
        panic!("case-insensitive regex");
    };
    assert!(regex.is_match(b"/logo.png"));
    assert!(matches!(
        config.sites[0].locations[0].action,
        Action::Proxy { upstream: 1 }
    ));
    let Action::Return(ret) = &config.sites[0].locations[1].action else {
        panic!("return")
    };
    assert!(matches!(
        ret.status,
        ReturnStatus::Fixed(http::StatusCode::MOVED_PERMANENTLY)
    ));
    assert_eq!(
        ret.location.as_ref().and_then(|l| l.as_literal()),
        Some("https://example.com/")
    );
}

#[test]
fn relative_access_log_is_resolved_against_the_config_directory() {
    let config = parse(&format!("{SERVER}[log]\naccess = \"logs/access.log\"\n"));
    assert_eq!(
        config.log.access,
        AccessLog::File(PathBuf::from("/etc/tollgate/logs/access.log"))
    );
    let absolute = parse(&format!(
        "{SERVER}[log]\naccess = \"/var/log/tollgate.log\"\n"
    ));
    assert_eq!(
        absolute.log.access,
        AccessLog::File(PathBuf::from("/var/log/tollgate.log"))
    );
}

#[test]
fn pid_file_is_off_unless_set_relative_to_the_config_directory() {
    assert_eq!(parse(SERVER).server.pid_file, None);
    let set = |path: &str| parse(&format!("{SERVER}pid_file = \"{path}\"\n")).server.pid_file;
    assert_eq!(set("run/tg.pid"), Some(PathBuf::from("/etc/tollgate/run/tg.pid")));
    assert_eq!(set("/run/tollgate.pid"), Some(PathBuf::from("/run/tollgate.pid")));
    let (line, col, message) = error("pid_file = \"\"\n");
    assert_eq!((line, col), (3, 12), "{message}");
    assert!(message.starts_with("`pid_file` must name a file"), "{message}");
}

#[test]
fn upstream_host_names_become_one_server_per_address() {
    let config = parse(&format!(
        "{SERVER}[upstreams.app]\nservers = [{{ addr = \"localhost:3000\", weight = 5 }}]\n"
    ));
    let servers = &config.upstreams[0].servers;
    assert!(!servers.is_empty());
    assert!(servers
        .iter()
        .all(|s| s.addr.ip().is_loopback() && s.addr.port() == 3000 && s.weight == 5));
}

#[test]
fn reference_example_in_docs_is_valid() {
    let doc = include_str!("../../docs/config.md");
    // The example under "## Example" (the sections above have snippets of their own).
    let example = doc.find("## Example\n").expect("an example section");
    let start =
        example + doc[example..].find("```toml\n").expect("a toml example") + "```toml\n".len();
    let end = start + doc[start..].find("```").expect("end of the example");
    let config = parse(&doc[start..end]);
    let log = PathBuf::from("/etc/tollgate/logs/access.log");
    assert_eq!(config.log.access, AccessLog::File(log));
    assert_eq!(config.sites[0].locations.len(), 3);
}

/// The TOML blocks of one `###` section of `text`, joined into one file.
fn section_blocks(text: &str, section: &str) -> String {
    let start = text.find(section).expect("the section") + section.len();
    let rest = &text[start..];
    let rest = &rest[..rest.find("\n### ").unwrap_or(rest.len())];
    let blocks = rest.split("```toml\n").skip(1);
    blocks
        .map(|block| block.split("```").next().unwrap_or(""))
        .collect()
}

#[test]
fn the_limit_examples_of_the_guide_and_docs_are_valid() {
    let guide = include_str!("../../docs/guide.md");
    let upstreams = "[upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n\
                     [upstreams.llm]\nservers = [\"127.0.0.1:9001\"]\n";
    let fleet = section_blocks(guide, "### Several instances\n");
    let config = parse(&format!("{SERVER}{upstreams}{fleet}"));
    let api = config.zones.iter().find(|z| z.name == "api").expect("api");
    assert_eq!(api.redis.map(|r| r.lease), Some(Some(20)));
    let redis = "[redis]\nurl = \"redis://127.0.0.1:6379\"\n";
    let answers = section_blocks(guide, "### Limits that read the answer\n");
    let config = parse(&format!("{SERVER}{upstreams}{redis}{answers}"));
    let locations = &config.sites[0].locations;
    assert!(locations[0].limits[0]
        .count
        .is_some_and(|c| c.contains(401)));
    assert!(locations[1].cost_from.is_some());
    let doc = include_str!("../../docs/config.md");
    let answers = section_blocks(doc, "### Charging by the answer\n");
    let config = parse(&format!("{SERVER}{upstreams}{answers}"));
    assert_eq!(config.sites[0].locations.len(), 2);
}

mod acme;
mod auth;
mod adaptive;
mod admin;
mod bans;
mod body;
mod client_certs;
mod concurrency;
mod errors;
mod files;
mod limit_action;
mod limits;
mod maps;
mod listeners;
mod props;
mod redis;
mod rewrites;
mod settle;
mod sites;
mod soft;
mod tls;
mod upstream_tls;
mod vars;
mod write;

#[test]
fn admin_listens_where_it_is_told_and_needs_an_address() {
    let config = parse(&format!("{SERVER}[admin]\nlisten = \"127.0.0.1:9901\"\n"));
    assert_eq!(
        config.admin,
        Some(Admin {
            listen: addr("127.0.0.1:9901"),
            token: None,
            protect_reads: false,
            max_connections: 64,
            explain: false,
        })
    );
    assert_eq!(parse(SERVER).admin, None);
    let capped = parse(&format!(
        "{SERVER}[admin]\nlisten = \"127.0.0.1:9901\"\nmax_connections = 8\n"
    ));
    assert_eq!(capped.admin.map(|admin| admin.max_connections), Some(8));
    let (line, col, message) = error("[admin]\nlisten = \"127.0.0.1:9901\"\nmax_connections = 0\n");
    assert_eq!((line, col), (5, 19), "{message}");
    assert!(message.contains("from 1 to 1024"), "{message}");
    let (line, col, message) = error("[admin]\nlisten = \"nowhere\"\n");
    assert_eq!((line, col), (4, 10), "{message}");
    let (line, col, message) = error("[admin]\n");
    assert_eq!((line, col), (3, 1), "{message}");
    assert!(message.contains("listen"), "{message}");
}

#[test]
fn a_config_knows_the_sha256_of_its_text() {
    // `sha256sum` of SERVER's text.
    let want = "cf27c8e5f876251cc17eea425adcd5589aa06b93cf5d50cc89bd2dc538427b8b";
    assert_eq!(parse(SERVER).sha256, want);
}
