//! What a location's texts read (header rules, `return`, `upstream_path`, `try_files`):
//! whether they need the request's variables, its regex's captures, or a verified token's
//! claims, found once when the generation is built.

use crate::config;
use crate::limit::decision::LimitRule;
use crate::routing::Pattern;
use crate::vars::Var;

/// Whether the location checks a token before its limits (a zone's key or plan reads a
/// claim: `check_first`), and whether a token's claims must go with its requests (that,
/// or a text reads one, or the upstream URL is made per request: `claims_read`).
pub(super) fn claims(location: &config::Location, rules: &[LimitRule], per_request_url: bool) -> (bool, bool) {
    let zone_reads = |rule: &LimitRule| {
        let zone = &rule.zone;
        zone.template.reads_claims() || zone.plan_from.as_ref().is_some_and(|plan| plan.reads_claims())
    };
    let check_first = matches!(location.auth, Some(config::Check::Jwt(_))) && rules.iter().any(zone_reads);
    let reads_claim = |text: &config::VarText| text.uses(|var| matches!(var, Var::JwtClaim(_)));
    let claims_read = check_first || texts(location).chain(tries(location)).any(reads_claim) || per_request_url;
    (check_first, claims_read)
}

/// Every text of the location that may hold variables.
pub(super) fn texts(location: &config::Location) -> impl Iterator<Item = &config::VarText> {
    let headers = &location.headers;
    let request = headers.request.iter().filter_map(|(_, v)| v.as_ref());
    let response = headers.response.iter().map(|(_, v)| &v.value);
    let answer = match &location.action {
        config::Action::Return(ret) => {
            let status = match &ret.status {
                config::ReturnStatus::Map(map) => Some(map.text()),
                config::ReturnStatus::Fixed(_) => None,
            };
            vec![Some(&ret.body), ret.location.as_ref(), status]
        }
        config::Action::Proxy { .. } | config::Action::Files { .. } => {
            vec![location.upstream_path.as_ref()]
        }
    };
    request.chain(response).chain(answer.into_iter().flatten())
}

/// The texts of the location's `try_files` (filled in on every request it serves, so
/// apart from [`texts`], which say whether anything else needs the variables).
pub(super) fn tries(location: &config::Location) -> impl Iterator<Item = &config::VarText> {
    let try_files = match &location.action {
        config::Action::Files { files, .. } => files.try_files.as_ref(),
        _ => None,
    };
    try_files.into_iter().flat_map(|try_files| {
        let last = match &try_files.last {
            config::files::Last::Uri(text) => Some(text),
            _ => None,
        };
        try_files.tries.iter().map(|t| &t.text).chain(last)
    })
}

/// The location's regex, when a text of it uses its captures (`rewrites`: a rewrite
/// rule of its upstream's answers does).
pub(super) fn captures(location: &config::Location, rewrites: bool) -> Option<regex::bytes::Regex> {
    let Pattern::Regex { regex, .. } = &location.pattern else {
        return None;
    };
    // A map's source may read them too.
    let captured = |text: &config::VarText| text.uses(|var| matches!(var, Var::Capture(_)));
    let used = rewrites || texts(location).chain(tries(location)).any(captured);
    used.then(|| regex.clone())
}
