//! Where each managed name stands, for `/status` and the log: `pending`, `valid until …`,
//! `renewing`, `failed: reason, next try at …`.

use std::fmt;

/// A managed name's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NameState {
    /// No certificate yet (a placeholder is served): ordering one, or waiting for a
    /// sibling instance that is.
    Pending,
    /// A certificate is in force until `until`; renewal starts at `renew_at`.
    Valid { until: i64, renew_at: i64 },
    /// The certificate in force (valid until `until`) is being renewed.
    Renewing { until: i64 },
    /// The last try failed; the next is at `next_try`. `until`: the end of the
    /// certificate still in force, if there is one (else a placeholder is served).
    Failed {
        reason: String,
        next_try: i64,
        until: Option<i64>,
    },
}

impl NameState {
    /// The one word `/status` keys on.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            NameState::Pending => "pending",
            NameState::Valid { .. } => "valid",
            NameState::Renewing { .. } => "renewing",
            NameState::Failed { .. } => "failed",
        }
    }

    /// The end of the certificate in force, if one was issued.
    pub(crate) fn until(&self) -> Option<i64> {
        match self {
            NameState::Pending => None,
            NameState::Valid { until, .. } | NameState::Renewing { until } => Some(*until),
            NameState::Failed { until, .. } => *until,
        }
    }
}

impl fmt::Display for NameState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameState::Pending => f.write_str("pending"),
            NameState::Valid { until, .. } => write!(f, "valid until {}", rfc3339(*until)),
            NameState::Renewing { .. } => f.write_str("renewing"),
            NameState::Failed {
                reason, next_try, ..
            } => write!(f, "failed: {reason}, next try at {}", rfc3339(*next_try)),
        }
    }
}

/// Seconds since the epoch as RFC 3339, UTC.
pub(crate) fn rfc3339(at: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(at)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| at.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_as_the_operator_sees_them() {
        assert_eq!(NameState::Pending.to_string(), "pending");
        let valid = NameState::Valid {
            until: 1_800_000_000,
            renew_at: 0,
        };
        assert_eq!(valid.to_string(), "valid until 2027-01-15T08:00:00Z");
        let failed = NameState::Failed {
            reason: "connection refused".into(),
            next_try: 1_800_000_060,
            until: None,
        };
        assert_eq!(
            failed.to_string(),
            "failed: connection refused, next try at 2027-01-15T08:01:00Z"
        );
        assert_eq!(failed.word(), "failed");
    }
}
