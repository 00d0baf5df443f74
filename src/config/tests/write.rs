//! The file's model written back (`raw::write`, and `toml::to_string` of the model): a
//! file read, written and read again gives the same `Config`, for the shipped file, the
//! examples, the docs' snippets, a sample of every section, and the texts of the
//! integration tests below, and for generated files. `parse` and `load_at` (in `tests.rs`)
//! check every file the other config tests load the same way, with [`same_once_written`].
//!
//! `Config` holds compiled regexes, rustls configs and certificates, which have no
//! `PartialEq`; two configs are compared by [`meaning`], their `Debug` text (which
//! reaches all of them) less what is not the file's meaning.

use proptest::prelude::*;

use super::super::diag::Diagnostics;
use super::super::raw;
use super::*;

const SHIPPED: &str = include_str!("../../../gateway.toml");

/// What `config` means, as text that two configs share when they mean the same: its
/// `Debug` form, less the hash of its text and the places of its addresses (a written
/// file differs from its source in layout and comments), with the API keys in order (a `HashMap` prints in any order).
/// `Debug` hides the admin token and the EAB key: [`same_once_written`] compares those
/// sections with `==` too.
fn meaning(config: &Config) -> String {
    let mut config = config.clone();
    config.sha256.clear();
    config.warnings.clear();
    config.places.clear();
    config.directories.clear();
    let mut keys: Vec<(String, String)> = config
        .api_keys
        .as_mut()
        .map(|api_keys| api_keys.keys.drain().collect())
        .unwrap_or_default();
    keys.sort();
    format!("{config:#?}\napi keys: {keys:?}")
}

/// The model of `text` (which has no problem), written by `write`.
fn rewritten(text: &str, write: impl Fn(&raw::RawConfig) -> String) -> String {
    let mut diag = Diagnostics::new(text);
    let model = raw::parse(text, &mut diag);
    assert!(!diag.has_errors(), "a problem reading:\n{text}");
    write(&model)
}

fn written(text: &str) -> String {
    rewritten(text, |model| {
        raw::write(model).expect("the model is writable")
    })
}

fn written_by_toml(text: &str) -> String {
    rewritten(text, |model| {
        toml::to_string(model).expect("the model is serializable")
    })
}

/// Panics unless `text`, which loads as `config`, is written by both writers as a file
/// that loads, with no problem, as the same `Config`; and unless `raw::write` gives its
/// own output back unchanged (what it writes is its canonical form).
pub(super) fn same_once_written(text: &str, origin: &Path, config: &Config) {
    let written = written(text);
    for (how, again) in [("raw::write", &written), ("toml", &written_by_toml(text))] {
        let reread = from_str(again, origin)
            .unwrap_or_else(|e| panic!("{how} wrote a file that is refused:\n{e}\n{again}"));
        let (before, after) = (meaning(config), meaning(&reread));
        if let Some(difference) = difference(&before, &after) {
            panic!("{how} wrote a file that means something else: {difference}\n{again}");
        }
        assert_eq!(config.admin, reread.admin, "{how}:\n{again}");
        assert_eq!(config.acme, reread.acme, "{how}:\n{again}");
    }
    assert_eq!(written, self::written(&written), "not a fixed point");
}

/// The first line where two meanings differ, with the path of fields leading to it.
fn difference(before: &str, after: &str) -> Option<String> {
    let (mut before_lines, mut after_lines) = (before.lines(), after.lines());
    let mut path: Vec<&str> = Vec::new();
    loop {
        match (before_lines.next(), after_lines.next()) {
            (None, None) => return None,
            (a, b) if a == b => {
                let line = a.unwrap_or_default();
                let depth = line.len() - line.trim_start().len();
                path.truncate(depth / 4);
                if line.ends_with('{') || line.ends_with('[') || line.ends_with('(') {
                    path.push(line.trim());
                }
            }
            (a, b) => {
                let (a, b) = (a.unwrap_or("(end)").trim(), b.unwrap_or("(end)").trim());
                return Some(format!(
                    "in {}: read `{a}`, once written `{b}`",
                    path.join(" ")
                ));
            }
        }
    }
}

/// Loads `text` at `origin`, checks it with [`same_once_written`], and gives what
/// `raw::write` makes of it.
fn round_trip(text: &str, origin: &Path) -> String {
    let config = from_str(text, origin).unwrap_or_else(|e| panic!("{e}\n{text}"));
    same_once_written(text, origin, &config);
    written(text)
}

/// A self-signed certificate for `names` as `{stem}.pem` and `{stem}.key` under `dir`.
fn certificate(dir: &Path, stem: &str, names: &[&str]) {
    tls::write_cert(dir, stem, names, &rcgen::PKCS_ECDSA_P256_SHA256);
}

#[test]
fn the_shipped_file_reads_the_same_once_written() {
    let written = round_trip(SHIPPED, Path::new(ORIGIN));
    // Laid out as the docs write a file: nested values inline, nothing unset.
    assert!(written.starts_with("[server]\nlisten = [\"127.0.0.1:8080\"]\n"));
    assert!(written.contains("\nplans = { free = \"5r/m\", pro = \"600r/m\" }\n"));
    let limit = "\nlimit = [{ zone = \"per_ip\", burst = 20, delay = 10 }, { zone = \"conns\" }]\n";
    assert!(written.contains(limit), "{written}");
    assert!(!written.contains("workers"), "{written}");
}

#[test]
fn the_examples_read_the_same_once_written() {
    let automatic = include_str!("../../../examples/automatic-https.toml");
    round_trip(automatic, Path::new(ORIGIN));
    round_trip(include_str!("../../../examples/demo.toml"), Path::new(ORIGIN));
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    certificate(&certs, "example.com", &["example.com", "www.example.com"]);
    certificate(&certs, "internal-ca", &["ca.internal"]);
    let migration = include_str!("../../../examples/nginx-migration.toml");
    let written = round_trip(migration, &dir.path().join("gateway.toml"));
    assert!(written.contains("\n[[tls.certificates]]\ncert = \"certs/example.com.pem\"\n"));
    assert!(written.contains("\n[[site]]\ndefault = true\n\n[[site.location]]\n"));
}

/// Every `toml` block of docs/config.md, docs/guide.md and docs/recipes.md that loads as it is, or after a
/// `[server]`, and the upstream groups and `[redis]` the snippets name.
#[test]
fn the_snippets_of_the_docs_read_the_same_once_written() {
    let docs = [
        include_str!("../../../docs/config.md"),
        include_str!("../../../docs/guide.md"),
        include_str!("../../../docs/recipes.md"),
    ];
    let upstreams = format!(
        "{SERVER}[upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n\
         [upstreams.llm]\nservers = [\"127.0.0.1:9001\"]\n"
    );
    let redis = format!("{upstreams}[redis]\nurl = \"redis://127.0.0.1:6379\"\n");
    let mut loaded = 0;
    for doc in docs {
        for block in doc.split("```toml\n").skip(1) {
            let block = block.split("```").next().unwrap_or_default();
            for before in ["", SERVER, &upstreams, &redis] {
                let text = format!("{before}{block}");
                if from_str(&text, Path::new(ORIGIN)).is_ok() {
                    round_trip(&text, Path::new(ORIGIN));
                    loaded += 1;
                    break;
                }
            }
        }
    }
    // As many as load today, so that a change to the docs cannot empty this test.
    assert!(loaded >= 17, "only {loaded} snippets load");
}

/// `props.rs`'s sample, which touches every section, with the files it names.
#[test]
fn every_section_reads_the_same_once_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("certs")).unwrap();
    certificate(&dir.path().join("certs"), "a", &["a.test"]);
    certificate(dir.path(), "ca", &["ca.test"]);
    std::fs::write(dir.path().join("keys.toml"), "\"k2\" = \"gold\"\n").unwrap();
    let written = round_trip(props::SAMPLE, &dir.path().join("gateway.toml"));
    assert!(written.contains("\n[redis]\nurl = "), "{written}");
}

/// Texts of the integration tests (tests/it), with their upstreams' addresses filled in.
const INTEGRATION: &[&str] = &[
    // header_rules.rs
    "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
     [upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n\
     [[location]]\nmatch = \"~ ^/app/(.*)$\"\nupstream = \"app\"\n\
     request_headers = { \"X-Env\" = \"prod\", \"X-Orig\" = \"$host$request_uri\", \
     \"X-Tail\" = \"$1\", \"Cookie\" = \"\" }\n\
     response_headers = { \"Strict-Transport-Security\" = \"max-age=63072000\", \"X-Uri\" = \"$uri\" }\n\
     hide_headers = [\"X-Powered-By\", \"Server\"]\n",
    // response_when.rs, forwarded_headers.rs and server_header.rs (and cli_control.rs's
    // pid_file)
    "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nserver_header = \"edge\"\n\
     pid_file = \"run/tollgate.pid\"\nforwarded_headers = [\"X-Real-IP\"]\n[log]\naccess = \"off\"\n\
     [upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n\
     [[site]]\nnames = [\"a.example\"]\nforwarded_headers = [\"X-Forwarded-Proto\"]\n\
     response_headers = { \"X-Frame-Options\" = { value = \"DENY\", when = \"success\" }, \
     \"Strict-Transport-Security\" = { value = \"max-age=1\", when = \"always\" }, \
     \"X-Plain\" = \"p\", \"X-Uri\" = { value = \"$uri\" } }\n\
     pass_headers = [\"Server\"]\n\
     [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\nforwarded_headers = []\n\
     request_headers = { \"X-Forwarded-For\" = \"$remote_addr\" }\npass_headers = [\"Date\"]\n",
    // sites/rules.rs (TWO_SITES)
    "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
     [[site]]\nnames = [\"a.test\"]\n[[site.location]]\nmatch = \"/\"\n\
     return = { status = 200, body = \"a\" }\n\
     [[site]]\nnames = [\"b.test\", \"*.b.test\"]\n[[site.location]]\nmatch = \"/\"\n\
     return = { status = 200, body = \"b\" }\n",
    // adaptive/elastic.rs
    "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 2\n[admin]\nlisten = \"127.0.0.1:0\"\n\
     [log]\naccess = \"off\"\n[zones.quota]\nkey = \"$http_x_client\"\n\
     algorithm = \"fixed_window\"\nrate = \"10r/h\"\n\
     adaptive = { upstream = \"app\", latency = \"500ms\", in_flight = 40 }\n\
     [upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n\
     [[location]]\nmatch = \"/limited\"\nlimit = [{ zone = \"quota\", burst = 0, elastic = \"2x\" }]\n\
     upstream = \"app\"\n[[location]]\nmatch = \"/free\"\nupstream = \"app\"\n",
    // limits.rs
    "[server]\nlisten = [\"127.0.0.1:0\"]\n[zones.per_ip]\nkey = \"$binary_remote_addr\"\n\
     rate = \"1r/m\"\n[[location]]\nmatch = \"/\"\n\
     limit = [{ zone = \"per_ip\", burst = 2, nodelay = true }]\n\
     return = { status = 200, body = \"ok\\n\" }\n",
    // bans.rs
    "[server]\nlisten = [\"127.0.0.1:0\"]\n[zones.login]\nkey = \"$binary_remote_addr\"\n\
     rate = \"2r/m\"\n[[location]]\nmatch = \"/login\"\n\
     limit = [{ zone = \"login\", count_status = [401, \"5xx\"], \
     ban = { after = 3, within = \"10s\", for = \"1m\" } }]\n\
     return = { status = 401 }\n",
];

#[test]
fn the_integration_tests_files_read_the_same_once_written() {
    for text in INTEGRATION {
        round_trip(text, Path::new(ORIGIN));
    }
}

/// Each word the file spells for a core type (`algorithm`, `on_error`) or a raw enum, and
/// each form of the keys that take two (`servers` items, `tls`, `max_in_flight`).
#[test]
fn every_word_and_form_reads_the_same_once_written() {
    let mut text = String::from(
        "[server]\nlisten = [\"127.0.0.1:8080\"]\nratelimit_headers = \"legacy\"\n\
         request_buffering = \"off\"\nlimit_action = \"tarpit\"\ntarpit_hold = \"3s\"\n\
         tarpit_max = 16\n[log]\nformat = \"json\"\n\
         [redis]\nurl = \"redis://127.0.0.1:6379\"\non_error = \"allow\"\n\
         [upstreams.a]\nservers = [\"127.0.0.1:3000\", { addr = \"127.0.0.1:3001\", weight = 2 }]\n\
         balance = \"least_conn\"\nmax_in_flight = 10\nqueue = 5\n\
         [upstreams.b]\nservers = [\"127.0.0.1:3002\"]\nbalance = \"ip_hash\"\ntls = false\n\
         max_in_flight = \"auto\"\nin_flight_min = 4\n\
         [upstreams.c]\nservers = [\"127.0.0.1:3003\"]\nbalance = \"round_robin\"\n\
         tls = { server_name = \"c.internal\" }\n",
    );
    let algorithms = [
        "leaky_bucket",
        "token_bucket",
        "fixed_window",
        "sliding_window",
        "sliding_log",
    ];
    for (i, algorithm) in algorithms.iter().enumerate() {
        let on_error = ["allow", "deny", "local"][i % 3];
        text += &format!(
            "[zones.{algorithm}]\nkey = \"$remote_addr\"\nrate = \"1r/s\"\n\
             algorithm = \"{algorithm}\"\nbackend = \"redis\"\non_error = \"{on_error}\"\n"
        );
    }
    text += "[zones.local]\nkey = \"$uri\"\nrate = \"1r/s\"\nbackend = \"local\"\n\
             [zones.conns]\nkey = \"$remote_addr\"\nalgorithm = \"concurrency\"\nmax = 3\n\
             [[location]]\nmatch = \"/\"\nupstream = \"a\"\nrequest_buffering = \"on\"\n\
             limit_action = \"close\"\n\
             limit = [{ zone = \"conns\" }, { zone = \"local\", soft = \"10%\" }]\n";
    let written = round_trip(&text, Path::new(ORIGIN));
    for word in [
        "\"deny\"",
        "\"tarpit\"",
        "\"close\"",
        "\"sliding_log\"",
        "\"auto\"",
        "\"ip_hash\"",
        "weight = 2",
    ] {
        assert!(written.contains(word), "{word}:\n{written}");
    }
}

/// What `tollgate import` does: a model built in code, with no spans worth the name,
/// is written as a file `tollgate -t` accepts.
#[test]
fn a_model_built_in_code_is_written_as_a_valid_file() {
    use raw::{RawConfig, RawLimit, RawLocation, RawReturn, RawServer, RawZone, Section};
    fn at<T>(value: T) -> serde_spanned::Spanned<T> {
        serde_spanned::Spanned::new(0..0, value)
    }
    let mut model = RawConfig {
        server: Section::Present(
            0..0,
            RawServer {
                listen: Some(at(vec![at(raw::RawListenItem::Addr(
                    "127.0.0.1:8080".to_owned(),
                ))])),
                ..Default::default()
            },
        ),
        ..Default::default()
    };
    model.zones.push(raw::Named {
        name: at("per_ip".to_owned()),
        body: Some(at(RawZone {
            key: Some(at("$binary_remote_addr".to_owned())),
            rate: Some(at("10r/s".to_owned())),
            ..Default::default()
        })),
    });
    model.locations.push(Some(at(RawLocation {
        pattern: Some(at("= /hello".to_owned())),
        ret: Some(at(RawReturn {
            status: Some(at(raw::RawStatus::Code(200))),
            body: Some(at("hello \"you\"\n".to_owned())),
            location: None,
        })),
        limit: Some(at(vec![at(RawLimit {
            zone: Some(at("per_ip".to_owned())),
            burst: Some(at(5)),
            ..Default::default()
        })])),
        ..Default::default()
    })));
    let text = raw::write(&model).unwrap();
    let config = from_str(&text, Path::new(ORIGIN)).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let location = &config.sites[0].locations[0];
    assert_eq!(location.limits[0].burst, 5);
    let Action::Return(answer) = &location.action else {
        panic!("{text}");
    };
    assert_eq!(answer.body.as_literal(), Some("hello \"you\"\n"));
}

/// Pieces of valid files for [`valid_files`]: any choice of them loads.
const SERVERS: &[&str] = &[
    "[server]\nlisten = [\"127.0.0.1:8080\"]\n",
    "[server]\nlisten = [\"127.0.0.1:8080\", { addr = \"[::1]:8080\", http2 = false }]\nworkers = 2\n\
     limit_status = 503\n\
     ratelimit_headers = \"both\"\n",
    "[server]\nlisten = [\"0.0.0.0:80\"]\nclient_max_body_size = \"0\"\nrequest_buffering = \"off\"\n\
     keepalive_timeout = \"5s\"\nmax_header_bytes = \"8k\"\n",
];
const SECTIONS: &[&str] = &[
    "[real_ip]\ntrusted = [\"10.0.0.0/8\", \"fd00::/8\"]\nrecursive = true\n",
    "[access]\ndeny = [\"192.0.2.0/24\"]\nexempt = [\"203.0.113.7\"]\n",
    "[log]\naccess = \"off\"\nformat = \"json\"\n",
    "[admin]\nlisten = \"127.0.0.1:9901\"\nprotect_reads = false\ntoken_env = \"TOLLGATE_TEST_TOKEN_NEVER_SET_9D2E\"\n",
];
const UPSTREAMS: &[&str] = &[
    "[upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n",
    "[upstreams.app]\nservers = [\"127.0.0.1:3000\", { addr = \"127.0.0.1:3001\", weight = 3 }]\n\
     balance = \"least_conn\"\nmax_fails = 0\nconnect_timeout = \"500ms\"\n",
    "[upstreams.app]\nservers = [\"127.0.0.1:3000\"]\nmax_in_flight = \"auto\"\nqueue = 10\n",
];
/// Name and keys; `conns` (a concurrency zone) takes no `burst` or `delay`.
const ZONES: &[(&str, &str)] = &[
    (
        "per_ip",
        "key = \"$binary_remote_addr\"\nrate = \"10r/s\"\nipv6_prefix = 64\n",
    ),
    (
        "per_key",
        "key = \"$http_x_api_key\"\nrate = \"120r/m\"\nalgorithm = \"token_bucket\"\n",
    ),
    (
        "window",
        "key = \"$remote_addr$uri\"\nrate = \"100r/h\"\nalgorithm = \"sliding_window\"\n",
    ),
    (
        "log",
        "key = \"$host\"\nrate = \"50r/m\"\nalgorithm = \"sliding_log\"\nsize = \"1m\"\n",
    ),
    (
        "conns",
        "key = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 20\n",
    ),
];
const MATCHES: &[&str] = &[
    "/",
    "= /exact",
    "^~ /static/",
    "~ ^/api/(\\\\d+)$",
    "~* \\\\.png$",
    "/app/",
];
const ACTIONS: &[&str] = &[
    "upstream = \"app\"\n",
    "return = { status = 200, body = \"ok\\n\" }\n",
    "return = { status = 301, location = \"https://$host$request_uri\" }\n",
];
const EXTRAS: &[&str] = &[
    "",
    "cost = 1\n",
    "limit_status = 503\n",
    "access = [\"allow 10.0.0.0/8\", \"deny all\"]\n",
    "request_headers = { \"X-Uri\" = \"$uri\", \"Cookie\" = \"\" }\nhide_headers = [\"Server\"]\n",
    "client_max_body_size = \"1m\"\nrequest_buffering = \"on\"\n",
    "client_body_timeout = \"5s\"\nsend_timeout = \"10s\"\nread_timeout = \"2m\"\nconnect_timeout = \"500ms\"\n",
];
const ITEMS: &[&str] = &[
    "",
    ", burst = 5, nodelay = true",
    ", burst = 3, delay = 1",
    ", dry_run = true",
];

/// One location of `header` with a limit on each of `zones` (name, item variant).
fn location(header: &str, pattern: &str, rest: (&str, &str), zones: &[(&str, usize)]) -> String {
    let items: Vec<String> = zones
        .iter()
        .map(|&(zone, item)| {
            let item = if zone == "conns" { "" } else { ITEMS[item] };
            format!("{{ zone = \"{zone}\"{item} }}")
        })
        .collect();
    let limit = if items.is_empty() {
        String::new()
    } else {
        format!("limit = [{}]\n", items.join(", "))
    };
    let (action, extra) = rest;
    format!("{header}\nmatch = \"{pattern}\"\n{action}{extra}{limit}")
}

/// Valid files: a `[server]`, some gateway-wide sections, an upstream group, some zones,
/// and locations (top-level, or in a `[[site]]`) limited by some of those zones.
fn valid_files() -> impl Strategy<Value = String> {
    use prop::sample::{select, subsequence};
    let zones = subsequence(ZONES.to_vec(), 0..=ZONES.len());
    let head = (
        select(SERVERS),
        subsequence(SECTIONS.to_vec(), 0..=SECTIONS.len()),
    );
    (head, select(UPSTREAMS), zones, any::<bool>()).prop_flat_map(
        |((server, sections), upstream, zones, in_site)| {
            let names: Vec<&'static str> = zones.iter().map(|(name, _)| *name).collect();
            let limits = (subsequence(names.clone(), 0..=names.len()), 0..ITEMS.len());
            let one = (select(ACTIONS), select(EXTRAS), limits);
            let matches = subsequence(MATCHES.to_vec(), 1..=MATCHES.len());
            (matches, prop::collection::vec(one, MATCHES.len())).prop_map(move |(matches, rest)| {
                let mut text = format!("{server}{}{upstream}", sections.concat());
                for (name, keys) in &zones {
                    text += &format!("[zones.{name}]\n{keys}");
                }
                let header = if in_site {
                    "[[site.location]]"
                } else {
                    "[[location]]"
                };
                if in_site {
                    text += "[[site]]\nnames = [\"example.com\", \"*.example.org\"]\n";
                }
                for (pattern, (action, extra, (zones, item))) in matches.iter().zip(&rest) {
                    let limited: Vec<_> = zones.iter().map(|zone| (*zone, *item)).collect();
                    text += &location(header, pattern, (action, extra), &limited);
                }
                text
            })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// A file put together from valid pieces loads, and loads the same once written.
    #[test]
    fn a_valid_file_reads_the_same_once_written(text in valid_files()) {
        round_trip(&text, Path::new(ORIGIN));
    }

    /// Whatever file the loader accepts among the shipped one with lines moved and values
    /// swapped, written, loads the same.
    #[test]
    fn every_file_the_loader_accepts_reads_the_same_once_written(
        lines in props::line_edits(),
    ) {
        let text = props::apply_lines(SHIPPED, &lines);
        if let Ok(config) = from_str(&text, Path::new(ORIGIN)) {
            same_once_written(&text, Path::new(ORIGIN), &config);
        }
    }
}
