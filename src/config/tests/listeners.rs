//! `listen` and `listen_tls` items: a string or a table with `http2`.

use super::*;

#[test]
fn a_listen_item_may_be_a_table_and_http2_is_on_by_default() {
    let config = parse(
        "[server]\nlisten = [\"127.0.0.1:8080\", { addr = \"127.0.0.1:8081\", http2 = false }, \
         { addr = \"127.0.0.1:8082\" }]\n[[location]]\nmatch = \"/\"\nreturn = { status = 204 }\n",
    );
    let http2: Vec<_> = config.server.listen.iter().map(|l| l.http2).collect();
    assert_eq!(http2, [true, false, true]);
    assert_eq!(addrs(&config.server.listen)[1], addr("127.0.0.1:8081"));
    let offered: Vec<_> = config.server.addresses().map(|a| a.http2).collect();
    assert_eq!(offered, [true, false, true]);
}

#[test]
fn port_zero_listeners_keep_their_own_http2() {
    let config = parse(
        "[server]\nlisten = [\"127.0.0.1:0\", { addr = \"127.0.0.1:0\", http2 = false }]\n\
         [[location]]\nmatch = \"/\"\nreturn = { status = 204 }\n",
    );
    let http2: Vec<_> = config.server.addresses().map(|a| a.http2).collect();
    assert_eq!(http2, [true, false]);
}

#[test]
fn a_site_names_a_table_listener_by_its_address() {
    let config = parse(
        "[server]\nlisten = [\"127.0.0.1:8080\", { addr = \"127.0.0.1:8081\", http2 = false }]\n\
         [[site]]\nlisten = [\"127.0.0.1:8081\"]\n[[site.location]]\nmatch = \"/\"\nreturn = { status = 204 }\n\
         [[site]]\nlisten = [\"127.0.0.1:8080\"]\n[[site.location]]\nmatch = \"/\"\nreturn = { status = 204 }\n",
    );
    let listen = config.sites[0].listen.as_deref().unwrap();
    assert_eq!((listen[0].addr, listen[0].http2), (addr("127.0.0.1:8081"), false));
}

#[test]
fn table_problems_are_reported_where_they_are() {
    let found = errors(
        "[server]\nlisten = [{ addr = \"nowhere\" }, { http2 = false }, { addr = \"1\", htp2 = true }]\n",
    );
    let at: Vec<_> = found.iter().map(|(l, c, _)| (*l, *c)).collect();
    assert_eq!(at, [(2, 20), (2, 33), (2, 66)], "{found:#?}");
    assert!(found[0].2.starts_with("invalid listen address \"nowhere\""));
    assert_eq!(found[1].2, "missing key `addr`");
    assert!(found[2].2.starts_with("unknown key `htp2`"), "{}", found[2].2);
}

#[test]
fn quic_needs_a_tls_listener() {
    let found = errors("[server]\nlisten = [{ addr = \"2\", quic = true }]\n");
    let messages: Vec<_> = found.iter().map(|(l, _, m)| (*l, m.as_str())).collect();
    assert_eq!(
        messages,
        [(2, "`quic` needs TLS: put this address in `listen_tls` (HTTP/3 is always encrypted)")]
    );
}

#[test]
fn the_quic_section_has_its_defaults_and_checks_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    super::tls::write_cert(dir.path(), "a", &["a.test"], &rcgen::PKCS_ECDSA_P256_SHA256);
    let file = |quic: &str| {
        format!(
            "[server]\nlisten_tls = [{{ addr = \"127.0.0.1:8443\", quic = true }}, \"127.0.0.1:9443\"]\n\
             [tls]\n[[tls.certificates]]\ncert = \"a.pem\"\nkey = \"a.key\"\n{quic}\
             [[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n"
        )
    };
    let load = |text: &str| load_at(text, &dir.path().join("gateway.toml"));
    let config = load(&file("")).unwrap();
    assert_eq!(config.quic, crate::config::Quic::default());
    assert_eq!((config.quic.advertise, config.quic.max_idle_timeout), (true, Duration::from_secs(30)));
    let quics: Vec<bool> = config.server.listen_tls.iter().map(|l| l.quic).collect();
    assert_eq!(quics, [true, false]);
    let set = load(&file("[quic]\nadvertise = false\nadvertised_port = 443\nmax_idle_timeout = \"10s\"\nearly_data = false\n")).unwrap();
    assert_eq!(
        (set.quic.advertise, set.quic.advertised_port, set.quic.max_idle_timeout),
        (false, Some(443), Duration::from_secs(10))
    );
    let messages = |quic: &str| -> Vec<String> {
        let Err(errors) = load(&file(quic)) else { panic!("accepted {quic}") };
        errors.errors.into_iter().map(|e| e.message).collect()
    };
    assert_eq!(messages("[quic]\nadvertised_port = 70000\n"), ["invalid advertised_port 70000: expected 1 to 65535"]);
    assert!(load(&file("[quic]\nearly_data = true\n")).unwrap().quic.early_data);
    assert_eq!(
        messages("[quic]\nretry_above = \"200r/s\"\nrefuse_above = \"100r/s\"\n"),
        ["`refuse_above` is below `retry_above`: no connection would ever get a Retry"]
    );
    assert!(messages("[quic]\nretry_above = \"many\"\n")[0].starts_with("invalid rate"), "{:?}", messages("[quic]\nretry_above = \"many\"\n"));
    let limits = load(&file("[quic]\nretry_above = \"2000r/s\"\nrefuse_above = \"20000r/s\"\nhost_key_file = \"quic.key\"\n")).unwrap();
    assert_eq!(limits.quic.retry_above.map(crate::limit::Rate::per_second), Some(2000.0));
    assert_eq!(limits.quic.host_key_file, Some(dir.path().join("quic.key")));
    assert!(messages("[quic]\nadvertize = true\n")[0].starts_with("unknown key `advertize`"));
    let per_address = load(&file("[quic]\nper_address = \"20r/s\"\nper_address_burst = 40\n")).unwrap().quic.per_address;
    let per_address = per_address.map(|p| (p.rate.per_second(), p.burst));
    assert_eq!(per_address, Some((20.0, 40)));
    assert_eq!(
        messages("[quic]\nper_address_burst = 4\n"),
        ["`per_address_burst` without `per_address`: a burst above which rate?"]
    );
    assert_eq!(
        messages("[quic]\nper_address = \"1r/s\"\nper_address_burst = -1\n"),
        ["invalid per_address_burst -1: expected 0 to 1000000"]
    );
    assert!(messages("[quic]\nper_address = \"fast\"\n")[0].starts_with("invalid rate"));
}

#[test]
fn proxy_protocol_listeners_need_their_senders() {
    let found = errors("[server]\nlisten = [{ addr = \"127.0.0.1:80\", proxy_protocol = true }]\n");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].0, 2);
    assert!(found[0].2.contains("needs `[server] proxy_protocol_from`"), "{}", found[0].2);
    let found = errors("[server]\nlisten = [\"127.0.0.1:80\"]\nproxy_protocol_from = [\"10.0.0.0/33\"]\n");
    assert_eq!(found[0].0, 3, "{found:#?}");
    let config = parse(
        "[server]\nlisten = [{ addr = \"127.0.0.1:80\", proxy_protocol = true }, \"127.0.0.1:81\"]\n\
         proxy_protocol_from = [\"10.0.0.0/8\", \"192.0.2.1\"]\n",
    );
    let server = &config.server;
    assert!(server.listen[0].proxy_protocol && !server.listen[1].proxy_protocol);
    let settings = server.proxy_protocol();
    let at = |addr: &str, transport| Address { addr: addr.parse().unwrap(), transport, http2: true };
    assert!(settings.reads(&at("127.0.0.1:80", Transport::Tcp)));
    assert!(!settings.reads(&at("127.0.0.1:81", Transport::Tcp)));
    assert!(!settings.reads(&at("127.0.0.1:80", Transport::Tls)));
    assert_eq!(settings.from.len(), 2);
}

#[test]
fn a_listen_item_of_another_type_says_both_forms() {
    let found = errors("[server]\nlisten = [8080]\n");
    assert!(
        found[0].2.contains(r#"expected an "IP:PORT" string or a table"#),
        "{}",
        found[0].2
    );
}


#[test]
fn the_trace_section_needs_its_collector_and_checks_its_numbers() {
    let messages = |trace: &str| -> Vec<String> {
        let Err(errors) = crate::config::from_str(&format!("[server]\nlisten = [\"127.0.0.1:1\"]\n[trace]\n{trace}"), Path::new("/x/gateway.toml")) else {
            panic!("accepted {trace}")
        };
        errors.errors.into_iter().map(|e| e.message).collect()
    };
    assert!(messages("sample = 0.5\n")[0].contains("otlp"), "{:?}", messages("sample = 0.5\n"));
    let url = "otlp = \"http://127.0.0.1:4318/v1/traces\"\n";
    assert_eq!(messages(&format!("{url}sample = 1.5\n")), ["invalid sample 1.5: expected a share from 0.0 to 1.0"]);
    assert_eq!(messages(&format!("{url}queue = 0\n")), ["invalid queue 0: expected 1 to 1048576 spans"]);
    assert!(messages("otlp = \"ftp://x\"\n")[0].starts_with("invalid url"), "{:?}", messages("otlp = \"ftp://x\"\n"));
    let bad_network = messages(&format!("{url}parents_from = [\"10.0.0.0/8\", \"10.0.0.0/33\"]\n"));
    assert!(bad_network.len() == 1 && bad_network[0].contains("10.0.0.0/33"), "{bad_network:?}");
    let config = crate::config::from_str(&format!("[server]\nlisten = [\"127.0.0.1:1\"]\n[trace]\n{url}"), Path::new("/x/gateway.toml")).unwrap();
    let trace = config.trace.unwrap();
    assert_eq!((trace.sample, trace.queue, trace.trace_keys, trace.service_name.as_str()), (0.01, 2048, false, "tollgate"));
    assert_eq!(trace.parents_from, None);
}
