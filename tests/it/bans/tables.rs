//! The penalty box's tables (`limit::bans`), driven at chosen instants: strike counting
//! in windows, expiry, lifting, Redis copies, and the memory bounds under a spray of keys.
//! (Here rather than beside the code: `src/limit/` never reads a clock, not even in tests.)

use std::time::{Duration, Instant};

use http::StatusCode;
use tollgate::limit::bans::*;

fn ban(after: u32, within_s: u64, for_s: u64) -> Ban {
    Ban {
        after,
        within: Duration::from_secs(within_s),
        duration: Duration::from_secs(for_s),
        status: StatusCode::FORBIDDEN,
        size: DEFAULT_SIZE,
    }
}

/// An instant to count from: read once per test, never again (times are `t0 + d`).
fn t0() -> Instant {
    Instant::now()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn the_nth_strike_within_the_window_bans_for_the_duration() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(3, 60, 900));
    assert!(!bans.may_hold(t0));
    assert_eq!(bans.strike(b"k", t0, &rule, None), None);
    assert_eq!(bans.strike(b"k", t0 + secs(10), &rule, None), None);
    assert_eq!(bans.standing(b"k", t0 + secs(10)), Standing::Clear);
    let entry = bans
        .strike(b"k", t0 + secs(59), &rule, None)
        .expect("banned");
    assert_eq!(entry.strikes, 3);
    assert_eq!(entry.until, t0 + secs(59 + 900));
    assert_eq!(
        bans.standing(b"k", t0 + secs(60)),
        Standing::Banned(secs(899))
    );
    assert_eq!(bans.standing(b"other", t0 + secs(60)), Standing::Clear);
    assert_eq!(bans.imposed(), 1);
    assert_eq!(bans.in_force(t0 + secs(60)), 1);
}

#[test]
fn a_strike_after_the_window_starts_a_new_one() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(3, 60, 900));
    bans.strike(b"k", t0, &rule, None);
    bans.strike(b"k", t0 + secs(30), &rule, None);
    // The window opened at t0 ended at t0 + 60: this is strike 1 of a new one.
    assert_eq!(bans.strike(b"k", t0 + secs(60), &rule, None), None);
    assert_eq!(bans.strike(b"k", t0 + secs(61), &rule, None), None);
    assert!(bans.strike(b"k", t0 + secs(62), &rule, None).is_some());
}

#[test]
fn a_ban_expires_and_is_then_forgotten() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 2));
    bans.strike(b"k", t0, &rule, None).expect("banned at once");
    assert!(matches!(
        bans.standing(b"k", t0 + secs(1)),
        Standing::Banned(_)
    ));
    assert_eq!(bans.standing(b"k", t0 + secs(2)), Standing::Clear);
    assert!(!bans.may_hold(t0 + secs(2)), "the expired entry was swept");
    assert_eq!(bans.in_force(t0 + secs(2)), 0);
    assert_eq!(bans.imposed(), 1);
}

#[test]
fn lifting_a_ban_clears_it_and_its_strikes() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(2, 60, 900));
    bans.strike(b"k", t0, &rule, None);
    bans.strike(b"k", t0, &rule, None).expect("banned");
    assert!(bans.lift(b"k", t0 + secs(1)));
    assert!(!bans.lift(b"k", t0 + secs(1)), "nothing left to lift");
    assert_eq!(bans.standing(b"k", t0 + secs(1)), Standing::Clear);
    bans.strike(b"j", t0, &rule, None);
    bans.lift(b"j", t0);
    assert_eq!(
        bans.strike(b"j", t0, &rule, None),
        None,
        "strikes forgotten"
    );
}

#[test]
fn a_redis_copy_is_trusted_for_the_recheck_interval_then_asked_again() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    let entry = bans.strike(b"k", t0, &rule, Some(secs(1))).expect("banned");
    assert_eq!(entry.trust_until, Some(t0 + secs(1)));
    assert_eq!(bans.standing(b"k", t0), Standing::Banned(secs(900)));
    assert_eq!(
        bans.standing(b"k", t0 + secs(1)),
        Standing::Recheck(secs(899))
    );
    bans.learn(b"k", t0 + secs(1), secs(899), secs(1));
    assert_eq!(
        bans.standing(b"k", t0 + secs(1)),
        Standing::Banned(secs(899))
    );
    let kept = bans.get(b"k", t0 + secs(1)).expect("held");
    assert_eq!(kept.strikes, 1, "a ban learned again keeps its reason");
    // "Not banned", asked while the copy was trusted: it stays; asked once due, it goes.
    bans.unlearn(b"k", t0 + secs(1));
    assert!(bans.get(b"k", t0 + secs(1)).is_some());
    bans.unlearn(b"k", t0 + secs(2));
    assert_eq!(bans.standing(b"k", t0 + secs(2)), Standing::Clear);
}

#[test]
fn a_stale_not_banned_answer_keeps_a_ban_imposed_after_its_call() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    // A call issued at t0 is answered "not banned" after the strike at t0 + 10ms banned.
    let later = t0 + Duration::from_millis(10);
    bans.strike(b"k", later, &rule, Some(secs(1)))
        .expect("banned");
    bans.unlearn(b"k", t0);
    assert_eq!(bans.standing(b"k", later), Standing::Banned(secs(900)));
}

#[test]
fn unlearning_leaves_a_local_zones_ban_alone() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    bans.strike(b"k", t0, &rule, None).expect("banned");
    bans.unlearn(b"k", t0 + secs(5));
    assert!(matches!(bans.standing(b"k", t0), Standing::Banned(_)));
}

#[test]
fn a_copy_is_trusted_again_while_redis_cannot_answer() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    bans.strike(b"k", t0, &rule, Some(secs(1))).expect("banned");
    assert!(matches!(
        bans.standing(b"k", t0 + secs(2)),
        Standing::Recheck(_)
    ));
    bans.trust_again(b"k", t0 + secs(2), secs(1));
    assert_eq!(
        bans.standing(b"k", t0 + secs(2)),
        Standing::Banned(secs(898))
    );
    assert!(matches!(
        bans.standing(b"k", t0 + secs(3)),
        Standing::Recheck(_)
    ));
}

#[test]
fn a_copy_redis_refused_is_withdrawn_but_not_a_newer_one() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    let entry = bans.strike(b"k", t0, &rule, Some(secs(1))).expect("banned");
    bans.withdraw(b"k", t0 + secs(1));
    assert!(bans.get(b"k", t0).is_some(), "another ban's refusal");
    bans.withdraw(b"k", entry.since);
    assert_eq!(bans.get(b"k", t0), None);
}

#[test]
fn bans_that_have_all_ended_are_skipped_without_a_lookup() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 2));
    bans.strike(b"a", t0, &rule, None).expect("banned");
    bans.strike(b"b", t0 + secs(1), &rule, None)
        .expect("banned");
    assert!(bans.may_hold(t0 + secs(2)), "b's ban runs until t0 + 3s");
    assert!(
        !bans.may_hold(t0 + secs(3)),
        "both ended, neither looked up"
    );
    assert_eq!(bans.usage().held, 2, "their entries wait to be swept");
    assert_eq!(bans.in_force(t0 + secs(3)), 0);
}

#[test]
fn a_time_past_what_an_instant_holds_saturates() {
    let t0 = t0();
    assert!(later(t0, Duration::MAX) > t0 + secs(1_000_000));
    assert_eq!(later(t0, secs(5)), t0 + secs(5));
}

#[test]
fn a_spray_of_keys_keeps_the_strike_table_within_its_budget() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(3, 60, 900));
    // A key close to a ban, then many one-strike keys.
    bans.strike(b"abuser", t0, &rule, None);
    bans.strike(b"abuser", t0, &rule, None);
    let most = (2 * DEFAULT_SIZE) / (ENTRY_BYTES + 8);
    for i in 0..(3 * most) as u64 {
        bans.strike(&i.to_be_bytes(), t0 + Duration::from_nanos(i), &rule, None);
    }
    let usage = bans.usage();
    assert!(
        usage.largest_shard_strike_bytes <= (2 * DEFAULT_SIZE) / SHARDS,
        "{usage:?}"
    );
    assert!(
        usage.strikes <= most && usage.strike_bytes <= (2 * DEFAULT_SIZE),
        "{usage:?}"
    );
    assert!(
        usage.strikes > most / 2,
        "room is made an eighth at a time: {usage:?}"
    );
    let banned = bans.strike(b"abuser", t0 + secs(1), &rule, None);
    assert!(banned.is_some(), "the key with the most strikes was kept");
}

#[test]
fn a_spray_of_bans_keeps_the_ban_table_within_its_budget() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    let most = DEFAULT_SIZE / (ENTRY_BYTES + 8);
    for i in 0..(3 * most) as u64 {
        bans.strike(&i.to_be_bytes(), t0 + Duration::from_nanos(i), &rule, None);
    }
    let usage = bans.usage();
    let held = usage.bans;
    assert!(held <= most && usage.ban_bytes <= DEFAULT_SIZE, "{usage:?}");
    assert!(
        usage.largest_shard_ban_bytes <= DEFAULT_SIZE / SHARDS,
        "{usage:?}"
    );
    assert_eq!(usage.held, held);
    assert_eq!(bans.in_force(t0 + secs(1)), held);
    assert_eq!(bans.list(t0 + secs(1), usize::MAX).len(), held);
    assert_eq!(bans.list(t0 + secs(1), 10).len(), 10);
    // The last ones imposed end last: they are still held.
    let last = (3 * most as u64 - 1).to_be_bytes();
    assert!(matches!(
        bans.standing(&last, t0 + secs(1)),
        Standing::Banned(_)
    ));
    assert_eq!(bans.imposed(), 3 * most as u64);
}

#[test]
fn expired_bans_make_room_before_any_ban_in_force_goes() {
    let (bans, t0) = (Bans::default(), t0());
    let short = ban(1, 60, 1);
    let most = DEFAULT_SIZE / (ENTRY_BYTES + 8);
    for i in 0..most as u64 {
        bans.strike(&i.to_be_bytes(), t0, &short, None);
    }
    let long = ban(1, 60, 900);
    bans.strike(b"late", t0 + secs(5), &long, None)
        .expect("banned");
    for i in 0..100u64 {
        bans.strike(&(u64::MAX - i).to_be_bytes(), t0 + secs(5), &long, None);
    }
    assert!(matches!(
        bans.standing(b"late", t0 + secs(5)),
        Standing::Banned(_)
    ));
    assert_eq!(bans.in_force(t0 + secs(5)), 101);
}
