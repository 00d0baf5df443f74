//! `auth_basic`, `auth_basic_user_file` and `satisfy` (DESIGN §18's `auth` and
//! `satisfy`): each inherited as nginx inherits it, and written whole on each location
//! where both a realm and a file are in effect ([`write`]), never on a `return` location
//! (nginx answers `return` before its access phase).

use tollgate_nginx::Directive;

use super::build::sp;
use super::level::Level;
use super::report::Status;
use crate::config::raw::{RawAuth, RawAuthTable, RawBasic, RawForwardAuth, RawLocation};
use crate::config::Satisfy;

/// The directive `d` of this family, translated into `own`; `None` when it is not one.
pub(super) fn setting(d: &Directive, own: &mut Level) -> Option<Status> {
    let auth = &mut own.auth;
    Some(match (d.name.as_str(), d.args.as_slice()) {
        ("auth_basic", [off]) if off == "off" => {
            auth.realm = Some(None);
            Status::Exact(None)
        }
        ("auth_basic", [realm]) => {
            if realm.contains('$') {
                return Some(Status::Unsupported("a realm with variables: tollgate's `realm` is one text".to_owned()));
            }
            if let Err(bad) = crate::access::basic::challenge(realm) {
                return Some(Status::Unsupported(bad.to_string()));
            }
            auth.realm = Some(Some(realm.clone()));
            Status::Exact(None)
        }
        ("auth_basic_user_file", [file]) => {
            if file.contains('$') {
                return Some(Status::Unsupported("a file name with variables: tollgate's `users` is one file".to_owned()));
            }
            auth.users = Some(file.clone());
            match file.starts_with('/') {
                true => Status::Approx(FILE.to_owned()),
                false => Status::Approx(format!("relative: nginx reads it from its prefix (`nginx -V`), tollgate from the gateway.toml's directory, so write it absolute; {FILE}")),
            }
        }
        ("satisfy", [how]) => {
            auth.satisfy = Some(match how.as_str() {
                "all" => Satisfy::All,
                "any" => Satisfy::Any,
                _ => return Some(Status::Unsupported(format!("`{how}`: all or any"))),
            });
            Status::Exact(None)
        }
        _ => return None,
    })
}

/// How tollgate reads the file otherwise than nginx, said on every `auth_basic_user_file`.
const FILE: &str = "read at load (`tollgate -t` refuses a line it cannot check: DES, bare plain text, yescrypt) and again within a second of a change, where nginx reads it on every request";

/// `auth` and `satisfy` on a location with `level`'s settings: a login where a realm and
/// a file are both in effect (nginx checks nothing otherwise), an auth service where
/// `auth_request` names one. nginx asks both when both are set; tollgate takes one, so
/// both are written and `tollgate -t` says so.
pub(super) fn write(raw: &mut RawLocation, level: &Level) {
    let auth = &level.auth;
    let mut table = RawAuthTable::default();
    if let (Some(Some(realm)), Some(users)) = (&auth.realm, &auth.users) {
        let basic = RawBasic {
            realm: Some(sp(realm.clone())),
            users: Some(sp(users.clone())),
        };
        table.basic = Some(sp(basic));
    }
    if let Some(Some(url)) = &auth.request {
        let copied = auth.copy.iter().flatten().map(|name| sp(name.clone()));
        let request = RawForwardAuth {
            url: Some(sp(url.clone())),
            copy_headers: auth.copy.is_some().then(|| sp(copied.collect())),
            ..RawForwardAuth::default()
        };
        table.request = Some(sp(request));
    }
    if table.basic.is_some() || table.request.is_some() {
        raw.auth = Some(sp(RawAuth::Table(Box::new(table))));
    }
    // `satisfy any` only means something beside a check.
    if raw.auth.is_some() && auth.satisfy == Some(Satisfy::Any) {
        raw.satisfy = Some(Satisfy::Any);
    }
}
