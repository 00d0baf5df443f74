//! `auth` and `satisfy` (a site, a location; DESIGN §18): who may pass beyond `access`.
//!
//! `auth = { basic = { realm = "Admin", users = "admin.htpasswd" } }` is nginx's
//! `auth_basic` and `auth_basic_user_file`: the htpasswd file (relative to the config
//! file's directory) is read and every line checked here, so that `tollgate -t` names a
//! bad line; the running gateway reads it again when it changes (`proxy::auth`).
//! `auth = "off"` turns off what the site sets, as `auth_basic off`. A location's `auth`
//! replaces its site's, as in nginx.
//!
//! `auth = { request = { url = "http://127.0.0.1:4180/oauth2/auth" } }` is nginx's
//! `auth_request` (read in `forward_auth`); `auth = { jwt = { jwks = "jwks.json" } }` checks
//! a bearer token (read in `jwt`).
//!
//! `satisfy = "all"` (the default) asks both `access` and `auth` to pass; `"any"` lets a
//! client pass that an `allow` rule names or that logs in (nginx's `satisfy`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::forward_auth::{forward_auth, ForwardAuth};
use super::jwt::{jwt, Jwt};
use super::raw::{RawAuth, RawBasic};
use crate::access::basic::{self, Users};

/// The realm a `basic` table without one names (Caddy's default, in nginx's words).
const DEFAULT_REALM: &str = "Restricted";

/// The largest htpasswd file read: a file larger is not a password list.
const MAX_USERS_FILE: u64 = 16 << 20;

/// `satisfy`: how `access` and `auth` combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Satisfy {
    /// Both must pass (nginx's default).
    #[default]
    All,
    /// Either: an `allow` rule naming the client, or a login.
    Any,
}

/// `auth` as a site or location writes it.
#[derive(Clone, Debug)]
pub(crate) enum Auth {
    /// `"off"`: no check, whatever the site sets.
    Off,
    On(Check),
}

impl Auth {
    /// The check in force: none for `"off"`.
    pub(crate) fn in_force(self) -> Option<Check> {
        match self {
            Auth::On(check) => Some(check),
            Auth::Off => None,
        }
    }
}

/// How a location checks who is asking. Shared (an `Arc`) by the locations that
/// inherit it from their site.
#[derive(Clone, Debug)]
pub(crate) enum Check {
    /// `basic`: a login from an htpasswd file.
    Basic(Arc<Basic>),
    /// `request`: the answer of an auth service.
    Request(Arc<ForwardAuth>),
    /// `jwt`: a bearer token checked against a JWK set.
    Jwt(Arc<Jwt>),
}

impl Check {
    /// Both are the same `auth` as written (one site's, inherited).
    pub(crate) fn same(&self, other: &Check) -> bool {
        match (self, other) {
            (Check::Basic(a), Check::Basic(b)) => Arc::ptr_eq(a, b),
            (Check::Request(a), Check::Request(b)) => Arc::ptr_eq(a, b),
            (Check::Jwt(a), Check::Jwt(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// `auth.basic`: a login checked against an htpasswd file.
pub(crate) struct Basic {
    /// What `WWW-Authenticate: Basic realm="…"` names (checked to fit between the quotes).
    pub realm: String,
    /// The htpasswd file, made absolute.
    pub users: PathBuf,
    /// Its entries as read at load.
    pub table: Arc<Users>,
}

/// The realm and the file: what the config says (the table's entries are the file's).
impl std::fmt::Debug for Basic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Basic")
            .field("realm", &self.realm)
            .field("users", &self.users)
            .finish_non_exhaustive()
    }
}

/// `auth` as written, each problem reported at its key; relative `users` paths start at
/// `base`, the config file's directory.
pub(super) fn auth(raw: &Spanned<RawAuth>, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Auth> {
    match raw.get_ref() {
        RawAuth::Off(word) if word == "off" => Some(Auth::Off),
        RawAuth::Off(word) => {
            let message = format!("invalid auth {word:?}: expected \"off\" or a table like {{ basic = {{ realm = \"Admin\", users = \"admin.htpasswd\" }} }}");
            diag.error(raw.span(), message);
            None
        }
        RawAuth::Table(table) => match (&table.basic, &table.request, &table.jwt) {
            (Some(written), None, None) => basic(written, base, diag).map(|b| Check::Basic(Arc::new(b))),
            (None, Some(written), None) => forward_auth(written, diag).map(|r| Check::Request(Arc::new(r))),
            (None, None, Some(written)) => jwt(written, base, diag).map(|j| Check::Jwt(Arc::new(j))),
            (None, None, None) => {
                let message = "auth needs a way to check who is asking: `basic = { realm = \"Admin\", users = \"admin.htpasswd\" }`, `jwt = { jwks = \"jwks.json\" }` or `request = { url = \"http://127.0.0.1:4180/oauth2/auth\" }`";
                diag.error(raw.span(), message);
                None
            }
            _ => {
                diag.error(raw.span(), "auth takes one way to check who is asking: `basic`, `jwt` or `request`, not two");
                None
            }
        }
        .map(Auth::On),
    }
}

fn basic(raw: &Spanned<RawBasic>, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Basic> {
    let written = raw.get_ref();
    let realm = match &written.realm {
        None => Some(DEFAULT_REALM.to_owned()),
        Some(realm) => {
            let checked = basic::challenge(realm.get_ref()).map_err(|e| e.to_string());
            diag.check(realm.span(), checked).map(|_| realm.get_ref().clone())
        }
    };
    let Some(file) = &written.users else {
        diag.error(raw.span(), "auth.basic needs `users`, the htpasswd file (as `htpasswd -c FILE USER` makes it)");
        return None;
    };
    let users = base.join(file.get_ref());
    let table = diag.check(file.span(), read_users(&users));
    Some(Basic {
        realm: realm?,
        users,
        table: Arc::new(table?),
    })
}

/// The htpasswd file at `path`, every line checked; the error names the file and each
/// refused line.
pub(crate) fn read_users(path: &Path) -> Result<Users, String> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|err| format!("cannot read the htpasswd file {shown}: {err}"))?
        .len();
    if size > MAX_USERS_FILE {
        return Err(format!("the htpasswd file {shown} is {size} bytes: more than the 16 MiB a password list may be"));
    }
    let text = std::fs::read(path).map_err(|err| format!("cannot read the htpasswd file {shown}: {err}"))?;
    Users::parse(&text).map_err(|bad| {
        let lines: Vec<String> = bad.iter().map(|bad| format!("{shown}:{}: {}", bad.line, bad.error)).collect();
        format!("the htpasswd file has lines tollgate cannot check:\n{}", lines.join("\n"))
    })
}
