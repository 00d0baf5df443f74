//! `auth_basic`, `auth_basic_user_file` and `satisfy`: inherited as nginx inherits them,
//! written on the locations where both a realm and a file are in effect, `off` and
//! `return` locations left alone, and what cannot be written reported.



use super::super::Imported;
use super::{approx, exact, has, import_in, unsupported};

/// Lines Debian's `htpasswd -B` wrote.
const USERS: &str = "alice:$2y$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy\n";

/// `text` imported, `{DIR}` in it naming a directory that holds an htpasswd file
/// `htpasswd`; the file written must load from that directory (where a relative
/// `users` starts).
fn import(text: &str) -> Imported {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("htpasswd"), USERS).unwrap();
    import_in(dir.path(), text)
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

#[test]
fn oauth2_proxy_behind_auth_request_becomes_an_auth_service_url() {
    // oauth2-proxy's nginx guide, shortened.
    let imported = import(
        "http {
    upstream oauth2 { server 127.0.0.1:4180; }
    server {
        listen 80;
        location /oauth2/ {
            proxy_pass http://oauth2;
            proxy_set_header X-Scheme $scheme;
        }
        location = /oauth2/auth {
            proxy_pass http://oauth2;
            proxy_set_header Content-Length \"\";
            proxy_pass_request_body off;
        }
        location / {
            auth_request /oauth2/auth;
            auth_request_set $user $upstream_http_x_auth_request_user;
            auth_request_set $email $upstream_http_x_auth_request_email;
            proxy_set_header X-User $user;
            proxy_pass http://127.0.0.1:3000;
        }
        location /public/ {
            auth_request off;
            proxy_pass http://127.0.0.1:3000;
        }
        location /check/ {
            auth_request /verify;
            proxy_pass http://127.0.0.1:3000;
        }
        location /verify {
            proxy_pass http://127.0.0.1:9000/v1/check;
        }
    }
}
",
    );
    approx(&imported, 15, "auth_request", "asks http://127.0.0.1:4180/oauth2/auth");
    approx(&imported, 16, "auth_request_set", "`x-auth-request-user` goes upstream under its own name");
    unsupported(&imported, 18, "proxy_set_header", "`$user` is not a tollgate variable");
    has(
        &imported,
        "auth = { request = { url = \"http://127.0.0.1:4180/oauth2/auth\", copy_headers = [\"x-auth-request-user\", \"x-auth-request-email\"] } }",
    );
    // A prefix location with a path in its proxy_pass: the matched part replaced.
    has(&imported, "auth = { request = { url = \"http://127.0.0.1:9000/v1/check\" } }");
    assert_eq!(imported.toml.matches("auth = ").count(), 2, "`off` writes none:\n{}", imported.toml);
}

#[test]
fn an_auth_request_that_reaches_no_proxying_location_is_reported() {
    let imported = import(
        "http {
    server {
        listen 80;
        location = /auth { return 204; }
        location /a/ { auth_request /auth; proxy_pass http://127.0.0.1:3000; }
        location /b/ { auth_request /nowhere; proxy_pass http://127.0.0.1:3000; }
        location / { auth_request_set $x $remote_user; proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    unsupported(&imported, 5, "auth_request", "has no `proxy_pass`");
    unsupported(&imported, 7, "auth_request_set", "only the auth service's headers");
    // `/nowhere` reaches `location /`, which proxies to the application: nginx asks it too.
    approx(&imported, 6, "auth_request", "asks http://127.0.0.1:3000/nowhere");
    assert_eq!(imported.toml.matches("auth = ").count(), 1, "{}", imported.toml);
}
