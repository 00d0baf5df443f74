//! `serve` against a real directory tree: what nginx would answer, and never a byte of
//! what lies outside the root.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, Method, StatusCode, Version};
use http_body::Body;

use super::*;
use crate::config::files::{Base, Last, Try, TryFiles};
use crate::config::Encoding;
use crate::vars::VarText;

mod paths;
mod ranges;
mod tried;

/// The mtime every file of the tree has: `"5f5e1000-…"`, Mon, 13 Sep 2020 12:26:40 GMT.
const MTIME: u64 = 0x5f5e_1000;
const SECRET: &[u8] = b"THE-SECRET-BYTES";

/// A temporary tree: `www/` (the root) and, beside it, what must never be served.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let tree = Tree {
            dir: tempfile::tempdir().unwrap(),
        };
        let top = tree.dir.path();
        fs::create_dir_all(top.join("www/docs")).unwrap();
        fs::create_dir_all(top.join("www/sub")).unwrap();
        fs::create_dir_all(top.join("www/.git")).unwrap();
        fs::create_dir_all(top.join("www/.well-known/acme-challenge")).unwrap();
        fs::create_dir_all(top.join("outside")).unwrap();
        tree.write("secret", SECRET);
        tree.write("outside/passwd", SECRET);
        tree.write("www/index.html", b"<h1>home</h1>");
        tree.write("www/a.txt", b"0123456789");
        tree.write("www/empty.txt", b"");
        tree.write("www/docs/index.html", b"<h1>docs</h1>");
        tree.write("www/app.js", b"console.log('plain');");
        tree.write("www/app.js.gz", b"GZIP-BYTES");
        tree.write("www/app.js.br", b"BROTLI-BYTES!");
        tree.write("www/only.css.gz", b"GZ-CSS");
        tree.write("www/.env", b"DOTENV");
        tree.write("www/.git/config", b"GITCONFIG");
        tree.write("www/.well-known/acme-challenge/token", b"TOKEN");
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(target, top.join(at)).unwrap();
        };
        link("index.html", "www/in");
        link("docs", "www/indir");
        link("../secret", "www/out");
        link(top.join("outside").to_str().unwrap(), "www/dirout");
        link("../outside", "www/relout");
        link(top.join("secret").to_str().unwrap(), "www/abs");
        link("docs/../../secret", "www/sneaky");
        tree
    }

    fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.dir.path().join(rel);
        fs::write(&path, bytes).unwrap();
        let file = fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME)).unwrap();
    }

    fn www(&self) -> PathBuf {
        self.dir.path().join("www")
    }

    fn config(&self) -> config::Files {
        config::Files {
            base: Base::Root(self.www()),
            index: vec!["index.html".into()],
            try_files: None,
            precompressed: Vec::new(),
            dotfiles: false,
            follow_symlinks: false,
        }
    }

    fn files(&self) -> Files {
        Files::new(&self.config(), OpenFiles::new(100))
    }
}

/// A request as the pipeline would hand it over: `sent` is the raw target.
struct Req {
    method: Method,
    version: Version,
    headers: HeaderMap,
    sent: String,
    first_pass: bool,
}

impl Req {
    fn get(target: &str) -> Req {
        Req {
            method: Method::GET,
            version: Version::HTTP_11,
            headers: HeaderMap::new(),
            sent: target.to_owned(),
            first_pass: true,
        }
    }

    fn method(mut self, method: Method) -> Req {
        self.method = method;
        self
    }

    fn header(mut self, name: &'static str, value: &str) -> Req {
        self.headers.append(name, HeaderValue::from_str(value).unwrap());
        self
    }

    fn version(mut self, version: Version) -> Req {
        self.version = version;
        self
    }

    /// An internal redirect's pass: the path is taken as it is, nothing was sent.
    fn redirected(mut self) -> Req {
        self.first_pass = false;
        self
    }

    fn serve(&self, files: &Files) -> Served {
        let (raw_path, query) = match self.sent.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (self.sent.as_str(), None),
        };
        // A path the router refuses is never handed over; here it is, raw, so that
        // serve's own check of what was sent is seen.
        let path = routing::normalize_path(raw_path)
            .map(|p| p.into_owned())
            .unwrap_or_else(|_| raw_path.as_bytes().to_vec());
        let vars = vars::Request {
            host: Some("example.com:8080"),
            server_port: 8080,
            uri: &path,
            args: query,
            request_uri: &self.sent,
            ..vars::Request::new(IpAddr::V4(Ipv4Addr::LOCALHOST), &self.headers)
        };
        let ask = Ask {
            method: &self.method,
            version: self.version,
            headers: &self.headers,
            path: &path,
            sent: self.first_pass.then_some(raw_path),
            query,
            compress: None,
            vars: &vars,
        };
        serve(files, &ask)
    }

    fn answer(&self, files: &Files) -> Answer {
        match self.serve(files) {
            Served::Answer(response) => Answer::of(response),
            Served::Redirect { path, query } => panic!(
                "{}: redirected to {:?}?{query:?}",
                self.sent,
                String::from_utf8_lossy(&path)
            ),
            Served::Upstream => panic!("{}: sent upstream", self.sent),
        }
    }
}

/// An answer with its body read whole.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
    /// The body's own exact length, as the connection would frame it.
    length: Option<u64>,
}

impl Answer {
    fn of(response: http::Response<ResponseBody>) -> Answer {
        let (parts, mut body) = response.into_parts();
        let length = body.size_hint().exact();
        let (bytes, err) = drain(&mut body);
        assert!(err.is_none(), "the body failed: {err:?}");
        Answer {
            status: parts.status,
            headers: parts.headers,
            body: bytes,
            length,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

/// Polls `body` to its end: the bytes, and the error it ended with.
fn drain(body: &mut ResponseBody) -> (Vec<u8>, Option<crate::wire::body::BodyError>) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match Pin::new(&mut *body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            Poll::Ready(Some(Err(err))) => return (out, Some(err)),
            Poll::Ready(None) => return (out, None),
            Poll::Pending => unreachable!("nothing here waits"),
        }
    }
}

fn etag_of(size: u64) -> String {
    format!("\"{MTIME:x}-{size:x}\"")
}

const DATE: &str = "Sun, 13 Sep 2020 12:26:40 GMT";

#[test]
fn the_date_of_the_tree_is_right() {
    let date = etag::http_date(i64::try_from(MTIME).unwrap());
    assert_eq!(date, DATE);
}

#[test]
fn a_file_is_served_with_nginx_headers() {
    let tree = Tree::new();
    let answer = Req::get("/a.txt").answer(&tree.files());
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, b"0123456789");
    assert_eq!(answer.header("content-type"), Some("text/plain"));
    assert_eq!(answer.header("content-length"), Some("10"));
    assert_eq!(answer.length, Some(10));
    assert_eq!(answer.header("last-modified"), Some(DATE));
    assert_eq!(answer.header("etag"), Some(etag_of(10).as_str()));
    assert_eq!(answer.header("accept-ranges"), Some("bytes"));
    assert_eq!(answer.header("vary"), None);
    let html = Req::get("/index.html").answer(&tree.files());
    assert_eq!(html.header("content-type"), Some("text/html"));
}

#[test]
fn head_sends_gets_head_without_a_body() {
    let tree = Tree::new();
    let files = tree.files();
    let answer = Req::get("/a.txt").method(Method::HEAD).answer(&files);
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, b"");
    assert_eq!(answer.header("content-length"), Some("10"));
    assert_eq!(answer.header("etag"), Some(etag_of(10).as_str()));
    assert_eq!(files.open.count(), 0, "no file held for a head");
}

#[test]
fn an_empty_file_is_a_200_of_nothing_even_when_a_range_is_asked() {
    let tree = Tree::new();
    let answer = Req::get("/empty.txt").answer(&tree.files());
    assert_eq!((answer.status, answer.body.len()), (StatusCode::OK, 0));
    assert_eq!(answer.header("content-length"), Some("0"));
    let ranged = Req::get("/empty.txt").header("range", "bytes=0-").answer(&tree.files());
    assert_eq!(ranged.status, StatusCode::OK);
}

#[test]
fn a_directory_without_its_slash_is_a_301_to_it_absolute_with_the_query() {
    let tree = Tree::new();
    let answer = Req::get("/docs?x=1").answer(&tree.files());
    assert_eq!(answer.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(answer.header("location"), Some("http://example.com:8080/docs/?x=1"));
    let post = Req::get("/docs").method(Method::POST).answer(&tree.files());
    assert_eq!(post.status, StatusCode::MOVED_PERMANENTLY, "before the method check, as nginx");
}

#[test]
fn methods_other_than_get_and_head_are_refused_with_allow() {
    let tree = Tree::new();
    for method in [Method::POST, Method::DELETE, Method::PUT, Method::OPTIONS] {
        let answer = Req::get("/a.txt").method(method.clone()).answer(&tree.files());
        assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(answer.header("allow"), Some("GET, HEAD"));
    }
}

#[test]
fn what_is_not_a_regular_file_is_not_found() {
    let tree = Tree::new();
    let _socket = std::os::unix::net::UnixListener::bind(tree.www().join("sock")).unwrap();
    let answer = Req::get("/sock").answer(&tree.files());
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    let fifo = rustix::fs::FileType::Fifo;
    let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
    rustix::fs::mknodat(rustix::fs::CWD, tree.www().join("fifo").as_path(), fifo, mode, 0).unwrap();
    let answer = Req::get("/fifo").answer(&tree.files());
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "opened without blocking, then refused");
    let missing = Req::get("/nothing.txt").answer(&tree.files());
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let below_a_file = Req::get("/a.txt/x").answer(&tree.files());
    assert_eq!(below_a_file.status, StatusCode::NOT_FOUND);
}

#[test]
fn a_missing_root_is_not_found() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.base = Base::Root(tree.dir.path().join("nowhere"));
    let files = Files::new(&config, OpenFiles::new(10));
    assert_eq!(Req::get("/a.txt").answer(&files).status, StatusCode::NOT_FOUND);
    assert_eq!(Req::get("/").answer(&files).status, StatusCode::NOT_FOUND);
}

#[cfg(not(target_os = "macos"))]
#[test]
fn an_unreadable_file_is_forbidden() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    let path = tree.www().join("locked.txt");
    fs::write(&path, b"x").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::File::open(&path).is_ok() {
        return; // root reads anything: nothing to see
    }
    let answer = Req::get("/locked.txt").answer(&tree.files());
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
}

#[test]
fn an_alias_replaces_the_locations_prefix() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.base = Base::Alias {
        prefix: "/static/".into(),
        dir: tree.www().join("docs"),
    };
    let files = Files::new(&config, OpenFiles::new(10));
    let answer = Req::get("/static/index.html").answer(&files);
    assert_eq!(answer.body, b"<h1>docs</h1>");
    assert!(matches!(
        Req::get("/static/").serve(&files),
        Served::Redirect { path, .. } if path == b"/static/index.html"
    ));
}

#[test]
fn conditions_answer_304_and_412_as_nginx() {
    let tree = Tree::new();
    let files = tree.files();
    let not_modified = Req::get("/a.txt").header("if-none-match", &etag_of(10)).answer(&files);
    assert_eq!(not_modified.status, StatusCode::NOT_MODIFIED);
    assert_eq!(not_modified.body, b"");
    assert_eq!(not_modified.header("etag"), Some(etag_of(10).as_str()));
    assert_eq!(not_modified.header("last-modified"), Some(DATE));
    for dropped in ["content-type", "content-length", "accept-ranges"] {
        assert_eq!(not_modified.header(dropped), None, "{dropped}");
    }
    let since = Req::get("/a.txt").header("if-modified-since", DATE).answer(&files);
    assert_eq!(since.status, StatusCode::NOT_MODIFIED);
    let weak = Req::get("/a.txt").header("if-none-match", &format!("W/{}", etag_of(10)));
    assert_eq!(weak.answer(&files).status, StatusCode::NOT_MODIFIED);
    let failed = Req::get("/a.txt").header("if-match", "\"other\"").answer(&files);
    assert_eq!(failed.status, StatusCode::PRECONDITION_FAILED);
    let range_too = Req::get("/a.txt")
        .header("range", "bytes=0-1")
        .header("if-none-match", "*")
        .answer(&files);
    assert_eq!(range_too.status, StatusCode::NOT_MODIFIED, "304 comes before ranges");
    assert_eq!(files.open.count(), 0);
}

#[test]
fn a_file_shrinking_while_it_streams_ends_its_body_with_an_error() {
    let tree = Tree::new();
    tree.write("www/big.bin", &vec![b'x'; 300_000]);
    let Served::Answer(answer) = Req::get("/big.bin").serve(&tree.files()) else {
        panic!("no answer");
    };
    assert_eq!(answer.headers()["content-length"], "300000");
    let mut body = answer.into_body();
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(
        Pin::new(&mut body).poll_frame(&mut cx),
        Poll::Ready(Some(Ok(_)))
    ));
    let file = fs::File::options().write(true).open(tree.www().join("big.bin")).unwrap();
    file.set_len(100_000).unwrap();
    let (rest, err) = drain(&mut body);
    assert!(rest.len() < 300_000 - 64 * 1024, "never the promised length");
    assert!(matches!(err, Some(crate::wire::body::BodyError::File(_))));
}

#[test]
fn open_files_are_bounded_and_given_back_when_their_bodies_drop() {
    let tree = Tree::new();
    let files = Files::new(&tree.config(), OpenFiles::new(2));
    let held: Vec<Served> = (0..2).map(|_| Req::get("/a.txt").serve(&files)).collect();
    assert_eq!(files.open.count(), 2);
    let third = Req::get("/a.txt").answer(&files);
    assert_eq!(third.status, StatusCode::SERVICE_UNAVAILABLE);
    let head = Req::get("/a.txt").method(Method::HEAD).answer(&files);
    assert_eq!(head.status, StatusCode::OK, "a head holds no file");
    drop(held);
    assert_eq!(files.open.count(), 0);
    let again = Req::get("/a.txt").answer(&files);
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(files.open.count(), 0, "read to its end and dropped");
}

fn precompressed(tree: &Tree) -> Files {
    let mut config = tree.config();
    config.precompressed = vec![Encoding::Br, Encoding::Zstd, Encoding::Gzip];
    Files::new(&config, OpenFiles::new(10))
}

#[test]
fn the_sidecar_the_client_prefers_is_sent_with_the_originals_type() {
    let tree = Tree::new();
    let files = precompressed(&tree);
    let br = Req::get("/app.js").header("accept-encoding", "gzip, br").answer(&files);
    assert_eq!(br.body, b"BROTLI-BYTES!");
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert_eq!(br.header("content-type"), Some("text/javascript"));
    assert_eq!(br.header("content-length"), Some("13"));
    assert_eq!(br.header("etag"), Some(etag_of(13).as_str()));
    assert_eq!(br.header("vary"), Some("Accept-Encoding"));
    let gzip = Req::get("/app.js").header("accept-encoding", "gzip;q=1, br;q=0.5");
    assert_eq!(gzip.answer(&files).body, b"GZIP-BYTES");
    let ranged = Req::get("/app.js")
        .header("accept-encoding", "gzip")
        .header("range", "bytes=0-3")
        .answer(&files);
    assert_eq!((ranged.status, ranged.body.as_slice()), (StatusCode::PARTIAL_CONTENT, &b"GZIP"[..]));
}

#[test]
fn without_an_accepted_sidecar_the_original_goes_but_still_varies() {
    let tree = Tree::new();
    let files = precompressed(&tree);
    for req in [
        Req::get("/app.js"),
        Req::get("/app.js").header("accept-encoding", "identity"),
        Req::get("/app.js").header("accept-encoding", "gzip").version(Version::HTTP_10),
    ] {
        let answer = req.answer(&files);
        assert_eq!(answer.body, b"console.log('plain');");
        assert_eq!(answer.header("content-encoding"), None);
        assert_eq!(answer.header("vary"), Some("Accept-Encoding"));
    }
    let plain = Req::get("/a.txt").header("accept-encoding", "gzip").answer(&files);
    assert_eq!(plain.header("vary"), None, "no sidecar, no vary");
}

#[test]
fn a_sidecar_serves_without_its_original() {
    let tree = Tree::new();
    let files = precompressed(&tree);
    let gz = Req::get("/only.css").header("accept-encoding", "gzip").answer(&files);
    assert_eq!(gz.body, b"GZ-CSS");
    assert_eq!(gz.header("content-type"), Some("text/css"));
    let refused = Req::get("/only.css").answer(&files);
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert_eq!(refused.header("vary"), Some("Accept-Encoding"));
    let post = Req::get("/app.js").method(Method::POST).header("accept-encoding", "gzip");
    assert_eq!(post.answer(&files).status, StatusCode::METHOD_NOT_ALLOWED);
}
