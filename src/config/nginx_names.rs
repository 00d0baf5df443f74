//! nginx directive names written as keys: an operator moving from nginx writes
//! `proxy_pass` where tollgate says `upstream`. `tollgate -t` then says which key does
//! that job here, or that tollgate does not do it yet and what will bring it, instead of
//! listing the valid keys alone.
//!
//! One table, searched only when a key is unknown: a file without mistakes never
//! reaches it.

/// nginx directive (or block) name, and what to write instead.
const NAMES: &[(&str, &str)] = &[
    // Blocks.
    ("http", "the whole file is nginx's `http {}`: write its sections (`[server]`, `[[site]]`, …) at the top level"),
    ("events", "tollgate has no `events {}`: `[server] workers` sets the worker threads"),
    ("server", "nginx's `server {}` is a `[[site]]` here (its names in `names`), and `[server]` holds the listeners and client limits"),
    ("location", "nginx's `location` is a `[[location]]` (or `[[site.location]]`) table with `match = \"/path\"`"),
    ("upstream", "nginx's `upstream NAME {}` is an `[upstreams.NAME]` table with `servers = [\"HOST:PORT\"]`; a location forwards with `upstream = \"NAME\"`"),
    ("map", "nginx's `map` is a `[maps.NAME]` table: `source`, `values` and `default`"),
    ("if", "there is no `if`: match with a location's `match` (`~` for a regex), or compute a variable with a `[maps.NAME]` table and use it (e.g. in `return.status`)"),
    // server {}.
    ("server_name", "a `[[site]]`'s `names = [\"example.com\", \"*.example.com\"]`"),
    ("listen", "`listen` and `listen_tls` belong in `[server]`; a `[[site]]`'s `listen` names some of those addresses (`http2` is a listener table's key: `{ addr = \"…\", http2 = false }`)"),
    ("ssl_certificate", "a `[[tls.certificates]]` table with `cert` and `key` (the addresses in `[server] listen_tls`)"),
    ("ssl_certificate_key", "a `[[tls.certificates]]` table's `key`, beside its `cert`"),
    ("ssl_protocols", "TLS 1.2 and 1.3 are always on and nothing older: leave it out"),
    ("ssl_ciphers", "the cipher suites are rustls's safe defaults: leave it out"),
    ("server_tokens", "`[server] server_header = \"tollgate\"` (`\"\"` sends none)"),
    ("default_server", "a `[[site]]`'s `default = true`"),
    // Forwarding.
    ("proxy_pass", "a location's `upstream = \"NAME\"` (an `[upstreams.NAME]` group; `upstream_path` for a path)"),
    ("proxy_set_header", "a location's (or site's) `request_headers = { \"Name\" = \"value\" }` (`\"\"` removes)"),
    ("proxy_hide_header", "a location's (or site's) `hide_headers = [\"Name\"]`"),
    ("proxy_pass_header", "a location's `pass_headers = [\"Server\"]`"),
    ("proxy_redirect", "a location's `redirect_rewrite` (`\"default\"`, `\"off\"`, or `[{ from = \"…\", to = \"…\" }]`)"),
    ("proxy_cookie_path", "a location's `cookie_path = { \"/from/\" = \"/to/\" }`"),
    ("proxy_cookie_domain", "a location's `cookie_domain = { \"from.internal\" = \"example.com\" }`"),
    ("proxy_read_timeout", "`read_timeout`, on the `[upstreams.NAME]` group or on a site or location"),
    ("proxy_connect_timeout", "`connect_timeout`, on the `[upstreams.NAME]` group or on a site or location"),
    ("proxy_send_timeout", "no such timeout: the request goes upstream under `read_timeout` (on the group, a site or a location)"),
    ("proxy_request_buffering", "`request_buffering = \"on\" | \"off\"`, in `[server]`, a site or a location"),
    ("proxy_http_version", "upstream requests are always HTTP/1.1: leave it out"),
    ("proxy_buffering", "responses always stream to the client as they come: leave it out"),
    ("proxy_next_upstream", "a failed connection or an idempotent request goes to the next server by itself (see `[upstreams.NAME]`)"),
    ("proxy_ssl_server_name", "an `[upstreams.NAME]` group's `tls = { server_name = \"…\" }`"),
    ("proxy_ssl_verify", "an `[upstreams.NAME]` group's `tls` verifies always; `tls = { ca = \"ca.pem\" }` names what to trust"),
    // Answers and headers.
    ("return", "a location's `return = { status = 301, location = \"https://$host$request_uri\" }` (or `body = \"…\"`), a table, not nginx's `return CODE TEXT`"),
    ("rewrite", "a location's `upstream_path` rewrites the path sent upstream; a redirect is `return = { status = 301, location = \"…\" }`"),
    ("add_header", "a location's (or site's) `response_headers = { \"Name\" = \"value\" }` (`{ value = \"…\", when = \"always\" }` for nginx's `always`)"),
    ("more_set_headers", "a location's (or site's) `response_headers = { \"Name\" = \"value\" }`"),
    ("client_max_body_size", "`client_max_body_size` is a key of `[server]`, a `[[site]]` or a location"),
    ("client_body_timeout", "`client_body_timeout` is a key of `[server]`, a `[[site]]` or a location"),
    ("send_timeout", "`send_timeout` is a key of `[server]`, a `[[site]]` or a location"),
    ("keepalive_timeout", "`keepalive_timeout` is a key of `[server]`"),
    ("client_header_timeout", "`client_header_timeout` is a key of `[server]`"),
    ("large_client_header_buffers", "`[server] max_header_bytes` and `max_uri_bytes`"),
    ("worker_processes", "`[server] workers`"),
    // Limits and access.
    ("limit_req_zone", "a `[zones.NAME]` table with `key = \"$binary_remote_addr\"` and `rate = \"10r/s\"`"),
    ("limit_req", "a location's (or site's) `limit = [{ zone = \"NAME\", burst = 5, nodelay = true }]`"),
    ("limit_req_status", "`limit_status`, in `[server]`, a site or a location"),
    ("limit_conn_zone", "a `[zones.NAME]` table with `algorithm = \"concurrency\"` and `max`"),
    ("limit_conn", "a location's `limit = [{ zone = \"NAME\" }]` on a `concurrency` zone"),
    ("allow", "a location's (or site's) `access = [\"allow 10.0.0.0/8\", \"deny all\"]`, rules in order"),
    ("deny", "a location's (or site's) `access = [\"deny 192.0.2.1\", \"allow all\"]`, rules in order (`[access] deny` refuses before any site)"),
    ("set_real_ip_from", "`[real_ip] trusted = [\"10.0.0.0/8\"]`"),
    ("real_ip_header", "`[real_ip] header`"),
    ("real_ip_recursive", "`[real_ip] recursive = true`"),
    // Logs.
    ("access_log", "`[log] access` (a path or \"off\")"),
    ("log_format", "`[log] format = \"combined\" | \"json\"`; nginx's own formats are not supported yet (issue 39: log formats)"),
    ("error_log", "errors go to stderr, with `RUST_LOG` for the level: leave it out"),
    // Not yet.
    // Files and compression.
    ("root", "a location's `root = \"/srv/www\"` (nginx's `http`/`server` root goes on each location that serves files)"),
    ("alias", "a location's `alias = \"/srv/assets/\"`, on a prefix location"),
    ("index", "a location's `index = [\"index.html\"]`, beside `root` or `alias`"),
    ("try_files", "a location's `try_files = [\"$uri\", \"$uri/\", \"/index.html\"]`, beside `root` or `alias` (last item a URI, \"=404\" or \"@upstream\")"),
    ("autoindex", "directory listings are not served: leave it out (a directory without an index answers 403)"),
    ("error_page", "`error_pages = { \"404\" = \"/404.html\", \"500 502\" = \"/50x.html\" }` on a location or a `[[site]]`"),
    ("proxy_intercept_errors", "`intercept_errors = true` on a location or a `[[site]]`, with its `error_pages`"),
    ("expires", "a location's `expires = \"30d\"` (also \"epoch\", \"max\", \"off\")"),
    ("gzip", "`compress = { encodings = [\"gzip\"] }` on a location, a `[[site]]` or `[server]`"),
    ("gzip_types", "`compress`'s `types = [\"text/*\", \"application/json\"]`"),
    ("gzip_min_length", "`compress`'s `min_length = \"1k\"`"),
    ("gzip_static", "a location's `precompressed = [\"gzip\"]` (also \"br\", \"zstd\")"),
    ("brotli", "`compress = { encodings = [\"br\"] }` on a location, a `[[site]]` or `[server]`"),
    ("brotli_static", "a location's `precompressed = [\"br\"]`"),
    ("sendfile", "`sendfile` is a key of `[server]`"),
    ("types", "MIME types come from a built-in table (mime_guess): leave it out"),
    ("default_type", "a file of unknown type is sent as application/octet-stream: leave it out"),
    ("auth_basic", "here `auth = { basic = { realm = \"Admin\", users = \"admin.htpasswd\" } }` (`auth = \"off\"` for `auth_basic off`)"),
    ("auth_basic_user_file", "here `users` in `auth = { basic = { realm = \"Admin\", users = \"admin.htpasswd\" } }`"),
    ("satisfy", "here `satisfy = \"any\"` (or \"all\", the default) beside `access` and `auth`"),
    ("auth_request", "`auth = { request = { url = \"http://…\" } }` asks an auth service (docs/config.md, \"Asking an auth service\")"),
    ("auth_request_set", "here `copy_headers` in `auth = { request = { url = \"…\", copy_headers = [\"X-Auth-Request-User\"] } }`"),
    ("ssl_client_certificate", "a `[[site]]`'s `client_certificates = { ca = \"clients.pem\" }`"),
    ("ssl_verify_client", "a `[[site]]`'s `client_certificates = { ca = \"clients.pem\", verify = \"on\" }` (or \"optional\")"),
    ("http3", "HTTP/3 is `quic = true` on a `listen_tls` table, with `[quic]` for its settings"),
    ("quic", "HTTP/3 is `quic = true` on a `listen_tls` table, with `[quic]` for its settings"),
    ("include", "one file holds the whole configuration: no `include`"),
];

/// What to write instead of nginx's `name`, when `name` is an nginx directive.
pub(super) fn hint(name: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .find(|(directive, _)| *directive == name)
        .map(|(_, hint)| *hint)
}

/// The message for `name`, a key unknown in its table, when it is an nginx directive.
pub(super) fn unknown_key(name: &str) -> Option<String> {
    let hint = hint(name)?;
    Some(format!("unknown key `{name}`: in nginx a directive; here {hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_in_the_table_once() {
        for (i, (name, _)) in NAMES.iter().enumerate() {
            let again = NAMES[i + 1..].iter().any(|(other, _)| other == name);
            assert!(!again, "{name} twice");
        }
    }

    #[test]
    fn the_common_directives_are_there() {
        let common = [
            "try_files",
            "proxy_pass",
            "proxy_set_header",
            "add_header",
            "gzip",
            "auth_basic",
            "if",
            "rewrite",
            "server_name",
            "listen",
            "root",
            "alias",
            "index",
            "error_page",
            "limit_req",
            "limit_req_zone",
            "allow",
            "deny",
            "ssl_certificate",
            "proxy_redirect",
            "proxy_cookie_path",
            "client_max_body_size",
            "return",
        ];
        for name in common {
            assert!(hint(name).is_some(), "{name}");
        }
        assert!(NAMES.len() >= 40);
    }

    #[test]
    fn a_hint_names_the_key_or_says_not_yet() {
        let pass = unknown_key("proxy_pass").unwrap();
        assert_eq!(
            pass,
            "unknown key `proxy_pass`: in nginx a directive; here a location's `upstream = \"NAME\"` (an `[upstreams.NAME]` group; `upstream_path` for a path)"
        );
        assert!(hint("gzip").unwrap().contains("`compress = {"));
        assert!(hint("auth_basic").unwrap().contains("`auth = { basic = {"));
        assert!(hint("auth_request").unwrap().contains("auth = { request"));
        assert_eq!(hint("proxy_pas"), None);
        assert_eq!(hint("PROXY_PASS"), None);
    }

    #[test]
    fn every_hint_names_a_key_or_says_to_leave_it_out_or_what_brings_it() {
        for (name, hint) in NAMES {
            assert!(
                hint.contains('`')
                    || hint.contains("leave it out")
                    || hint.contains("not supported yet (issue"),
                "{name}: {hint}"
            );
        }
    }
}
