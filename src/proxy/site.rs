//! The sites of a configuration at run time: which one answers a request (by the
//! address it arrived on and its host, `routing::sites`), and each site's locations.

use crate::config::Address;
use crate::routing::sites::Selector;
use crate::routing::Router;

use super::{Conn, Location};

/// One site, ready to route within.
pub struct Site {
    pub router: Router,
    /// Indexed by the router's location index.
    pub locations: Vec<Location>,
}

/// Every site, and how to pick one.
pub struct Sites {
    /// In file order.
    pub sites: Vec<Site>,
    /// Per listening address, the selector over the sites that answer there; empty when
    /// one site answers everywhere, and there is nothing to choose.
    pub addresses: Vec<(Address, Selector)>,
    /// Over every site: for a connection of an address this configuration no longer
    /// has (a listener a reload is closing).
    pub any: Selector,
}

impl Sites {
    /// The site for a request with `host` (the request's, as sent; looked up only when
    /// there is a choice) on `conn`. A request without a host takes the TLS handshake's
    /// name (SNI), as nginx does: there the site was chosen by SNI before the request came.
    pub fn select<'h>(
        &self,
        conn: &'h Conn,
        host: impl FnOnce() -> Option<&'h str>,
    ) -> Option<&Site> {
        if self.addresses.is_empty() {
            return self.sites.first();
        }
        let selector = self
            .addresses
            .iter()
            .find(|(address, _)| *address == conn.address)
            .map_or(&self.any, |(_, selector)| selector);
        let host = host().or(conn.sni.as_deref());
        self.sites.get(selector.select(host)?)
    }
}
