//! The configuration errors sites add, each reported at the line it is on (the spec's
//! list: two defaults or one name twice on an address, a site address the server does not
//! listen on, a server address no site serves, an invalid name).

use std::path::Path;

/// `[server]` with two addresses, before the sites of each case.
const SERVER: &str = "[server]\nlisten = [\"127.0.0.1:8080\", \"127.0.0.1:8081\"]\n";

/// A site's body after its own lines: one location.
const LOCATION: &str = "[[site.location]]\nmatch = \"/\"\nreturn = { status = 200 }\n";

/// The cases: what is wrong, and the sites that are wrong so. The line of the error is
/// the line marked `# here` (any of them where two lines share the blame).
const CASES: &[(&str, &[&str])] = &[
    (
        "two defaults on one address",
        &[
            "default = true # here\n",
            "names = [\"b.test\"]\ndefault = true # here\n",
        ],
    ),
    (
        "one exact name on two sites of one address",
        &[
            "names = [\"a.test\"] # here\n",
            "names = [\"b.test\", \"A.test\"] # here\n",
        ],
    ),
    (
        "one wildcard on two sites of one address",
        &[
            "names = [\"*.a.test\"] # here\nlisten = [\"127.0.0.1:8080\"]\n",
            "names = [\"*.a.test\"] # here\n",
        ],
    ),
    (
        "a site address the server does not listen on",
        &["listen = [\"127.0.0.1:8080\", \"127.0.0.1:9999\"] # here\n"],
    ),
    (
        "an invalid name",
        &["names = [\"a.test\", \"www.*.test\"] # here\n"],
    ),
    ("an invalid name regex", &["names = [\"~^(a\"] # here\n"]),
    (
        "nginx's .example.com, refused with a hint",
        &["names = [\"a.test\", \".example.com\"] # here\n"],
    ),
];

/// The config of `sites`, and the 1-based numbers of its lines marked `# here`.
fn config(sites: &[&str]) -> (String, Vec<usize>) {
    let mut text = SERVER.to_owned();
    for site in sites {
        text.push_str("[[site]]\n");
        text.push_str(site);
        text.push_str(LOCATION);
    }
    let marked = text.lines().enumerate();
    let lines = marked
        .filter(|(_, line)| line.ends_with("# here"))
        .map(|(i, _)| i + 1)
        .collect();
    (text, lines)
}

#[test]
fn each_site_error_is_reported_at_its_line() {
    let mut wrong = String::new();
    for (what, sites) in CASES {
        let (text, lines) = config(sites);
        let errors = match tollgate::config::from_str(&text, Path::new("t.toml")) {
            Ok(_) => {
                wrong.push_str(&format!("{what}: accepted\n{text}\n"));
                continue;
            }
            Err(errors) => errors.to_string(),
        };
        let at_a_marked_line = lines
            .iter()
            .any(|line| errors.contains(&format!("t.toml:{line}:")));
        if !at_a_marked_line {
            wrong.push_str(&format!(
                "{what}: not at lines {lines:?}: {errors}\n{text}\n"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong}");
}

#[test]
fn a_server_address_no_site_listens_on_is_reported() {
    let text = format!("{SERVER}[[site]]\nlisten = [\"127.0.0.1:8080\"]\n{LOCATION}");
    let Err(errors) = tollgate::config::from_str(&text, Path::new("t.toml")) else {
        panic!("accepted, though 127.0.0.1:8081 has no site");
    };
    let errors = errors.to_string();
    // At the address in `listen` (line 2) or at the site that could take it (line 3).
    let at = |line| errors.contains(&format!("t.toml:{line}:"));
    assert!(at(2) || at(3), "{errors}");
    assert!(errors.contains("127.0.0.1:8081"), "{errors}");
}

#[test]
fn a_name_may_repeat_on_sites_that_share_no_address_and_tls_addresses_may_be_named() {
    let dir = tempfile::tempdir().unwrap();
    super::tls::certificate(dir.path());
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:8080\"]\nlisten_tls = [\"127.0.0.1:8443\"]\n\
         [[tls.certificates]]\ncert = \"site.pem\"\nkey = \"site.key\"\n\
         [[site]]\nnames = [\"a.test\"]\nlisten = [\"127.0.0.1:8080\"]\n{LOCATION}\
         [[site]]\nnames = [\"a.test\"]\nlisten = [\"127.0.0.1:8443\"]\n{LOCATION}"
    );
    let path = dir.path().join("gateway.toml");
    if let Err(errors) = tollgate::config::from_str(&text, &path) {
        panic!("{errors}\n{text}");
    }
}

/// A site with a bad name or address still names the addresses it answers on: one
/// mistake makes one error, not also "no site answers on" for each of them.
#[test]
fn a_broken_site_still_answers_on_its_addresses() {
    let mut wrong = String::new();
    for sites in [
        "listen = [\"127.0.0.1:8080\", \"127.0.0.1:8081\", \"127.0.0.1:9999\"]\n",
        "names = [\"www.*.test\"]\n",
        "names = [\"~^(a\"]\n",
    ] {
        let (text, _) = config(&[sites]);
        let Err(errors) = tollgate::config::from_str(&text, Path::new("t.toml")) else {
            panic!("accepted:\n{text}");
        };
        let errors = errors.to_string();
        if errors.contains("no site answers on") {
            wrong.push_str(&format!("{sites:?}: {errors}\n"));
        }
    }
    assert!(wrong.is_empty(), "{wrong}");
}
