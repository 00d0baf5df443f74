//! Site and location selection: what a file of 20 sites with 10 locations each (200 in
//! all) costs a request, against one site with 10 locations, the same router without
//! any site choice.
//!
//! ```text
//! cargo bench --bench routing
//! ```
//!
//! Groups:
//! - `location`: `Router::find` alone, on one site's 10 locations;
//! - `site_and_location`: `Selector::select` on the request's Host (exact names, leading
//!   and trailing wildcards, regex names and unknown hosts, in turn), then that site's
//!   `Router::find`.
//!
//! - `site_only/HOST`: `Selector::select` alone, one host at a time (what each kind of
//!   name costs: exact, upper case with a port, wildcards, a regex, none).
//!
//! The first two check that they found a site and a location every time.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use tollgate::routing::sites::{Selector, SiteName};
use tollgate::routing::{Pattern, Router};

const SITES: usize = 20;

/// One site's 10 locations, as an ordinary site has them.
fn router() -> Router {
    let patterns = vec![
        Pattern::Prefix("/".into()),
        Pattern::Exact("/".into()),
        Pattern::Exact("/health".into()),
        Pattern::Prefix("/api/".into()),
        Pattern::Prefix("/api/v2/".into()),
        Pattern::PriorityPrefix("/static/".into()),
        Pattern::Prefix("/login".into()),
        Pattern::Prefix("/admin/".into()),
        Pattern::regex(r"\.(png|jpg|css|js)$", true).expect("regex"),
        Pattern::regex(r"^/users/(\d+)$", false).expect("regex"),
    ];
    Router::new(patterns)
}

/// Site `i`'s names: every fourth has a leading wildcard, a trailing one, a regex.
fn names(i: usize) -> Vec<SiteName> {
    let mut texts = vec![
        format!("site{i}.example.com"),
        format!("www.site{i}.example.com"),
    ];
    match i % 4 {
        1 => texts.push(format!("*.site{i}.example.org")),
        2 => texts.push(format!("mail{i}.*")),
        3 => texts.push(format!("~^app\\d+\\.site{i}\\.example\\.net$")),
        _ => {}
    }
    texts
        .iter()
        .map(|text| SiteName::parse(text).expect("a name"))
        .collect()
}

const REQUESTS: [(&str, &str); 8] = [
    ("site7.example.com", "/api/v2/orders"),
    ("WWW.site12.example.com:443", "/static/app.css"),
    ("shop.site5.example.org", "/login"),
    ("mail10.example.com", "/users/42"),
    ("app3.site19.example.net", "/health"),
    ("unknown.test", "/"),
    ("site0.example.com", "/img/logo.png"),
    ("site19.example.com.", "/admin/users"),
];

fn bench(c: &mut Criterion) {
    let one = router();
    let routers: Vec<Router> = (0..SITES).map(|_| router()).collect();
    let names: Vec<Vec<SiteName>> = (0..SITES).map(names).collect();
    let selector = Selector::new(names.iter().enumerate().map(|(i, n)| (i, &n[..])), None);
    let mut group = c.benchmark_group("routing");
    group.bench_function("location", |b| {
        let mut i = 0;
        b.iter(|| {
            let (_, path) = REQUESTS[i % REQUESTS.len()];
            i += 1;
            let found = one.find(black_box(path.as_bytes()));
            assert!(found.is_some());
            found
        })
    });
    group.bench_function("site_and_location", |b| {
        let mut i = 0;
        b.iter(|| {
            let (host, path) = REQUESTS[i % REQUESTS.len()];
            i += 1;
            let site = selector.select(Some(black_box(host))).expect("a site");
            let found = routers[site].find(black_box(path.as_bytes()));
            assert!(found.is_some());
            found
        })
    });
    for (host, _) in REQUESTS {
        group.bench_function(format!("site_only/{host}"), |b| {
            b.iter(|| selector.select(Some(black_box(host))).expect("a site"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
