//! The crate boundary: the pure crates under `crates/` cannot reach the runtime. Their
//! Cargo.toml lists no async runtime, no Redis client, no HTTP server or TLS stack and
//! not the gateway, so that a socket, a timer or a spawn in them is a compile error, not
//! something a review must catch. And they are layered too: the variables sit below the
//! limiter.

use std::path::Path;

/// What no pure crate may depend on.
const RUNTIME: &[&str] = &[
    "tokio",
    "redis",
    "hyper",
    "hyper-util",
    "rustls",
    "tokio-rustls",
    "socket2",
    "tracing",
    "tollgate",
];

/// Each pure crate and the crates of the workspace it may use.
const PURE: &[(&str, &[&str])] = &[
    ("crates/vars", &[]),
    ("crates/limit", &["tollgate-vars"]),
    ("crates/nginx", &[]),
];

/// The pure crates that need nothing at all.
const NO_DEPENDENCIES: &[&str] = &["crates/vars", "crates/nginx"];

#[test]
fn the_pure_crates_cannot_reach_the_runtime() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut report = String::new();
    for (dir, allowed) in PURE {
        let manifest = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap();
        let deps = dependencies(&manifest);
        assert!(
            !deps.is_empty() || NO_DEPENDENCIES.contains(dir),
            "{dir}: no dependencies read"
        );
        for dep in deps {
            let ours = dep.starts_with("tollgate-") && !allowed.contains(&dep.as_str());
            if RUNTIME.contains(&dep.as_str()) || ours {
                report.push_str(&format!("  {dir}/Cargo.toml depends on {dep}\n"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "a pure crate reaches the runtime:\n{report}"
    );
}

#[test]
fn the_boundary_check_reads_dependencies() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nhttp = \"1\"\nfoo = { path = \"../foo\" }\n\n[target.'cfg(unix)'.dependencies]\ntokio = \"1\"\n\n[dev-dependencies]\nproptest = \"1\"\n";
    assert_eq!(dependencies(manifest), ["http", "foo", "tokio"]);
}

/// The names under every `[dependencies]` table of a manifest, a target's included;
/// `[dev-dependencies]` (tests only) left out.
fn dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]") && !line.ends_with("dev-dependencies]");
            continue;
        }
        let Some((name, _)) = line.split_once('=') else {
            continue;
        };
        if in_deps && !line.starts_with('#') {
            names.push(name.trim().to_owned());
        }
    }
    names
}
