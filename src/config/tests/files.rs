//! Files and compression (DESIGN §17): `root`, `alias`, `index`, `try_files`,
//! `error_pages`, `intercept_errors`, `expires`, `precompressed`, `compress`,
//! `follow_symlinks`, `dotfiles` and `[server] sendfile`; what they become, what a
//! location inherits, and every problem `-t` reports.

use super::*;
use http::StatusCode;
use crate::config::compress::MediaRange;
use crate::config::files::{Base, ErrorPage, Last, PageStatus, PageTarget};

const UPSTREAM: &str = "[upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n";

/// `SERVER`, the `app` upstream, then one location of `rest` (its `match` on line 6).
fn located(rest: &str) -> String {
    format!("{SERVER}{UPSTREAM}[[location]]\n{rest}")
}

/// The single problem of one location.
fn problem(rest: &str) -> (usize, usize, String) {
    let mut found = errors(&located(rest));
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0)
}

fn files(location: &Location) -> &Files {
    match &location.action {
        Action::Files { files, .. } => files,
        other => panic!("not files: {other:?}"),
    }
}

#[test]
fn root_serves_the_uri_below_it_with_index_html_by_default() {
    let config = parse(&located("match = \"/\"\nroot = \"/srv/www\"\n"));
    let location = &config.sites[0].locations[0];
    let served = files(location);
    assert_eq!(served.base, Base::Root("/srv/www".into()));
    assert_eq!(served.index, ["index.html"]);
    assert!(served.try_files.is_none() && served.precompressed.is_empty());
    assert!(!served.dotfiles && !served.follow_symlinks);
    assert!(matches!(location.action, Action::Files { upstream: None, .. }));
    assert!(config.server.sendfile, "on by default, as nginx");
    assert!(location.compress.is_none() && location.expires.is_none());
}

#[test]
fn a_relative_root_or_alias_starts_at_the_config_directory() {
    let config = parse(&located(
        "match = \"/\"\nroot = \"www\"\n[[location]]\nmatch = \"^~ /assets/\"\nalias = \"../assets/\"\n",
    ));
    let locations = &config.sites[0].locations;
    assert_eq!(files(&locations[0]).base, Base::Root("/etc/tollgate/www".into()));
    assert_eq!(
        files(&locations[1]).base,
        Base::Alias {
            prefix: "/assets/".into(),
            dir: "/etc/tollgate/../assets/".into()
        }
    );
    let noted: Vec<_> = config.directories.iter().map(|(dir, place)| (dir.clone(), place.clone())).collect();
    assert_eq!(
        noted,
        [
            (PathBuf::from("/etc/tollgate/www"), format!("{ORIGIN}:7:8")),
            (PathBuf::from("/etc/tollgate/../assets/"), format!("{ORIGIN}:10:9")),
        ]
    );
}

#[test]
fn every_file_key_is_read() {
    let config = parse(&located(
        "match = \"~ ^/app/(.*)$\"\nroot = \"/srv\"\nindex = [\"index.htm\", \"default.html\"]\n\
         try_files = [\"$uri\", \"/app/$1/\", \"=404\"]\nprecompressed = [\"br\", \"gzip\"]\n\
         follow_symlinks = true\ndotfiles = true\nexpires = \"30d\"\n",
    ));
    let location = &config.sites[0].locations[0];
    let served = files(location);
    assert_eq!(served.index, ["index.htm", "default.html"]);
    let try_files = served.try_files.as_ref().unwrap();
    let tried: Vec<(String, bool)> = try_files
        .tries
        .iter()
        .map(|t| (t.text.to_string(), t.dir))
        .collect();
    assert_eq!(tried, [("${uri}".into(), false), ("/app/$1".into(), true)]);
    assert!(matches!(try_files.last, Last::Status(s) if s == StatusCode::NOT_FOUND));
    assert_eq!(served.precompressed, [Encoding::Br, Encoding::Gzip]);
    assert!(served.dotfiles && served.follow_symlinks);
    assert_eq!(location.expires, Some(Expires::After(30 * 86_400)));
}

#[test]
fn try_files_ends_with_a_uri_a_status_or_the_upstream() {
    let config = parse(&located(
        "match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$uri\", \"$uri/\", \"/index.html?from=$uri\"]\n\
         [[location]]\nmatch = \"/api/\"\nroot = \"/srv\"\nupstream = \"app\"\n\
         try_files = [\"$uri\", \"@upstream\"]\n",
    ));
    let locations = &config.sites[0].locations;
    let spa = files(&locations[0]).try_files.as_ref().unwrap();
    assert!(matches!(&spa.last, Last::Uri(uri) if uri.to_string() == "/index.html?from=${uri}"));
    assert!(spa.tries[1].dir);
    assert!(matches!(locations[1].action, Action::Files { upstream: Some(0), .. }));
    let api = files(&locations[1]).try_files.as_ref().unwrap();
    assert!(matches!(api.last, Last::Upstream));
}

#[test]
fn try_files_problems_are_reported_at_the_item() {
    let want = |line, col, message: &str| (line, col, message.to_owned());
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$uri\"]\n"),
        want(8, 13, "`try_files` needs at least two items: the files to test, then what answers when none exists (a URI, \"=404\" or \"@upstream\")")
    );
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$uri\", \"@backend\"]\n"),
        want(8, 22, "unknown target \"@backend\": the last item of `try_files` may be \"@upstream\" (this location's upstream), a URI or \"=404\"")
    );
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$uri\", \"@upstream\"]\n"),
        want(8, 22, "\"@upstream\" forwards to this location's `upstream`: it has none")
    );
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$uri\", \"=600\"]\n"),
        want(8, 22, "invalid status \"=600\" in `try_files`: expected \"=200\" to \"=599\"")
    );
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"=404\", \"/x\"]\n"),
        want(8, 14, "\"=404\" can only be the last item of `try_files`")
    );
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$uri\", \"index.html\"]\n"),
        want(8, 22, "invalid last item \"index.html\" of `try_files`: expected a URI starting with \"/\", \"=404\" or \"@upstream\"")
    );
    let (line, _, message) =
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$1\", \"/x\"]\n");
    assert_eq!(line, 8);
    assert!(message.contains("need a regex location"), "{message}");
    let (_, _, message) =
        problem("match = \"/\"\nroot = \"/srv\"\ntry_files = [\"$nope\", \"/x\"]\n");
    assert!(message.contains("nope"), "{message}");
}

#[test]
fn a_location_takes_one_action() {
    let want = |line, col, message: &str| (line, col, message.to_owned());
    assert_eq!(
        problem("match = \"/\"\nreturn = { status = 204 }\nroot = \"/srv\"\n"),
        want(8, 8, "a location takes `upstream`, `return` or `root`/`alias`: this one answers with `return`")
    );
    assert_eq!(
        problem("match = \"/\"\nupstream = \"app\"\nroot = \"/srv\"\n"),
        want(7, 12, "a location takes `upstream`, `return` or `root`/`alias`; `upstream` beside `root`/`alias` is for a `try_files` ending \"@upstream\"")
    );
    assert_eq!(
        problem("match = \"/a/\"\nroot = \"/srv\"\nalias = \"/srv/a/\"\n"),
        want(8, 9, "a location takes `root` or `alias`, not both")
    );
    assert_eq!(
        problem("match = \"/\"\n"),
        want(6, 9, "a location needs `upstream`, `return` or `root`/`alias`")
    );
}

#[test]
fn alias_needs_a_prefix_location() {
    let message = "`alias` replaces a location's prefix: it needs a prefix location (\"/path/\" or \"^~ /path/\"); use `root` here";
    for pattern in ["~ ^/a/(.*)$", "= /a"] {
        let found = problem(&format!("match = \"{pattern}\"\nalias = \"/srv/a/\"\n"));
        assert_eq!(found, (7, 9, message.to_owned()), "{pattern}");
    }
}

#[test]
fn file_keys_need_root_or_alias() {
    let found = errors(&located(
        "match = \"/\"\nupstream = \"app\"\nindex = [\"a.html\"]\ntry_files = [\"$uri\", \"/x\"]\n\
         precompressed = [\"gzip\"]\nfollow_symlinks = true\ndotfiles = false\n",
    ));
    let keys: Vec<String> = found.iter().map(|(_, _, message)| message.clone()).collect();
    let want: Vec<String> = ["index", "try_files", "precompressed", "follow_symlinks", "dotfiles"]
        .iter()
        .map(|key| format!("`{key}` needs `root` or `alias` on this location"))
        .collect();
    assert_eq!(keys, want);
}

#[test]
fn index_names_are_file_names() {
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\nindex = [\"a.html\", \"/b.html\"]\n"),
        (8, 20, "invalid index \"/b.html\": expected a file name without \"/\"".to_owned())
    );
}

#[test]
fn cost_from_needs_an_upstream_to_read() {
    let (_, _, message) =
        problem("match = \"/\"\nroot = \"/srv\"\ncost_from = \"X-Cost\"\n");
    assert_eq!(
        message,
        "`cost_from` reads the upstream's answer; this location serves files and has no `upstream`"
    );
}

#[test]
fn expires_takes_nginx_times_and_words() {
    for (written, want) in [
        ("1h 30m", Some(Expires::After(5_400))),
        ("-1", Some(Expires::After(-1))),
        ("epoch", Some(Expires::Epoch)),
        ("max", Some(Expires::Max)),
        ("off", None),
    ] {
        let config = parse(&located(&format!("match = \"/\"\nupstream = \"app\"\nexpires = \"{written}\"\n")));
        assert_eq!(config.sites[0].locations[0].expires, want, "{written}");
    }
    let (line, col, message) = problem("match = \"/\"\nupstream = \"app\"\nexpires = \"soon\"\n");
    assert_eq!((line, col), (8, 11));
    assert!(message.starts_with("invalid expires \"soon\": expected a time such as \"30d\""), "{message}");
    let (_, _, message) = problem("match = \"/\"\nupstream = \"app\"\nexpires = \"modified 1d\"\n");
    assert!(message.contains("not supported"), "{message}");
}

#[test]
fn precompressed_lists_known_codings_once() {
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\nprecompressed = [\"gzip\", \"gzip\"]\n"),
        (8, 26, "\"gzip\" is listed twice in `precompressed`".to_owned())
    );
    assert_eq!(
        problem("match = \"/\"\nroot = \"/srv\"\nprecompressed = [\"brr\"]\n"),
        (8, 18, "unknown encoding \"brr\": did you mean \"br\"?".to_owned())
    );
}

#[test]
fn compress_has_defaults_for_what_is_left_out() {
    let config = parse(&located("match = \"/\"\nupstream = \"app\"\ncompress = {}\n"));
    let compress = config.sites[0].locations[0].compress.as_ref().unwrap();
    assert_eq!(compress.encodings, [Encoding::Zstd, Encoding::Br, Encoding::Gzip]);
    assert_eq!(compress.min_length, 1024);
    assert!(compress.covers("text/css") && compress.covers("image/svg+xml"));
    assert!(!compress.covers("image/png"));
    let config = parse(&located(
        "match = \"/\"\nupstream = \"app\"\n\
         compress = { encodings = [\"gzip\"], types = [\"Application/JSON\", \"text/*\"], min_length = \"20\" }\n",
    ));
    let compress = config.sites[0].locations[0].compress.as_ref().unwrap();
    assert_eq!(compress.encodings, [Encoding::Gzip]);
    assert_eq!(
        compress.types,
        [MediaRange::Exact("application/json".into()), MediaRange::Family("text".into())]
    );
    assert_eq!(compress.min_length, 20);
    assert!(!compress.covers("application/javascript"), "nothing implied");
}

#[test]
fn compress_problems_are_reported_at_the_value() {
    let at = |rest: &str| problem(&format!("match = \"/\"\nupstream = \"app\"\ncompress = {rest}\n"));
    assert_eq!(
        at("{ encodings = [] }"),
        (8, 26, "`compress.encodings` is empty: leave `compress` out to compress nothing".to_owned())
    );
    assert_eq!(
        at("{ encodings = [\"br\", \"br\"] }").2,
        "\"br\" is listed twice in `compress.encodings`"
    );
    assert_eq!(
        at("{ types = [] }").2,
        "`compress.types` is empty: leave `compress` out to compress nothing"
    );
    assert_eq!(
        at("{ types = [\"html\"] }").2,
        "invalid media type \"html\": expected \"type/subtype\" or \"type/*\", e.g. \"text/css\""
    );
    assert!(at("{ min_length = \"1q\" }").2.starts_with("invalid size"));
    let unknown = at("{ level = 9 }").2;
    assert!(unknown.contains("level"), "{unknown}");
}

#[test]
fn compress_and_error_pages_are_inherited_from_the_site_and_server() {
    let config = parse(&format!(
        "[server]\nlisten = [\"8080\"]\nsendfile = false\ncompress = {{ encodings = [\"gzip\"] }}\n{UPSTREAM}\
         [[site]]\nnames = [\"a.test\"]\nerror_pages = {{ \"404\" = \"/404.html\", \"500 502\" = \"/50x.html\" }}\n\
         intercept_errors = true\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\n\
         [[site.location]]\nmatch = \"/own/\"\nupstream = \"app\"\nerror_pages = {{ \"403\" = \"=404 /gone\" }}\n\
         intercept_errors = false\ncompress = {{ encodings = [\"br\"] }}\n\
         [[site]]\nnames = [\"b.test\"]\ncompress = {{ encodings = [\"zstd\"] }}\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\n",
    ));
    assert!(!config.server.sendfile);
    let site = &config.sites[0];
    assert_eq!(site.error_pages.pages.len(), 3);
    let (inherited, own) = (&site.locations[0], &site.locations[1]);
    assert_eq!(
        inherited.error_pages.get(StatusCode::BAD_GATEWAY),
        Some(&ErrorPage {
            target: PageTarget::Uri("/50x.html".into()),
            status: PageStatus::Keep
        })
    );
    assert!(inherited.intercept_errors);
    assert_eq!(inherited.compress.as_ref().unwrap().encodings, [Encoding::Gzip]);
    assert!(own.error_pages.get(StatusCode::NOT_FOUND).is_none(), "replaced whole");
    assert_eq!(
        own.error_pages.get(StatusCode::FORBIDDEN).map(|p| p.status),
        Some(PageStatus::Set(StatusCode::NOT_FOUND))
    );
    assert!(!own.intercept_errors);
    assert_eq!(own.compress.as_ref().unwrap().encodings, [Encoding::Br]);
    let other = &config.sites[1].locations[0];
    assert_eq!(other.compress.as_ref().unwrap().encodings, [Encoding::Zstd]);
}

#[test]
fn error_pages_problems_are_reported_at_the_key_or_value() {
    let at = |table: &str| problem(&format!("match = \"/\"\nupstream = \"app\"\nerror_pages = {table}\n"));
    assert_eq!(
        at("{ \"404 abc\" = \"/x\" }"),
        (8, 17, "invalid status \"abc\" in `error_pages`: expected statuses 300 to 599, apart by spaces (\"500 502\")".to_owned())
    );
    assert_eq!(
        at("{ \"404\" = \"/x\", \"500 404\" = \"/y\" }").2,
        "status 404 has two pages in `error_pages`"
    );
    assert_eq!(
        at("{ \"200\" = \"/x\" }").2,
        "invalid status \"200\" in `error_pages`: expected statuses 300 to 599, apart by spaces (\"500 502\")"
    );
    let (line, col, message) = at("{ \"404\" = \"@fallback\" }");
    assert_eq!((line, col), (8, 25));
    assert!(message.contains("named locations (nginx `@name`) are not supported"), "{message}");
    assert!(at("{ \"404\" = \"=999 /x\" }").2.contains("200 to 599"));
}

#[test]
fn sendfile_and_compress_in_server() {
    let config = parse(&format!(
        "[server]\nlisten = [\"8080\"]\ncompress = {{}}\n{UPSTREAM}[[location]]\nmatch = \"/\"\nupstream = \"app\"\n"
    ));
    assert!(config.server.sendfile);
    let compress = config.sites[0].locations[0].compress.as_ref();
    assert_eq!(compress.map(|c| c.min_length), Some(1024));
}
