//! The corpus: nginx configurations written for this repository under `tests/nginx/`, one
//! directory per case. Each holds `nginx.conf` (and what it includes), `requests.txt` (the
//! requests sent to both servers) and `report.txt` (the import report as reviewed).
//!
//! The files name what only the run knows with placeholders, replaced in every file of
//! the case when it is copied to a temporary prefix: `{DIR}` (that prefix), `{PORT}` and
//! `{PORT2}` (the ports both servers listen on, one after the other), `{APP}` (the
//! recording upstream) and `{DEAD}` (a loopback port nobody listens on).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directory of the corpus.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nginx")
}

/// Every case, in name order.
pub fn cases() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root())
        .expect("tests/nginx exists")
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.path().join("nginx.conf").exists())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A case copied to a temporary prefix with its placeholders filled in.
pub struct Case {
    pub name: String,
    pub dir: tempfile::TempDir,
    /// The ports the case's files name (`{PORT}`, and `{PORT2}` when written).
    pub ports: Vec<u16>,
    /// Placeholder to value, for turning run values back into placeholders.
    pub values: BTreeMap<&'static str, String>,
}

impl Case {
    pub fn copy(name: &str, app: std::net::SocketAddr) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let mut ports = vec![super::super::support::free_port()];
        if tree_mentions(&root().join(name), "{PORT2}") {
            ports.push(super::super::support::free_port());
        }
        let mut values = BTreeMap::new();
        values.insert("{DIR}", dir.path().display().to_string());
        values.insert("{PORT}", ports[0].to_string());
        if let Some(port) = ports.get(1) {
            values.insert("{PORT2}", port.to_string());
        }
        values.insert("{APP}", app.to_string());
        values.insert("{DEAD}", super::super::support::closed_port().to_string());
        let case = Case {
            name: name.to_owned(),
            dir,
            ports,
            values,
        };
        case.copy_tree(&root().join(name), case.dir.path());
        std::fs::create_dir_all(case.dir.path().join("tmp")).unwrap();
        certificate(&case.dir.path().join("certs"));
        case
    }

    fn copy_tree(&self, from: &Path, to: &Path) {
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                std::fs::create_dir_all(&target).unwrap();
                self.copy_tree(&entry.path(), &target);
            } else {
                let text = std::fs::read_to_string(entry.path()).unwrap();
                std::fs::write(target, self.fill(&text)).unwrap();
            }
        }
    }

    /// `text` with the placeholders' values.
    pub fn fill(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (name, value) in &self.values {
            text = text.replace(name, value);
        }
        text
    }

    /// `text` with the values turned back into placeholders (longest first).
    pub fn unfill(&self, text: &str) -> String {
        let mut pairs: Vec<(&&str, &String)> = self.values.iter().collect();
        pairs.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        let mut text = text.to_owned();
        for (name, value) in pairs {
            text = text.replace(value.as_str(), name);
        }
        text
    }

    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("nginx.conf")
    }

    pub fn requests(&self) -> Vec<Request> {
        let text = std::fs::read_to_string(self.dir.path().join("requests.txt")).unwrap();
        parse_requests(&text)
    }
}

/// `certs/site.pem` and `certs/site.key` under a case's prefix, for its TLS servers: one
/// self-signed certificate for every name the corpus uses (the client accepts any).
fn certificate(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let names = vec![
        "localhost".to_owned(),
        "*.example".to_owned(),
        "secure.example".to_owned(),
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(names)
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("site.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("site.key"), key.serialize_pem()).unwrap();
}

/// Whether a file under `dir` holds `text`.
fn tree_mentions(dir: &Path, text: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        if path.is_dir() {
            tree_mentions(&path, text)
        } else {
            std::fs::read_to_string(&path).is_ok_and(|body| body.contains(text))
        }
    })
}

/// One request of `requests.txt`.
#[derive(Clone, Debug)]
pub struct Request {
    /// Which of the case's ports it goes to (0 or 1).
    pub port: usize,
    /// Whether nginx and tollgate are known to answer it differently, and why (the
    /// report says so too); such a request is shown, not counted as a match.
    pub differs: Option<String>,
    /// Over TLS (`@tls`), with SNI the Host's name.
    pub tls: bool,
    /// Only a TLS handshake offering `h2` and `http/1.1` (`@alpn`): what is chosen.
    pub alpn: bool,
    /// The bytes sent (CRLF line ends, `Connection: close` added).
    pub bytes: Vec<u8>,
    /// Its first line, to name it.
    pub line: String,
}

/// `requests.txt`: requests separated by lines `---`; `#` lines are comments. A request
/// may start with `@port2`, `@tls`, `@alpn` and `@differs: why`; then its head as written,
/// and after an empty line its body.
pub fn parse_requests(text: &str) -> Vec<Request> {
    let mut requests = Vec::new();
    for block in text.split("\n---\n") {
        let mut port = 0;
        let mut tls = false;
        let mut alpn = false;
        let mut differs = None;
        let mut lines: Vec<&str> = Vec::new();
        for line in block.lines() {
            if lines.is_empty() && (line.starts_with('#') || line.trim().is_empty()) {
                continue;
            }
            if lines.is_empty() && line == "@port2" {
                port = 1;
            } else if lines.is_empty() && line == "@tls" {
                tls = true;
            } else if lines.is_empty() && line == "@alpn" {
                (tls, alpn) = (true, true);
            } else if let Some(why) = line.strip_prefix("@differs:").filter(|_| lines.is_empty()) {
                differs = Some(why.trim().to_owned());
            } else {
                lines.push(line);
            }
        }
        if lines.is_empty() {
            continue;
        }
        let split = lines
            .iter()
            .position(|line| line.is_empty())
            .unwrap_or(lines.len());
        let (head, body) = lines.split_at(split);
        let body = body.iter().skip(1).copied().collect::<Vec<_>>().join("\n");
        let mut bytes = Vec::new();
        for line in head {
            bytes.extend_from_slice(line.as_bytes());
            bytes.extend_from_slice(b"\r\n");
        }
        if !head
            .iter()
            .any(|line| line.to_ascii_lowercase().starts_with("connection:"))
        {
            bytes.extend_from_slice(b"Connection: close\r\n");
        }
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(body.as_bytes());
        requests.push(Request {
            port,
            tls,
            alpn,
            differs,
            bytes,
            line: head[0].to_owned(),
        });
    }
    requests
}
