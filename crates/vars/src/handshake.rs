//! What a TLS connection's handshake told, as `$ssl_client_verify`, `$ssl_client_s_dn`,
//! `$ssl_client_fingerprint` and `$ja4` read it. The gateway fills it in once per
//! connection, after the handshake; a plain connection has none (each variable is then
//! empty, as nginx's are).

/// One TLS connection's variables, each already text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Handshake {
    /// `$ja4`: the ClientHello's JA4 fingerprint; empty when no text reads it (it is
    /// then not computed).
    pub ja4: Box<str>,
    /// `$ssl_client_verify`: `NONE` without a client certificate (or where none was
    /// asked for), `SUCCESS` for one the site's CA verified, `FAILED:reason` for one it
    /// did not (nginx's words).
    pub client_verify: Box<str>,
    /// `$ssl_client_s_dn`: the verified certificate's subject (RFC 2253, as nginx since
    /// 1.11.6); empty without one.
    pub client_s_dn: Box<str>,
    /// `$ssl_client_fingerprint`: the SHA-1 of the verified certificate's DER, in lower-case
    /// hex; empty without one.
    pub client_fingerprint: Box<str>,
}
