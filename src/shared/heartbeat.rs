//! How many instances share each Redis zone, counted rather than configured: every
//! instance announces itself in each of its Redis zones once per `heartbeat`, and keeps
//! the count it last saw ("Zones in Redis" in docs/config.md).
//!
//! One sorted set per zone, `tollgate-instances:<zone>` (a prefix no zone key has, so it
//! cannot meet a client's key): member = this instance's id, score = when that member
//! expires, in ms on Redis's clock. One script call per zone and beat adds this member,
//! drops the expired ones and returns how many are left, so an instance that stops
//! announcing itself (stopped, crashed, cut off) leaves the count within
//! [`TTL_BEATS`] beats plus one `timeout` per zone (the zones are beaten one after
//! another).
//!
//! The beats run on a thread of their own, one per [`super::Backend`], with a connection
//! of their own: a request never waits for one. Which zones it announces is what the live
//! [`Announcement`]s name, so a configuration that adds or drops a zone changes them
//! without anyone here knowing why. While Redis fails, each call still ends within the
//! backend's `timeout`, the counts last seen are kept, and a warning is logged once, then
//! about once a minute while it lasts.

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::Script;
use tokio::sync::{oneshot, Notify};

use super::connection::{Connection, Target};

/// The heartbeat script: the clock prelude, then `heartbeat.lua`.
pub const HEARTBEAT: &str = concat!(
    include_str!("lua/now.lua"),
    include_str!("lua/heartbeat.lua")
);

/// An announcement lasts this many beats: an instance that misses two beats in a row
/// (a slow call, a short hiccup) is still counted.
pub(crate) const TTL_BEATS: u32 = 3;

/// The Redis key of zone `zone`'s instances.
pub fn instances_key(zone: &str) -> Vec<u8> {
    [b"tollgate-instances:".as_slice(), zone.as_bytes()].concat()
}

/// A new instance id: random (64 bits no other instance shares), then the pid for an
/// operator reading the set. A gateway keeps its [`Fleet`], and so its id, across
/// reloads; two gateways in one process (tests) are two instances.
pub(crate) fn new_instance_id() -> Box<str> {
    // `RandomState` is seeded from the system's randomness, and each one differs.
    let random = RandomState::new().hash_one(std::process::id());
    format!("{random:016x}-{}", std::process::id()).into()
}

/// The zones this instance announces itself in, and the count last seen in each.
pub struct Fleet {
    /// This instance's id: its member in every zone's set.
    id: Box<str>,
    zones: RwLock<Vec<Member>>,
    /// Wakes the heartbeat when a zone is added, so that its count is known at once.
    added: Notify,
}

struct Member {
    zone: Box<str>,
    /// Instances seen at the last answer; 0 before any.
    seen: Arc<AtomicU64>,
    /// Live announcements naming the zone.
    holders: usize,
}

impl Fleet {
    /// The fleet of a new instance (its id a [`new_instance_id`]).
    pub fn new(id: Box<str>) -> Fleet {
        Fleet {
            id,
            zones: RwLock::default(),
            added: Notify::new(),
        }
    }

    /// This instance's id among those sharing its zones.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Announces this instance in `zones` for as long as the result lives.
    pub(crate) fn announce(self: &Arc<Self>, zones: Vec<Box<str>>) -> Announcement {
        let mut members = self.zones.write().unwrap_or_else(|p| p.into_inner());
        let mut added = false;
        for zone in &zones {
            match members.iter_mut().find(|m| m.zone == *zone) {
                Some(member) => member.holders += 1,
                None => {
                    members.push(Member {
                        zone: zone.clone(),
                        seen: Arc::default(),
                        holders: 1,
                    });
                    added = true;
                }
            }
        }
        drop(members);
        if added {
            self.added.notify_one();
        }
        Announcement {
            fleet: Arc::clone(self),
            zones,
        }
    }

    /// The instances zone `zone` had at the last heartbeat answered; `None` before any
    /// (or for a zone not announced).
    pub(crate) fn live(&self, zone: &str) -> Option<u64> {
        let members = self.zones.read().unwrap_or_else(|p| p.into_inner());
        let member = members.iter().find(|m| &*m.zone == zone)?;
        Some(member.seen.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    /// The zones to announce now, each with its count's cell.
    fn members(&self) -> Vec<(Box<str>, Arc<AtomicU64>)> {
        let members = self.zones.read().unwrap_or_else(|p| p.into_inner());
        members
            .iter()
            .map(|m| (m.zone.clone(), Arc::clone(&m.seen)))
            .collect()
    }
}

/// A generation's Redis zones, announced while it lives (the snapshot holds it).
pub struct Announcement {
    fleet: Arc<Fleet>,
    zones: Vec<Box<str>>,
}

impl Drop for Announcement {
    fn drop(&mut self) {
        let mut members = self.fleet.zones.write().unwrap_or_else(|p| p.into_inner());
        for zone in &self.zones {
            if let Some(member) = members.iter_mut().find(|m| m.zone == *zone) {
                member.holders = member.holders.saturating_sub(1);
            }
        }
        members.retain(|m| m.holders > 0);
    }
}

/// The heartbeat thread of one backend; dropping it stops the thread (at once, or when
/// the call under way ends).
pub(super) struct Heartbeat {
    _stop: oneshot::Sender<()>,
}

/// What the heartbeat needs: where Redis is, how long a call may take, how often.
pub(super) struct Beat {
    pub target: Target,
    pub timeout: Duration,
    pub every: Duration,
    pub fleet: Arc<Fleet>,
}

impl Heartbeat {
    /// Starts the heartbeat thread; `None` (logged) if no thread can be made, and then
    /// no count is ever seen.
    pub(super) fn start(beat: Beat) -> Option<Heartbeat> {
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("tollgate-heartbeat".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(runtime) => runtime.block_on(beat.run(stopped)),
                    Err(err) => tracing::error!(error = %err, "no Redis heartbeat: no runtime"),
                }
            });
        match thread {
            Ok(_) => Some(Heartbeat { _stop: stop }),
            Err(err) => {
                tracing::error!(error = %err, "no Redis heartbeat: cannot start its thread");
                None
            }
        }
    }
}

impl Beat {
    async fn run(self, mut stopped: oneshot::Receiver<()>) {
        let script = Script::new(HEARTBEAT);
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut conn = None;
        let mut log = Quiet::new(self.every);
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = tick.tick() => {}
                () = self.fleet.added.notified() => {}
            }
            let beats = self.beat_all(&script, &mut conn);
            let failed = tokio::select! {
                _ = &mut stopped => return,
                failed = beats => failed,
            };
            log.after(failed);
        }
    }

    /// One beat in every announced zone; the last error, if any call failed.
    async fn beat_all(&self, script: &Script, conn: &mut Option<Connection>) -> Option<String> {
        let mut failed = None;
        let zones = self.fleet.members();
        let ttl_ms = ttl_ms(self.every, self.timeout, zones.len());
        for (zone, seen) in zones {
            let call = self.beat(script, conn, &zone, ttl_ms);
            match within(self.timeout, call).await {
                Ok(count) => seen.store(count, Ordering::Relaxed),
                Err(err) => {
                    // Made again at the next beat (a timed-out one too: it may be stuck).
                    *conn = None;
                    failed = Some(format!("zone {zone}: {err}"));
                }
            }
        }
        failed
    }

    async fn beat(
        &self,
        script: &Script,
        conn: &mut Option<Connection>,
        zone: &str,
        ttl_ms: u64,
    ) -> redis::RedisResult<u64> {
        let conn = match conn {
            Some(conn) => conn,
            None => conn.insert(self.target.connect().await?),
        };
        let mut call = script.prepare_invoke();
        call.key(instances_key(zone))
            .arg(self.fleet.id())
            .arg(ttl_ms)
            .arg("");
        call.invoke_async(conn).await
    }
}

/// How long an announcement lasts: [`TTL_BEATS`] beats, plus the time the zones' calls
/// (one after another, each up to `timeout`) may take, so that an instance with many
/// zones and a short `heartbeat` does not drop out of its own count.
fn ttl_ms(every: Duration, timeout: Duration, zones: usize) -> u64 {
    let zones = u32::try_from(zones).unwrap_or(u32::MAX);
    let ttl = (every.saturating_mul(TTL_BEATS)).saturating_add(timeout.saturating_mul(zones));
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

async fn within<T>(
    limit: Duration,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("no answer within {limit:?}")),
    }
}

/// When a failing heartbeat is worth a log line: the first failure, then about once a
/// minute while it lasts, then the recovery. Counted in beats, not read from a clock.
struct Quiet {
    /// Beats in a row that failed.
    failing: u64,
    /// Beats in about a minute.
    per_minute: u64,
}

impl Quiet {
    fn new(every: Duration) -> Quiet {
        let per_minute = Duration::from_secs(60).as_millis() / every.as_millis().max(1);
        Quiet {
            failing: 0,
            per_minute: u64::try_from(per_minute).unwrap_or(u64::MAX).max(1),
        }
    }

    /// Logs what a beat that ended with `failed` is worth logging.
    fn after(&mut self, failed: Option<String>) {
        match failed {
            Some(error) => {
                if self.failing.is_multiple_of(self.per_minute) {
                    tracing::warn!(
                        error,
                        beats_failed = self.failing + 1,
                        "Redis heartbeat failed; keeping the instance counts last seen"
                    );
                }
                self.failing += 1;
            }
            None if self.failing > 0 => {
                tracing::info!(beats_failed = self.failing, "Redis heartbeat back");
                self.failing = 0;
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_add_zones_and_dropping_the_last_one_removes_them() {
        let fleet = Arc::new(Fleet::new("me".into()));
        let first = fleet.announce(vec!["a".into(), "b".into()]);
        let second = fleet.announce(vec!["b".into(), "c".into()]);
        let names = |fleet: &Fleet| -> Vec<String> {
            fleet.members().iter().map(|(z, _)| z.to_string()).collect()
        };
        assert_eq!(names(&fleet), ["a", "b", "c"]);
        assert_eq!(fleet.live("b"), None, "no heartbeat answered yet");
        fleet.members()[1].1.store(2, Ordering::Relaxed);
        assert_eq!(fleet.live("b"), Some(2));
        drop(first);
        assert_eq!(names(&fleet), ["b", "c"]);
        assert_eq!(
            fleet.live("b"),
            Some(2),
            "b's count stays while c's generation lives"
        );
        drop(second);
        assert!(names(&fleet).is_empty());
        assert_eq!(fleet.live("b"), None);
    }

    #[test]
    fn instance_ids_differ_and_the_key_cannot_meet_a_zone_key() {
        assert_ne!(new_instance_id(), new_instance_id());
        assert!(new_instance_id().len() > 16);
        assert_eq!(instances_key("api"), b"tollgate-instances:api");
        assert!(!instances_key("api").starts_with(b"tollgate:"));
    }

    #[test]
    fn an_announcement_outlasts_three_beats_and_every_zones_call() {
        let (every, timeout) = (Duration::from_millis(100), Duration::from_millis(50));
        assert_eq!(ttl_ms(every, timeout, 0), 300);
        assert_eq!(ttl_ms(every, timeout, 10), 800);
    }

    #[test]
    fn a_failing_heartbeat_logs_about_once_a_minute() {
        let mut quiet = Quiet::new(Duration::from_secs(5));
        assert_eq!(quiet.per_minute, 12);
        let mut logged = 0;
        for _ in 0..25 {
            if quiet.failing.is_multiple_of(quiet.per_minute) {
                logged += 1;
            }
            quiet.after(Some("down".into()));
        }
        assert_eq!(logged, 3, "at beats 1, 13 and 25");
        quiet.after(None);
        assert_eq!(quiet.failing, 0);
    }
}
