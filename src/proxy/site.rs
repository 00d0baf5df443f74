//! The sites of a configuration at run time: which one answers a request (by the
//! address it arrived on and its host, `routing::sites`), and each site's locations.

use crate::config::Address;
use crate::routing::sites::Selector;
use crate::routing::Router;

use super::{Conn, HeaderRules, Location};

/// One site, ready to route within.
pub struct Site {
    pub router: Router,
    /// Indexed by the router's location index.
    pub locations: Vec<Location>,
    /// The site's own header rules, for the answers no location gives (a 404).
    pub headers: HeaderRules,
    /// `$server_name`: its first name.
    pub server_name: std::sync::Arc<str>,
    /// Its `error_pages`, for the 404 of a path no location matches.
    pub error_pages: crate::config::ErrorPages,
    /// Its `client_certificates`: each request checked against what the connection's
    /// handshake found.
    pub client_auth: Option<std::sync::Arc<crate::tls::ClientAuth>>,
    /// Where its 404 for a path no location matches is logged (`None`: nowhere).
    pub log: Option<std::sync::Arc<crate::log::AccessLog>>,
}

/// Every site, and how to pick one.
pub struct Sites {
    /// In file order.
    pub sites: Vec<Site>,
    /// Per listening address, the selector over the sites that answer there; empty when
    /// one site answers everywhere, and there is nothing to choose.
    pub addresses: Vec<(Address, Selector)>,
}

impl Sites {
    /// The site for a request with `host` (the request's, as sent; looked up only when
    /// there is a choice) on `conn`, if one answers on its address. TLS's SNI plays no part, as in nginx: it picks the
    /// certificate, and a request without a host goes to the name `""` or the default.
    pub(crate) fn select<'h>(&self, conn: &Conn, host: impl FnOnce() -> Option<&'h str>) -> Option<&Site> {
        if self.addresses.is_empty() {
            return self.sites.first();
        }
        // `None` for an address this configuration no longer has (a listener a reload
        // is closing): no site answers there, not even one that listens elsewhere.
        let (_, selector) = self
            .addresses
            .iter()
            .find(|(address, _)| *address == conn.address)?;
        self.sites.get(selector.select(host())?)
    }
}
