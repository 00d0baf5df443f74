//! The sites of a configuration at run time: which one answers a request (by the
//! address it arrived on and its host, `routing::sites`), each site's locations, and the
//! request's location among them ([`super::Pipeline::route`]).

use http::{Request, StatusCode};

use crate::config::Address;
use crate::routing::sites::Selector;
use crate::routing::{self, Router};
use crate::wire::body::ClientBody;

use super::fill::host_of;
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

/// A request's site and location, its normalized path, and whether nginx's
/// trailing-slash 301 answers it.
pub(super) type Found<'s, 'p> = (&'s Site, &'s Location, std::borrow::Cow<'p, [u8]>, bool);

/// Why a request has no location: a refusal (400, 421), the site's client certificate
/// check, or no location of its site matches its path (404).
pub(super) enum Unrouted<'s, 'p> {
    Refused(StatusCode),
    /// The site's `client_certificates` refuse the connection's.
    ClientCertificate(crate::tls::Refusal),
    NotFound(&'s Site, std::borrow::Cow<'p, [u8]>),
}

impl super::Pipeline {
    /// The location for this request (in the site its address and host pick), its
    /// normalized path, and whether nginx's trailing-slash 301 answers it
    /// (`slash_redirect`); or the 400/404 that ends it.
    pub(super) fn route<'p>(
        &self,
        target: &'p http::Uri,
        req: &Request<ClientBody>,
        conn: &Conn,
    ) -> Result<Found<'_, 'p>, Unrouted<'_, 'p>> {
        let path = routing::normalize_path(target.path())
            .map_err(|_| Unrouted::Refused(StatusCode::BAD_REQUEST))?;
        // A connection left on a listener a reload removed: 421 and close, so that
        // the client asks again on an address that is configured.
        let site = self
            .sites
            .select(conn, || host_of(req))
            .ok_or(Unrouted::Refused(StatusCode::MISDIRECTED_REQUEST))?;
        if let Some(auth) = &site.client_auth {
            auth.admit(conn.https, conn.tls.as_deref(), host_of(req))
                .map_err(Unrouted::ClientCertificate)?;
        }
        let (index, slashless) = match site.router.route(&path) {
            Some(routing::Routed::Location(index)) => (index, false),
            Some(routing::Routed::AddSlash(index)) => (index, true),
            None => return Err(Unrouted::NotFound(site, path)),
        };
        match site.locations.get(index) {
            Some(location) => Ok((site, location, path, slashless)),
            None => Err(Unrouted::NotFound(site, path)),
        }
    }
}
