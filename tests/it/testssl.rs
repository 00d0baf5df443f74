//! testssl.sh (Debian's `/usr/bin/testssl`) against a `listen_tls` listener serving a
//! self-signed certificate made for the test: once with an ECDSA P-256 key (rcgen) and once
//! with an RSA 2048 key (openssl; ROBOT, DROWN and the RSA cipher suites only show with one).
//! Any finding of severity HIGH or CRITICAL fails the test, except the few listed in
//! [`ABOUT_THE_TEST_CERTIFICATE`], which are about the certificate itself, not tollgate.
//!
//! The checks are narrowed to [`CHECKS`] (protocols, ciphers, server defaults and known
//! vulnerabilities); a run takes about 35 s on two cores, and the two runs take turns, with no
//! other test running meanwhile (so about 70 s in all). testssl makes no outbound
//! connections: no DNS lookups (`--nodns none`), and no CRL or OCSP fetching (that needs
//! `--phone-out`, which is off by default).
//!
//! Without testssl the test is skipped, unless `CI` is set: then it fails (`.ci/run` installs
//! it). `cargo test --test it testssl:: -- --nocapture` prints every finding of severity LOW
//! and up.

use crate::support;

use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::Value;

/// Debian's testssl.sh (package `testssl.sh`).
const TESTSSL: &str = "/usr/bin/testssl";

/// The narrowest set that covers protocols, ciphers and known vulnerabilities (a default run
/// adds client simulations and HTTP header checks and takes about twice as long):
/// `-p` protocols (SSLv2 to TLS 1.3, ALPN), `-s` cipher categories (NULL, aNULL, EXPORT,
/// LOW, 3DES, obsolete CBC, strong), `-f` forward secrecy and curves, `-P` the server's
/// protocol and cipher choices, `-S` server defaults (session tickets and IDs, TLS
/// extensions, the certificate and chain served) and `-U` every vulnerability check
/// (Heartbleed, CCS, Ticketbleed, ROBOT, renegotiation, CRIME, BREACH, POODLE,
/// TLS_FALLBACK_SCSV, SWEET32, FREAK, DROWN, LOGJAM, BEAST, LUCKY13, RC4).
const CHECKS: &[&str] = &["-p", "-s", "-f", "-P", "-S", "-U"];

/// A run that takes longer is killed and fails the test.
const TIME_LIMIT: Duration = Duration::from_secs(300);

/// Scans per certificate when a scan reports a check it could not do (and nothing HIGH).
const ATTEMPTS: u32 = 2;

/// testssl 3.0.8's TLS 1.3 ticket resumption check races the server's post-handshake
/// NewSessionTicket against its own `openssl s_client </dev/null` closing (the same client
/// loses that race against `openssl s_server` too): when the client leaves first it has no
/// ticket to resume with, and testssl reports this WARN ("check failed because of connect
/// problem") and exits with 1. On a loaded machine it can lose every attempt, so when it
/// does, [`tickets_resume`] does the same check with a client that waits for the ticket.
const TICKET_RACE: &str = "sessionresumption_ticket";

/// HIGH or CRITICAL findings that are about the self-signed test certificate, not about
/// tollgate's TLS configuration, and why.
const ABOUT_THE_TEST_CERTIFICATE: &[(&str, &str)] = &[
    // CRITICAL "failed (self signed)." No CA that testssl trusts issued it.
    (
        "cert_chain_of_trust",
        "self-signed: no CA in testssl's trust stores issued it",
    ),
    // HIGH "Neither CRL nor OCSP URI provided". A CA puts these in the certificates it
    // issues; the test certificate has none (and nothing to point them at).
    (
        "cert_revocation",
        "the test certificate names no CRL or OCSP responder",
    ),
];

/// Severities that fail the test (besides the scan problems below).
const FAILING: &[&str] = &["HIGH", "CRITICAL"];

/// What testssl reports when it could not do a check or the whole scan.
const SCAN_PROBLEMS: &[&str] = &["WARN", "FATAL"];

/// Printed: everything from LOW up, and scan problems.
const SHOWN: &[&str] = &["LOW", "MEDIUM", "HIGH", "CRITICAL", "WARN", "FATAL"];

/// The protocol findings that `-p` always produces.
const PROTOCOLS: &[&str] = &["SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2", "TLS1_3"];

#[test]
fn testssl_finds_nothing_high_with_an_ecdsa_certificate() {
    // One scan at a time, and no other test beside it: two scans at once on a small machine
    // make testssl's timing-sensitive checks fail (see [`ATTEMPTS`]), and so can other tests'
    // load; a scan's own load is enough to upset the timing of other tests.
    let _alone = support::alone();
    if !testssl_available() {
        return;
    }
    scan("ECDSA P-256", KeyPair::generate().unwrap());
}

#[test]
fn testssl_finds_nothing_high_with_an_rsa_certificate() {
    // As above: one scan at a time, alone.
    let _alone = support::alone();
    if !testssl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    scan("RSA 2048", rsa_key(dir.path()));
}

/// Whether to run: testssl is there. Without it the test is skipped, except in CI.
fn testssl_available() -> bool {
    if Path::new(TESTSSL).exists() {
        return true;
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !in_ci,
        "{TESTSSL} not found: CI must install testssl.sh (`apt-get install -y testssl.sh` in .ci/run)"
    );
    support::skip_note(&format!("{TESTSSL} not found; skipping the testssl test"));
    false
}

/// Starts the gateway with a self-signed certificate for `key`, scans it and checks the
/// findings. A HIGH or CRITICAL finding fails at once; a scan that could not do every check
/// is repeated (see [`ATTEMPTS`]).
fn scan(label: &str, key: KeyPair) {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(dir.path(), key);
    let gw = support::gateway(&format!(
        r#"
[server]
listen_tls = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[[location]]
match = "/"
return = {{ status = 200 }}
[[tls.certificates]]
cert = "{}"
key = "{}"
"#,
        cert.display(),
        key.display()
    ));
    let target = gw.tls_addrs()[0];

    for attempt in 1..=ATTEMPTS {
        let scan = testssl(label, dir.path(), &target.to_string());
        let mut summary = format!(
            "{label}: testssl {} on {target}: {} findings in {:.1} s, {}\n",
            CHECKS.join(" "),
            scan.findings.len(),
            scan.elapsed.as_secs_f64(),
            scan.status
        );
        for f in scan
            .findings
            .iter()
            .filter(|f| SHOWN.contains(&f.severity.as_str()))
        {
            let excluded =
                excluded(&f.id).map_or(String::new(), |why| format!("  [excluded: {why}]"));
            let _ = writeln!(
                summary,
                "  {:<24} {:<8} {}{excluded}",
                f.id, f.severity, f.finding
            );
        }
        eprintln!("{summary}");

        let findings: Vec<String> = scan
            .findings
            .iter()
            .filter(|f| FAILING.contains(&f.severity.as_str()) && excluded(&f.id).is_none())
            .map(|f| format!("{} is {}: {}", f.id, f.severity, f.finding))
            .collect();
        assert!(
            findings.is_empty(),
            "{label}: testssl found:\n  {}\n\n{summary}\ntestssl's output:\n{}",
            findings.join("\n  "),
            scan.screen
        );

        let problems = scan_problems(&scan, dir.path(), &target.to_string());
        if problems.is_empty() {
            return;
        }
        assert!(
            attempt < ATTEMPTS,
            "{label}: testssl could not do every check, {ATTEMPTS} times:\n  {}\n\n{summary}\n\
             testssl's output:\n{}",
            problems.join("\n  "),
            scan.screen
        );
        eprintln!(
            "{label}: testssl could not do every check ({}); once more",
            problems.join("; ")
        );
    }
}

/// What one testssl run reported.
struct Scan {
    status: ExitStatus,
    elapsed: Duration,
    findings: Vec<Finding>,
    /// Its screen output (stdout and stderr).
    screen: String,
}

/// Runs testssl with [`CHECKS`] against `target`, in `dir`.
fn testssl(label: &str, dir: &Path, target: &str) -> Scan {
    let json = dir.join("findings.json");
    let output = dir.join("testssl.txt");
    // testssl refuses to overwrite a JSON file left by an earlier attempt.
    let _ = std::fs::remove_file(&json);
    let screen = File::create(&output).unwrap();
    let started = Instant::now();
    let mut command = Command::new(TESTSSL);
    command
        .args([
            "--quiet",
            "--color",
            "0",
            "--warnings",
            "off",
            "--nodns",
            "none",
        ])
        .arg("--jsonfile")
        .arg(&json)
        .args(CHECKS)
        .arg(target)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(screen.try_clone().unwrap())
        .stderr(screen);
    let status = Run::start(&mut command).wait(TIME_LIMIT);
    let elapsed = started.elapsed();
    let screen = std::fs::read_to_string(&output).unwrap_or_default();
    let Some(status) = status else {
        panic!(
            "{label}: testssl did not finish within {} s; its output:\n{screen}",
            TIME_LIMIT.as_secs()
        );
    };
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    let findings = parse(&text).unwrap_or_else(|error| {
        panic!("{label}: testssl ({status}) wrote no usable JSON ({error}); its output:\n{screen}")
    });
    Scan {
        status,
        elapsed,
        findings,
        screen,
    }
}

/// Why `scan` does not show that every check was done: testssl failed, could not connect,
/// or reported a check it could not do. A lost [`TICKET_RACE`] is no problem when
/// [`tickets_resume`] shows that tickets do resume (and then neither is the exit status 1
/// that it alone causes).
fn scan_problems(scan: &Scan, dir: &Path, target: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let has = |id: &str| scan.findings.iter().any(|f| f.id == id);
    let missing: Vec<&str> = PROTOCOLS.iter().filter(|p| !has(p)).copied().collect();
    if !missing.is_empty() {
        problems.push(format!("no protocol findings for {}", missing.join(", ")));
    }
    if !scan
        .findings
        .iter()
        .any(|f| PROTOCOLS.contains(&f.id.as_str()) && f.finding.starts_with("offered"))
    {
        problems.push("no protocol found offered: testssl did not get through".to_owned());
    }
    let mut lost_the_race = false;
    for f in scan
        .findings
        .iter()
        .filter(|f| SCAN_PROBLEMS.contains(&f.severity.as_str()))
    {
        if f.id == TICKET_RACE && f.severity == "WARN" {
            match tickets_resume(dir, target) {
                Ok(()) => {
                    eprintln!("{TICKET_RACE}: testssl's client left before the ticket came; a client that waits for it resumed");
                    lost_the_race = true;
                    continue;
                }
                Err(why) => problems.push(format!("{TICKET_RACE}: {why}")),
            }
        }
        problems.push(format!("{} ({}): {}", f.id, f.severity, f.finding));
    }
    let race_only = lost_the_race && problems.is_empty() && scan.status.code() == Some(1);
    if !scan.status.success() && !race_only {
        problems.insert(0, format!("testssl exited with {}", scan.status));
    }
    problems
}

/// Checks TLS 1.3 ticket resumption as testssl's [`TICKET_RACE`] check does, without its
/// race: the first `openssl s_client` keeps its stdin open until it has written the session
/// (it does when a ticket arrives), and a second one must resume from it.
fn tickets_resume(dir: &Path, target: &str) -> Result<(), String> {
    let session = dir.join("session.pem");
    let _ = std::fs::remove_file(&session);
    let s_client = |with: &str| {
        let mut command = Command::new("openssl");
        command
            .args(["s_client", "-tls1_3", "-connect", target, with])
            .arg(&session)
            .stderr(Stdio::null());
        command
    };
    let mut first = s_client("-sess_out")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let written = || std::fs::metadata(&session).is_ok_and(|m| m.len() > 0);
    while !written() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(first.stdin.take());
    let _ = first.wait();
    if !written() {
        return Err("no session ticket came within 10 s".to_owned());
    }
    let second = s_client("-sess_in")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    let stdout = String::from_utf8_lossy(&second.stdout);
    match stdout
        .lines()
        .find(|l| l.starts_with("New,") || l.starts_with("Reused,"))
    {
        Some(line) if line.starts_with("Reused,") => Ok(()),
        Some(line) => Err(format!("the ticket was not resumed: {line}")),
        None => Err(format!(
            "the resuming client got no session ({})",
            second.status
        )),
    }
}

/// Why a HIGH or CRITICAL finding with this id does not fail the test, if it does not.
fn excluded(id: &str) -> Option<&'static str> {
    ABOUT_THE_TEST_CERTIFICATE
        .iter()
        .find(|(excluded, _)| *excluded == id)
        .map(|(_, why)| *why)
}

/// One entry of testssl's flat JSON (`--jsonfile`).
struct Finding {
    id: String,
    severity: String,
    finding: String,
}

fn parse(text: &str) -> Result<Vec<Finding>, String> {
    let json: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let entries = json.as_array().ok_or("not a JSON array")?;
    let field = |entry: &Value, name: &str| -> Result<String, String> {
        match &entry[name] {
            Value::String(s) => Ok(s.clone()),
            other => Err(format!("{name} of {entry} is {other}")),
        }
    };
    entries
        .iter()
        .map(|entry| {
            Ok(Finding {
                id: field(entry, "id")?,
                severity: field(entry, "severity")?,
                finding: field(entry, "finding")?,
            })
        })
        .collect()
}

/// Writes a certificate for `localhost` and 127.0.0.1 signed by `key` itself, valid from a
/// day ago for 90 days, to `dir/cert.pem` and `dir/cert.key`. rcgen's default validity
/// (1975 to 4096) would be a HIGH `cert_validityPeriod` and under 60 days left a MEDIUM or
/// HIGH `cert_expirationStatus`; 90 days is neither, so those need no exclusion.
fn self_signed(dir: &Path, key: KeyPair) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(90);
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("cert.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

/// A 2048-bit RSA key from openssl (ring cannot generate RSA keys), as PKCS#8 PEM.
fn rsa_key(dir: &Path) -> KeyPair {
    let path = dir.join("rsa.key");
    let status = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&path)
        .stderr(Stdio::null())
        .status()
        .expect("openssl is installed (.ci/run installs it)");
    assert!(status.success());
    let pem = std::fs::read_to_string(&path).unwrap();
    KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256).unwrap()
}

/// testssl in its own process group (it runs many openssl children), killed as a whole
/// when dropped unless it has finished.
struct Run {
    child: Child,
    done: bool,
}

impl Run {
    fn start(command: &mut Command) -> Run {
        let child = command
            .process_group(0)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {TESTSSL}: {error}"));
        Run { child, done: false }
    }

    /// The exit status, or `None` when it is still running after `limit`.
    fn wait(mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait for testssl") {
                self.done = true;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // The group's id is the leader's pid; `kill -- -PGID` signals every member.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
