//! What a level sets of auth (`import/auth.rs` and `import/auth_request.rs` read it), apart so
//! that the levels and the directives that fill them import no circle.

use crate::config::Satisfy;

/// What a level sets of auth, each `None` where it sets nothing.
#[derive(Clone, Debug, Default)]
pub(super) struct AuthSettings {
    /// `auth_basic`: the realm, or `Some(None)` for `off`.
    pub realm: Option<Option<String>>,
    /// `auth_basic_user_file`.
    pub users: Option<String>,
    pub satisfy: Option<Satisfy>,
    /// `auth_request`: the auth service's URL, or `Some(None)` for `off`.
    pub request: Option<Option<String>>,
    /// `auth_request_set … $upstream_http_NAME`: the NAMEs, as headers.
    pub copy: Option<Vec<String>>,
    /// `ssl_verify_client`: `on`, `optional` or `off` (a server's `client_certificates`).
    pub verify_client: Option<String>,
    /// `ssl_client_certificate`: the CAs' file, as the gateway.toml names it.
    pub client_ca: Option<String>,
}

impl AuthSettings {
    /// This level's settings over `parent`'s.
    pub(super) fn under(self, parent: &AuthSettings) -> AuthSettings {
        AuthSettings {
            realm: self.realm.or_else(|| parent.realm.clone()),
            users: self.users.or_else(|| parent.users.clone()),
            satisfy: self.satisfy.or(parent.satisfy),
            request: self.request.or_else(|| parent.request.clone()),
            copy: self.copy.or_else(|| parent.copy.clone()),
            verify_client: self.verify_client.or_else(|| parent.verify_client.clone()),
            client_ca: self.client_ca.or_else(|| parent.client_ca.clone()),
        }
    }
}
