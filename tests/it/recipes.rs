//! The configurations the project ships or shows load as `tollgate -t` loads them: every
//! ```toml block of docs/recipes.md (with the certificate files it names made for it), and
//! every examples/*.toml and the root gateway.toml as they are, with nothing else made.

use std::path::Path;

use crate::cli::{tollgate, write_config};
use crate::support;

/// The ```toml blocks of a Markdown text, in order.
fn toml_blocks(text: &str) -> Vec<&str> {
    text.split("```toml\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap_or_default())
        .collect()
}

/// `tollgate -t -c path`: exit status 0 and "configuration ok", or the test fails with what
/// it printed.
fn assert_checks(path: &Path, what: &str) {
    let out = tollgate().arg("-t").arg("-c").arg(path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what}:\n{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configuration ok\n",
        "{what}"
    );
}

/// A self-signed certificate and key for example.com and www.example.com, as
/// certs/example.com.pem and certs/example.com.key under `dir` (the names the recipes use).
pub(crate) fn example_certificate(dir: &Path) {
    let certs = dir.join("certs");
    std::fs::create_dir(&certs).unwrap();
    let names = vec!["example.com".to_owned(), "www.example.com".to_owned()];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(names)
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(certs.join("example.com.pem"), cert.pem()).unwrap();
    std::fs::write(certs.join("example.com.key"), key.serialize_pem()).unwrap();
}

#[test]
fn every_recipe_passes_the_check() {
    let _shared = support::shared();
    let recipes = include_str!("../../docs/recipes.md");
    let blocks = toml_blocks(recipes);
    // As many as the page has today, so that a change cannot empty this test.
    assert!(blocks.len() >= 6, "only {} recipes", blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        example_certificate(dir.path());
        let path = write_config(&dir, "gateway.toml", block);
        assert_checks(&path, &format!("docs/recipes.md, toml block {}", i + 1));
    }
}

#[test]
fn every_shipped_example_passes_the_check_as_it_is() {
    let _shared = support::shared();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("gateway.toml")];
    for entry in std::fs::read_dir(root.join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "toml") {
            files.push(path);
        }
    }
    assert!(files.len() >= 3, "{files:?}");
    for path in files {
        assert_checks(&path, &path.display().to_string());
    }
}
