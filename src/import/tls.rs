//! `ssl_certificate` / `ssl_certificate_key` (`[[tls.certificates]]`), `ssl_protocols`,
//! `ssl_verify_client` / `ssl_client_certificate` (a site's `client_certificates`), and
//! the TLS settings tollgate keeps fixed.

use tollgate_nginx::Directive;

use super::level::{Context, Level};
use super::report::Status;
use super::state::Walk;
use crate::config::raw::RawClientCertificates;

/// Where a site's `client_certificates` differ from nginx's `ssl_verify_client`.
const CLIENT_CERTIFICATES: &str = "checked as nginx checks (400 for a certificate the CAs do not verify, or none with `on`; 421 for a request naming another name than the handshake's), and also: a plain-HTTP request to this server is refused with `on` (nginx lets it pass), and a TLS connection whose handshake chose another server's CAs (no SNI) gets 421";

pub(super) fn setting(w: &mut Walk<'_>, d: &Directive, own: &mut Level, context: Context) -> Option<Status> {
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
        ("ssl_verify_client", [mode]) => match mode.as_str() {
            "off" => {
                own.auth.verify_client = Some(mode.clone());
                Status::Exact(None)
            }
            "on" | "optional" => {
                own.auth.verify_client = Some(mode.clone());
                Status::Approx(CLIENT_CERTIFICATES.to_owned())
            }
            _ => Status::Unsupported(
                "tollgate refuses a certificate its `ca` does not verify (no `optional_no_ca`): use \"optional\" with the CA that signed it"
                    .to_owned(),
            ),
        },
        ("ssl_client_certificate", [path]) => {
            own.auth.client_ca = Some(w.dir.join(path).display().to_string());
            Status::Exact(None)
        }
        ("http3", [on]) if on == "on" => Status::Exact(None),
        ("http3", _) => Status::Unsupported("HTTP/3 is on or off per address (`quic` on its `listen_tls` table), not per server".to_owned()),
        (name, _) if name.starts_with("quic_") || name.starts_with("http3_") => {
            Status::Approx("tollgate's QUIC settings are its own, in [quic] (docs/config.md)".to_owned())
        }
        ("ssl_early_data", [on]) if on == "on" => Status::Approx(
            "0-RTT is `[quic] early_data = true`, for HTTP/3 only (none over TCP TLS); where nginx passes every early request and sets `$ssl_early_data`, tollgate takes safe methods only (with `Early-Data: 1` upstream) and answers the others 425 Too Early".to_owned(),
        ),
        ("ssl_verify_depth", _) => Status::Approx("tollgate checks a client's chain to any depth its `ca` reaches".to_owned()),
        (name, _) if name.starts_with("ssl_") => Status::Approx("tollgate's TLS settings are its own: TLS 1.3 and 1.2 AEAD suites, session tickets and a session cache (docs/config.md, [tls])".to_owned()),
        ("http2", _) => Status::Approx("tollgate offers HTTP/2 on every TLS address (`http2 = false` on a listen table is coming)".to_owned()),
        _ => return None,
    })
}

/// The `client_certificates` of a server whose level says `ssl_verify_client on` or
/// `optional` with an `ssl_client_certificate`; `None` otherwise (nginx refuses `on`
/// without the CAs' file).
pub(super) fn client_certificates(level: &Level) -> Option<RawClientCertificates> {
    let verify = level.auth.verify_client.as_deref().filter(|v| *v != "off")?;
    let ca = level.auth.client_ca.clone()?;
    let spanned = |text: &str| serde_spanned::Spanned::new(0..0, text.to_owned());
    Some(RawClientCertificates {
        ca: Some(spanned(&ca)),
        verify: (verify != "on").then(|| spanned(verify)),
    })
}
