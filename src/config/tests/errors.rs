//! Every class of problem, with the exact `line:col` it is reported at. `error(rest)`
//! appends `rest` to a valid `[server]` table, so `rest` starts at line 3.

use super::*;

const NO_LISTENER: &str = "at least one of `listen` / `listen_tls` must be non-empty";

fn at(found: &[(usize, usize, String)]) -> Vec<(usize, usize)> {
    found.iter().map(|(line, col, _)| (*line, *col)).collect()
}

fn owned(line: usize, col: usize, message: &str) -> (usize, usize, String) {
    (line, col, message.to_owned())
}

#[test]
fn missing_server_section_is_reported_without_position() {
    assert_eq!(
        errors("[log]\nformat = \"json\"\n"),
        [owned(0, 0, NO_LISTENER)]
    );
    let shown = from_str("", Path::new(ORIGIN)).unwrap_err().to_string();
    assert_eq!(shown, format!("{ORIGIN}: {NO_LISTENER}"));
}

#[test]
fn server_without_listen_is_reported_at_its_header_or_empty_list() {
    assert_eq!(
        errors("\n[server]\nworkers = 2\n"),
        [owned(2, 1, NO_LISTENER)]
    );
    assert_eq!(
        errors("[server]\nlisten = []\n"),
        [owned(2, 10, NO_LISTENER)]
    );
}

#[test]
fn bad_and_duplicate_listen_addresses_are_reported_at_each_item() {
    let found = errors("[server]\nlisten = [\"80\", \"*:80\", \"localhost:81\"]\n");
    assert_eq!(at(&found), [(2, 17), (2, 25)]);
    assert_eq!(found[0].2, "duplicate listen address 0.0.0.0:80");
    let want = r#"invalid listen address "localhost:81": expected "IP:PORT", "[IPv6]:PORT", "*:PORT" or "PORT""#;
    assert_eq!(found[1].2, want);
}

#[test]
fn duration_without_unit_is_reported_with_a_hint() {
    let want = r#"invalid duration "10": expected a number with a unit (ms, s, m, h), e.g. "10s""#;
    assert_eq!(
        error("client_header_timeout = \"10\"\n"),
        owned(3, 25, want)
    );
    let want = r#"invalid duration 10: expected a number with a unit (ms, s, m, h), e.g. "10s""#;
    assert_eq!(error("shutdown_timeout = 10\n"), owned(3, 20, want));
}

#[test]
fn zero_timeouts_are_rejected() {
    let want = r#"invalid duration "0s": must be greater than zero"#;
    assert_eq!(error("keepalive_timeout = \"0s\"\n"), owned(3, 21, want));
}

#[test]
fn workers_and_header_limit_out_of_range_are_rejected() {
    let want = r#"invalid workers 0: expected "auto" or a number from 1 to 256"#;
    assert_eq!(error("workers = 0\n"), owned(3, 11, want));
    let want = r#"invalid max_header_bytes "2m": expected a size from "1k" to "1m""#;
    assert_eq!(error("max_header_bytes = \"2m\"\n"), owned(3, 20, want));
    let want = r#"invalid size "16kb": expected a number of bytes, optionally with a unit (k, m, g), e.g. "16k""#;
    assert_eq!(error("max_header_bytes = \"16kb\"\n"), owned(3, 20, want));
}

#[test]
fn unknown_and_future_server_keys_are_reported_at_the_key() {
    assert_eq!(
        error("limit_status = 200\n"),
        owned(3, 16, "invalid limit_status 200: expected 400 to 599")
    );
    assert_eq!(
        error("  listen_tls = [\"127.0.0.1:8443\"]\n"),
        owned(
            3,
            16,
            "`listen_tls` needs a certificate: add a [[tls.certificates]] table with `cert` and `key`, or set `acme = true` on a site to order one"
        )
    );
    assert_eq!(
        error("listen_tls = [\"8080\"]\n"),
        owned(3, 15, "duplicate listen address 0.0.0.0:8080")
    );
    let (line, col, message) = error("lisen = []\n");
    assert_eq!((line, col), (3, 1));
    assert_eq!(message, "unknown key `lisen`: did you mean `listen`?");
    let (_, _, message) = error("bind_address = []\n");
    assert!(
        message.starts_with(
            "unknown key `bind_address`, expected one of `listen`, `listen_tls`, `workers`"
        ),
        "a key far from every known one lists them: {message}"
    );
}

#[test]
fn bad_real_ip_values_are_each_reported() {
    let found = errors(&format!(
        "{SERVER}[real_ip]\ntrusted = [\"10.0.0.0/8\", \"bogus\"]\nheader = \"X Bad\"\n"
    ));
    assert_eq!(at(&found), [(4, 26), (5, 10)]);
    let want =
        r#"invalid address "bogus": expected an IP address or a CIDR network, e.g. "10.0.0.0/8""#;
    assert_eq!(found[0].2, want);
    assert_eq!(
        found[1].2,
        r#"invalid header name "X Bad": expected e.g. "X-Forwarded-For""#
    );
    let (line, col, message) = error("[real_ip]\ntrusted = []\n");
    assert_eq!((line, col), (4, 11));
    assert!(
        message.starts_with("`trusted` must list at least one"),
        "{message}"
    );
    assert_eq!(
        error("[real_ip]\nrecursive = true\n"),
        owned(3, 1, "missing key `trusted`")
    );
}

#[test]
fn bad_log_values_are_reported() {
    let (line, column, message) = error("[log]\nformat = \"xml\"\n");
    assert_eq!((line, column), (4, 11));
    assert!(message.starts_with("a format without variables"), "{message}");
    let (_, column, message) = error("[log]\nformat = \"$remote_addr $stauts\"\n");
    assert_eq!(column, 24);
    assert!(message.starts_with("`$stauts` is not a log variable; did you mean `$status`?"), "{message}");
    let (_, column, message) = error("[log]\nformat = \"json\"\nescape = \"json\"\n");
    assert_eq!((column, message.as_str()), (10, "`escape` is for a template: the named formats escape their own way"));
    let want = r#"invalid access log "": expected "off", "stdout" or a file path"#;
    assert_eq!(error("[log]\naccess = \"\"\n"), owned(4, 10, want));
}

#[test]
fn bad_upstream_names_and_server_lists_are_reported() {
    let want = r#"invalid upstream name "a b": use letters, digits, "_" and "-""#;
    assert_eq!(
        error("[upstreams.\"a b\"]\nservers = [\"10.0.0.1:80\"]\n"),
        owned(3, 12, want)
    );
    let want = "`servers` must list at least one server";
    assert_eq!(error("[upstreams.app]\nservers = []\n"), owned(4, 11, want));
    assert_eq!(
        error("[upstreams.app]\nbalance = \"ip_hash\"\n"),
        owned(3, 1, "missing key `servers`")
    );
    let want = "invalid type: integer `5`, expected an upstream table";
    assert_eq!(error("[upstreams]\napp = 5\n"), owned(4, 7, want));
}

#[test]
fn bad_upstream_servers_are_reported_at_the_item() {
    let text = "[upstreams.app]\nservers = [\"10.0.0.1\", { addr = \"no-such-host.invalid:80\" }, \
                { addr = \"10.0.0.1:80\", weight = 0 }]\n";
    let found = errors(&format!("{SERVER}{text}"));
    assert_eq!(at(&found), [(4, 12), (4, 33), (4, 95)]);
    let want = r#"invalid server address "10.0.0.1": expected "HOST:PORT", e.g. "127.0.0.1:3000""#;
    assert_eq!(found[0].2, want);
    assert!(found[1]
        .2
        .starts_with(r#"cannot resolve server address "no-such-host.invalid:80""#));
    assert_eq!(found[2].2, "invalid weight 0: expected 1 to 1000");
}

#[test]
fn bad_upstream_settings_are_reported() {
    let want = "unknown variant `random`, expected one of `round_robin`, `least_conn`, `ip_hash`";
    let found = error("[upstreams.app]\nservers = [\"10.0.0.1:80\"]\nbalance = \"random\"\n");
    assert_eq!(found, owned(5, 11, want));
    let found = error("[upstreams.app]\nservers = [\"10.0.0.1:80\"]\nbalance = \"round_robbin\"\n");
    let want = "unknown value `round_robbin`: did you mean `round_robin`?";
    assert_eq!(found, owned(5, 11, want));
    let found = error("[upstreams.app]\nservers = [\"10.0.0.1:80\"]\nkeepalive = -1\n");
    assert_eq!(
        found,
        owned(5, 13, "invalid value: integer `-1`, expected usize")
    );
    let found = error("[upstreams.app]\nservers = [\"10.0.0.1:80\"]\nconnect_timeout = \"2\"\n");
    assert_eq!((found.0, found.1), (5, 19));
}

#[test]
fn bad_matches_are_reported_at_the_match() {
    let upstream = "[upstreams.app]\nservers = [\"10.0.0.1:80\"]\n";
    let found = error(&format!(
        "{upstream}[[location]]\nmatch = \"api/\"\nupstream = \"app\"\n"
    ));
    let want =
        r#"invalid match "api/": expected "/path", "= /path", "^~ /path", "~ regex" or "~* regex""#;
    assert_eq!(found, owned(6, 9, want));
    let found = error(&format!(
        "{upstream}[[location]]\nmatch = \"~ (\"\nupstream = \"app\"\n"
    ));
    assert_eq!(found, owned(6, 9, r#"invalid regex "(": unclosed group"#));
}

#[test]
fn unknown_upstream_lists_the_known_ones() {
    let want = r#"unknown upstream "nope": no `[upstreams.NAME]` is defined"#;
    assert_eq!(
        error("[[location]]\nmatch = \"/\"\nupstream = \"nope\"\n"),
        owned(5, 12, want)
    );
    let text =
        "[upstreams.b]\nservers = [\"10.0.0.1:80\"]\n[upstreams.a]\nservers = [\"10.0.0.1:80\"]\n\
                [[location]]\nmatch = \"/\"\nupstream = \"c\"\n";
    assert_eq!(
        error(text),
        owned(9, 12, r#"unknown upstream "c", expected one of "b", "a""#)
    );
}

#[test]
fn a_location_needs_exactly_one_action() {
    let want = "a location needs `upstream`, `return` or `root`/`alias`";
    assert_eq!(error("[[location]]\nmatch = \"/\"\n"), owned(4, 9, want));
    let text = "[upstreams.app]\nservers = [\"10.0.0.1:80\"]\n\
                [[location]]\nmatch = \"/\"\nupstream = \"app\"\nreturn = { status = 204 }\n";
    assert_eq!(
        error(text),
        owned(6, 9, "a location takes `upstream`, `return` or `root`/`alias`, not both `upstream` and `return`")
    );
}

#[test]
fn bad_returns_are_reported_at_the_value() {
    let want = "invalid status 100: expected 200 to 599";
    let found = error("[[location]]\nmatch = \"/\"\nreturn = { status = 100 }\n");
    assert_eq!(found, owned(5, 21, want));
    let found = error("[[location]]\nmatch = \"/\"\nreturn = { body = \"x\" }\n");
    assert_eq!(found, owned(5, 10, "missing key `status`"));
    let found =
        error("[[location]]\nmatch = \"/\"\nreturn = { status = 302, location = \"a\\nb\" }\n");
    assert_eq!((found.0, found.1), (5, 37));
    assert!(found.2.starts_with("invalid location"), "{}", found.2);
}

#[test]
fn duplicate_exact_and_prefix_locations_name_the_first() {
    let ret = "return = { status = 204 }\n";
    let text =
        format!("[[location]]\nmatch = \"= /x\"\n{ret}[[location]]\nmatch = \"=  /x\"\n{ret}");
    let want = r#"duplicate location "=  /x": already defined at line 4"#;
    assert_eq!(error(&text), owned(7, 9, want));
    let text = format!("[[location]]\nmatch = \"/x\"\n{ret}[[location]]\nmatch = \"^~ /x\"\n{ret}");
    let want = r#"duplicate location "^~ /x": already defined at line 4"#;
    assert_eq!(error(&text), owned(7, 9, want));
    let text = format!("[[location]]\nmatch = \"= /x\"\n{ret}[[location]]\nmatch = \"/x\"\n{ret}");
    assert!(
        from_str(&format!("{SERVER}{text}"), Path::new(ORIGIN)).is_ok(),
        "exact and prefix may share a path"
    );
}

#[test]
fn future_and_unknown_sections_are_reported_at_their_name() {
    let found = error("[[location]]\nmatch = \"/\"\ncost = 0\nreturn = { status = 204 }\n");
    assert_eq!(found, owned(5, 8, "invalid cost 0: expected 1 to 1000000"));
    let want = "unknown section `upstream`: in nginx a directive; here nginx's `upstream NAME {}` is an `[upstreams.NAME]` table with `servers = [\"HOST:PORT\"]`; a location forwards with `upstream = \"NAME\"`";
    assert_eq!(error("[upstream.app]\nservers = []\n"), owned(3, 2, want));
    let want = "unknown section `upstreamz`, expected one of `server`, `real_ip`, `access`, `log`, `upstreams`, `maps`, `zones`, `api_keys`, `location`, `site`, `admin`, `tls`, `redis`, `acme`, `quic`, `trace`";
    assert_eq!(error("[upstreamz.app]\nservers = []\n"), owned(3, 2, want));
}

#[test]
fn problems_in_different_sections_are_reported_together() {
    let text = "[server]\n\
                listen = [\"8080\"]\n\
                keepalive_timeout = \"75\"\n\
                [real_ip]\n\
                trusted = [\"10.0.0.300\"]\n\
                [upstreams.app]\n\
                servers = [\"10.0.0.1\"]\n\
                [[location]]\n\
                match = \"api\"\n\
                upstream = \"app\"\n\
                [[location]]\n\
                match = \"/\"\n\
                upstream = \"missing\"\n\
                [redis]\n";
    let found = errors(text);
    assert_eq!(
        at(&found),
        [(3, 21), (5, 12), (7, 12), (9, 9), (13, 12), (14, 1)],
        "{found:#?}"
    );
}

#[test]
fn syntax_errors_are_reported_with_position_beside_other_problems() {
    let text = "[server]\nlisten = [\"8080\"]\nworkers = \nkeepalive_timeout = \"5\"\n[log]\nformat = \"json\n";
    let found = errors(text);
    assert_eq!(at(&found), [(3, 11), (4, 21), (6, 15)], "{found:#?}");
    assert_eq!(
        found[0].2,
        "string values must be quoted, expected literal string"
    );
    assert!(found[1].2.starts_with("invalid duration"));
    let shown = from_str(text, Path::new(ORIGIN)).unwrap_err().to_string();
    assert!(
        shown.starts_with(&format!("{ORIGIN}:3:11: string values must be quoted")),
        "{shown}"
    );
    assert_eq!(shown.lines().count(), 3);
}

#[test]
fn missing_match_is_reported_at_the_location_header() {
    let text = "\n[[location]]\nreturn = { status = 204 }\n";
    assert_eq!(error(text), owned(4, 1, "missing key `match`"));
}

#[test]
fn every_problem_in_one_server_table_is_reported() {
    let text = "[server]\n\
                bogus = 1\n\
                listen = 8080\n\
                client_header_timeout = \"10\"\n\
                workers = 0\n\
                lisen = [\"80\"]\n";
    let found = errors(text);
    assert_eq!(
        at(&found),
        [(2, 1), (3, 10), (4, 25), (5, 11), (6, 1)],
        "{found:#?}"
    );
    assert!(
        found[0].2.starts_with("unknown key `bogus`"),
        "{}",
        found[0].2
    );
    assert_eq!(
        found[1].2,
        "invalid type: integer `8080`, expected a sequence"
    );
    assert!(found[2].2.starts_with(r#"invalid duration "10""#));
    assert!(found[3].2.starts_with("invalid workers 0"));
    assert!(
        found[4].2.starts_with("unknown key `lisen`"),
        "{}",
        found[4].2
    );
}

#[test]
fn a_bad_listen_item_does_not_hide_other_server_problems() {
    let text = "[server]\nlisten = [\"80\", 81]\nkeepalive_timeout = \"0s\"\nbogus = 1\n";
    let found = errors(text);
    assert_eq!(at(&found), [(2, 17), (3, 21), (4, 1)], "{found:#?}");
    assert_eq!(found[0].2, r#"invalid type: integer `81`, expected an "IP:PORT" string or a table like { addr = "IP:PORT", http2 = false }"#);
}

#[test]
fn every_problem_in_one_location_is_reported() {
    let text = "[upstreams.app]\nservers = [\"10.0.0.1:80\"]\n\
                [[location]]\n\
                matchh = \"/\"\n\
                match = 1\n\
                upstream = \"nope\"\n\
                [[location]]\n\
                match = \"/x\"\n\
                return = { status = \"200\", body = 2, location = \"a\\nb\" }\n\
                [[location]]\n\
                match = \"api\"\n\
                return = 5\n\
                cost = 0\n";
    let found = errors(&format!("{SERVER}{text}"));
    assert_eq!(
        at(&found),
        [
            (6, 1),
            (7, 9),
            (8, 12),
            (11, 21),
            (11, 35),
            (11, 49),
            (13, 9),
            (14, 10),
            (15, 8)
        ],
        "{found:#?}"
    );
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert!(
        messages[0].starts_with("unknown key `matchh`"),
        "{}",
        messages[0]
    );
    assert_eq!(messages[1], "invalid type: integer `1`, expected a string");
    assert_eq!(
        messages[2],
        r#"unknown upstream "nope", expected one of "app""#
    );
    assert_eq!(
        messages[3],
        r#"invalid status "200": expected a number, or a map variable alone such as "$redirect_status""#
    );
    assert_eq!(messages[4], "invalid type: integer `2`, expected a string");
    assert!(
        messages[5].starts_with("invalid location"),
        "{}",
        messages[5]
    );
    assert!(
        messages[6].starts_with(r#"invalid match "api""#),
        "{}",
        messages[6]
    );
    assert!(
        messages[7].starts_with("invalid type: integer `5`"),
        "{}",
        messages[7]
    );
    assert_eq!(messages[8], "invalid cost 0: expected 1 to 1000000");
}

#[test]
fn every_problem_in_one_upstream_is_reported_even_inside_server_items() {
    let text = "[upstreams.x]\n\
                servers = [{ addr = 1, wieght = 2 }, { addr = \"10.0.0.1:80\", weight = \"2\" }, \"10.0.0.1\", { weight = 3 }]\n\
                balance = \"random\"\n\
                keepalive = -1\n\
                read_timeout = \"5\"\n\
                bogus = 1\n\
                [[location]]\n\
                match = \"/\"\n\
                upstream = \"x\"\n";
    let found = errors(&format!("{SERVER}{text}"));
    assert_eq!(
        at(&found),
        [
            (4, 21),
            (4, 24),
            (4, 71),
            (4, 78),
            (4, 90),
            (5, 11),
            (6, 13),
            (7, 16),
            (8, 1)
        ],
        "{found:#?}"
    );
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(messages[0], "invalid type: integer `1`, expected a string");
    assert!(
        messages[1].starts_with("unknown key `wieght`"),
        "{}",
        messages[1]
    );
    assert_eq!(messages[2], r#"invalid type: string "2", expected i64"#);
    assert!(messages[3].starts_with(r#"invalid server address "10.0.0.1""#));
    assert_eq!(messages[4], "missing key `addr`");
    assert!(messages[5].starts_with("unknown variant `random`"));
    assert_eq!(messages[6], "invalid value: integer `-1`, expected usize");
    assert!(messages[7].starts_with(r#"invalid duration "5""#));
    assert!(
        messages[8].starts_with("unknown key `bogus`"),
        "{}",
        messages[8]
    );
}

#[test]
fn a_required_key_of_the_wrong_type_is_not_also_missing() {
    let text = "[upstreams.app]\nservers = \"10.0.0.1:80\"\nconnect_timeout = \"2\"\n\
                [real_ip]\ntrusted = \"10.0.0.0/8\"\nheader = \"X Bad\"\n";
    let found = errors(&format!("{SERVER}{text}"));
    assert_eq!(
        at(&found),
        [(4, 11), (5, 19), (7, 11), (8, 10)],
        "{found:#?}"
    );
    assert!(
        found[0].2.starts_with("invalid type: string"),
        "{}",
        found[0].2
    );
    assert!(
        found[2].2.starts_with("invalid type: string"),
        "{}",
        found[2].2
    );
}

#[test]
fn problems_in_tables_opened_by_headers_or_dotted_keys_are_all_reported() {
    let text = "[[upstreams.app.servers]]\naddr = 1\nweight = \"x\"\n\
                [[upstreams.app.servers]]\naddr = \"10.0.0.1:80\"\nwieght = 1\n\
                [[location]]\nmatch = \"/\"\nreturn.status = \"x\"\nreturn.body = 1\n";
    let found = errors(&format!("{SERVER}{text}"));
    assert_eq!(
        at(&found),
        [(4, 8), (5, 10), (8, 1), (11, 17), (12, 15)],
        "{found:#?}"
    );
}

#[test]
fn a_zone_with_a_problem_is_reported_once_not_again_where_it_is_used() {
    let text = "[server]\n\
                listen = [\"8080\"]\n\
                [upstreams.app]\n\
                servers = [\"127.0.0.1:3000\"]\n\
                [zones.ip]\n\
                key = \"$binary_remote_addr\"\n\
                rate = \"5r/sec\"\n\
                [zones.good]\n\
                key = \"$binary_remote_addr\"\n\
                rate = \"5r/s\"\n\
                [[location]]\n\
                match = \"/\"\n\
                upstream = \"app\"\n\
                limit = [{ zone = \"ip\" }, { zone = \"good\" }, { zone = \"nope\" }]\n";
    let found = errors(text);
    assert_eq!(at(&found), [(7, 8), (14, 55)], "{found:#?}");
    assert!(found[0].2.starts_with("invalid rate \"5r/sec\""), "{}", found[0].2);
    assert!(
        found[1].2.starts_with("unknown zone \"nope\", expected one of \"good\""),
        "the valid zone is known, the misnamed one is not: {}",
        found[1].2
    );
}
