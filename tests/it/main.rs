//! Every integration test, in one binary: the crate and its dependencies are linked once,
//! not once per file. Each file is a module (`cargo test --test it testssl::` runs one).
//!
//! proptest keeps the failures it found (and replays them first) in
//! `tests/proptest-regressions/<module>.txt`: its default, `SourceParallel`, finds this
//! `main.rs` above the source file and puts the file in a directory beside `tests/it`.

mod support;

mod acme;
mod adaptive;
mod admin;
mod admin_auth;
mod admin_history;
mod admin_limits;
mod admin_page;
mod architecture;
mod auth_basic;
mod auth_jwt;
mod auth_request;
mod bans;
mod body_limit;
mod cli;
mod cli_control;
mod client_certs;
mod compress_memory;
mod concurrency_gate;
mod contrib;
mod descriptors;
mod files_conformance;
mod files_paths;
mod files_redirects;
mod files_sendfile;
mod files_spa;
mod forwarded_headers;
mod framing_corpus;
mod h1_codec;
mod hardening;
mod header_rules;
mod http3;
mod import;
mod import_conformance;
mod ja4;
mod large_body;
mod limit_action;
mod limit_by_answer;
mod limit_concurrency;
mod limit_memory;
mod limit_properties;
mod limits;
mod listen_tables;
mod location_timeouts;
mod log_format;
mod logs;
mod maps;
mod metrics;
mod nginx_conformance;
mod path_properties;
mod pebble_harness;
mod proxy;
mod proxy_protocol;
mod quic_admission;
mod recipes;
mod redirect_rewrite;
mod redis_clock_skew;
mod redis_instances;
mod redis_leases;
mod redis_scripts;
mod redis_timeouts;
mod redis_zones;
mod rejections;
mod reload;
mod request_buffering;
mod response_when;
mod return_vars;
mod rewrite;
mod server_header;
mod sites;
mod slow_clients;
mod soft_limits;
mod testssl;
mod timeouts;
mod tls;
mod trailing_slash;
mod upstream_tls;
mod upstreams;
mod websocket;
mod zone_keys;
