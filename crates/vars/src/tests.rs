use http::{HeaderMap, Method};

use super::*;

fn request<'a>(headers: &'a HeaderMap, host: Option<&'a str>) -> Request<'a> {
    Request {
        https: true,
        method: &Method::GET,
        host,
        server_name: "example.com",
        server_port: 8443,
        request_uri: "/a%20b/../c?x=1",
        uri: b"/a b/c",
        args: Some("x=1"),
        remote_addr: "192.0.2.7".parse().expect("ip"),
        remote_port: 51000,
        request_id: Some("0123456789abcdef0123456789abcdef"),
        headers,
        captures: None,
        claims: None,
        tls: None,
    }
}

fn rendered(text: &str, req: &Request<'_>) -> String {
    let mut out = Vec::new();
    VarText::parse(text).expect("parses").render(req, &mut out);
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn every_variable_is_filled_in() {
    let mut headers = HeaderMap::new();
    headers.append("x-tag", "one".parse().expect("value"));
    headers.append("x-tag", "two".parse().expect("value"));
    let req = request(&headers, Some("Example.COM.:8443"));
    assert_eq!(
        rendered("https://$host$request_uri", &req),
        "https://example.com/a%20b/../c?x=1"
    );
    assert_eq!(
        rendered("$scheme://${host}:$server_port$uri?$args", &req),
        "https://example.com:8443/a b/c?x=1"
    );
    assert_eq!(
        rendered("$remote_addr:$remote_port", &req),
        "192.0.2.7:51000"
    );
    assert_eq!(
        rendered("id=$request_id", &req),
        "id=0123456789abcdef0123456789abcdef"
    );
    assert_eq!(
        rendered("[$http_x_tag] [$http_absent]", &req),
        "[one, two] []"
    );
    assert_eq!(rendered("no variables", &req), "no variables");
}

#[test]
fn remote_user_is_the_basic_user_checked_or_not() {
    let mut headers = HeaderMap::new();
    let req = request(&headers, None);
    assert_eq!(rendered("[$remote_user]", &req), "[]");
    // "alice:secret", padding left out as nginx allows.
    headers.insert(
        "authorization",
        "basic   YWxpY2U6c2VjcmV0".parse().expect("value"),
    );
    let req = request(&headers, None);
    assert_eq!(rendered("[$remote_user]", &req), "[alice]");
    for other in ["Bearer YWxpY2U6c2VjcmV0", "Basic !!", "Basic OnNlY3JldA=="] {
        headers.insert("authorization", other.parse().expect("value"));
        let req = request(&headers, None);
        assert_eq!(rendered("[$remote_user]", &req), "[]", "{other}");
    }
}

#[test]
fn hosts_lose_their_port_and_trailing_dot_and_keep_ipv6_brackets() {
    let headers = HeaderMap::new();
    for (host, name) in [
        ("example.com", "example.com"),
        ("EXAMPLE.com:80", "example.com"),
        ("example.com.", "example.com"),
        ("[::1]:8080", "[::1]"),
        ("[::1]", "[::1]"),
        ("10.0.0.1:80", "10.0.0.1"),
    ] {
        assert_eq!(rendered("$host", &request(&headers, Some(host))), name);
    }
    let nameless = Request {
        server_name: "",
        ..request(&headers, None)
    };
    assert_eq!(rendered("[$host]", &nameless), "[]");
}

#[test]
fn captures_come_from_the_location_regex() {
    let headers = HeaderMap::new();
    let regex = regex::bytes::Regex::new(r"^/old/(\w+)/(\d+)$").expect("regex");
    let captures = regex.captures(b"/old/page/42").expect("matches");
    let req = Request {
        captures: Some(&captures),
        ..request(&headers, None)
    };
    assert_eq!(rendered("/new/$2/$1$3", &req), "/new/42/page");
    let text = VarText::parse("/new/$2/$1").expect("parses");
    assert_eq!(text.max_capture(), 2);
}

#[test]
fn unknown_variables_are_refused_where_their_dollar_is() {
    let err = VarText::parse("https://$hots$request_uri").expect_err("unknown");
    assert_eq!(err.at, 8);
    assert!(
        err.message.starts_with("unknown variable `$hots`"),
        "{}",
        err.message
    );
    assert_eq!(VarText::parse("a$").expect_err("no name").at, 1);
    assert_eq!(VarText::parse("${}").expect_err("no name").at, 0);
    assert_eq!(VarText::parse("x${host").expect_err("unclosed").at, 1);
    assert_eq!(VarText::parse("$0").expect_err("no $0").at, 0);
}

#[test]
fn literal_text_is_known_as_such_and_shown_back_as_written() {
    assert_eq!(
        VarText::parse("/x").expect("parses").as_literal(),
        Some("/x")
    );
    assert_eq!(VarText::parse("").expect("parses").as_literal(), Some(""));
    let text = VarText::parse("https://$host$request_uri?$http_x_a $1").expect("parses");
    assert_eq!(text.as_literal(), None);
    assert_eq!(
        text.to_string(),
        "https://${host}${request_uri}?${http_x_a} $1"
    );
    let again = VarText::parse(&text.to_string()).expect("parses");
    assert_eq!(again, text);
}

#[test]
fn header_values_get_no_control_bytes() {
    assert_eq!(
        escape_for_header(b"/a b\r\nSet-Cookie: x\xff%41"),
        b"/a%20b%0D%0ASet-Cookie:%20x%FF%41".to_vec()
    );
}

#[test]
fn host_falls_back_to_the_server_name_as_nginx_does() {
    let headers = HeaderMap::new();
    let without = request(&headers, None);
    assert_eq!(
        rendered("$host|$server_name", &without),
        "example.com|example.com"
    );
    let with = request(&headers, Some("WWW.Example.com:8443"));
    assert_eq!(
        rendered("$host|$server_name", &with),
        "www.example.com|example.com"
    );
}

#[test]
fn every_variable_prints_back_as_it_parses() {
    let all = "$scheme $host $server_name $server_port $request_method $request_uri $uri $args \
               $arg_k $remote_addr $binary_remote_addr $remote_port $remote_user $request_id \
               $http_x_a $cookie_s $1";
    let text = VarText::parse(all).expect("parses");
    assert_eq!(text.pieces().len(), 33, "{text:?}");
    let again = VarText::parse(&text.to_string()).expect("parses");
    assert_eq!(again, text);
    for named in ["$arg_", "$cookie_", "$http_"] {
        let err = VarText::parse(named).expect_err("a name is needed");
        assert!(
            err.message.starts_with("unknown variable"),
            "{}",
            err.message
        );
    }
}

#[test]
fn a_place_can_refuse_a_variable_where_its_dollar_is() {
    let refuse = |var: &Var| (*var == Var::RequestId).then(|| "no ids here".to_owned());
    let err = VarText::parse_refusing("k:$uri:$request_id", refuse).expect_err("refused");
    assert_eq!((err.at, err.message.as_str()), (7, "no ids here"));
    assert!(VarText::parse_refusing("k:$uri", refuse).is_ok());
}

#[test]
fn a_claim_of_the_verified_token_is_a_variable_and_empty_without_one() {
    let headers = HeaderMap::new();
    let pair = |name: &str, value: &str| (Box::from(name), Box::from(value.as_bytes()));
    let claims = Claims::new(vec![pair("sub", "alice"), pair("plan", "pro")]);
    let text = "$jwt_claim_sub:${jwt_claim_plan}:$jwt_claim_scope";
    assert_eq!(rendered(text, &request(&headers, None)), "::");
    let verified = Request {
        claims: Some(&claims),
        ..request(&headers, None)
    };
    assert_eq!(rendered(text, &verified), "alice:pro:");
    assert_eq!(
        VarText::parse(text).unwrap().to_string(),
        "${jwt_claim_sub}:${jwt_claim_plan}:${jwt_claim_scope}"
    );
}
