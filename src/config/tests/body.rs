//! `client_max_body_size`: nginx's default, `"0"` for no limit, a location's own value
//! over the server's, and bad sizes reported where they are written.

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
