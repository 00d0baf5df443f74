//! Settling a request's charges by its answer (`count_status`, `cost_from`; see
//! `limit::settle`): the status and the cost the upstream declared, read from the
//! response head, and the cost header taken out before the client sees it.

use std::time::Instant;

use http::{HeaderMap, HeaderName, Response};

use crate::limit::settle::{Answer, Pending};
use crate::upstream::ResponseBody;

use super::Location;

/// The most a declared cost counts for: as much as a location's `cost` may be.
pub(super) const MAX_DECLARED: u64 = 1_000_000;

/// Settles `pending` by `response`; `from_upstream` when the upstream answered (only
/// then is a declared cost believed). The cost header goes unless `keep_cost_header`.
pub(super) fn settle(
    location: &Location,
    response: &mut Response<ResponseBody>,
    pending: Vec<Pending>,
    from_upstream: bool,
    worker: usize,
) {
    let mut declared = None;
    if let Some(cost_from) = &location.cost_from {
        if from_upstream {
            declared = declared_cost(response.headers(), &cost_from.header);
        }
        if !cost_from.keep {
            response.headers_mut().remove(&cost_from.header);
        }
    }
    if pending.is_empty() {
        return;
    }
    let answer = Answer {
        status: response.status().as_u16(),
        declared,
    };
    location
        .limits
        .settle(pending, answer, Instant::now(), worker);
}

/// The cost in `name`: one field of decimal digits, capped at [`MAX_DECLARED`]. None (the
/// static cost stands) when it is absent, repeated or not a number.
fn declared_cost(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    let mut values = headers.get_all(name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let digits = value.as_bytes().trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        tracing::debug!(header = %name, "the upstream's declared cost is not a number");
        return None;
    }
    // Any run of digits: one too long for u64 is over the cap anyway.
    let cost = digits.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    });
    Some(cost.map_or(MAX_DECLARED, |cost| cost.min(MAX_DECLARED)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn cost_of(values: &[&str]) -> Option<u64> {
        let name = HeaderName::from_static("x-cost");
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(&name, HeaderValue::from_str(value).expect("valid"));
        }
        declared_cost(&headers, &name)
    }

    #[test]
    fn a_declared_cost_is_one_decimal_number_capped() {
        assert_eq!(cost_of(&["42"]), Some(42));
        assert_eq!(cost_of(&[" 7 "]), Some(7));
        assert_eq!(cost_of(&["0"]), Some(0));
        assert_eq!(cost_of(&["99999999"]), Some(MAX_DECLARED));
        assert_eq!(cost_of(&["99999999999999999999999999"]), Some(MAX_DECLARED));
        assert_eq!(cost_of(&[]), None);
        assert_eq!(cost_of(&["1", "2"]), None, "repeated: ambiguous");
        for bad in ["", "-1", "1.5", "12abc", "0x10", "1e3", "+3"] {
            assert_eq!(cost_of(&[bad]), None, "{bad:?}");
        }
    }
}
