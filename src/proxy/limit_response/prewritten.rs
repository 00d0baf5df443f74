//! What a location's limited answers say the same way every time, written once when the
//! location is built: the `RateLimit-Policy` value, each zone's problem body up to its
//! `retry_after` number, and a rejection's header lines that carry no number. A request uses them while its zones hold it to their configured
//! rates (no plan, no adaptive factor, no elastic ceiling in play), which is the usual
//! case; otherwise its texts are written for it as before.

use bytes::Bytes;
use http::{HeaderValue, StatusCode};

use crate::config::RateLimitHeaders;
use crate::limit::decision::LimitRule;
use crate::limit::outcome::Applied;
use crate::limit::{Algorithm, Rate};

use super::super::text::Text;
use super::{problem_start, write_policy, Detail};

/// The prewritten texts of one location.
#[derive(Debug)]
pub struct Prewritten {
    /// The enforcing rules (index and configured rate), in list order, that `policy`
    /// announces.
    announced: Vec<(usize, Rate)>,
    policy: Option<HeaderValue>,
    /// Per rule: a rejection's body up to `retry_after`, for a rate zone at its rate.
    problems: Vec<Option<(Rate, Bytes)>>,
    /// A rejection's header lines without a number (`Content-Type`, and `RateLimit-Policy`
    /// when the draft's headers are sent), `name: value\r\n` each; `None` where a zone's
    /// name could not be sent in a header as it is.
    lines: Option<Bytes>,
    /// The header style `lines` were written for.
    style: RateLimitHeaders,
}

impl Prewritten {
    /// The texts of a location whose rejections answer `status` with `style`'s headers;
    /// `own` are the location's `response_headers` lines that such an answer gets and
    /// that have no variable.
    pub(crate) fn new(
        rules: &[LimitRule],
        status: StatusCode,
        style: RateLimitHeaders,
        own: &[u8],
    ) -> Prewritten {
        let mut policy = Text::<96>::new();
        let mut announced = Vec::new();
        for (index, rule) in rules.iter().enumerate().filter(|(_, r)| !r.dry_run) {
            let rate = rule.zone.rate_for(None);
            write_policy(&mut policy, &rule.zone, rate);
            announced.push((index, rate));
        }
        let problems = rules
            .iter()
            .map(|rule| {
                if rule.zone.algorithm == Algorithm::Concurrency {
                    return None;
                }
                let rate = rule.zone.rate_for(None);
                let mut body = Text::<320>::new();
                problem_start(&mut body, status, Detail::Rate(rate), &rule.zone.name);
                Some((rate, body.to_bytes()))
            })
            .collect();
        let policy = (!announced.is_empty()).then(|| policy.to_value()).flatten();
        // The `RateLimit` line carries the zones' names as they are: each must be a
        // header value.
        let sendable = rules
            .iter()
            .all(|rule| HeaderValue::from_str(&rule.zone.name).is_ok());
        let mut lines = Text::<160>::new();
        lines.push("content-type: application/problem+json\r\n");
        if let (true, Some(policy)) = (style.draft(), &policy) {
            lines.push("ratelimit-policy: ");
            lines.push_bytes(policy.as_bytes());
            lines.push("\r\n");
        }
        lines.push_bytes(own);
        Prewritten {
            policy,
            announced,
            problems,
            lines: sendable.then(|| lines.to_bytes()),
            style,
        }
    }

    /// A rejection's header lines that carry no number, if written for `style`.
    pub(super) fn lines(&self, style: RateLimitHeaders) -> Option<&Bytes> {
        self.lines.as_ref().filter(|_| self.style == style)
    }

    /// The `RateLimit-Policy` value, if `applied` (the enforcing zones that applied, in
    /// list order) are exactly the announced ones at their configured rates.
    pub(super) fn policy<'a>(
        &self,
        mut applied: impl Iterator<Item = &'a Applied>,
    ) -> Option<&HeaderValue> {
        let policy = self.policy.as_ref()?;
        for &(rule, rate) in &self.announced {
            match applied.next() {
                Some(a) if a.rule == rule && a.rate == rate => {}
                _ => return None,
            }
        }
        applied.next().is_none().then_some(policy)
    }

    /// The start of the rejection body for `applied`, if its zone held it to the
    /// configured rate.
    pub(super) fn problem(&self, applied: &Applied) -> Option<&[u8]> {
        match self.problems.get(applied.rule)? {
            Some((rate, start)) if *rate == applied.rate => Some(start),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Instant, SystemTime};

    use crate::limit::key::Template;
    use crate::limit::zone::{Spec, Zone};
    use crate::limit::{Decision, Period, Verdict};
    use crate::vars::VarText;

    use super::super::{problem, write_policy};
    use super::*;

    fn rule(name: &str, count: u64, plan: u64, dry_run: bool) -> LimitRule {
        let rate = |count| Rate::new(count, Period::Second).expect("a rate");
        let zone = Zone::new(
            Spec {
                name: name.into(),
                template: Template::new(VarText::parse("$binary_remote_addr").unwrap(), 32, 128),
                algorithm: Algorithm::LeakyBucket,
                rate: rate(count),
                plan_rates: vec![Some(rate(plan))],
                max: 0,
                size: 1 << 20,
                redis: None,
                adaptive: None,
                soft: None,
            },
            Instant::now(),
            SystemTime::now(),
        );
        LimitRule {
            zone: Arc::new(zone),
            burst: 0,
            delay: 0,
            dry_run,
            count: None,
            settles: false,
            ban: None,
            elastic: None,
            soft: None,
        }
    }

    fn applied(rules: &[LimitRule], rule: usize, plan: Option<usize>) -> Applied {
        Applied {
            rule,
            rate: rules[rule].zone.rate_for(plan),
            decision: Decision {
                verdict: Verdict::Pass,
                remaining: 0,
                reset: 0,
            },
            dry_run: rules[rule].dry_run,
            soft: false,
        }
    }

    #[test]
    fn the_prewritten_texts_are_the_ones_written_per_request() {
        let rules = [rule("ip", 10, 100, false), rule("key", 2, 20, false)];
        let texts = Prewritten::new(
            &rules,
            StatusCode::TOO_MANY_REQUESTS,
            RateLimitHeaders::Draft,
            b"",
        );
        let both = [applied(&rules, 0, None), applied(&rules, 1, None)];
        let mut written = Text::<96>::new();
        for a in &both {
            write_policy(&mut written, &rules[a.rule].zone, a.rate);
        }
        let policy = texts.policy(both.iter()).expect("the configured rates");
        assert_eq!(policy.as_bytes(), written.as_bytes());
        assert_eq!(policy, r#""ip";q=10;w=1, "key";q=2;w=1"#);

        let start = texts.problem(&both[1]).expect("a rate zone at its rate");
        let whole = problem(
            StatusCode::TOO_MANY_REQUESTS,
            Detail::Rate(both[1].rate),
            "key",
            7,
        );
        assert_eq!(super::super::problem_end(start, 7), whole);

        let lines = texts
            .lines(RateLimitHeaders::Draft)
            .expect("names fit for a header");
        assert_eq!(
            &lines[..],
            b"content-type: application/problem+json\r\n\
              ratelimit-policy: \"ip\";q=10;w=1, \"key\";q=2;w=1\r\n"
        );
        let legacy = Prewritten::new(
            &rules,
            StatusCode::TOO_MANY_REQUESTS,
            RateLimitHeaders::Legacy,
            b"",
        );
        let lines = legacy
            .lines(RateLimitHeaders::Legacy)
            .expect("names fit for a header");
        assert_eq!(&lines[..], b"content-type: application/problem+json\r\n");
        assert!(legacy.lines(RateLimitHeaders::Both).is_none());
    }

    #[test]
    fn another_rate_or_another_set_of_zones_is_written_afresh() {
        let rules = [
            rule("ip", 10, 100, false),
            rule("key", 2, 20, false),
            rule("watch", 1, 1, true),
        ];
        let texts = Prewritten::new(
            &rules,
            StatusCode::TOO_MANY_REQUESTS,
            RateLimitHeaders::Draft,
            b"",
        );
        let configured = [applied(&rules, 0, None), applied(&rules, 1, None)];
        assert!(texts.policy(configured.iter()).is_some());
        // A plan's rate, one zone short, or one zone more: not the prewritten value.
        let planned = [applied(&rules, 0, None), applied(&rules, 1, Some(0))];
        assert!(texts.policy(planned.iter()).is_none());
        assert!(texts.problem(&planned[1]).is_none());
        assert!(texts.policy(configured[..1].iter()).is_none());
        let more = [configured[0], configured[1], configured[1]];
        assert!(texts.policy(more.iter()).is_none());
    }
}
