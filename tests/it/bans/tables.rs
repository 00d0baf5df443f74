//! The penalty box's tables (`limit::bans`), driven at chosen instants: strike counting
//! in windows, expiry, lifting, Redis copies, and full tables under a spray of keys.
//! (Here rather than beside the code: `crates/limit` never reads a clock, not even in tests.)

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
    assert_eq!(bans.strike(b"k", t0, &rule, None), Struck::Counted);
    assert_eq!(
        bans.strike(b"k", t0 + secs(10), &rule, None),
        Struck::Counted
    );
    assert_eq!(bans.standing(b"k", t0 + secs(10)), Standing::Clear);
    let entry = bans
        .strike(b"k", t0 + secs(59), &rule, None)
        .banned()
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
    assert_eq!(
        bans.strike(b"k", t0 + secs(60), &rule, None),
        Struck::Counted
    );
    assert_eq!(
        bans.strike(b"k", t0 + secs(61), &rule, None),
        Struck::Counted
    );
    assert!(bans
        .strike(b"k", t0 + secs(62), &rule, None)
        .banned()
        .is_some());
}

#[test]
fn a_ban_expires_and_is_then_forgotten() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 2));
    bans.strike(b"k", t0, &rule, None)
        .banned()
        .expect("banned at once");
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
    bans.strike(b"k", t0, &rule, None).banned().expect("banned");
    assert!(bans.lift(b"k", t0 + secs(1)));
    assert!(!bans.lift(b"k", t0 + secs(1)), "nothing left to lift");
    assert_eq!(bans.standing(b"k", t0 + secs(1)), Standing::Clear);
    bans.strike(b"j", t0, &rule, None);
    bans.lift(b"j", t0);
    assert_eq!(
        bans.strike(b"j", t0, &rule, None),
        Struck::Counted,
        "strikes forgotten"
    );
}

#[test]
fn a_redis_copy_is_trusted_for_the_recheck_interval_then_asked_again() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    let entry = bans
        .strike(b"k", t0, &rule, Some(secs(1)))
        .banned()
        .expect("banned");
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
        .banned()
        .expect("banned");
    bans.unlearn(b"k", t0);
    assert_eq!(bans.standing(b"k", later), Standing::Banned(secs(900)));
}

#[test]
fn unlearning_leaves_a_local_zones_ban_alone() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    bans.strike(b"k", t0, &rule, None).banned().expect("banned");
    bans.unlearn(b"k", t0 + secs(5));
    assert!(matches!(bans.standing(b"k", t0), Standing::Banned(_)));
}

#[test]
fn a_copy_is_trusted_again_while_redis_cannot_answer() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 900));
    bans.strike(b"k", t0, &rule, Some(secs(1)))
        .banned()
        .expect("banned");
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
    let entry = bans
        .strike(b"k", t0, &rule, Some(secs(1)))
        .banned()
        .expect("banned");
    bans.withdraw(b"k", t0 + secs(1));
    assert!(bans.get(b"k", t0).is_some(), "another ban's refusal");
    bans.withdraw(b"k", entry.since);
    assert_eq!(bans.get(b"k", t0), None);
}

#[test]
fn bans_that_have_all_ended_are_skipped_without_a_lookup() {
    let (bans, t0, rule) = (Bans::default(), t0(), ban(1, 60, 2));
    bans.strike(b"a", t0, &rule, None).banned().expect("banned");
    bans.strike(b"b", t0 + secs(1), &rule, None)
        .banned()
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

/// The most entries of `key_len`-byte keys that `bytes` of table hold.
fn most(bytes: usize, key_len: usize) -> usize {
    bytes / (ENTRY_BYTES + key_len)
}

/// A key of 8 bytes for each `i`, none of them `b"victim"`.
fn fake(i: usize) -> [u8; 8] {
    (i as u64).to_be_bytes()
}

#[test]
fn a_full_ban_table_keeps_the_bans_it_holds_and_refuses_and_counts_new_ones() {
    let (bans, t0, rule) = (Bans::new(MIN_SIZE), t0(), ban(1, 60, 900));
    bans.strike(b"victim", t0, &rule, None)
        .banned()
        .expect("banned");
    // Four times what the table holds, each key banned at its first strike.
    let sprayed = 4 * most(MIN_SIZE, 8);
    let mut refused = 0;
    for i in 0..sprayed {
        let at = t0 + Duration::from_nanos(i as u64);
        match bans.strike(&fake(i), at, &rule, None) {
            Struck::Banned(_) => {}
            Struck::Refused => refused += 1,
            other => panic!("{other:?}"),
        }
    }
    let now = t0 + secs(1);
    assert!(matches!(bans.standing(b"victim", now), Standing::Banned(_)));
    let usage = bans.usage();
    assert!(usage.ban_bytes <= MIN_SIZE, "{usage:?}");
    assert!(
        usage.largest_shard_ban_bytes <= MIN_SIZE / SHARDS,
        "{usage:?}"
    );
    // Each shard full but for less than one entry.
    assert!(usage.bans + SHARDS > most(MIN_SIZE, 8), "{usage:?}");
    assert_eq!(bans.refused(), refused);
    assert_eq!(bans.imposed() + refused, sprayed as u64 + 1);
    assert_eq!(bans.in_force(now) as u64, bans.imposed(), "none forgotten");
    assert_eq!(bans.list(now, usize::MAX).len(), usage.bans);
    assert_eq!(usage.held, usage.bans);
    // A key kept out gets its zone's ordinary answer: it is not banned.
    let last = fake(sprayed - 1);
    if bans.get(&last, now).is_none() {
        assert_eq!(bans.standing(&last, now), Standing::Clear);
    }
}

#[test]
fn a_spray_of_strikes_cannot_erase_the_strikes_of_a_key_close_to_a_ban() {
    let (bans, t0, rule) = (Bans::new(MIN_SIZE), t0(), ban(3, 60, 900));
    bans.strike(b"victim", t0, &rule, None);
    bans.strike(b"victim", t0, &rule, None);
    // As many strikes for each fake key: none is further from a ban than the victim.
    let strike_size = 2 * MIN_SIZE;
    let sprayed = 4 * most(strike_size, 8);
    for i in 0..sprayed {
        let at = t0 + Duration::from_nanos(i as u64);
        bans.strike(&fake(i), at, &rule, None);
        bans.strike(&fake(i), at, &rule, None);
    }
    let usage = bans.usage();
    let third = bans.strike(b"victim", t0 + secs(1), &rule, None);
    assert!(third.banned().is_some(), "{third:?}, {usage:?}");
    assert!(usage.strike_bytes <= strike_size, "{usage:?}");
    assert!(
        usage.largest_shard_strike_bytes <= strike_size / SHARDS,
        "{usage:?}"
    );
    assert!(usage.strikes + SHARDS > most(strike_size, 8), "{usage:?}");
    // Each key kept out was refused at both of its strikes.
    let kept_out = (sprayed + 1 - usage.strikes) as u64;
    assert_eq!(bans.strikes_refused(), 2 * kept_out);
}

#[test]
fn a_ban_refused_is_imposed_at_the_next_strike_once_there_is_room() {
    let (bans, t0) = (Bans::new(MIN_SIZE), t0());
    let short = ban(1, 60, 1);
    for i in 0..4 * most(MIN_SIZE, 8) {
        bans.strike(&fake(i), t0, &short, None);
    }
    let rule = ban(2, 60, 900);
    assert_eq!(bans.strike(b"k", t0, &rule, None), Struck::Counted);
    assert_eq!(bans.strike(b"k", t0, &rule, None), Struck::Refused);
    assert_eq!(bans.standing(b"k", t0), Standing::Clear);
    // The short bans have ended: the next strike of the window bans.
    let banned = bans.strike(b"k", t0 + secs(2), &rule, None);
    assert_eq!(banned.banned().map(|e| e.strikes), Some(3));
    assert!(matches!(
        bans.standing(b"k", t0 + secs(2)),
        Standing::Banned(_)
    ));
}

#[test]
fn a_larger_size_makes_room_in_a_full_table() {
    let (bans, t0, rule) = (Bans::new(MIN_SIZE), t0(), ban(1, 60, 900));
    for i in 0..4 * most(MIN_SIZE, 8) {
        bans.strike(&fake(i), t0, &rule, None);
    }
    assert_eq!(bans.strike(b"k", t0, &rule, None), Struck::Refused);
    bans.resize(2 * MIN_SIZE);
    assert_eq!(bans.size(), 2 * MIN_SIZE);
    assert!(bans.strike(b"k", t0, &rule, None).banned().is_some());
}

#[test]
fn expired_bans_make_room_before_any_ban_in_force_goes() {
    // Room for some 150 bans a shard: the 101 below fit wherever they fall.
    let size = 16 * MIN_SIZE;
    let (bans, t0) = (Bans::new(size), t0());
    let short = ban(1, 60, 1);
    for i in 0..4 * most(size, 8) {
        bans.strike(&fake(i), t0, &short, None);
    }
    let long = ban(1, 60, 900);
    bans.strike(b"late", t0 + secs(5), &long, None)
        .banned()
        .expect("banned");
    for i in 0..100 {
        bans.strike(&fake(usize::MAX - i), t0 + secs(5), &long, None);
    }
    assert!(matches!(
        bans.standing(b"late", t0 + secs(5)),
        Standing::Banned(_)
    ));
    assert_eq!(bans.in_force(t0 + secs(5)), 101);
}

#[test]
fn ban_lines_are_logged_at_once_then_once_per_interval_with_the_count_left_out() {
    use tollgate::limit::bans::lines::{Thinned, INTERVAL};
    assert_eq!(INTERVAL, tollgate::log::repeats::INTERVAL, "one rhythm");
    let (lines, t0) = (Thinned::default(), t0());
    assert_eq!(lines.admit(t0), Some(0));
    for ms in 1..1000 {
        assert_eq!(lines.admit(t0 + Duration::from_millis(ms)), None);
    }
    assert_eq!(lines.admit(t0 + INTERVAL), Some(999));
    assert_eq!(lines.admit(t0 + INTERVAL), None);
    assert_eq!(lines.admit(t0 + 3 * INTERVAL), Some(1));
}
