//! `ssl_certificate` / `ssl_certificate_key` (`[[tls.certificates]]`), `ssl_protocols`,
//! and the TLS settings tollgate keeps fixed.

use tollgate_nginx::Directive;

use super::level::Context;
use super::report::Status;
use super::state::Walk;

pub(super) fn setting(w: &mut Walk<'_>, d: &Directive, context: Context) -> Option<Status> {
    let _ = context;
    let args = d.args.as_slice();
    Some(match (d.name.as_str(), args) {
        ("ssl_certificate" | "ssl_certificate_key", [path]) => {
            if path.contains('$') || path.starts_with("data:") || path.starts_with("engine:") {
                return Some(Status::Unsupported("a certificate from a variable or an engine: name the files; tollgate picks one by SNI".to_owned()));
            }
            let full = w.dir.join(path).display().to_string();
            let key = d.name == "ssl_certificate_key";
            let pairs = &mut w.build.certificates;
            // A certificate and its key come in pairs, in the order they are written.
            match pairs.iter_mut().find(|(c, k)| if key { k.is_empty() && !c.is_empty() } else { c.is_empty() }) {
                Some((c, k)) if key => *k = full,
                Some((c, _)) => *c = full,
                None if key => pairs.push((String::new(), full)),
                None => pairs.push((full, String::new())),
            }
            match pairs.len() {
                1 => Status::Exact(None),
                _ => Status::Approx("tollgate picks a certificate by SNI from the names it holds, whatever server {} it was written in".to_owned()),
            }
        }
        ("ssl_protocols", protocols) => {
            let old = protocols.iter().any(|p| matches!(p.as_str(), "SSLv2" | "SSLv3" | "TLSv1" | "TLSv1.1"));
            let has = |v: &str| protocols.iter().any(|p| p == v);
            match (old, has("TLSv1.2"), has("TLSv1.3")) {
                (false, true, true) => Status::Exact(None),
                (true, _, _) => Status::Approx("tollgate speaks TLS 1.2 and 1.3 only".to_owned()),
                _ => Status::Approx("tollgate speaks both TLS 1.2 and 1.3".to_owned()),
            }
        }
        ("ssl", _) => Status::Approx("write `ssl` on the listen: tollgate's TLS is per address (listen_tls)".to_owned()),
        ("ssl_client_certificate" | "ssl_verify_client" | "ssl_verify_depth", _) => Status::Unsupported("client certificates come with DESIGN §18 (`client_certificates`)".to_owned()),
        (name, _) if name.starts_with("ssl_") => Status::Approx("tollgate's TLS settings are its own: TLS 1.3 and 1.2 AEAD suites, session tickets and a session cache (docs/config.md, [tls])".to_owned()),
        ("http2", _) => Status::Approx("tollgate offers HTTP/2 on every TLS address (`http2 = false` on a listen table is coming)".to_owned()),
        _ => return None,
    })
}
