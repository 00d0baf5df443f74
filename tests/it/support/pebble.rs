//! Pebble (Let's Encrypt's test ACME server, Debian's `pebble` 2.4.0) as child processes for
//! the ACME tests: a `pebble` on free loopback ports with an HTTPS certificate made here,
//! and a `pebble-challtestsrv` as its DNS server (every name is 127.0.0.1); both killed
//! when dropped. Validation is real: pebble connects back to the ports the test names.
//!
//! Pebble's listening ports are fixed in its config, so each test starts its own.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::future::Future;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::TlsConnector;

use super::free_port;

/// Debian's pebble.
pub const PEBBLE: &str = "/usr/bin/pebble";
/// Debian's pebble-challtestsrv (its mock DNS answers pebble's lookups).
pub const CHALLTESTSRV: &str = "/usr/bin/pebble-challtestsrv";

/// How long pebble has to answer on its directory after it is started.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// How long one look at the directory may take while waiting for it.
const ATTEMPT: Duration = Duration::from_secs(2);

/// What a test chooses about its pebble. Ports left unset are free ports nothing listens on
/// (a validation there fails).
#[derive(Clone, Debug, Default)]
pub struct Options {
    http_port: Option<u16>,
    tls_port: Option<u16>,
    validity: Option<Duration>,
    eab: BTreeMap<String, Vec<u8>>,
}

impl Options {
    /// Where pebble connects for http-01 (`httpPort`): the gateway's plain listener.
    pub fn http_port(mut self, port: u16) -> Options {
        self.http_port = Some(port);
        self
    }

    /// Where pebble connects for tls-alpn-01 (`tlsPort`): the gateway's TLS listener.
    pub fn tls_port(mut self, port: u16) -> Options {
        self.tls_port = Some(port);
        self
    }

    /// How long the certificates pebble issues are valid (`certificateValidityPeriod`,
    /// whole seconds); pebble's own default is 5 years. For renewal tests.
    pub fn validity(mut self, validity: Duration) -> Options {
        self.validity = Some(validity);
        self
    }

    /// Requires external account binding, and accepts key id `kid` with MAC key `hmac`
    /// (the raw bytes: `instant_acme::ExternalAccountKey::new(kid, hmac)`; pebble's config
    /// holds them base64url-encoded). Call again for more ids.
    pub fn eab(mut self, kid: &str, hmac: &[u8]) -> Options {
        self.eab.insert(kid.to_owned(), hmac.to_vec());
        self
    }
}

/// The loopback ports of one pebble, kept across restarts.
#[derive(Clone, Copy, Debug)]
struct Ports {
    acme: u16,
    management: u16,
    http: u16,
    tls: u16,
    dns: u16,
    dns_management: u16,
}

impl Ports {
    fn choose(options: &Options) -> Ports {
        Ports {
            acme: free_port(),
            management: free_port(),
            http: options.http_port.unwrap_or_else(free_port),
            tls: options.tls_port.unwrap_or_else(free_port),
            dns: free_port(),
            dns_management: free_port(),
        }
    }
}

/// A child process killed (and reaped) when dropped, so that none outlives its test, also
/// when a start fails half-way or the test panics. Neither pebble nor pebble-challtestsrv
/// starts children, so no process group of their own: in ours, a Ctrl-C of `cargo test`
/// reaches them too.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running pebble and its DNS server.
pub struct Pebble {
    // Declared first, so dropped (killed) before the directory of its files goes.
    pebble: Option<Process>,
    _dns: Process,
    ports: Ports,
    https: Https,
    ca_pem: String,
    ca_pem_path: PathBuf,
    config: PathBuf,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Pebble {
    /// Starts pebble-challtestsrv and pebble on free loopback ports and waits until the
    /// directory answers, within [`READY_WITHIN`] in all; panics with pebble's output if
    /// not. A port taken between choosing and binding it makes a process exit; then other
    /// ports are tried.
    pub async fn start(options: Options) -> Pebble {
        let deadline = Instant::now() + READY_WITHIN;
        let mut last_error = String::new();
        for _ in 0..3 {
            match Pebble::try_start(&options, deadline).await {
                Ok(pebble) => return pebble,
                Err(error) => last_error = error,
            }
            if Instant::now() > deadline {
                break;
            }
        }
        panic!("pebble did not start:\n{last_error}");
    }

    async fn try_start(options: &Options, deadline: Instant) -> Result<Pebble, String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let ports = Ports::choose(options);
        let (ca_pem, ca_pem_path, cert, key) = https_certificate(dir.path());
        let config = dir.path().join("pebble-config.json");
        std::fs::write(&config, config_json(&ports, options, &cert, &key)).unwrap();
        let dns = start_dns(&ports, dir.path(), deadline)?;
        let mut pebble = Pebble {
            pebble: None,
            _dns: dns,
            ports,
            https: Https::trusting(&ca_pem),
            ca_pem,
            ca_pem_path,
            config,
            log: dir.path().join("pebble.log"),
            dir,
        };
        pebble.run(deadline).await?;
        Ok(pebble)
    }

    /// Starts the pebble process (on this harness's ports and config) and waits for its
    /// directory until `deadline`; its output is added to [`Pebble::log`].
    async fn run(&mut self, deadline: Instant) -> Result<(), String> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("pebble log file");
        let child = Command::new(PEBBLE)
            .arg("-config")
            .arg(&self.config)
            .args(["-dnsserver", &format!("127.0.0.1:{}", self.ports.dns)])
            .arg("-strict")
            // No random sleep before validating, no nonce refused on purpose, and every
            // order validated afresh (no authorization reused from an earlier order).
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("pebble log file"))
            .stderr(log)
            .spawn()
            .map_err(|error| format!("cannot run {PEBBLE}: {error}"))?;
        self.pebble = Some(Process(child));
        self.wait_ready(deadline).await
    }

    /// Polls the directory until it answers 200, pebble exits, or `deadline` passes.
    async fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        loop {
            let process = self.pebble.as_mut().expect("pebble was started");
            if let Ok(Some(status)) = process.0.try_wait() {
                return Err(format!("pebble exited ({status}):\n{}", self.log()));
            }
            // Only our pebble has a certificate from our CA: a 200 is from ours.
            let answer = tokio::time::timeout(ATTEMPT, self.https.get(&self.directory())).await;
            let last_error = match answer {
                Ok(Ok((StatusCode::OK, _))) => return Ok(()),
                Ok(Ok((status, _))) => format!("the directory answered {status}"),
                Ok(Err(error)) => error,
                Err(_) => format!("no answer from the directory within {ATTEMPT:?}"),
            };
            if Instant::now() > deadline {
                let log = self.log();
                return Err(format!("pebble is not ready ({last_error}):\n{log}"));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Kills pebble (its DNS server stays): the ACME server is down, its ports closed.
    /// Pebble keeps nothing: what it issued and its CA are gone.
    pub fn stop(&mut self) {
        self.pebble = None;
    }

    /// Starts pebble again on the same ports with the same config (stopping it first if it
    /// runs) and waits for its directory (panics with its output if it does not answer
    /// within [`READY_WITHIN`]). It makes a new random root CA each time.
    pub async fn restart(&mut self) {
        self.stop();
        if let Err(error) = self.run(Instant::now() + READY_WITHIN).await {
            panic!("pebble did not start again:\n{error}");
        }
    }

    /// The ACME directory URL, `https://127.0.0.1:PORT/dir`.
    pub fn directory(&self) -> String {
        format!("https://127.0.0.1:{}/dir", self.ports.acme)
    }

    /// The CA that signed pebble's own HTTPS certificate (for `localhost` and 127.0.0.1),
    /// which an ACME client must trust to talk to pebble. Not the CA pebble issues from:
    /// that is [`Pebble::root`].
    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_pem_path
    }

    /// [`Pebble::ca_pem_path`]'s contents.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The management interface (`/roots/0`, `/intermediates/0`,
    /// `/cert-status-by-serial/SERIAL`), over the same HTTPS as the directory.
    pub fn management(&self) -> String {
        format!("https://127.0.0.1:{}", self.ports.management)
    }

    /// pebble-challtestsrv's management interface (plain HTTP), to set DNS answers
    /// (`/set-txt`, `/add-a`, ...) and read `/dns-request-history`.
    pub fn dns_management(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.dns_management)
    }

    /// The root CA pebble issues under (PEM), fetched now: a new one after each restart.
    /// Issued chains are leaf, intermediate; this root is not in them.
    pub async fn root(&self) -> String {
        self.management_pem("/roots/0").await
    }

    /// The intermediate CA that signs pebble's leaves (PEM), fetched now.
    pub async fn intermediate(&self) -> String {
        self.management_pem("/intermediates/0").await
    }

    async fn management_pem(&self, path: &str) -> String {
        let url = format!("{}{path}", self.management());
        match self.https.get(&url).await {
            Ok((StatusCode::OK, body)) => String::from_utf8(body.to_vec()).expect("PEM text"),
            Ok((status, body)) => panic!("{url} answered {status}: {body:?}"),
            Err(error) => panic!("{url}: {error}"),
        }
    }

    /// Everything pebble has written, over every run of this harness.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Orders pebble has created, over every run of this harness. Pebble's management
    /// interface counts nothing, so this counts its log lines (`Added order`).
    pub fn orders(&self) -> usize {
        self.log().matches("Added order ").count()
    }

    /// Certificates pebble has issued, over every run (`Issued certificate serial` lines).
    pub fn issued(&self) -> usize {
        self.log().matches("Issued certificate serial ").count()
    }

    /// Challenges pebble has validated (of any type), over every run. Each validation
    /// connects three times, as from three vantage points, all from 127.0.0.1.
    pub fn validations(&self) -> usize {
        self.log()
            .matches("Pulled a task from the Tasks queue")
            .count()
    }

    /// http-01 requests pebble has made, over every run (`Attempting to validate w/ HTTP`
    /// lines: three per validation; pebble logs no such line for tls-alpn-01).
    pub fn http_validations(&self) -> usize {
        self.log().matches("Attempting to validate w/ HTTP").count()
    }

    /// An HTTPS client trusting [`Pebble::ca_pem`], for instant-acme
    /// (`Account::builder_with_http(pebble.acme_http())`).
    pub fn acme_http(&self) -> Box<dyn instant_acme::HttpClient> {
        Box::new(self.https.clone())
    }
}

/// Whether to run: pebble and pebble-challtestsrv are there. Without them the test is
/// skipped (with a note saying why), except in CI, where their absence fails the test.
pub fn available() -> bool {
    if Path::new(PEBBLE).exists() && Path::new(CHALLTESTSRV).exists() {
        return true;
    }
    let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !in_ci,
        "{PEBBLE} not found: CI must install pebble (`apt-get install -y pebble` in .ci/run)"
    );
    super::skip_note(&format!(
        "{PEBBLE} not found; skipping this ACME test (apt-get install pebble)"
    ));
    false
}

/// Starts pebble-challtestsrv as a DNS server only (no challenge servers of its own: the
/// gateway answers the challenges) that answers every A query with 127.0.0.1 and no AAAA,
/// and waits until its management port listens (it binds DNS first).
fn start_dns(ports: &Ports, dir: &Path, deadline: Instant) -> Result<Process, String> {
    let log_path = dir.join("challtestsrv.log");
    let log = File::create(&log_path).expect("challtestsrv log file");
    let child = Command::new(CHALLTESTSRV)
        .args([
            "-management",
            &format!("127.0.0.1:{}", ports.dns_management),
        ])
        .args(["-dns01", &format!("127.0.0.1:{}", ports.dns)])
        .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
        .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("challtestsrv log file"))
        .stderr(log)
        .spawn()
        .map_err(|error| format!("cannot run {CHALLTESTSRV}: {error}"))?;
    let mut process = Process(child);
    let management = SocketAddr::from(([127, 0, 0, 1], ports.dns_management));
    loop {
        let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Ok(Some(status)) = process.0.try_wait() {
            return Err(format!("pebble-challtestsrv exited ({status}):\n{}", log()));
        }
        if TcpStream::connect(management).is_ok() {
            return Ok(process);
        }
        if Instant::now() > deadline {
            return Err(format!("pebble-challtestsrv is not listening:\n{}", log()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Pebble's config file (pebble 2.4.0 reads these keys; it ignores unknown ones).
fn config_json(ports: &Ports, options: &Options, cert: &Path, key: &Path) -> String {
    let mut pebble = serde_json::json!({
        "listenAddress": format!("127.0.0.1:{}", ports.acme),
        "managementListenAddress": format!("127.0.0.1:{}", ports.management),
        "certificate": cert,
        "privateKey": key,
        "httpPort": ports.http,
        "tlsPort": ports.tls,
        "ocspResponderURL": "",
        "externalAccountBindingRequired": !options.eab.is_empty(),
    });
    if !options.eab.is_empty() {
        let keys: BTreeMap<&String, String> = options
            .eab
            .iter()
            .map(|(kid, hmac)| (kid, base64url(hmac)))
            .collect();
        pebble["externalAccountMACKeys"] = serde_json::json!(keys);
    }
    if let Some(validity) = options.validity {
        pebble["certificateValidityPeriod"] = validity.as_secs().into();
    }
    serde_json::json!({ "pebble": pebble }).to_string()
}

/// A CA and, signed by it, pebble's HTTPS certificate for `localhost` and 127.0.0.1 (Debian
/// ships pebble without its test certificates), written into `dir`. Returns the CA's PEM,
/// its path, and the paths of the leaf's certificate and key.
fn https_certificate(dir: &Path) -> (String, PathBuf, PathBuf, PathBuf) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "tollgate test: pebble HTTPS CA");
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let leaf = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let paths = [
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    ];
    std::fs::write(&paths[0], &ca_pem).unwrap();
    std::fs::write(&paths[1], leaf.pem()).unwrap();
    std::fs::write(&paths[2], key.serialize_pem()).unwrap();
    let [ca_path, cert, key] = paths;
    (ca_pem, ca_path, cert, key)
}

/// Base64url without padding (RFC 4648 §5), as pebble reads EAB MAC keys.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let bits = chunk.iter().enumerate().fold(0u32, |bits, (i, &byte)| {
            bits | u32::from(byte) << (16 - 8 * i)
        });
        // n bytes carry 8n bits: n + 1 sextets.
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(bits >> (18 - 6 * i)) as usize & 63]));
        }
    }
    out
}

/// A minimal HTTPS client trusting one CA: a new HTTP/1.1 connection per request (pebble
/// is on loopback, and tests send few requests).
#[derive(Clone)]
pub struct Https {
    tls: TlsConnector,
}

impl Https {
    /// A client trusting the certificates in `ca_pem` only.
    pub fn trusting(ca_pem: &str) -> Https {
        let mut roots = rustls::RootCertStore::empty();
        for cert in pem_certs(ca_pem) {
            roots.add(cert).expect("a CA certificate");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Https {
            tls: TlsConnector::from(Arc::new(config)),
        }
    }

    /// `GET url`: the status and the whole body.
    pub async fn get(&self, url: &str) -> Result<(StatusCode, Bytes), String> {
        let req = Request::get(url).body(Empty::<Bytes>::new()).unwrap();
        let response = self.send(req).await?;
        let status = response.status();
        let body = response.into_body().collect().await;
        Ok((status, body.map_err(|e| e.to_string())?.to_bytes()))
    }

    /// Sends `req` (its URI absolute, `https://HOST:PORT/...`) on a new connection.
    async fn send<B>(
        &self,
        mut req: Request<B>,
    ) -> Result<http::Response<hyper::body::Incoming>, String>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let uri = req.uri().clone();
        let (Some(host), Some(port)) = (uri.host(), uri.port_u16()) else {
            return Err(format!("not an https URL with a port: {uri}"));
        };
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("connect to {host}:{port}: {e}"))?;
        let name = ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let authority = uri.authority().expect("a host").as_str().to_owned();
        req.headers_mut()
            .insert(http::header::HOST, authority.parse().unwrap());
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        *req.uri_mut() = path.parse().unwrap();
        sender.send_request(req).await.map_err(|e| e.to_string())
    }
}

impl instant_acme::HttpClient for Https {
    fn request(
        &self,
        req: Request<instant_acme::BodyWrapper<Bytes>>,
    ) -> Pin<
        Box<dyn Future<Output = Result<instant_acme::BytesResponse, instant_acme::Error>> + Send>,
    > {
        let https = self.clone();
        Box::pin(async move {
            match https.send(req).await {
                Ok(response) => Ok(instant_acme::BytesResponse::from(response)),
                Err(error) => Err(instant_acme::Error::Other(error.into())),
            }
        })
    }
}

/// The certificates in a PEM text.
fn pem_certs(pem: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("PEM certificates")
}

/// Whether `chain_pem` (leaf first, then intermediates, as ACME serves it and as a server
/// sends it) is valid now for `name` under `root_pem` alone: WebPKI path building, the way
/// a TLS client checks it.
pub fn verify_chain(root_pem: &str, chain_pem: &str, name: &str) -> Result<(), String> {
    use rustls::client::danger::ServerCertVerifier;
    let mut roots = rustls::RootCertStore::empty();
    for cert in pem_certs(root_pem) {
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), provider)
            .build()
            .map_err(|e| e.to_string())?;
    let chain = pem_certs(chain_pem);
    let (leaf, intermediates) = chain.split_first().ok_or("no certificate in the chain")?;
    let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    let now = rustls::pki_types::UnixTime::now();
    verifier
        .verify_server_cert(leaf, intermediates, &name, &[], now)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn base64url_is_rfc_4648_unpadded() {
    // RFC 4648 §10's vectors without the padding, and the two characters §5 changes.
    let cases: [(&[u8], &str); 5] = [
        (b"", ""),
        (b"f", "Zg"),
        (b"fo", "Zm8"),
        (b"foobar", "Zm9vYmFy"),
        (&[0xfb, 0xff], "-_8"),
    ];
    for (bytes, encoded) in cases {
        assert_eq!(base64url(bytes), encoded, "{bytes:?}");
    }
}
