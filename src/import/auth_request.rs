//! `auth_request` and `auth_request_set` (DESIGN §18's `auth.request`). nginx's
//! `auth_request /auth` asks a location of the same server, which proxies to the auth
//! service; tollgate asks the service itself, so the URL is that location's
//! `proxy_pass` with the path nginx would send. `auth_request_set $v
//! $upstream_http_NAME` becomes `copy_headers = ["NAME"]`.

use tollgate_nginx::Directive;

use super::level::Level;
use super::proxy;
use super::report::Status;
use super::state::Walk;

/// How `auth.request` answers otherwise than nginx's `auth_request`, said on each one.
const DIFFERENCES: &str = "the service is asked directly: a GET with the client's headers and tollgate's own X-Forwarded-*/X-Original-* (not the auth location's `proxy_set_header` lines), within `timeout` (5s, not the location's proxy timeouts); a 401, 403 or redirect is answered as the service gave it (nginx answers its own 401/403 page, and a redirect with 500), and a service that cannot be reached is 503 (nginx: 500)";

/// The directive `d` of this family, translated into `own`; `None` when it is not one.
pub(super) fn setting(w: &mut Walk<'_>, d: &Directive, own: &mut Level) -> Option<Status> {
    let auth = &mut own.auth;
    Some(match (d.name.as_str(), d.args.as_slice()) {
        ("auth_request", [off]) if off == "off" => {
            auth.request = Some(None);
            Status::Exact(None)
        }
        ("auth_request", [uri]) => match url(w, uri) {
            Ok(url) => {
                let status = Status::Approx(format!("asks {url}; {DIFFERENCES}"));
                own.auth.request = Some(Some(url));
                status
            }
            Err(why) => Status::Unsupported(why),
        },
        ("auth_request_set", [var, value]) => {
            let Some(name) = value.strip_prefix("$upstream_http_") else {
                return Some(Status::Unsupported(format!("`{value}`: only the auth service's headers (`$upstream_http_NAME`) map, to `copy_headers`")));
            };
            let header = name.replace('_', "-");
            auth.copy.get_or_insert_with(Vec::new).push(header.clone());
            Status::Approx(format!("the service's `{header}` goes upstream under its own name (`copy_headers`), where nginx sets `{var}` for other directives: a `proxy_set_header` of `{var}` is not translated"))
        }
        _ => return None,
    })
}

/// The auth service's URL for `auth_request uri`: the `proxy_pass` of the location of
/// this server that `uri` reaches, with the path nginx sends it.
fn url(w: &mut Walk<'_>, uri: &str) -> Result<String, String> {
    if uri.contains('$') || !uri.starts_with('/') {
        return Err(format!("`{uri}`: tollgate asks one URL, written without variables"));
    }
    let Some((location, prefix)) = reached(&w.locations, uri) else {
        return Err(format!("no location of this server (exact or prefix) matches `{uri}`: write `auth = {{ request = {{ url = \"http://…\" }} }}` by hand"));
    };
    let block = location.block.as_deref().unwrap_or_default();
    let pass = block.iter().find(|d| d.name == "proxy_pass").cloned();
    let Some(pass) = pass else {
        return Err(format!("the location for `{uri}` has no `proxy_pass`: tollgate asks an auth service over HTTP"));
    };
    let target = proxy::pass(w, &pass).map_err(|status| match status {
        Status::Unsupported(why) | Status::Approx(why) => why,
        Status::Exact(_) => "its proxy_pass".to_owned(),
    })?;
    let group = w.build.group(&target.group).map(|g| g.servers.first().map(|(s, _)| s.clone()));
    let Some(Some(server)) = group else {
        return Err(format!("the auth location's upstream `{}` has no server", target.group));
    };
    let base = match server.strip_prefix("https://") {
        Some(host) => format!("https://{host}"),
        None => format!("http://{server}"),
    };
    // As nginx: a proxy_pass with a path replaces the part the location matched.
    let path = match &target.path {
        Some(path) => format!("{path}{}", &uri[prefix..]),
        None => uri.to_owned(),
    };
    Ok(format!("{base}{path}"))
}

/// The location `uri` reaches among `locations` (nginx's order: an exact match, else the
/// longest prefix; regex locations are not looked at), and how much of `uri` it matched.
fn reached<'d>(locations: &'d [Directive], uri: &str) -> Option<(&'d Directive, usize)> {
    let mut longest: Option<(&Directive, usize)> = None;
    for location in locations {
        let (exact, path) = match location.args.as_slice() {
            [eq, path] if eq == "=" => (true, path.as_str()),
            [caret, path] if caret == "^~" => (false, path.as_str()),
            [path] if path.starts_with('=') => (true, &path[1..]),
            [path] if path.starts_with('/') => (false, path.as_str()),
            _ => continue,
        };
        if exact && path == uri {
            return Some((location, uri.len()));
        }
        if !exact && uri.starts_with(path) && longest.is_none_or(|(_, len)| path.len() > len) {
            longest = Some((location, path.len()));
        }
    }
    longest
}
