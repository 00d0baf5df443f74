//! `[[site]]`: names, addresses, defaults, what locations inherit, and every problem
//! at its `line:col`.

use super::*;
use crate::routing::sites::SiteName;

/// Two plain addresses and one TLS address (lines 1 to 5).
const SERVERS: &str =
    "[server]\nlisten = [\"127.0.0.1:8080\", \"127.0.0.1:8081\"]\nlisten_tls = []\n\
[upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n";

const RETURN: &str = "[[site.location]]\nmatch = \"/\"\nreturn = { status = 204 }\n";

fn sites(rest: &str) -> Config {
    parse(&format!("{SERVERS}{rest}"))
}

fn site_errors(rest: &str) -> Vec<(usize, usize, String)> {
    errors(&format!("{SERVERS}{rest}"))
}

#[test]
fn sites_keep_their_names_addresses_and_locations() {
    let config = sites(&format!(
        "[[site]]\nnames = [\"Example.com.\", \"*.example.com\", \"mail.*\", \"~^w\\\\d+$\"]\n{RETURN}\
         [[site]]\nlisten = [\"127.0.0.1:8081\"]\ndefault = true\n{RETURN}"
    ));
    let [first, second] = &config.sites[..] else {
        panic!("two sites: {:?}", config.sites);
    };
    assert_eq!(first.server_name, "example.com");
    assert_eq!(first.label.as_deref(), Some("example.com"));
    assert!(matches!(&first.names[0], SiteName::Exact(n) if n == "example.com"));
    assert!(matches!(&first.names[1], SiteName::LeadingWildcard(n) if n == ".example.com"));
    assert!(matches!(&first.names[2], SiteName::TrailingWildcard(n) if n == "mail."));
    assert!(matches!(&first.names[3], SiteName::Regex(_)));
    assert_eq!((first.listen.as_ref(), first.default), (None, false));
    let only = Address {
        addr: addr("127.0.0.1:8081"),
        transport: Transport::Tcp,
        http2: true,
    };
    assert_eq!(second.listen.as_deref(), Some(&[only][..]));
    assert!(second.default && second.names.is_empty());
    assert_eq!(second.label.as_deref(), Some("_"));
    assert_eq!(second.locations.len(), 1);
}

#[test]
fn a_file_of_top_level_locations_is_one_site_for_every_name() {
    let config = parse(&format!(
        "{SERVER}[[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n"
    ));
    let [site] = &config.sites[..] else {
        panic!("one site");
    };
    assert!(site.names.is_empty() && site.listen.is_none() && site.label.is_none());
    assert_eq!(site.server_name, "");
}

#[test]
fn locations_inherit_the_sites_rules() {
    let config = sites(&format!(
        "[zones.ip]\nkey = \"$remote_addr\"\nrate = \"1r/s\"\n\
         [[site]]\nclient_max_body_size = \"5m\"\naccess = [\"deny all\"]\nlimit_status = 503\n\
         limit = [{{ zone = \"ip\", burst = 3 }}]\nresponse_headers = {{ \"X-A\" = \"site\", \"X-B\" = \"site\" }}\n\
         {RETURN}\
         [[site.location]]\nmatch = \"/own/\"\nupstream = \"app\"\nlimit = []\naccess = []\n\
         client_max_body_size = \"0\"\nresponse_headers = {{ \"X-B\" = \"own\" }}\n"
    ));
    let [inherits, own] = &config.sites[0].locations[..] else {
        panic!("two locations");
    };
    assert_eq!(
        inherits.client_max_body_size,
        Some(MaxBodySize::Bytes(5 << 20))
    );
    assert_eq!((inherits.access.len(), inherits.limits.len()), (1, 1));
    assert_eq!(
        inherits.limit_status,
        Some(http::StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(own.client_max_body_size, Some(MaxBodySize::Unlimited));
    assert!(own.access.is_empty() && own.limits.is_empty());
    let values: Vec<(&str, Option<&str>)> = own
        .headers
        .response
        .iter()
        .map(|(name, rule)| (name.as_str(), rule.value.as_literal()))
        .collect();
    assert_eq!(values, [("x-a", Some("site")), ("x-b", Some("own"))]);
}

#[test]
fn top_level_locations_do_not_mix_with_sites() {
    let found = site_errors(&format!(
        "[[site]]\n{RETURN}[[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n"
    ));
    let want = "top-level `[[location]]` cannot be used with `[[site]]`: put these locations in a site, as `[[site.location]]`";
    assert_eq!(found, [(10, 1, want.to_owned())]);
}

#[test]
fn two_defaults_on_one_address_are_refused_at_the_second() {
    let found = site_errors(&format!(
        "[[site]]\ndefault = true\n{RETURN}[[site]]\nlisten = [\"127.0.0.1:8081\"]\ndefault = true\n{RETURN}"
    ));
    let want = "a second default site for 127.0.0.1:8081: the site at line 6 is its default";
    assert_eq!(found, [(13, 11, want.to_owned())]);
}

#[test]
fn a_name_on_two_sites_of_one_address_is_refused() {
    let found = site_errors(&format!(
        "[[site]]\nnames = [\"a.test\", \"*.a.test\"]\nlisten = [\"127.0.0.1:8080\"]\n{RETURN}\
         [[site]]\nnames = [\"*.a.test\"]\nlisten = [\"127.0.0.1:8081\"]\n{RETURN}\
         [[site]]\nnames = [\"b.test\", \"A.test\"]\n{RETURN}"
    ));
    let want = r#"the name "a.test" already belongs to the site at line 6, which also answers on 127.0.0.1:8080"#;
    assert_eq!(found, [(19, 20, want.to_owned())]);
}

#[test]
fn site_addresses_must_be_the_servers_and_each_address_needs_a_site() {
    let found = site_errors(&format!(
        "[[site]]\nlisten = [\"127.0.0.1:8080\", \"127.0.0.1:9999\"]\n{RETURN}"
    ));
    let want = "127.0.0.1:9999 is not an address of `[server] listen` or `listen_tls`: a site answers on those only";
    assert_eq!(found, [(7, 29, want.to_owned())]);
    let found = site_errors(&format!(
        "[[site]]\nlisten = [\"127.0.0.1:8080\"]\n{RETURN}"
    ));
    let want = "no site answers on 127.0.0.1:8081: name it in a site's `listen`, or leave `listen` out of a site to answer on every address";
    assert_eq!(found, [(6, 3, want.to_owned())]);
    let found = site_errors(&format!("[[site]]\nlisten = []\n{RETURN}"));
    assert_eq!((found[0].0, found[0].1), (7, 10));
}

#[test]
fn bad_names_and_captures_in_site_headers_are_refused_where_written() {
    let found = site_errors(&format!(
        "[[site]]\nnames = [\"*.\", \"~(\", \"a b\"]\nresponse_headers = {{ \"X\" = \"$1\" }}\n{RETURN}"
    ));
    assert_eq!(at(&found), [(7, 10), (7, 16), (7, 22), (8, 28)]);
    assert!(
        found[0].2.starts_with(r#"invalid name "*.""#),
        "{}",
        found[0].2
    );
    assert!(
        found[1].2.starts_with("invalid name regex"),
        "{}",
        found[1].2
    );
    assert!(found[3]
        .2
        .starts_with("captures ($1 to $9) need a regex location"));
}

#[test]
fn status_444_takes_no_body() {
    let found = site_errors(
        "[[site]]\n[[site.location]]\nmatch = \"/\"\nreturn = { status = 444, body = \"x\" }\n",
    );
    let want =
        "status 444 closes the connection without an answer: it takes no `body` or `location`";
    assert_eq!(found, [(9, 10, want.to_owned())]);
}

#[test]
fn a_locations_cost_is_checked_against_the_limits_it_inherits() {
    let found = site_errors(&format!(
        "[zones.ip]\nkey = \"$remote_addr\"\nrate = \"1r/s\"\n\
         [[site]]\nlimit = [{{ zone = \"ip\", burst = 3 }}]\n{RETURN}\
         [[site.location]]\nmatch = \"/big\"\ncost = 10\nreturn = {{ status = 204 }}\n"
    ));
    let want = r#"with the site's `limit`: cost 10 exceeds what zone "ip" can ever admit at once (4); every request would be rejected"#;
    assert_eq!(found, [(16, 8, want.to_owned())]);
}

fn at(found: &[(usize, usize, String)]) -> Vec<(usize, usize)> {
    found.iter().map(|(line, col, _)| (*line, *col)).collect()
}

#[test]
fn sites_that_share_a_first_name_get_labels_apart() {
    let config = sites(&format!(
        "[[site]]\nnames = [\"a.test\"]\nlisten = [\"127.0.0.1:8080\"]\n{RETURN}\
         [[site]]\nnames = [\"a.test\"]\nlisten = [\"127.0.0.1:8081\"]\n{RETURN}\
         [[site]]\nlisten = [\"127.0.0.1:8081\"]\n{RETURN}\
         [[site]]\nlisten = [\"127.0.0.1:8081\"]\n{RETURN}\
         [[site]]\nnames = [\"b.test\"]\n{RETURN}"
    ));
    let labels: Vec<&str> = config
        .sites
        .iter()
        .filter_map(|s| s.label.as_deref())
        .collect();
    assert_eq!(
        labels,
        [
            "a.test@127.0.0.1:8080",
            "a.test@127.0.0.1:8081",
            "_@127.0.0.1:8081",
            "_@127.0.0.1:8081#2",
            "b.test"
        ]
    );
}

#[test]
fn timeouts_of_a_location_replace_its_sites_one_by_one() {
    let config = parse(
        "[server]\nlisten = [\"8080\"]\n[upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n\
         [[site]]\nread_timeout = \"5s\"\nsend_timeout = \"7s\"\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\nread_timeout = \"1s\"\n\
         client_body_timeout = \"2s\"\nconnect_timeout = \"300ms\"\n\
         [[site.location]]\nmatch = \"/b\"\nupstream = \"app\"\n",
    );
    let secs = Duration::from_secs;
    let own = config.sites[0].locations[0].timeouts;
    assert_eq!(
        (own.client_body, own.send, own.read, own.connect),
        (Some(secs(2)), Some(secs(7)), Some(secs(1)), Some(Duration::from_millis(300)))
    );
    let inherited = config.sites[0].locations[1].timeouts;
    assert_eq!(
        (inherited.client_body, inherited.send, inherited.read, inherited.connect),
        (None, Some(secs(7)), Some(secs(5)), None)
    );
}

#[test]
fn a_bad_location_timeout_is_reported_at_its_value() {
    let found = errors(
        "[server]\nlisten = [\"8080\"]\n[[location]]\nmatch = \"/\"\nreturn = { status = 204 }\n\
         send_timeout = 10\n",
    );
    assert_eq!((found[0].0, found[0].1), (6, 16), "{found:?}");
    assert!(found[0].2.starts_with("invalid duration 10"), "{}", found[0].2);
}

#[test]
fn server_name_of_a_wildcard_site_in_a_redirect_is_a_warning() {
    let text = "[server]\nlisten = [\"8080\"]\n\
                [[site]]\nnames = [\"*.example.com\", \"example.com\"]\n\
                response_headers = { \"X-Site\" = \"$server_name\" }\n\
                [[site.location]]\nmatch = \"/\"\n\
                return = { status = 301, location = \"https://$server_name$request_uri\" }\n\
                [[site]]\nnames = [\"example.org\"]\n[[site.location]]\nmatch = \"/\"\n\
                return = { status = 301, location = \"https://${server_name}/\" }\n";
    let config = parse(text);
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(&format!("{ORIGIN}:5:33: `$server_name` is this site's first name as written, \"*.example.com\"")),
        "{}",
        warnings[0]
    );
    assert!(warnings[1].starts_with(&format!("{ORIGIN}:8:37: ")), "{}", warnings[1]);
    let exact = parse(&format!("{SERVER}[[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"$server_name\" }}\n"));
    assert!(exact.warnings().is_empty());
}

#[test]
fn a_log_takes_what_it_does_not_write_from_its_site_key_by_key() {
    let config = sites(&format!(
        "[log]\naccess = \"main.log\"\nformat = \"json\"\n\
         [[site]]\nlog = {{ format = \"$status $site\", escape = \"none\" }}\n\
         [[site.location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\nlog = {{ access = \"off\" }}\n\
         [[site.location]]\nmatch = \"/b\"\nreturn = {{ status = 204 }}\n\
         [[site]]\nlisten = [\"127.0.0.1:8081\"]\n{RETURN}"
    ));
    let site = &config.sites[0];
    let template = || LogFormat::Template(std::sync::Arc::new(LogTemplate::parse("$status $site", Escape::None).unwrap()));
    let [quiet, b] = &site.locations[..] else { panic!("two locations") };
    assert_eq!(config.log.with(quiet.log.as_ref()), Log { access: AccessLog::Off, format: template() });
    let main = AccessLog::File(PathBuf::from("/etc/tollgate/main.log"));
    assert_eq!(config.log.with(b.log.as_ref()), Log { access: main.clone(), format: template() });
    assert_eq!(config.sites[1].locations[0].log, None);
    // Each log once: [log]'s, the site's (its `/b` the same), its `/`'s.
    assert_eq!(config.logs().len(), 3);
}

#[test]
fn a_log_escape_needs_its_format_beside_it() {
    let got = site_errors(&format!("[[site]]\nlog = {{ escape = \"json\" }}\n{RETURN}"));
    let want = "`escape` is for a template: write the `format` it escapes beside it";
    assert_eq!(got, [(7, 18, want.to_owned())]);
    let got = site_errors("[[site]]\n[[site.location]]\nmatch = \"/\"\nreturn = { status = 204 }\nlog = { format = \"$stauts\" }\n");
    assert_eq!((got[0].0, got[0].1), (10, 19), "{got:?}");
}
