//! `client_max_body_size`: nginx's default, `"0"` for no limit, a location's own value
//! over the server's, and bad sizes reported where they are written; `request_buffering`
//! and `client_body_temp_path`.

use super::*;

const SIZE_HINT: &str =
    r#"expected a number of bytes, optionally with a unit (k, m, g), e.g. "16k""#;

#[test]
fn the_server_limit_is_nginx_1m_unless_set() {
    assert_eq!(
        parse(SERVER).server.client_max_body_size,
        MaxBodySize::Bytes(1 << 20)
    );
    let set = |value: &str| {
        parse(&format!("{SERVER}client_max_body_size = {value}\n"))
            .server
            .client_max_body_size
    };
    assert_eq!(set("\"10m\""), MaxBodySize::Bytes(10 << 20));
    assert_eq!(set("\"8K\""), MaxBodySize::Bytes(8 << 10));
    assert_eq!(set("100"), MaxBodySize::Bytes(100));
    assert_eq!(set("\"0\""), MaxBodySize::Unlimited);
    assert_eq!(set("0"), MaxBodySize::Unlimited);
}

#[test]
fn a_location_limit_is_its_own_or_none() {
    let config = parse(&format!(
        "{SERVER}[[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n\
         [[location]]\nmatch = \"/up/\"\nreturn = {{ status = 204 }}\nclient_max_body_size = \"64m\"\n\
         [[location]]\nmatch = \"/any/\"\nreturn = {{ status = 204 }}\nclient_max_body_size = \"0\"\n"
    ));
    let limits: Vec<_> = config.sites[0]
        .locations
        .iter()
        .map(|l| l.client_max_body_size)
        .collect();
    assert_eq!(
        limits,
        [
            None,
            Some(MaxBodySize::Bytes(64 << 20)),
            Some(MaxBodySize::Unlimited)
        ]
    );
}

#[test]
fn bad_sizes_are_reported_at_their_value() {
    let want = format!(r#"invalid size "10mb": {SIZE_HINT}"#);
    assert_eq!(error("client_max_body_size = \"10mb\"\n"), (3, 24, want));
    let want = format!("invalid size -1: {SIZE_HINT}");
    assert_eq!(error("client_max_body_size = -1\n"), (3, 24, want));
    let found = error(
        "[[location]]\nmatch = \"/\"\nreturn = { status = 204 }\nclient_max_body_size = \"1.5m\"\n",
    );
    assert_eq!(
        found,
        (6, 24, format!(r#"invalid size "1.5m": {SIZE_HINT}"#))
    );
    let want = format!("invalid size true: {SIZE_HINT}");
    assert_eq!(error("client_max_body_size = true\n"), (3, 24, want));
}

#[test]
fn every_bad_limit_is_reported_at_once() {
    let found = errors(&format!(
        "{SERVER}client_max_body_size = \"x\"\n\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\nclient_max_body_size = \"y\"\n"
    ));
    let at: Vec<_> = found.iter().map(|(line, col, _)| (*line, *col)).collect();
    assert_eq!(at, [(3, 24), (7, 24)], "{found:#?}");
}

#[test]
fn request_buffering_is_on_unless_set_and_sites_and_locations_set_their_own() {
    assert_eq!(parse(SERVER).server.request_buffering, RequestBuffering::On);
    let config = parse(&format!(
        "{SERVER}request_buffering = \"off\"\n\
         [upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n\
         [[site]]\nrequest_buffering = \"on\"\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\n\
         [[site.location]]\nmatch = \"/live/\"\nupstream = \"app\"\nrequest_buffering = \"off\"\n"
    ));
    assert_eq!(config.server.request_buffering, RequestBuffering::Off);
    let set: Vec<_> = config.sites[0]
        .locations
        .iter()
        .map(|l| l.request_buffering)
        .collect();
    assert_eq!(
        set,
        [Some(RequestBuffering::On), Some(RequestBuffering::Off)]
    );
}

#[test]
fn request_buffering_is_on_or_off_and_nothing_else() {
    let (line, col, message) = error("request_buffering = \"yes\"\n");
    assert_eq!((line, col), (3, 21), "{message}");
    assert!(
        message.starts_with("unknown variant `yes`, expected `on` or `off`"),
        "{message}"
    );
    let (line, col, message) =
        error("[[location]]\nmatch = \"/\"\nreturn = { status = 204 }\nrequest_buffering = true\n");
    assert_eq!((line, col), (6, 21), "{message}");
}

#[test]
fn the_body_temp_path_is_in_the_system_temp_dir_unless_set_relative_to_the_file() {
    assert_eq!(
        parse(SERVER).server.client_body_temp_path,
        std::env::temp_dir().join("tollgate-body")
    );
    let set = |path: &str| {
        parse(&format!("{SERVER}client_body_temp_path = \"{path}\"\n"))
            .server
            .client_body_temp_path
    };
    assert_eq!(set("body"), PathBuf::from("/etc/tollgate/body"));
    assert_eq!(set("/var/spool/tg"), PathBuf::from("/var/spool/tg"));
    let (line, col, message) = error("client_body_temp_path = \"\"\n");
    assert_eq!((line, col), (3, 25), "{message}");
    assert!(
        message.starts_with("`client_body_temp_path` is empty"),
        "{message}"
    );
}
