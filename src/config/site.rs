//! `[[site]]` (nginx `server {}`): each site's names, addresses, default flag, `acme` flag
//! (checked in `acme`), the rules its locations inherit, and its locations; then what
//! must hold between sites on one address (one default, no name twice, no address
//! without a site).
//!
//! A file without `[[site]]` is one site of its top-level `[[location]]`s, answering every
//! name on every address; the two forms do not mix.

use std::path::Path;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::limits::ZoneInfo;
use super::context::Context;
use super::location::locations;
use super::raw::{RawLocation, RawSite, RawSiteEntry, Span};
use super::maps::Maps;
use super::rules::{self, Inherited, Rules};
use super::{client_certs, server_name};
use super::{acme, values, Address, Pattern, Server, Site, SiteName};

/// The sites of the file, or `None` when any had a problem (reported). `server` is
/// `None` when `[server]` itself had one (the addresses are then not checked);
/// `acme_section` tells whether the file has `[acme]`, which `acme = true` needs.
#[expect(
    clippy::too_many_arguments,
    reason = "what the sites may name, each from its own section"
)]
pub(super) fn sites(
    raw_sites: Option<(Span, Vec<Option<RawSiteEntry>>)>,
    raw_locations: Vec<Option<Spanned<RawLocation>>>,
    server: Option<&Server>,
    upstreams: &[String],
    zones: &[ZoneInfo],
    maps: &Maps,
    acme_section: bool,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Site>> {
    let from_server = Inherited::server(server.map(|s| s.forwarded_headers));
    let context = Context {
        upstreams,
        zones,
        maps,
        base,
    };
    let Some((key, raw_sites)) = raw_sites else {
        let top = Rules {
            forwarded: from_server.forwarded,
            compress: server.and_then(|s| s.compress.clone()),
            ..Rules::default()
        };
        let locations = locations(raw_locations, &top, &context, diag)?;
        return Some(vec![Site {
            names: Vec::new(),
            server_name: String::new(),
            label: None,
            listen: None,
            default: false,
            acme: false,
            client_certificates: None,
            locations,
            headers: Default::default(),
            error_pages: Default::default(),
            log: None,
        }]);
    };
    let mut valid = true;
    if let Some(first) = raw_locations.iter().flatten().next() {
        let message = "top-level `[[location]]` cannot be used with `[[site]]`: put these locations in a site, as `[[site.location]]`";
        diag.error(first.span(), message);
        valid = false;
    }
    if raw_sites.is_empty() {
        diag.error(key.clone(), "`site` needs at least one `[[site]]` table");
        return None;
    }
    let mut checked = Vec::with_capacity(raw_sites.len());
    for entry in raw_sites {
        let site = entry.and_then(|entry| site(entry, server, &context, acme_section, diag));
        valid &= site.is_some();
        checked.extend(site);
    }
    // A site with a problem is left out, so the checks between sites wait for all.
    if let (Some(server), true) = (server, valid) {
        valid = per_address(&checked, server, &key, diag);
    }
    let mut sites: Vec<Site> = checked.into_iter().map(|c| c.site).collect();
    label_apart(&mut sites);
    valid.then_some(sites)
}

/// Sites that share a first name (`example.com` on :80 and on :443) get labels apart:
/// the name, `@` and the first address each answers on, then `#2`, `#3`… if that is
/// shared too. Else their counters would add up under one label.
fn label_apart(sites: &mut [Site]) {
    let names: Vec<Option<String>> = sites.iter().map(|s| s.label.clone()).collect();
    for i in 0..sites.len() {
        if names.iter().filter(|&name| *name == names[i]).count() < 2 {
            continue;
        }
        let name = names[i].clone().unwrap_or_default();
        let mut label = match sites[i].listen.as_deref().and_then(<[Address]>::first) {
            Some(address) => format!("{name}@{}", address.addr),
            None => name,
        };
        let before = sites[..i]
            .iter()
            .filter(|s| s.label.as_deref() == Some(&label));
        let n = before.count();
        if n > 0 {
            label = format!("{label}#{}", n + 1);
        }
        sites[i].label = Some(label);
    }
}

/// A site with the spans the checks between sites point at.
struct Checked {
    site: Site,
    /// Where the site's table starts (its line names it in messages).
    table: Span,
    /// Each name's span, in the order of `site.names`.
    name_spans: Vec<Span>,
    default: Option<Span>,
}

fn site(
    entry: RawSiteEntry,
    server: Option<&Server>,
    context: &Context<'_>,
    acme_section: bool,
    diag: &mut Diagnostics<'_>,
) -> Option<Checked> {
    let RawSiteEntry {
        span,
        site: raw,
        locations: raw_locations,
    } = entry;
    let names = names(&raw, diag);
    let listen = listen(&raw, server, diag);
    let acme = acme::site(
        raw.acme.as_ref(),
        names
            .as_ref()
            .map(|(names, _, spans)| (&names[..], &spans[..])),
        listen.as_ref(),
        server,
        acme_section,
        diag,
    );
    let answers_on_tls = listen.as_ref().is_some_and(|listen| {
        client_certs::answers_on_tls(listen.as_deref(), server)
    });
    let client_certificates = client_certs::client_certificates(
        raw.client_certificates.as_ref(),
        answers_on_tls || listen.is_none(),
        context.base,
        diag,
    );
    // Site-wide header values may use variables but no captures: those belong to a
    // regex location (a plain prefix says so in the message).
    let no_captures = Pattern::Prefix("/".to_owned());
    let inherited = Inherited::server(server.map(|s| s.forwarded_headers));
    let rules = rules::rules(&raw.rules(), 1, Some(&no_captures), context, inherited, diag);
    // Its locations inherit `[server]`'s `compress` through the site.
    let rules = rules.map(|mut rules| {
        if rules.compress.is_none() {
            rules.compress = server.and_then(|s| s.compress.clone());
        }
        rules
    });
    if let Some((names, written, _)) = &names {
        let first = names.first().zip(written.first().map(String::as_str));
        server_name::warn(first, &raw, &raw_locations, diag);
    }
    let locations = rules
        .as_ref()
        .and_then(|rules| locations(raw_locations, rules, context, diag));
    let (names, written, name_spans) = names?;
    // nginx's `$server_name`: the first name in lower case (a regex as written).
    let server_name = match (names.first(), written.first()) {
        (Some(name), Some(written)) => name.key().unwrap_or_else(|| written.clone()),
        _ => String::new(),
    };
    Some(Checked {
        site: Site {
            label: Some(match server_name.as_str() {
                "" => "_".to_owned(),
                name => name.to_owned(),
            }),
            names,
            server_name,
            listen: listen?,
            default: raw.default.as_ref().is_some_and(|d| *d.get_ref()),
            acme: acme?,
            client_certificates: client_certificates?,
            locations: locations?,
            error_pages: rules.as_ref()?.error_pages.clone().unwrap_or_default(),
            log: rules.as_ref()?.log.clone(),
            headers: rules?.headers,
        },
        table: span,
        name_spans,
        default: raw
            .default
            .as_ref()
            .filter(|d| *d.get_ref())
            .map(Spanned::span),
    })
}

/// The parsed names, as written, and their spans.
type Names = (Vec<SiteName>, Vec<String>, Vec<Span>);

fn names(raw: &RawSite, diag: &mut Diagnostics<'_>) -> Option<Names> {
    let mut names = (Vec::new(), Vec::new(), Vec::new());
    let mut valid = true;
    for written in raw.names.iter().flat_map(|list| list.get_ref()) {
        let Some(name) = diag.check(written.span(), SiteName::parse(written.get_ref())) else {
            valid = false;
            continue;
        };
        names.0.push(name);
        names.1.push(written.get_ref().clone());
        names.2.push(written.span());
    }
    valid.then_some(names)
}

/// `listen`: `None` when absent (every address), else each one of `[server]`'s.
fn listen(
    raw: &RawSite,
    server: Option<&Server>,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Vec<Address>>> {
    let Some(list) = &raw.listen else {
        return Some(None);
    };
    let mut addresses = Some(Vec::new());
    for written in list.get_ref() {
        let addr = diag.check(written.span(), values::listen_addr(written.get_ref()));
        let found = match (addr, server) {
            (Some(addr), Some(server)) => {
                let found = server.addresses().find(|a| a.addr == addr);
                if found.is_none() {
                    let message = format!(
                        "{addr} is not an address of `[server] listen` or `listen_tls`: a site answers on those only"
                    );
                    diag.error(written.span(), message);
                }
                found
            }
            _ => None,
        };
        match (&mut addresses, found) {
            (Some(addresses), Some(found)) => addresses.push(found),
            _ => addresses = None,
        }
    }
    if list.get_ref().is_empty() {
        let message = "an empty `listen` answers nowhere: leave it out to answer on every address";
        diag.error(list.span(), message);
        return None;
    }
    addresses.map(Some)
}

/// What must hold on each address of `[server]`: a site answers there, at most one site
/// is marked default, and no exact or wildcard name belongs to two sites (nginx warns
/// and ignores the second; a name that cannot be reached is a mistake).
fn per_address(sites: &[Checked], server: &Server, key: &Span, diag: &mut Diagnostics<'_>) -> bool {
    let mut valid = true;
    for address in server.addresses() {
        let here: Vec<&Checked> = sites
            .iter()
            .filter(|c| c.site.listens_on(address))
            .collect();
        let addr = address.addr;
        if here.is_empty() {
            let message = format!(
                "no site answers on {addr}: name it in a site's `listen`, or leave `listen` out of a site to answer on every address"
            );
            diag.error(key.clone(), message);
            valid = false;
        }
        let mut defaults = here.iter().filter_map(|c| Some((c, c.default.clone()?)));
        if let Some((first, _)) = defaults.next() {
            for (_, span) in defaults {
                let line = diag.line_of(first.table.start);
                let message = format!(
                    "a second default site for {addr}: the site at line {line} is its default"
                );
                diag.error(span, message);
                valid = false;
            }
        }
    }
    let names = names_once(sites, server, diag);
    valid && names
}

/// No exact or wildcard name on two sites that share an address.
fn names_once(sites: &[Checked], server: &Server, diag: &mut Diagnostics<'_>) -> bool {
    let mut valid = true;
    for (later, checked) in sites.iter().enumerate() {
        for earlier in &sites[..later] {
            let shared = server
                .addresses()
                .find(|&a| checked.site.listens_on(a) && earlier.site.listens_on(a));
            let Some(shared) = shared else {
                continue;
            };
            for (name, span) in checked.site.names.iter().zip(&checked.name_spans) {
                let Some(key) = name.key() else {
                    continue;
                };
                if earlier
                    .site
                    .names
                    .iter()
                    .any(|other| other.key().as_ref() == Some(&key))
                {
                    let line = diag.line_of(earlier.table.start);
                    let message = format!(
                        r#"the name "{key}" already belongs to the site at line {line}, which also answers on {}"#,
                        shared.addr
                    );
                    diag.error(span.clone(), message);
                    valid = false;
                }
            }
        }
    }
    valid
}
