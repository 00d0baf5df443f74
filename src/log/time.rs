//! The times a log line writes, from one reading of the wall clock, in UTC (nginx writes
//! its local time: run it with `TZ=UTC` to compare).

use std::io::Write as _;
use std::time::SystemTime;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A second's `$time_local` and `$time_iso8601`, kept by each thread: formatted once a
/// second, not once a line.
struct Second {
    at: u64,
    local: Vec<u8>,
    iso8601: Vec<u8>,
}

thread_local! {
    static SECOND: std::cell::RefCell<Option<Second>> = const { std::cell::RefCell::new(None) };
}

/// `now`'s texts (formatted again when the second changed) handed to `write`.
fn cached(now: SystemTime, write: impl FnOnce(&Second)) {
    let at = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    SECOND.with_borrow_mut(|second| {
        if second.as_ref().is_none_or(|second| second.at != at) {
            let (mut local, mut iso8601) = (Vec::with_capacity(26), Vec::with_capacity(25));
            format_local(&mut local, now);
            format_iso8601(&mut iso8601, now);
            *second = Some(Second { at, local, iso8601 });
        }
        if let Some(second) = second {
            write(second);
        }
    });
}

/// nginx's `$time_local`: `21/Nov/2026:21:41:36 +0000`.
pub(super) fn local(out: &mut Vec<u8>, now: SystemTime) {
    cached(now, |second| out.extend_from_slice(&second.local));
}

/// nginx's `$time_iso8601`: `2026-11-21T21:41:36+00:00`.
pub(super) fn iso8601(out: &mut Vec<u8>, now: SystemTime) {
    cached(now, |second| out.extend_from_slice(&second.iso8601));
}

fn format_local(out: &mut Vec<u8>, now: SystemTime) {
    let t = time::OffsetDateTime::from(now);
    let _ = write!(
        out,
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        t.day(),
        MONTHS[usize::from(u8::from(t.month())) - 1],
        t.year(),
        t.hour(),
        t.minute(),
        t.second()
    );
}

fn format_iso8601(out: &mut Vec<u8>, now: SystemTime) {
    let t = time::OffsetDateTime::from(now);
    let _ = write!(
        out,
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}+00:00",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
}

/// The `json` format's time: `2026-11-21T21:41:36.123Z`.
pub(super) fn iso_millis(out: &mut Vec<u8>, now: SystemTime) {
    let t = time::OffsetDateTime::from(now);
    let _ = write!(
        out,
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    );
}

/// nginx's `$msec`: seconds since the epoch, to the millisecond: `1795297296.123`.
pub(super) fn msec(out: &mut Vec<u8>, now: SystemTime) {
    let since = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    super::digits::seconds(out, since);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_nginx_shaped() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_297_296_045);
        let shown = |f: fn(&mut Vec<u8>, SystemTime)| {
            let mut out = Vec::new();
            f(&mut out, at);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(shown(local), "21/Nov/2026:21:41:36 +0000");
        assert_eq!(shown(iso8601), "2026-11-21T21:41:36+00:00");
        assert_eq!(shown(iso_millis), "2026-11-21T21:41:36.045Z");
        assert_eq!(shown(msec), "1795297296.045");
    }
}
