use super::*;

fn names(texts: &[&str]) -> Vec<SiteName> {
    texts
        .iter()
        .map(|text| SiteName::parse(text).expect("a name"))
        .collect()
}

/// Sites 0..: a catch-all first (the default), then the names nginx's docs use.
fn selector() -> Selector {
    let sites = [
        names(&["catchall.invalid"]),
        names(&["example.com", "www.example.com"]),
        names(&["*.example.com"]),
        names(&["*.api.example.com"]),
        names(&["mail.*"]),
        names(&["mail.example.*"]),
        names(&["~^www\\d+\\.example\\.net$", "~^(?:a|b)\\.example\\.org$"]),
        names(&["~.*\\.example\\.net$"]),
        names(&[""]),
    ];
    Selector::new(sites.iter().enumerate().map(|(i, n)| (i, &n[..])), None)
}

#[test]
fn exact_then_longest_leading_then_longest_trailing_then_regex_in_order_then_default() {
    let s = selector();
    for (host, site) in [
        ("example.com", 1),
        ("www.example.com", 1),
        ("shop.example.com", 2),
        ("a.b.example.com", 2),
        ("v1.api.example.com", 3),
        ("mail.example.com", 2),
        ("mail.example.org", 5),
        ("mail.other.org", 4),
        ("mail.example.co.uk", 5),
        ("www7.example.net", 6),
        ("b.example.org", 6),
        ("x.example.net", 7),
        ("www.example.net", 7),
        ("unknown.test", 0),
        ("example", 0),
    ] {
        assert_eq!(s.select(Some(host)), Some(site), "{host}");
    }
}

#[test]
fn case_port_and_trailing_dot_do_not_matter() {
    let s = selector();
    for host in [
        "EXAMPLE.com",
        "example.com:8080",
        "example.com.",
        "Example.COM.:443",
    ] {
        assert_eq!(s.select(Some(host)), Some(1), "{host}");
    }
    assert_eq!(s.select(Some("WWW3.Example.NET")), Some(6));
    assert_eq!(host_key("[::1]:8080"), "[::1]");
    assert_eq!(host_key("[::1]"), "[::1]");
    assert_eq!(host_key("10.0.0.1:80"), "10.0.0.1");
}

#[test]
fn a_wildcard_needs_a_label_of_its_own_and_no_host_takes_the_empty_name() {
    let s = selector();
    assert_eq!(
        s.select(Some(".example.com")),
        Some(0),
        "nothing before the dot"
    );
    assert_eq!(s.select(Some("mail.")), Some(0));
    assert_eq!(s.select(None), Some(8));
    assert_eq!(s.select(Some("")), Some(8));
    let plain = Selector::new([(3, &names(&["a.test"])[..])], None);
    assert_eq!(plain.select(None), Some(3), "the default, not a regex");
}

#[test]
fn the_default_is_the_marked_site_else_the_first_and_none_without_sites() {
    let a = names(&["a.test"]);
    let b = names(&["b.test"]);
    let marked = Selector::new([(0, &a[..]), (1, &b[..])], Some(1));
    assert_eq!(marked.select(Some("c.test")), Some(1));
    let first = Selector::new([(0, &a[..]), (1, &b[..])], None);
    assert_eq!(first.select(Some("c.test")), Some(0));
    assert_eq!(Selector::new([], None).select(Some("a.test")), None);
}

#[test]
fn names_are_checked_when_read() {
    for bad in [
        "*",
        "*.",
        "**.a",
        "a.*.b",
        "ex ample.com",
        "*example.com",
        "mail*",
        "~(",
        ".example.com",
    ] {
        assert!(SiteName::parse(bad).is_err(), "{bad}");
    }
    assert!(
        matches!(SiteName::parse("Example.COM."), Ok(SiteName::Exact(n)) if n == "example.com")
    );
    let v6 = Selector::new([(1, &names(&["[::1]"])[..])], Some(0));
    assert_eq!(v6.select(Some("[::1]:8443")), Some(1));
    assert!(SiteName::parse("[::1").is_err() && SiteName::parse("[x]").is_err());
    let hint = SiteName::parse(".example.com").unwrap_err();
    assert!(
        hint.contains(r#"write "example.com" and "*.example.com""#),
        "{hint}"
    );
}

#[test]
fn many_regex_names_still_pick_the_first_that_matches_in_file_order() {
    let names = names(&[r"~^a\d+\.test$", r"~^a1", r"~\.test$"]);
    let one_each: Vec<[SiteName; 1]> = names.iter().map(|n| [n.clone()]).collect();
    let selector = Selector::new(
        one_each.iter().enumerate().map(|(i, n)| (i + 1, &n[..])),
        Some(0),
    );
    assert_eq!(selector.select(Some("A12.test")), Some(1));
    assert_eq!(selector.select(Some("a1.example")), Some(2));
    assert_eq!(selector.select(Some("b.test")), Some(3));
    assert_eq!(selector.select(Some("b.example")), Some(0));
}
