//! `auth_basic`, `auth_basic_user_file` and `satisfy`: inherited as nginx inherits them,
//! written on the locations where both a realm and a file are in effect, `off` and
//! `return` locations left alone, and what cannot be written reported.

use std::path::Path;

use tollgate_nginx::Memory;

use super::super::{import_from, Imported};
use super::{approx, exact, has, unsupported, MAIN};
use crate::config;

/// Lines Debian's `htpasswd -B` wrote.
const USERS: &str = "alice:$2y$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy\n";

/// `text` imported, `{DIR}` in it naming a directory that holds an htpasswd file
/// `htpasswd`; the file written must load from that directory (where a relative
/// `users` starts).
fn import(text: &str) -> Imported {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("htpasswd"), USERS).unwrap();
    let text = text.replace("{DIR}", &dir.path().display().to_string());
    let imported = import_from(&Memory::new().with(MAIN, text.as_str()), Path::new(MAIN)).unwrap_or_else(|e| panic!("{e}"));
    let origin = dir.path().join("gateway.toml");
    if let Err(errors) = config::from_str(&imported.toml, &origin) {
        panic!("{errors}\n{}\n{}", imported.toml, imported.report);
    }
    imported
}

#[test]
fn an_admin_area_behind_a_login_or_the_office_network() {
    let imported = import(
        "http {
    auth_basic_user_file {DIR}/htpasswd;
    server {
        listen 80;
        location /admin/ {
            satisfy any;
            allow 10.0.0.0/8;
            deny all;
            auth_basic \"Admin area\";
            proxy_pass http://127.0.0.1:3000;
        }
        location /health { auth_basic \"x\"; return 200 ok; }
        location / { proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    approx(&imported, 2, "auth_basic_user_file", "again within a second of a change");
    exact(&imported, 6, "satisfy");
    exact(&imported, 9, "auth_basic");
    has(&imported, "match = \"/admin/\"\nupstream = \"127_0_0_1_3000\"\naccess = [\"allow 10.0.0.0/8\", \"deny all\"]\n");
    has(&imported, "auth = { basic = { realm = \"Admin area\", users = \"");
    has(&imported, "/htpasswd\" } }\nsatisfy = \"any\"\n");
    assert!(!imported.toml.contains("match = \"/health\"\nreturn = { status = 200, body = \"ok\" }\nauth"), "{}", imported.toml);
    assert_eq!(imported.toml.matches("auth = ").count(), 1, "{}", imported.toml);
}

#[test]
fn a_server_login_is_inherited_and_turned_off_where_nginx_turns_it_off() {
    let imported = import(
        "http {
    server {
        listen 80;
        auth_basic \"Staging\";
        auth_basic_user_file htpasswd;
        location / { proxy_pass http://127.0.0.1:3000; }
        location /public/ { auth_basic off; proxy_pass http://127.0.0.1:3000; }
        location /vars/ { auth_basic $realm; proxy_pass http://127.0.0.1:3000; }
        location /quote/ { auth_basic \"a\\\"b\"; proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    approx(&imported, 5, "auth_basic_user_file", "relative");
    exact(&imported, 7, "auth_basic");
    unsupported(&imported, 8, "auth_basic", "variables");
    unsupported(&imported, 9, "auth_basic", "the realm holds");
    has(&imported, "match = \"/\"\nupstream = ");
    let staging = "auth = { basic = { realm = \"Staging\", users = \"htpasswd\" } }\n";
    // `/`, and `/vars/` and `/quote/`, which keep the server's realm.
    assert_eq!(imported.toml.matches(staging).count(), 3, "{}", imported.toml);
}
