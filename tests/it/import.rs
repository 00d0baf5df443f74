//! `tollgate import` as an operator runs it: the gateway.toml written (to `-o` or
//! stdout) and passing `tollgate -t`, the report on stderr, and the exit status: 0 when
//! nothing is unsupported, 2 when something is (the file still written), 1 when nginx
//! would refuse the file.

use crate::cli::{tollgate, write_config};
use crate::support;

const SITE: &str = "http {
    limit_req_zone $binary_remote_addr zone=per_ip:10m rate=10r/s;
    upstream app { server 127.0.0.1:3000; }
    server {
        listen 127.0.0.1:8080;
        server_name example.com;
        location / {
            limit_req zone=per_ip burst=5 nodelay;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_pass http://app;
        }
    }
}
";

#[test]
fn import_writes_a_file_that_passes_the_check_and_reports_each_directive() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let nginx = write_config(&dir, "nginx.conf", SITE);
    let output = dir.path().join("gateway.toml");
    let out = tollgate()
        .arg("import")
        .arg(&nginx)
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("nginx.conf:2: limit_req_zone: exact\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("nginx.conf:10: proxy_pass: exact (Host: \"app\" written, nginx's default $proxy_host)\n"),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("11 directives: 10 exact, 1 approx, 0 unsupported\n"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&output).unwrap();
    assert!(
        written.contains("# nginx.conf:3\n[upstreams.app]\n"),
        "{written}"
    );
    // Only the forwarding header nginx writes, and no HTTP/2 where nginx has none.
    assert!(
        written.contains("forwarded_headers = [\"X-Real-IP\"]\n"),
        "{written}"
    );
    assert!(
        written.contains("listen = [{ addr = \"127.0.0.1:8080\", http2 = false }]\n"),
        "{written}"
    );
    let check = tollgate()
        .arg("-t")
        .arg("-c")
        .arg(&output)
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn import_without_output_writes_to_stdout() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let nginx = write_config(&dir, "nginx.conf", SITE);
    let out = tollgate().arg("import").arg(&nginx).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("# Written by `tollgate import nginx.conf`"),
        "{stdout}"
    );
    assert!(stdout.contains("[zones.per_ip]\n"), "{stdout}");
}

#[test]
fn something_unsupported_exits_2_and_still_writes_the_file_with_it_as_a_comment() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let text = SITE.replace(
        "proxy_pass http://app;",
        "proxy_pass http://app;\n            gzip_disable msie6;",
    );
    let nginx = write_config(&dir, "nginx.conf", &text);
    let output = dir.path().join("gateway.toml");
    let out = tollgate()
        .arg("import")
        .arg(&nginx)
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("nginx.conf:11: gzip_disable: unsupported: no per-User-Agent switch"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(&output).unwrap();
    assert!(
        written.contains("# nginx.conf:11: gzip_disable msie6; (unsupported: "),
        "{written}"
    );
    let check = tollgate()
        .arg("-t")
        .arg("-c")
        .arg(&output)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0));
}

#[test]
fn a_file_nginx_refuses_exits_1_with_its_file_and_line() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let nginx = write_config(
        &dir,
        "nginx.conf",
        "http {\n    server {\n        listen 80\n    }\n}\n",
    );
    let output = dir.path().join("gateway.toml");
    let out = tollgate()
        .arg("import")
        .arg(&nginx)
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = nginx.display();
    assert_eq!(
        stderr,
        format!(
            "{file}:4: unexpected \"}}\": directive \"listen\" (line 3) has no \";\" before it\n"
        )
    );
    assert!(!output.exists());
    let missing = tollgate()
        .arg("import")
        .arg(dir.path().join("none.conf"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("none.conf: cannot read the file"));
}

#[test]
fn includes_are_read_from_the_main_files_directory() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sites")).unwrap();
    write_config(
        &dir,
        "sites/a.conf",
        "server { listen 127.0.0.1:8081; location / { return 204; } }\n",
    );
    let nginx = write_config(&dir, "nginx.conf", "http { include sites/*.conf; }\n");
    let out = tollgate().arg("import").arg(&nginx).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("nginx.conf:1: include: exact (1 file(s) read)\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("sites/a.conf:1: listen: exact\n"),
        "{stderr}"
    );
}
