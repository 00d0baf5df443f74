//! The header names of a connection's heads, kept from one head to the next: an upstream
//! connection's responses, a client connection's requests (`server/h1`). An application
//! answers with the same names in the same order, a client asks with them, and comparing
//! the bytes sent with the last head's costs a fraction of parsing a name again (and, for
//! a name not in the standard's list, an allocation).

use http::header::{HeaderName, InvalidHeaderName};

/// Positions kept: a response's first this many names.
const KEPT: usize = 32;
/// Bytes of names kept; past it, all are forgotten and learned again.
const KEPT_BYTES: usize = 1024;

/// The names of the last responses, by position in the head.
#[derive(Debug, Default)]
pub(crate) struct Names {
    /// The names as sent, one after another.
    sent: Vec<u8>,
    /// Per position: where its name is in `sent`, and the name.
    seen: Vec<(u32, u32, HeaderName)>,
}

impl Names {
    /// The name sent as `raw` at position `at` of a head.
    pub(crate) fn name(&mut self, at: usize, raw: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
        if let Some((start, len, name)) = self.seen.get(at) {
            let (start, len) = (*start as usize, *len as usize);
            if self.sent.get(start..start + len) == Some(raw) {
                return Ok(name.clone());
            }
        }
        let name = HeaderName::from_bytes(raw)?;
        self.keep(at, raw, &name);
        Ok(name)
    }

    fn keep(&mut self, at: usize, raw: &[u8], name: &HeaderName) {
        // A name longer than all that is kept is not kept (else an upstream could make
        // every pooled connection hold a head's worth of name).
        if at >= KEPT || at > self.seen.len() || raw.len() > KEPT_BYTES {
            return;
        }
        if self.sent.len() + raw.len() > KEPT_BYTES {
            self.sent.clear();
            self.seen.clear();
            if at > 0 {
                return;
            }
        }
        // Both fit in u32: `sent` stays within KEPT_BYTES.
        let entry = (self.sent.len() as u32, raw.len() as u32, name.clone());
        self.sent.extend_from_slice(raw);
        match self.seen.get_mut(at) {
            Some(slot) => *slot = entry,
            None => self.seen.push(entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &mut Names, raw: &[&str]) -> Vec<String> {
        raw.iter()
            .enumerate()
            .map(|(at, raw)| names.name(at, raw.as_bytes()).expect("a name").to_string())
            .collect()
    }

    #[test]
    fn names_come_out_as_parsed_whatever_was_kept_before() {
        let mut kept = Names::default();
        let first = ["Content-Type", "X-Request-Id", "date"];
        assert_eq!(
            names(&mut kept, &first),
            ["content-type", "x-request-id", "date"]
        );
        assert_eq!(
            names(&mut kept, &first),
            ["content-type", "x-request-id", "date"]
        );
        // Another order, another case, other names: each is parsed again.
        let second = ["date", "x-request-id", "X-Other", "content-length"];
        assert_eq!(
            names(&mut kept, &second),
            ["date", "x-request-id", "x-other", "content-length"]
        );
        assert_eq!(names(&mut kept, &["DATE"]), ["date"]);
        assert!(kept.name(1, b"bad name").is_err());
        assert_eq!(names(&mut kept, &second)[1], "x-request-id");
    }

    #[test]
    fn a_name_longer_than_what_is_kept_is_not_kept() {
        let mut kept = Names::default();
        let long = "x".repeat(60_000);
        assert_eq!(names(&mut kept, &[&long])[0], long);
        assert!(kept.sent.is_empty() && kept.seen.is_empty());
        assert_eq!(names(&mut kept, &["date"]), ["date"]);
        assert_eq!(kept.seen.len(), 1);
    }

    #[test]
    fn what_is_kept_stays_bounded() {
        let mut kept = Names::default();
        for round in 0..100 {
            let raw: Vec<String> = (0..40).map(|i| format!("x-name-{round}-{i}")).collect();
            let raw: Vec<&str> = raw.iter().map(String::as_str).collect();
            let parsed = names(&mut kept, &raw);
            assert_eq!(parsed[39], format!("x-name-{round}-39"));
            assert!(kept.sent.len() <= KEPT_BYTES);
            assert!(kept.seen.len() <= KEPT);
        }
    }
}
