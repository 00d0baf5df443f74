//! The runtime `auth` of a generation: one for each `auth` as written, so that the
//! locations inheriting their site's share its remembered logins and its auth service's
//! connections. An auth service is reached as an upstream group of its own.

use std::cell::RefCell;
use std::sync::Arc;

use crate::config;
use crate::metrics::Metrics;
use crate::proxy::auth::Auth;
use crate::upstream::{Group, GroupSpec};

/// The `auth`s made so far for one generation.
#[derive(Default)]
pub(super) struct Auths {
    made: RefCell<Vec<(config::Check, Arc<Auth>)>>,
}

impl Auths {
    /// The runtime `auth` for `check`, made on first use.
    pub(super) fn of(&self, check: &config::Check, metrics: &Metrics, workers: usize) -> Result<Arc<Auth>, String> {
        let mut made = self.made.borrow_mut();
        if let Some((_, auth)) = made.iter().find(|(written, _)| written.same(check)) {
            return Ok(Arc::clone(auth));
        }
        let group = |upstream: &config::Upstream| {
            let spec: GroupSpec = super::groups::group_spec(upstream, metrics, None);
            Arc::new(Group::new(spec, workers))
        };
        let auth = Arc::new(Auth::new(check, group)?);
        made.push((check.clone(), Arc::clone(&auth)));
        Ok(auth)
    }

    /// The groups of the auth services, whose idle connections the workers trim.
    pub(super) fn groups(&self) -> Vec<Arc<Group>> {
        let made = self.made.borrow();
        let services = made.iter().filter_map(|(_, auth)| match &**auth {
            Auth::Request(service) => Some(Arc::clone(service.group())),
            Auth::Basic(_) | Auth::Jwt(_) => None,
        });
        services.collect()
    }
}
