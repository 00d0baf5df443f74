//! `expires` (nginx's `ngx_http_set_expires`): `Expires` and `Cache-Control` on the
//! answers of a location whose status is one nginx calls safe, replacing any
//! `Cache-Control` the answer had (an upstream's too).

use std::time::SystemTime;

use http::header::{CACHE_CONTROL, EXPIRES};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::etag::{http_date, seconds};
use crate::config::Expires;

/// The statuses nginx sets `expires` on.
const SAFE: [u16; 10] = [200, 201, 204, 206, 301, 302, 303, 304, 307, 308];

pub(super) fn apply(expires: Expires, status: StatusCode, headers: &mut HeaderMap, now: SystemTime) {
    if !SAFE.contains(&status.as_u16()) {
        return;
    }
    let (date, cache_control) = values(expires, now);
    headers.insert(EXPIRES, date);
    // `insert` drops every earlier line of the name.
    headers.insert(CACHE_CONTROL, cache_control);
}

/// `Expires` and `Cache-Control` for `expires` at `now`.
fn values(expires: Expires, now: SystemTime) -> (HeaderValue, HeaderValue) {
    match expires {
        Expires::Epoch => (
            HeaderValue::from_static("Thu, 01 Jan 1970 00:00:01 GMT"),
            HeaderValue::from_static("no-cache"),
        ),
        Expires::Max => (
            HeaderValue::from_static("Thu, 31 Dec 2037 23:55:55 GMT"),
            HeaderValue::from_static("max-age=315360000"),
        ),
        Expires::After(after) => {
            let now = seconds(now).unwrap_or(0);
            let cache_control = if after < 0 {
                HeaderValue::from_static("no-cache")
            } else {
                HeaderValue::from_str(&format!("max-age={after}"))
                    .unwrap_or(HeaderValue::from_static("max-age=0"))
            };
            (http_date(now.saturating_add(after)), cache_control)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    /// Sun, 06 Nov 1994 08:49:37 GMT.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(784_111_777)
    }

    fn applied(expires: Expires, status: u16) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.append(CACHE_CONTROL, HeaderValue::from_static("private"));
        headers.append(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        apply(expires, StatusCode::from_u16(status).unwrap(), &mut headers, now());
        headers
    }

    fn pair(headers: &HeaderMap) -> (Vec<&str>, Vec<&str>) {
        let all = |name| headers.get_all(name).iter().map(|v| v.to_str().unwrap()).collect();
        (all(EXPIRES), all(CACHE_CONTROL))
    }

    #[test]
    fn a_duration_counts_from_now_and_replaces_cache_control() {
        let headers = applied(Expires::After(3600), 200);
        assert_eq!(
            pair(&headers),
            (vec!["Sun, 06 Nov 1994 09:49:37 GMT"], vec!["max-age=3600"])
        );
    }

    #[test]
    fn zero_is_now_and_max_age_0_and_negative_is_no_cache() {
        let headers = applied(Expires::After(0), 304);
        assert_eq!(pair(&headers), (vec!["Sun, 06 Nov 1994 08:49:37 GMT"], vec!["max-age=0"]));
        let headers = applied(Expires::After(-60), 200);
        assert_eq!(pair(&headers), (vec!["Sun, 06 Nov 1994 08:48:37 GMT"], vec!["no-cache"]));
    }

    #[test]
    fn epoch_and_max_are_nginx_fixed_values() {
        let headers = applied(Expires::Epoch, 200);
        assert_eq!(pair(&headers), (vec!["Thu, 01 Jan 1970 00:00:01 GMT"], vec!["no-cache"]));
        let headers = applied(Expires::Max, 301);
        assert_eq!(
            pair(&headers),
            (vec!["Thu, 31 Dec 2037 23:55:55 GMT"], vec!["max-age=315360000"])
        );
    }

    #[test]
    fn unsafe_statuses_are_left_alone() {
        for status in [404, 403, 500, 502, 416, 412] {
            let headers = applied(Expires::Max, status);
            assert_eq!(pair(&headers), (vec![], vec!["private", "no-store"]), "{status}");
        }
    }
}
