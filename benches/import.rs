//! `tollgate import` of a generated 5,000-line nginx configuration: 250 `server {}`
//! blocks of 20 lines each (names, limits, headers, five locations: proxy_pass with and
//! without a path, a regex, an exact `return`, allow/deny), read from memory. The target
//! is under a second (issue 33).
//!
//! ```text
//! cargo bench --bench import
//! ```

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use tollgate::import::import_from;
use tollgate_nginx::Memory;

const SERVERS: usize = 250;
const MAIN: &str = "/etc/nginx/nginx.conf";

/// The configuration: a head of zones and a group, then the servers.
fn config() -> String {
    let mut text = String::from(
        "events { worker_connections 1024; }\nhttp {\n    limit_req_zone $binary_remote_addr zone=per_ip:10m rate=10r/s;\n    limit_req_zone $http_x_api_key zone=api:10m rate=100r/m;\n    upstream app { server 127.0.0.1:3000 weight=2; server 127.0.0.1:3001; keepalive 32; }\n",
    );
    for i in 0..SERVERS {
        let port = 3000 + i % 10;
        text.push_str(&format!(
            "server {{
    listen 80;
    server_name site{i}.example.com www.site{i}.example.com;
    limit_req zone=per_ip burst=20 nodelay;
    add_header X-Frame-Options DENY always;
    location / {{
        proxy_pass http://app;
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }}
    location /api/ {{
        proxy_pass http://127.0.0.1:{port}/v2/;
        limit_req zone=api burst=5;
    }}
    location ~ \\.php$ {{ return 403; }}
    location = /health {{ return 200 ok; }}
    location /admin/ {{ allow 10.0.0.0/8; deny all; proxy_pass http://app; }}
    gzip on;
}}

"
        ));
    }
    text.push_str("}\n");
    text
}

fn import(c: &mut Criterion) {
    let text = config();
    let lines = text.lines().count();
    assert!(lines >= 5000, "{lines} lines");
    let files = Memory::new().with(MAIN, text);
    let imported = import_from(&files, Path::new(MAIN)).expect("imports");
    tollgate::from_str(&imported.toml, Path::new("/etc/nginx/gateway.toml")).expect("loads");
    let mut group = c.benchmark_group("import");
    group.sample_size(20);
    group.bench_function(format!("{lines}_lines"), |b| {
        b.iter(|| import_from(black_box(&files), Path::new(MAIN)).expect("imports"))
    });
    group.finish();
}

criterion_group!(benches, import);
criterion_main!(benches);
