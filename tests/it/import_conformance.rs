//! `tollgate import` against real nginx: each configuration of the corpus (`tests/nginx/`,
//! written for this repository, see `corpus`) is run by nginx, then imported with
//! `tollgate import` and run by tollgate on the same ports, and both get the same
//! requests. Every request must be answered alike (status, the headers that say
//! something about the config, a success's body) and reach the upstream alike (method,
//! URI, every header but framing), unless the case marks it `@differs` with the reason,
//! which the import report must also give. The report itself is compared line by line
//! with the case's `report.txt`.
//!
//! `TOLLGATE_BLESS=1` writes the reports found instead of comparing them (review the
//! diff); `TOLLGATE_CASE=NAME` runs one case; `TOLLGATE_SHOW_NGINX=1` prints nginx's rows
//! before the import (to write a case). `cargo test --test it import_conformance -- --nocapture` prints every row and
//! the corpus's figures.

use crate::support;

mod corpus;
mod exchange;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::Command;

use corpus::{Case, Request};
use exchange::Row;
use support::nginx::{self, Nginx};

/// What one case came to.
#[derive(Default)]
struct Figures {
    directives: usize,
    exact: usize,
    approx: usize,
    unsupported: usize,
    requests: usize,
    matched: usize,
    known_differences: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_config_imported_answers_as_nginx_answers() {
    if !nginx::available("the import conformance corpus") {
        return;
    }
    let _shared = support::shared();
    let mut problems = String::new();
    let mut total = Figures::default();
    let mut table = String::new();
    let only = std::env::var("TOLLGATE_CASE").ok();
    for name in corpus::cases() {
        if only.as_ref().is_some_and(|only| *only != name) {
            continue;
        }
        let figures = run_case(&name, &mut problems).await;
        let _ = writeln!(
            table,
            "{name:<14} directives {:>3} (exact {:>3}, approx {:>3}, unsupported {:>3})  requests {:>3}, matched {:>3}, known differences {:>2}",
            figures.directives, figures.exact, figures.approx, figures.unsupported,
            figures.requests, figures.matched, figures.known_differences
        );
        add(&mut total, &figures);
    }
    let _ = writeln!(
        table,
        "{:<14} directives {:>3} (exact {:>3}, approx {:>3}, unsupported {:>3})  requests {:>3}, matched {:>3}, known differences {:>2}",
        "total", total.directives, total.exact, total.approx, total.unsupported,
        total.requests, total.matched, total.known_differences
    );
    println!("{table}");
    assert!(problems.is_empty(), "{problems}");
}

fn add(total: &mut Figures, one: &Figures) {
    total.directives += one.directives;
    total.exact += one.exact;
    total.approx += one.approx;
    total.unsupported += one.unsupported;
    total.requests += one.requests;
    total.matched += one.matched;
    total.known_differences += one.known_differences;
}

async fn run_case(name: &str, problems: &mut String) -> Figures {
    let stub = exchange::stub().await;
    let case = Case::copy(name, stub.addr);
    let requests = case.requests();
    let mut figures = Figures::default();

    let nginx = match Nginx::run(case.dir.path(), &case.conf(), &case.ports) {
        Ok(nginx) => nginx,
        Err(error) => {
            let _ = writeln!(problems, "{name}: nginx does not run the case: {error}");
            return figures;
        }
    };
    let mut nginx_rows = Vec::new();
    for request in &requests {
        let addr = addr_of(&case, request);
        nginx_rows.push(exchange::exchange(addr, request, &stub.seen).await);
    }
    drop(nginx);
    if std::env::var_os("TOLLGATE_SHOW_NGINX").is_some() {
        for (request, row) in requests.iter().zip(&nginx_rows) {
            println!(
                "{name} {}\n  {}\n  up: {}",
                request.line,
                case.unfill(&row.answer),
                case.unfill(&row.upstream)
            );
        }
    }

    let Some(gateway_toml) = import(&case, &mut figures, problems) else {
        return figures;
    };
    let config = match tollgate::load(&gateway_toml) {
        Ok(config) => config,
        Err(errors) => {
            let _ = writeln!(
                problems,
                "{name}: the imported config does not load:\n{errors}"
            );
            return figures;
        }
    };
    let gateway = tollgate::Gateway::start(config).expect("the imported config starts");
    for (request, nginx_row) in requests.iter().zip(&nginx_rows) {
        let addr = addr_of(&case, request);
        let row = exchange::exchange(addr, request, &stub.seen).await;
        compare(&case, request, nginx_row, &row, &mut figures, problems);
    }
    gateway.stop().await;
    figures
}

fn addr_of(case: &Case, request: &Request) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], case.ports[request.port]))
}

/// Runs `tollgate import`, checks its report against `report.txt`, and counts its
/// directives; the imported file's path, unless the import failed.
fn import(case: &Case, figures: &mut Figures, problems: &mut String) -> Option<std::path::PathBuf> {
    let name = &case.name;
    let out_path = case.dir.path().join("gateway.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("import")
        .arg(case.conf())
        .arg("-o")
        .arg(&out_path)
        .output()
        .unwrap();
    let report = case.unfill(&String::from_utf8_lossy(&out.stderr));
    if !matches!(out.status.code(), Some(0 | 2)) {
        let _ = writeln!(
            problems,
            "{name}: import failed ({}):\n{report}",
            out.status
        );
        return None;
    }
    // A directive's line is `FILE:LINE: NAME: VERDICT…`; the last line sums them up
    // (`N directives: …`), and is not counted.
    for line in report.lines() {
        let verdict = line.splitn(3, ": ").nth(2).unwrap_or("");
        let word = verdict.split([' ', ':']).next().unwrap_or("");
        let count = match word {
            "exact" => &mut figures.exact,
            "approx" => &mut figures.approx,
            "unsupported" => &mut figures.unsupported,
            _ => continue,
        };
        *count += 1;
        figures.directives += 1;
    }
    let reviewed = corpus::root().join(name).join("report.txt");
    if std::env::var_os("TOLLGATE_BLESS").is_some() {
        std::fs::write(&reviewed, &report).unwrap();
    } else {
        let expected = std::fs::read_to_string(&reviewed).unwrap_or_default();
        if expected != report {
            let _ = writeln!(
                problems,
                "{name}: the import report differs from report.txt (TOLLGATE_BLESS=1 rewrites it)\n{}",
                diff(&expected, &report)
            );
        }
    }
    Some(out_path)
}

/// The lines only one of `expected` and `found` has, marked `-` and `+`.
fn diff(expected: &str, found: &str) -> String {
    let mut out = String::new();
    for line in expected
        .lines()
        .filter(|line| !found.lines().any(|l| l == *line))
    {
        let _ = writeln!(out, "- {line}");
    }
    for line in found
        .lines()
        .filter(|line| !expected.lines().any(|l| l == *line))
    {
        let _ = writeln!(out, "+ {line}");
    }
    out
}

fn compare(
    case: &Case,
    request: &Request,
    nginx: &Row,
    tollgate: &Row,
    figures: &mut Figures,
    problems: &mut String,
) {
    let name = &case.name;
    let nginx = Row {
        answer: case.unfill(&nginx.answer),
        upstream: case.unfill(&nginx.upstream),
    };
    let tollgate = Row {
        answer: case.unfill(&tollgate.answer),
        upstream: case.unfill(&tollgate.upstream),
    };
    figures.requests += 1;
    let same = nginx == tollgate;
    println!(
        "{name} {}: {}\n  nginx    {}\n           up: {}\n  tollgate {}\n           up: {}",
        request.line,
        if same { "same" } else { "DIFFERENT" },
        nginx.answer,
        nginx.upstream,
        tollgate.answer,
        tollgate.upstream
    );
    match (&request.differs, same) {
        (None, true) => figures.matched += 1,
        (Some(_), false) => figures.known_differences += 1,
        (None, false) => {
            let _ = writeln!(
                problems,
                "{name} `{}` answered differently:\n  nginx:    {}\n            up: {}\n  tollgate: {}\n            up: {}",
                request.line, nginx.answer, nginx.upstream, tollgate.answer, tollgate.upstream
            );
        }
        (Some(why), true) => {
            let _ = writeln!(
                problems,
                "{name} `{}` is marked `@differs: {why}` but was answered alike: remove the mark",
                request.line
            );
        }
    }
}
