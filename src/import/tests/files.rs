//! Files and compression (DESIGN §17): `root`, `alias`, `index`, `try_files` (with a
//! named location's `proxy_pass`), `error_page`, `expires`, `gzip*`, `gzip_static`,
//! `brotli*`, `proxy_intercept_errors` and `sendfile`, inherited as nginx inherits them.

use super::{approx, exact, has, import, one_line_each, unsupported};

#[test]
fn a_single_page_app_with_its_api_behind_a_named_location() {
    let imported = import(
        "http {
    sendfile on;
    gzip on;
    gzip_types application/json text/css;
    gzip_min_length 1k;
    server {
        listen 80;
        root /srv/app;
        index index.html;
        error_page 500 502 503 504 /50x.html;
        location / {
            try_files $uri $uri/ /index.html;
        }
        location /api/ {
            try_files $uri @backend;
        }
        location @backend { proxy_pass http://127.0.0.1:3000; }
        location /assets/ {
            gzip_static on;
            expires 30d;
        }
    }
}
",
    );
    exact(&imported, 2, "sendfile");
    has(&imported, "[server]\nlisten = [{ addr = \"0.0.0.0:80\", http2 = false }]\n");
    has(&imported, "sendfile = true\n");
    approx(&imported, 3, "gzip", "Vary: Accept-Encoding");
    exact(&imported, 4, "gzip_types");
    exact(&imported, 5, "gzip_min_length");
    approx(&imported, 8, "root", "dotfiles");
    exact(&imported, 9, "index");
    exact(&imported, 10, "error_page");
    exact(&imported, 12, "try_files");
    exact(&imported, 15, "try_files");
    exact(&imported, 17, "location");
    exact(&imported, 17, "proxy_pass");
    exact(&imported, 19, "gzip_static");
    exact(&imported, 20, "expires");
    has(
        &imported,
        "match = \"/\"\nroot = \"/srv/app\"\nindex = [\"index.html\"]\n\
         try_files = [\"$uri\", \"$uri/\", \"/index.html\"]\n\
         error_pages = { \"500 502 503 504\" = \"/50x.html\" }\n\
         compress = { encodings = [\"gzip\"], types = [\"text/html\", \"application/json\", \"text/css\"], min_length = \"1k\" }\n",
    );
    has(&imported, "match = \"/api/\"\nupstream = \"127_0_0_1_3000\"\n");
    has(&imported, "try_files = [\"$uri\", \"@upstream\"]\n");
    has(&imported, "precompressed = [\"gzip\"]\n");
    has(&imported, "expires = \"30d\"\n");
    assert_eq!(imported.report.exit_code(), 0, "{}", imported.report);
    one_line_each(&imported, 19);
}

#[test]
fn a_server_root_without_location_slash_serves_what_no_location_matches() {
    let imported = import(
        "http {
    root /srv/www;
    server {
        listen 80;
        location /api/ { proxy_pass http://127.0.0.1:3000; }
    }
}
",
    );
    has(&imported, "[[site.location]]\nmatch = \"/\"\nroot = \"/srv/www\"\n");
    exact(&imported, 3, "server");
    assert_eq!(imported.report.exit_code(), 0, "{}", imported.report);
}

#[test]
fn error_pages_expires_and_intercepted_upstream_errors() {
    let imported = import(
        "http {
    server {
        listen 80;
        error_page 404 /404.html;
        location /app/ {
            proxy_pass http://127.0.0.1:3000;
            proxy_intercept_errors on;
            error_page 502 =503 /down.html;
            error_page 403 http://example.com/forbidden;
            expires epoch;
        }
        location /old/ {
            return 404;
            error_page 404 @gone;
        }
        location /cache/ {
            proxy_pass http://127.0.0.1:3000;
            expires modified 1h;
        }
    }
}
",
    );
    exact(&imported, 4, "error_page");
    exact(&imported, 7, "proxy_intercept_errors");
    exact(&imported, 8, "error_page");
    exact(&imported, 9, "error_page");
    exact(&imported, 10, "expires");
    unsupported(&imported, 14, "error_page", "named location");
    unsupported(&imported, 18, "expires", "`modified`");
    has(
        &imported,
        "error_pages = { 403 = \"http://example.com/forbidden\", 502 = \"=503 /down.html\" }\n\
         intercept_errors = true\nexpires = \"epoch\"\n",
    );
    // A location's own error_page replaces the server's whole, as nginx.
    has(&imported, "match = \"/old/\"\nreturn = { status = 404 }\nerror_pages = { 404 = \"/404.html\" }\n");
    assert_eq!(imported.report.exit_code(), 2);
}

#[test]
fn alias_brotli_and_what_stays_unsupported() {
    let imported = import(
        "http {
    brotli on;
    brotli_static on;
    gzip_static always;
    server {
        listen 80;
        location /static/ {
            alias /srv/static/;
            disable_symlinks off;
        }
        location /x/ {
            root html;
            try_files $uri @other;
            autoindex on;
        }
        location @other { return 404; }
    }
}
",
    );
    approx(&imported, 2, "brotli", "quality 4");
    exact(&imported, 3, "brotli_static");
    approx(&imported, 4, "gzip_static", "only to clients that accept it");
    approx(&imported, 8, "alias", "dotfiles");
    exact(&imported, 9, "disable_symlinks");
    approx(&imported, 12, "root", "relative");
    unsupported(&imported, 13, "try_files", "one `proxy_pass`");
    unsupported(&imported, 14, "autoindex", "no directory listings");
    unsupported(&imported, 16, "location", "named location");
    has(
        &imported,
        "match = \"/static/\"\nalias = \"/srv/static/\"\nprecompressed = [\"br\", \"gzip\"]\n\
         compress = { encodings = [\"br\"], types = [\"text/html\"], min_length = \"20\" }\nfollow_symlinks = true\n",
    );
}

#[test]
fn gzip_http_version_is_exact_only_at_nginx_default() {
    let imported = import(
        "http {
    gzip on;
    gzip_http_version 1.1;
    server {
        listen 80;
        gzip_http_version 1.0;
        location / { root /srv/www; }
    }
}
",
    );
    exact(&imported, 3, "gzip_http_version");
    approx(&imported, 6, "gzip_http_version", "HTTP/1.1 clients and later only");
}

#[test]
fn types_and_default_type_say_where_mime_types_come_from() {
    let imported = import(
        "http {
    default_type application/octet-stream;
    types { text/html html; }
    server { listen 80; location / { proxy_pass http://127.0.0.1:3000; } }
}
",
    );
    approx(&imported, 2, "default_type", "mime_guess");
    approx(&imported, 3, "text/html", "mime_guess");
}

#[test]
fn what_cannot_be_written_beside_a_proxy_or_on_a_regex_is_unsupported() {
    let imported = import(
        "http {
    server {
        listen 80;
        location ~ ^/img/(.*)$ { alias /srv/img/$1; }
        location /api/ {
            try_files $uri /index.html;
            proxy_pass http://127.0.0.1:3000;
        }
    }
}
",
    );
    unsupported(&imported, 4, "alias", "regex or exact location");
    unsupported(&imported, 6, "try_files", "beside `proxy_pass`");
    assert_eq!(imported.report.exit_code(), 2);
}
