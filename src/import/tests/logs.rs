//! `log_format` and `access_log`: `http {}`'s access log becomes `[log]`, a server's its
//! site's `log`, a location's its own, each format a template (nginx's `combined` written
//! out); options and a block's second log are told.

use super::{approx, exact, has, import, loads, unsupported};

#[test]
fn an_access_log_with_a_named_format_becomes_the_log_and_its_template() {
    let imported = import(
        "http {
    log_format main escape=json '{\"addr\":\"$remote_addr\",'
                                '\"status\":$status,\"ua\":\"$http_user_agent\"}';
    log_format timing '$remote_addr $request_time $upstream_response_time';
    access_log /var/log/nginx/access.log main buffer=32k;
    server {
        listen 80;
        access_log /var/log/nginx/api.log timing;
        location /health { access_log off; return 200; }
        location / { proxy_pass http://127.0.0.1:3000; }
    }
}",
    );
    approx(&imported, 2, "log_format", "so the line stays JSON (nginx writes them raw)");
    approx(&imported, 4, "log_format", "name the server that answered");
    has(&imported, "access = \"/var/log/nginx/access.log\"");
    has(&imported, "format = '{\"addr\":\"$remote_addr\",\"status\":$status,\"ua\":\"$http_user_agent\"}'");
    has(&imported, "escape = \"json\"");
    approx(&imported, 5, "access_log", "`buffer=32k`: tollgate buffers lines itself");
    exact(&imported, 8, "access_log");
    exact(&imported, 9, "access_log");
    loads(&imported);
    let site_log = "log = { access = \"/var/log/nginx/api.log\", format = \"$remote_addr $request_time $upstream_response_time\" }";
    has(&imported, &format!("[[site]]\nlisten = [\"0.0.0.0:80\"]\n{site_log}\n"));
    has(&imported, "match = \"/health\"\nreturn = { status = 200 }\nlog = { access = \"off\" }\n");
    // The `location /` inherits its site's log: it is not written twice.
    assert_eq!(imported.toml.matches("api.log").count(), 1, "{}", imported.toml);
}

#[test]
fn a_blocks_second_log_is_told_as_nginx_writes_to_both() {
    let imported = import(
        "http {
    server {
        listen 80;
        access_log /var/log/a.log;
        access_log /var/log/b.log;
        location / { return 200; }
    }
}",
    );
    approx(&imported, 5, "access_log", "a request's line to one log: `/var/log/a.log`, the first of this block");
    has(&imported, "access = \"/var/log/a.log\"");
}

#[test]
fn combined_is_written_out_and_stdout_named_as_tollgate_names_it() {
    let imported = import(
        "http {
    access_log /dev/stdout;
    server { listen 80; location / { return 200; } }
}",
    );
    approx(&imported, 2, "access_log", "written in UTC");
    has(&imported, "access = \"stdout\"");
    has(&imported, "format = '$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"'");
}

#[test]
fn what_cannot_be_logged_so_is_told() {
    let imported = import(
        "http {
    log_format odd '$remote_addr $connection_requests';
    log_format fine '$remote_addr';
    access_log syslog:server=127.0.0.1 fine;
    access_log logs/access.log missing;
    access_log logs/access.log fine if=$loggable;
    server { listen 80; location / { return 200; } }
}",
    );
    unsupported(&imported, 2, "log_format", "`$connection_requests` is not a log variable");
    unsupported(&imported, 4, "access_log", "syslog");
    unsupported(&imported, 5, "access_log", "no `log_format missing` before it");
    approx(&imported, 6, "access_log", "`if=$loggable`: tollgate logs every request");
    approx(&imported, 6, "access_log", "read from the directory of gateway.toml");
    has(&imported, "access = \"logs/access.log\"");
    has(&imported, "format = \"$remote_addr\"");
}
