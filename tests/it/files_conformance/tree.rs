//! The tree both servers serve, written by the test (no binary files in the repository),
//! every file with the same modification time so that `ETag` and `Last-Modified` are
//! comparable byte for byte.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// 2026-01-02 03:04:05 UTC: every file's modification time.
pub const MTIME: u64 = 1_767_323_045;

/// The size of `big.bin`.
pub const BIG: usize = 1 << 20;

/// Writes the tree under `www`.
pub fn write(www: &Path) {
    let text = |n: usize, seed: &str| -> Vec<u8> {
        let line = format!("<p>{seed} lorem ipsum dolor sit amet, consectetur adipiscing</p>\n");
        line.bytes().cycle().take(n).collect()
    };
    let json: Vec<u8> = {
        let mut out = b"[".to_vec();
        let mut i = 0;
        while out.len() < 100 * 1024 {
            let _ = write!(
                out,
                "{{\"id\":{i},\"name\":\"item {i}\",\"tags\":[\"a\",\"b\"]}},"
            );
            i += 1;
        }
        out.push(b']');
        out
    };
    let big: Vec<u8> = {
        // xorshift: incompressible, reproducible.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..BIG)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    let script = text(30 * 1024, "app.js");
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("index.html", text(2048, "index")),
        ("app.js", script.clone()),
        ("app.js.gz", gzip(&script)),
        ("data.json", json),
        (
            "style.css",
            b"body { color: #222; background: #fafafa; margin: 0 auto; max-width: 40em; }\n"
                .to_vec(),
        ),
        ("big.bin", big),
        ("empty.txt", Vec::new()),
        ("docs/index.html", text(1500, "docs")),
        ("dir/a.txt", b"in a directory without an index\n".to_vec()),
        ("404.html", b"<h1>not here</h1>\n".to_vec()),
        ("50x.html", b"<h1>upstream trouble</h1>\n".to_vec()),
        (".env", b"SECRET=1\n".to_vec()),
        ("static/x.css", text(300, "static")),
        ("assets-v2/logo.svg", text(1200, "svg")),
    ];
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(MTIME);
    for (name, bytes) in files {
        let path = www.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&bytes).unwrap();
        file.set_modified(mtime).unwrap();
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}
