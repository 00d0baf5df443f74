//! A TLS session's version and cipher suite as nginx's `$ssl_protocol` and `$ssl_cipher`
//! name them (OpenSSL's names: `TLSv1.3`, `TLS_AES_128_GCM_SHA256`,
//! `ECDHE-RSA-AES128-GCM-SHA256`), for log lines.

use rustls::{CipherSuite, ProtocolVersion};

/// `$ssl_protocol` and `$ssl_cipher` of a session.
pub(crate) fn openssl_names(
    version: Option<ProtocolVersion>,
    suite: Option<CipherSuite>,
) -> (&'static str, Option<&'static str>) {
    let protocol = match version {
        Some(ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(ProtocolVersion::TLSv1_2) => "TLSv1.2",
        _ => "TLS",
    };
    (protocol, suite.and_then(cipher))
}

/// OpenSSL's name of the suites rustls offers.
fn cipher(suite: CipherSuite) -> Option<&'static str> {
    Some(match suite {
        CipherSuite::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        _ => return None,
    })
}
