//! Every other directive: what it is to tollgate. Those with no effect on answers are
//! approx (the difference said); those that change answers and have no tollgate key
//! yet are unsupported, with the key or design section that will do it; a name this
//! table does not know is unsupported as unknown.

use tollgate_nginx::Directive;

use super::report::Status;

/// What `d` is, when no family translated it.
pub(super) fn status(d: &Directive) -> Status {
    let name = d.name.as_str();
    if let Some(why) = no_effect(name) {
        return Status::Approx(why.to_owned());
    }
    Status::Unsupported(match instead(name) {
        Some(instead) => instead.to_owned(),
        None if TRANSLATED.contains(&name) => format!("`{name}` does not take these arguments"),
        None if d.block.is_some() => format!("the `{name}` block is not translated"),
        None => format!("`{name}` is not known to tollgate import: nothing is written for it"),
    })
}

/// What a directive inside `parent`'s untranslated block is.
pub(super) fn inside(parent: &Directive, inner: &Directive) -> Status {
    match parent.name.as_str() {
        "events" => status(inner),
        "types" => Status::Approx(MIME.to_owned()),
        name => Status::Unsupported(format!("inside `{name}` (line {}), which is not translated", parent.place.line)),
    }
}

/// What nginx's `types` and `default_type` become.
const MIME: &str = "MIME types come from a built-in table (mime_guess): `.js` is text/javascript, an unknown extension application/octet-stream";

/// The directives the families translate (with the arguments nginx takes).
const TRANSLATED: [&str; 60] = [
    "listen", "server_name", "location", "proxy_pass", "return", "rewrite", "upstream",
    "proxy_set_header", "proxy_hide_header", "proxy_pass_header", "proxy_redirect",
    "proxy_cookie_path", "proxy_cookie_domain", "proxy_connect_timeout", "proxy_read_timeout",
    "proxy_send_timeout", "proxy_http_version", "proxy_request_buffering", "proxy_buffering",
    "proxy_intercept_errors", "proxy_ssl_server_name", "proxy_ssl_verify", "add_header",
    "allow", "deny", "set_real_ip_from", "real_ip_header", "real_ip_recursive",
    "limit_req_zone", "limit_conn_zone", "limit_req", "limit_conn", "limit_req_status",
    "limit_conn_status", "limit_req_dry_run", "client_max_body_size", "client_body_timeout",
    "send_timeout", "keepalive_timeout", "client_header_timeout", "underscores_in_headers",
    "server_tokens", "ssl_certificate", "ssl_certificate_key", "ssl_protocols", "include",
    "root", "alias", "index", "try_files", "error_page", "expires", "gzip", "gzip_static",
    "gzip_min_length", "brotli", "brotli_static", "sendfile", "log_format", "access_log",
];

/// Directives that change nothing tollgate's answers show, and why.
fn no_effect(name: &str) -> Option<&'static str> {
    Some(match name {
        "user" | "worker_processes" | "worker_rlimit_nofile" | "worker_cpu_affinity"
        | "worker_priority" | "worker_shutdown_timeout" | "daemon" | "master_process"
        | "load_module" | "pcre_jit" | "thread_pool" | "timer_resolution" | "env"
        | "lock_file" | "working_directory" => {
            "process settings: tollgate runs one process with a worker thread per CPU ([server] workers)"
        }
        "events" | "worker_connections" | "multi_accept" | "use" | "accept_mutex"
        | "accept_mutex_delay" => "connection handling is tollgate's own (file descriptors shared out at start)",
        "error_log" | "open_log_file_cache" | "log_not_found" | "log_subrequest" | "rewrite_log" => {
            "logs: tollgate's access log is `[log]` for the whole gateway, its error log stderr"
        }
        "tcp_nopush" | "tcp_nodelay" | "aio" | "directio" | "output_buffers"
        | "postpone_output" | "reset_timedout_connection" | "lingering_close"
        | "lingering_time" | "lingering_timeout" => "socket and sending details are tollgate's own",
        "types" | "default_type" => MIME,
        "charset" | "charset_types" | "source_charset" | "override_charset" => {
            "tollgate passes the upstream's Content-Type and adds no charset to files"
        }
        "server_names_hash_bucket_size" | "server_names_hash_max_size"
        | "types_hash_max_size" | "types_hash_bucket_size" | "variables_hash_max_size"
        | "variables_hash_bucket_size" | "map_hash_bucket_size" | "map_hash_max_size"
        | "proxy_headers_hash_max_size" | "proxy_headers_hash_bucket_size" => "hash table sizes: tollgate needs none",
        "fastcgi_temp_path" | "uwsgi_temp_path" | "scgi_temp_path" => "temporary files of protocols tollgate does not proxy: nothing to write",
        "client_body_buffer_size" | "client_header_buffer_size" | "large_client_header_buffers"
        | "client_body_in_file_only" | "client_body_in_single_buffer" | "client_body_temp_path"
        | "connection_pool_size" | "request_pool_size" => "buffers are tollgate's own ([server] client_body_buffer_size, max_header_bytes)",
        "keepalive_requests" | "keepalive_time" | "keepalive_disable" => "tollgate keeps client connections alive by `keepalive_timeout` alone",
        "resolver" | "resolver_timeout" => "tollgate resolves upstream names when the file is loaded",
        "server_name_in_redirect" | "port_in_redirect" | "absolute_redirect"
        | "msie_padding" | "msie_refresh" | "ignore_invalid_headers" | "merge_slashes"
        | "etag" | "if_modified_since" | "server_names_hash" | "chunked_transfer_encoding"
        | "http2_max_concurrent_streams" | "http2_recv_buffer_size" | "http2_chunk_size"
        | "http2_body_preread_size" | "http2_idle_timeout" | "http2_max_requests" | "http2_push"
        | "http2_push_preload" => "tollgate's own behaviour (docs/config.md)",
        "open_file_cache" | "open_file_cache_valid" | "open_file_cache_min_uses"
        | "open_file_cache_errors" => "tollgate keeps no cache of open files: each request opens its file",
        _ => return None,
    })
}

/// Directives that change answers, and the tollgate key or design section for them.
fn instead(name: &str) -> Option<&'static str> {
    Some(match name {
        "autoindex" => "no directory listings: a directory without an index answers 403",
        "otel_exporter" | "otel_trace" | "otel_trace_context" | "otel_service_name" | "otel_span_name"
        | "otel_span_attr" | "otel_resource_attr" => {
            "OpenTelemetry: write `[trace] otlp = \"http://COLLECTOR:4318/v1/traces\"` and `sample` (OTLP over HTTP, not gRPC; a sampled `traceparent` is continued, from the clients `parents_from` names if it is written)"
        }
        "internal" => "no internal-only locations: a location answers every request it matches",
        "recursive_error_pages" => "an error page's own error is answered as it is, never paged again",
        "zstd" | "zstd_types" | "zstd_comp_level" | "zstd_static" => {
            "write `compress = { encodings = [\"zstd\"] }` or `precompressed = [\"zstd\"]` by hand"
        }
        "auth_jwt" | "auth_jwt_key_file" | "auth_jwt_key_request" | "auth_jwt_claim_set" | "auth_jwt_require" | "auth_jwt_leeway" => {
            "nginx Plus's JWT module is not translated: write `auth = { jwt = { jwks = \"FILE\" } }` (or `jwks_url`), with `issuer`, `audience` and `require` (docs/config.md, \"Tokens (JWT)\")"
        }
        "map" => "`map` is translated in `http {}` (a `[maps.NAME]`), where nginx takes it",
        "geo" | "split_clients" => "no equivalent: write the addresses as `access` rules, or `[access] exempt`",
        "if" => "only an `if` holding a `return` before the block's own `return` with the same text is translated (a `[maps.NAME]` choosing the status): write a location per case (`match`), or a `[maps.NAME]` for a value chosen per request",
        "set" => "no variables of one's own: a `[maps.NAME]` computes one (`default` alone for a constant)",
        "limit_except" => "no per-method rules: a `return` or `access` per location",
        "break" => "no rewrite phase: nothing to stop",
        "stream" => "TCP/UDP proxying: tollgate forwards HTTP",
        "mail" => "mail proxying: tollgate forwards HTTP",
        "fastcgi_pass" | "uwsgi_pass" | "scgi_pass" | "grpc_pass" | "memcached_pass" => {
            "tollgate forwards HTTP/1.1: run the application behind an HTTP server"
        }
        "sub_filter" | "sub_filter_once" | "sub_filter_types" | "addition_types" | "ssi" => {
            "tollgate does not change answer bodies"
        }
        "add_trailer" => "tollgate sets no trailers",
        "mirror" | "mirror_request_body" => "no request mirroring",
        "valid_referers" | "secure_link" | "secure_link_md5" => "no equivalent: check it in the application",
        _ => return None,
    })
}
