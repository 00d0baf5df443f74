//! `count_status` and `cost_from`: typed values, and each problem at its `line:col`.

use super::*;

const ZONES: &str = "[zones.login]\nkey = \"$binary_remote_addr\"\nrate = \"5r/m\"\nalgorithm = \"fixed_window\"\n\
                     [zones.c]\nkey = \"$binary_remote_addr\"\nalgorithm = \"concurrency\"\nmax = 2\n\
                     [upstreams.app]\nservers = [\"127.0.0.1:9000\"]\n";

#[test]
fn statuses_and_classes_make_one_set_and_cost_from_names_a_header() {
    let text = format!(
        "{SERVER}{ZONES}[[location]]\nmatch = \"= /login\"\nupstream = \"app\"\n\
         cost_from = \"X-Cost\"\nkeep_cost_header = true\n\
         limit = [{{ zone = \"login\", count_status = [401, \"5xx\", 429] }}]\n"
    );
    let config = parse(&text);
    let location = &config.sites[0].locations[0];
    let count = location.limits[0].count.expect("a set");
    for counted in [401, 429, 500, 503, 599] {
        assert!(count.contains(counted), "{counted}");
    }
    for not in [200, 400, 403, 499, 600] {
        assert!(!count.contains(not), "{not}");
    }
    assert_eq!(
        location.cost_from,
        Some(CostFrom {
            header: http::HeaderName::from_static("x-cost"),
            keep: true
        })
    );
}

#[test]
fn count_status_and_cost_from_problems_are_each_reported() {
    let text = format!(
        "{SERVER}{ZONES}[[location]]\nmatch = \"/a\"\nupstream = \"app\"\n\
         limit = [{{ zone = \"login\", count_status = [200, 600, \"6xx\", \"4x\", true] }}]\n\
         [[location]]\nmatch = \"/b\"\nupstream = \"app\"\n\
         limit = [{{ zone = \"c\", count_status = [401] }}, {{ zone = \"login\", count_status = [] }}]\n\
         [[location]]\nmatch = \"/c\"\nreturn = {{ status = 200 }}\ncost_from = \"X-Cost\"\n\
         [[location]]\nmatch = \"/d\"\nupstream = \"app\"\ncost_from = \"Content-Length\"\n\
         [[location]]\nmatch = \"/e\"\nupstream = \"app\"\ncost_from = \"bad header\"\n\
         [[location]]\nmatch = \"/f\"\nupstream = \"app\"\nkeep_cost_header = true\n"
    );
    let found = errors(&text);
    let messages: Vec<&str> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    let expected = [
        "invalid status 600: expected a status from 100 to 599 (401) or a class (\"4xx\")",
        "invalid status class \"6xx\": expected",
        "invalid status class \"4x\": expected",
        "invalid status true: expected",
        "`count_status` does not apply to a `concurrency` zone",
        "`count_status` is empty",
        "`cost_from` reads the upstream's answer; this location answers with `return`",
        "`cost_from` cannot be \"Content-Length\"",
        "invalid header name \"bad header\" in `cost_from`",
        "`keep_cost_header` needs `cost_from`",
    ];
    assert_eq!(messages.len(), expected.len(), "{found:#?}");
    for (message, start) in messages.iter().zip(expected) {
        assert!(
            message.starts_with(start),
            "{message:?} should start {start:?}"
        );
    }
    // Each at its own item: line 11 holds /a's list, its three bad items apart.
    let a: Vec<(usize, usize)> = found[..4].iter().map(|(l, c, _)| (*l, *c)).collect();
    assert!(a.iter().all(|(line, _)| *line == a[0].0), "{a:?}");
    assert!(a.windows(2).all(|w| w[0].1 < w[1].1), "{a:?}");
}
