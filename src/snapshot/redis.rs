//! What a generation's Redis zones decide through: the backend (kept across reloads
//! while `[redis]` is the same) and each zone's table of leases (anew each time).

use std::sync::Arc;

use super::BuildError;
use crate::admission::policy::ZoneLeases;
use crate::config;
use crate::limit::zone::Zone;
use crate::shared;

/// `[redis]`'s backend: the one in force when it has the same settings (connections and
/// all), else a new one; `None` without the section.
pub(super) fn backend(
    wanted: Option<&config::Redis>,
    kept: Option<&Arc<shared::Backend>>,
    workers: usize,
) -> Result<Option<Arc<shared::Backend>>, BuildError> {
    let Some(wanted) = wanted else {
        return Ok(None);
    };
    Ok(match kept {
        Some(kept) if *kept.settings() == wanted.settings => Some(Arc::clone(kept)),
        _ => {
            // The instance keeps its id and counts while it has a `[redis]`.
            let fleet = kept.map_or_else(
                || Arc::new(shared::Fleet::new(shared::heartbeat::new_instance_id())),
                |kept| Arc::clone(kept.fleet()),
            );
            let settings = wanted.settings.clone();
            let backend = shared::Backend::new(settings, workers, fleet, crate::clock::now)?;
            Some(Arc::new(backend))
        }
    })
}

/// A table of leases for each Redis zone with `lease`, anew for each generation (the
/// units a table held are dropped with it, which can only admit less).
pub(super) fn leases(zones: &[Arc<Zone>]) -> ZoneLeases {
    let leased = zones.iter().filter_map(|zone| {
        let most = zone.redis.and_then(|settings| settings.lease)?;
        Some((Box::from(&*zone.name), Arc::new(shared::Leases::new(most))))
    });
    leased.collect()
}
