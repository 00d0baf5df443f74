//! `proxy_redirect`, `proxy_cookie_path` and `proxy_cookie_domain`: the location's
//! `redirect_rewrite`, `cookie_path` and `cookie_domain`. nginx rewrites the upstream's
//! redirects even when nothing says so (`proxy_redirect default`, made from the
//! location's `proxy_pass` text); tollgate only when the key is set, so the import
//! writes that rule on every location that forwards.

use serde_spanned::Spanned;

use super::build::sp;
use super::level::{Level, Redirect};
use super::pattern::{Kind, Pattern, Target};
use super::report::Status;
use super::values;
use crate::config::raw::{RawCookieRewrites, RawLocation, RawRedirectRewrite, RawRewriteRule};

/// `proxy_redirect …` at a level.
pub(super) fn redirect(own: &mut Level, args: &[String]) -> Status {
    match args {
        [word] if word == "off" => {
            own.redirect = Some(Vec::new());
            Status::Exact(Some("no `redirect_rewrite` written".to_owned()))
        }
        [word] if word == "default" => {
            own.redirect.get_or_insert_with(Vec::new).push(Redirect::Default);
            Status::Exact(Some("`redirect_rewrite`, from the proxy_pass text to the location's path".to_owned()))
        }
        [from, to] => {
            let list = own.redirect.get_or_insert_with(Vec::new);
            if let Err(why) = rule(from, to) {
                return Status::Unsupported(why);
            }
            list.push(Redirect::Rule(from.clone(), to.clone()));
            Status::Exact(Some("a `redirect_rewrite` rule".to_owned()))
        }
        _ => Status::Unsupported("`proxy_redirect` takes `off`, `default`, or a from and a to".to_owned()),
    }
}

/// `proxy_cookie_path …` / `proxy_cookie_domain …` at a level.
pub(super) fn cookie(own: &mut Level, name: &str, args: &[String]) -> Status {
    let key = match name {
        "proxy_cookie_path" => "cookie_path",
        _ => "cookie_domain",
    };
    let list = match name {
        "proxy_cookie_path" => &mut own.cookie_paths,
        _ => &mut own.cookie_domains,
    };
    match args {
        [word] if word == "off" => {
            *list = Some(Vec::new());
            Status::Exact(Some(format!("no `{key}` written")))
        }
        [from, to] => {
            let list = list.get_or_insert_with(Vec::new);
            if let Err(why) = rule(from, to) {
                return Status::Unsupported(why);
            }
            if list.iter().any(|(f, _)| f == from) {
                return Status::Exact(Some("never used: a rule above has the same `from`".to_owned()));
            }
            list.push((from.clone(), to.clone()));
            Status::Exact(Some(format!("a `{key}` rule")))
        }
        _ => Status::Unsupported(format!("`{name}` takes `off`, or a from and a to")),
    }
}

/// Why a from/to pair cannot be written, if it cannot.
fn rule(from: &str, to: &str) -> Result<(), String> {
    if let Some(regex) = from.strip_prefix('~') {
        let source = match regex.strip_prefix('*') {
            Some(rest) => format!("(?i){rest}"),
            None => regex.to_owned(),
        };
        if regex::Regex::new(&source).is_err() {
            return Err("a regex tollgate's engine does not take (lookaround and backreferences have no equivalent)".to_owned());
        }
    } else {
        values::vars(&placeholders(from))?;
    }
    values::vars(&placeholders(to)).map(|_| ())
}

/// `$proxy_host` is known when the location is written; checked as a literal.
fn placeholders(text: &str) -> String {
    text.replace("${proxy_host}", "x").replace("$proxy_host", "x")
}

fn with_proxy_host(text: &str, target: &Target) -> String {
    text.replace("${proxy_host}", &target.proxy_host)
        .replace("$proxy_host", &target.proxy_host)
}

/// nginx's `proxy_redirect default` for this location: from the proxy_pass text to the
/// location's name (`url/` to `/` when proxy_pass has no path); none when proxy_pass
/// has variables (nginx has no rule then).
fn nginx_default(target: &Target, pattern: &Pattern) -> Option<(String, String)> {
    match &target.path {
        // nginx refuses a path in a regex location's proxy_pass, unless it has variables,
        // and has no default rule then.
        Some(path) if path.contains('$') || pattern.kind == Kind::Regex => None,
        Some(_) => Some((target.url.clone(), pattern.path.clone())),
        None => Some((format!("{}/", target.url), "/".to_owned())),
    }
}

/// What tollgate's `"default"` would be here, when it is defined.
fn tollgate_default(target: &Target, pattern: &Pattern, path: Option<&str>, tls: bool) -> Option<(String, String)> {
    let scheme = if tls { "https" } else { "http" };
    match path {
        Some(_) if pattern.kind == Kind::Regex => None,
        Some(path) => Some((format!("{scheme}://{}{path}", target.group), pattern.path.clone())),
        None => Some((format!("{scheme}://{}/", target.group), "/".to_owned())),
    }
}

/// Writes the location's `redirect_rewrite`, `cookie_path` and `cookie_domain`, as nginx
/// would apply them to what `target` answers; `path` is the `upstream_path` written and
/// `tls` whether the group's servers are `https://`. The differences, for the report.
pub(super) fn write(
    raw: &mut RawLocation,
    level: &Level,
    pattern: &Pattern,
    target: &Target,
    path: Option<&str>,
    tls: bool,
) {
    let implicit = vec![Redirect::Default];
    let rules = level.redirect.as_ref().unwrap_or(&implicit);
    let pairs: Vec<(String, String)> = rules
        .iter()
        .filter_map(|rule| match rule {
            Redirect::Default => nginx_default(target, pattern),
            Redirect::Rule(from, to) => Some((with_proxy_host(from, target), with_proxy_host(to, target))),
        })
        .collect();
    let only_default = matches!(rules.as_slice(), [Redirect::Default]);
    let same = pairs.first().cloned() == tollgate_default(target, pattern, path, tls);
    raw.redirect_rewrite = match (pairs.is_empty(), only_default && same) {
        (true, _) => None,
        (false, true) => Some(sp(RawRedirectRewrite::Word("default".to_owned()))),
        (false, false) => {
            let rules = pairs.into_iter().map(|(from, to)| {
                sp(RawRewriteRule {
                    from: Some(sp(from)),
                    to: Some(sp(to)),
                })
            });
            Some(sp(RawRedirectRewrite::Rules(rules.collect())))
        }
    };
    raw.cookie_path = cookies(level.cookie_paths.as_deref(), target);
    raw.cookie_domain = cookies(level.cookie_domains.as_deref(), target);
}

fn cookies(rules: Option<&[(String, String)]>, target: &Target) -> Option<Spanned<RawCookieRewrites>> {
    let rules = rules.filter(|r| !r.is_empty())?;
    let pairs = rules
        .iter()
        .map(|(from, to)| (sp(with_proxy_host(from, target)), sp(with_proxy_host(to, target))));
    Some(sp(RawCookieRewrites(pairs.collect())))
}
