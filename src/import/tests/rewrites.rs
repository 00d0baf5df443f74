//! The upstream's URLs rewritten back (`proxy_redirect`, `proxy_cookie_*`), `map`, and
//! the `if` that chooses a redirect's status.

use super::{approx, exact, has, import, one_line_each, unsupported};

#[test]
fn nginx_s_implicit_proxy_redirect_default_is_written_from_the_proxy_pass_text() {
    let imported = import(
        "http {
    upstream app { server 127.0.0.1:3000; }
    server {
        listen 80;
        location /one/ { proxy_pass http://app/two/; }
        location /plain/ { proxy_pass http://app; }
        location /ip/ { proxy_pass http://127.0.0.1:4000/v2/; }
        location /bare/ { proxy_pass http://127.0.0.1:4000; }
        location = /exact { proxy_pass http://app/x; }
        location ~ ^/u/(\\d+)$ { proxy_pass http://app/users/$1; }
        location /broken/ { rewrite ^/broken/(.*)$ /fixed/$1 break; proxy_pass http://app/two/; }
    }
}
",
    );
    has(&imported, "upstream_path = \"/two/\"\nredirect_rewrite = \"default\"\n");
    has(&imported, "match = \"/plain/\"\nupstream = \"app\"\nrequest_headers = { Host = \"app\" }\nredirect_rewrite = \"default\"\n");
    // The group is named 127_0_0_1_4000: "default" would say http://127_0_0_1_4000/.
    has(&imported, "redirect_rewrite = [{ from = \"http://127.0.0.1:4000/v2/\", to = \"/ip/\" }]");
    has(&imported, "redirect_rewrite = [{ from = \"http://127.0.0.1:4000/\", to = \"/\" }]");
    has(&imported, "upstream_path = \"/x\"\nredirect_rewrite = \"default\"\n");
    // proxy_pass with variables: nginx has no default rule.
    has(&imported, "upstream_path = \"/users/$1\"\nforwarded_headers = []\n\n");
    // The path sent up is rewrite's, the rule still proxy_pass's text.
    has(&imported, "upstream_path = \"/fixed/\"\nredirect_rewrite = [{ from = \"http://app/two/\", to = \"/broken/\" }]");
    assert_eq!(imported.report.exit_code(), 0, "{}", imported.report);
}

#[test]
fn proxy_redirect_and_cookie_rules_are_inherited_and_replaced_as_in_nginx() {
    let imported = import(
        "http {
    proxy_cookie_domain app.internal example.com;
    server {
        listen 80;
        proxy_redirect ~^http://[^/]+/v2/(.*)$ https://$host/api/$1;
        proxy_redirect http://$proxy_host/ /;
        location /api/ { proxy_pass http://127.0.0.1:3000/v2/; }
        location /off/ { proxy_pass http://127.0.0.1:3000; proxy_redirect off; proxy_cookie_domain off; }
        location /both/ {
            proxy_pass http://127.0.0.1:3000/v3/;
            proxy_redirect default;
            proxy_redirect ~*^https?://old/ /;
            proxy_cookie_path /v3/ /both/;
            proxy_cookie_path ~^/v3/(.*)$ /both/$1;
            proxy_cookie_path /v3/ /never/;
        }
        location /lookaround/ { proxy_pass http://127.0.0.1:3000; proxy_redirect ~(?=x) /; }
        location /unknown/ { proxy_pass http://127.0.0.1:3000; proxy_redirect http://$proxy_port/ /; }
    }
}
",
    );
    has(&imported, "match = \"/api/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\" }\nupstream_path = \"/v2/\"\nredirect_rewrite = [{ from = \"~^http://[^/]+/v2/(.*)$\", to = \"https://$host/api/$1\" }, { from = \"http://127.0.0.1:3000/\", to = \"/\" }]\ncookie_domain = { \"app.internal\" = \"example.com\" }\n");
    has(&imported, "match = \"/off/\"\nupstream = \"127_0_0_1_3000\"\nrequest_headers = { Host = \"127.0.0.1:3000\" }\nforwarded_headers = []\n\n");
    has(&imported, "redirect_rewrite = [{ from = \"http://127.0.0.1:3000/v3/\", to = \"/both/\" }, { from = \"~*^https?://old/\", to = \"/\" }]\ncookie_path = { \"/v3/\" = \"/both/\", \"~^/v3/(.*)$\" = \"/both/$1\" }\ncookie_domain = { \"app.internal\" = \"example.com\" }\n");
    exact(&imported, 2, "proxy_cookie_domain");
    exact(&imported, 5, "proxy_redirect");
    exact(&imported, 6, "proxy_redirect");
    exact(&imported, 8, "proxy_redirect");
    exact(&imported, 8, "proxy_cookie_domain");
    exact(&imported, 11, "proxy_redirect");
    exact(&imported, 15, "proxy_cookie_path");
    unsupported(&imported, 17, "proxy_redirect", "regex");
    unsupported(&imported, 18, "proxy_redirect", "`$proxy_port`");
}

#[test]
fn maps_keep_their_keys_in_order_and_report_what_they_cannot_say() {
    let imported = import(
        "http {
    map $http_user_agent $is_bot {
        default 0;
        \"~*(googlebot|bingbot)\" 1;
        ~^curl/(?<v>[0-9]+) curl$1;
        Mozilla human;
        mozilla twice;
        \\~tilde tilde;
        volatile;
    }
    map $host $site {
        hostnames;
        *.example.com wild;
        example.org org;
        default $request_body;
    }
    map $uri $http_x { default a; }
    map $uri $bad { /a $1; /b $nope; ~(?=x) look; }
    map $nope $worse { default x; }
    map $worse $worst { default x; }
    server {
        listen 80;
        location / { add_header X-Worst $worst; add_header X-Bot $is_bot; return 200 \"$site $bad\"; }
    }
}
",
    );
    has(&imported, "[maps.is_bot]\nsource = \"$http_user_agent\"\nvalues = { \"~*(googlebot|bingbot)\" = \"1\", \"~^curl/(?<v>[0-9]+)\" = \"curl$1\", Mozilla = \"human\", '\\~tilde' = \"tilde\" }\ndefault = \"0\"\n");
    has(&imported, "[maps.site]\nsource = \"$host\"\nvalues = { \"example.org\" = \"org\" }\n");
    has(&imported, "[maps.bad]\nsource = \"$uri\"\nvalues = {}\n");
    has(&imported, "return = { status = 200, body = \"$site $bad\" }");
    exact(&imported, 2, "map");
    exact(&imported, 7, "mozilla");
    exact(&imported, 9, "volatile");
    approx(&imported, 11, "map", "without the 3 line(s)");
    unsupported(&imported, 12, "hostnames", "`hostnames`");
    unsupported(&imported, 13, "*.example.com", "wildcard");
    unsupported(&imported, 15, "default", "`$request_body`");
    unsupported(&imported, 17, "map", "is a tollgate variable already");
    unsupported(&imported, 17, "default", "inside the map");
    unsupported(&imported, 18, "/a", "`$1`");
    unsupported(&imported, 18, "/b", "`$nope`");
    unsupported(&imported, 18, "~(?=x)", "regex");
    unsupported(&imported, 19, "map", "`$nope`");
    unsupported(&imported, 20, "map", "`$worse`");
    unsupported(&imported, 23, "add_header", "`$worst`");
    one_line_each(&imported, 30);
}

#[test]
fn an_if_holding_a_redirect_becomes_a_map_of_statuses() {
    let imported = import(
        "http {
    server {
        listen 80;
        if ($scheme = http) { return 301 https://$host$request_uri; }
        return 308 https://$host$request_uri;
    }
    server {
        listen 81;
        location / {
            if ($request_method = GET) { return 301 https://$host$request_uri; }
            if ($request_method ~* ^head$) { return 302 https://$host$request_uri; }
            add_header X-A b always;
            return 308 https://$host$request_uri;
        }
        location /n { if ($http_x_old != \"\") { return 410 gone; } return 404 gone; }
        location /other { if ($request_method = POST) { return 307 /a; } return 301 /b; }
        location /half { if ($request_method = POST) { return 405; } proxy_pass http://127.0.0.1:3000; }
        location /two { if ($scheme = http) { return 301 /x; } if ($host = a) { return 302 /x; } return 308 /x; }
        location /after { if ($arg_x) { return 403; } if ($request_method = GET) { return 301 /y; } return 308 /y; }
    }
}
",
    );
    has(&imported, "[maps.status_by_scheme]\nsource = \"$scheme\"\nvalues = { \"~^http$\" = \"301\" }\ndefault = \"308\"\n");
    has(&imported, "match = \"/\"\nreturn = { status = \"$status_by_scheme\", location = \"https://$host$request_uri\" }\n");
    has(&imported, "[maps.status_by_request_method]\nsource = \"$request_method\"\nvalues = { \"~^GET$\" = \"301\", \"~*^head$\" = \"302\" }\ndefault = \"308\"\n");
    has(&imported, "return = { status = \"$status_by_request_method\", location = \"https://$host$request_uri\" }\nresponse_headers");
    has(&imported, "[maps.status_by_http_x_old]\nsource = \"$http_x_old\"\nvalues = { \"\" = \"404\" }\ndefault = \"410\"\n");
    exact(&imported, 4, "if");
    exact(&imported, 5, "return");
    exact(&imported, 10, "if");
    exact(&imported, 11, "if");
    exact(&imported, 13, "return");
    exact(&imported, 15, "if");
    unsupported(&imported, 16, "if", "another text");
    unsupported(&imported, 17, "if", "no `return` after it");
    unsupported(&imported, 18, "if", "different variables");
    unsupported(&imported, 19, "if", "a test other than");
    has(&imported, "if ($request_method = GET) { … }; (unsupported: after an `if` that is not translated");
}

#[test]
fn a_redirecting_rewrite_to_a_path_says_its_location_is_relative() {
    let imported = import(
        "http {
    server {
        listen 80;
        location /a { rewrite ^ /maintenance.html? redirect; }
        location /b { rewrite ^(.*)$ https://example.com$1 permanent; }
    }
}
",
    );
    has(&imported, "return = { status = 302, location = \"/maintenance.html\" }");
    approx(&imported, 4, "rewrite", "nginx makes a relative one absolute");
    approx(&imported, 5, "rewrite", "$request_uri");
}

#[test]
fn a_map_s_include_is_read_into_it() {
    let files = tollgate_nginx::Memory::new()
        .with(
            super::MAIN,
            "http {\n    map $uri $old {\n        include redirects.map;\n        default \"\";\n    }\n    server { listen 80; location / { return 200 \"$old\"; } }\n}\n",
        )
        .with("/etc/nginx/redirects.map", "/a /b;\n~^/c/ /d;\n");
    let imported = super::import_files(files);
    has(&imported, "[maps.old]\nsource = \"$uri\"\nvalues = { \"/a\" = \"/b\", \"~^/c/\" = \"/d\" }\ndefault = \"\"\n");
    exact(&imported, 2, "map");
    exact(&imported, 3, "include");
    assert_eq!(imported.report.exit_code(), 0, "{}", imported.report);
}
