//! What a location's limited answers say the same way every time, written once when the
//! location is built: the `RateLimit-Policy` value, each zone's problem body up to its
//! `retry_after` number, and, per zone, a rejection's whole head and body as a [`Form`]
//! with holes for its numbers. A request uses them while its zones hold it to their
//! configured rates (no plan, no adaptive factor, no elastic ceiling in play), which is
//! the usual case; otherwise its texts are written for it as before.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, StatusCode};

use crate::config::RateLimitHeaders;
use crate::limit::decision::LimitRule;
use crate::limit::outcome::Applied;
use crate::limit::{Algorithm, Rate};
use crate::wire::body::Form;

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
    /// Per rule: the whole of a rejection by that rule's zone at its rate, but for its
    /// numbers ([`Prewritten::form`] says which); `None` where a zone's name could not
    /// be sent in a header as it is, or a form would take too many numbers.
    forms: Vec<Option<Arc<Form>>>,
    /// The header style the forms were written for.
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
        let problems: Vec<_> = rules
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
        let head = match sendable {
            true => head_pieces(rules, &announced, policy.as_ref(), style, own),
            false => Vec::new(),
        };
        let forms = problems
            .iter()
            .map(|problem| {
                let (_, start) = problem.as_ref().filter(|_| sendable)?;
                let head: Vec<&[u8]> = head.iter().map(Vec::as_slice).collect();
                Form::new(&head, &[start, b"}\n"]).map(Arc::new)
            })
            .collect();
        Prewritten {
            policy,
            announced,
            problems,
            forms,
            style,
        }
    }

    /// The form of a rejection by `rejected` (the rule whose zone refused) when the
    /// enforcing zones that applied (`applied`, in list order) are exactly the announced
    /// ones at their configured rates and the headers are `style`'s.
    pub(super) fn form<'a>(
        &self,
        rejected: &Applied,
        applied: impl Iterator<Item = &'a Applied>,
        style: RateLimitHeaders,
    ) -> Option<&Arc<Form>> {
        if style != self.style || self.problem(rejected).is_none() {
            return None;
        }
        self.same_as_announced(applied)?;
        self.forms.get(rejected.rule)?.as_ref()
    }

    /// The `RateLimit-Policy` value, if `applied` (the enforcing zones that applied, in
    /// list order) are exactly the announced ones at their configured rates.
    pub(super) fn policy<'a>(&self, applied: impl Iterator<Item = &'a Applied>) -> Option<&HeaderValue> {
        let policy = self.policy.as_ref()?;
        self.same_as_announced(applied)?;
        Some(policy)
    }

    fn same_as_announced<'a>(&self, mut applied: impl Iterator<Item = &'a Applied>) -> Option<()> {
        for &(rule, rate) in &self.announced {
            match applied.next() {
                Some(a) if a.rule == rule && a.rate == rate => {}
                _ => return None,
            }
        }
        applied.next().is_none().then_some(())
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

/// A rejection's header lines as the pieces between its numbers: `Content-Type`,
/// `RateLimit-Policy` (draft), the location's own lines, `Retry-After`, then for the
/// announced zones the draft's `RateLimit` (each zone's requests left and, but for a
/// `concurrency` zone, seconds to reset) and the legacy three, in the order
/// [`super::numbers`] gives them.
fn head_pieces(
    rules: &[LimitRule],
    announced: &[(usize, Rate)],
    policy: Option<&HeaderValue>,
    style: RateLimitHeaders,
    own: &[u8],
) -> Vec<Vec<u8>> {
    let mut piece = b"content-type: application/problem+json\r\n".to_vec();
    if let (true, Some(policy)) = (style.draft(), policy) {
        piece.extend_from_slice(b"ratelimit-policy: ");
        piece.extend_from_slice(policy.as_bytes());
        piece.extend_from_slice(b"\r\n");
    }
    piece.extend_from_slice(own);
    piece.extend_from_slice(b"retry-after: ");
    let mut pieces = vec![piece];
    let mut piece = b"\r\n".to_vec();
    let limited = style.count() > 0 && !announced.is_empty();
    if limited && style.draft() {
        piece.extend_from_slice(b"ratelimit: ");
        for (i, &(rule, _)) in announced.iter().enumerate() {
            let Some(zone) = rules.get(rule).map(|rule| &rule.zone) else {
                continue;
            };
            if i > 0 {
                piece.extend_from_slice(b", ");
            }
            piece.extend_from_slice(format!("\"{}\";r=", zone.name).as_bytes());
            pieces.push(std::mem::take(&mut piece));
            if zone.algorithm != Algorithm::Concurrency {
                piece.extend_from_slice(b";t=");
                pieces.push(std::mem::take(&mut piece));
            }
        }
        piece.extend_from_slice(b"\r\n");
    }
    if limited && style.legacy() {
        for name in ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"] {
            piece.extend_from_slice(name.as_bytes());
            piece.extend_from_slice(b": ");
            pieces.push(std::mem::take(&mut piece));
            piece.extend_from_slice(b"\r\n");
        }
    }
    pieces.push(piece);
    pieces
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
                plan_from: None,
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

        let form = texts
            .form(&both[1], both.iter(), RateLimitHeaders::Draft)
            .expect("names fit for a header");
        let (lines, body) = answer(form, &[7, 4, 1, 0, 7, 7]);
        assert_eq!(
            lines,
            "content-type: application/problem+json\r\n\
             ratelimit-policy: \"ip\";q=10;w=1, \"key\";q=2;w=1\r\n\
             retry-after: 7\r\nratelimit: \"ip\";r=4;t=1, \"key\";r=0;t=7\r\n"
        );
        assert_eq!(body.as_bytes(), &whole[..]);
        assert!(texts
            .form(&both[1], both.iter(), RateLimitHeaders::Legacy)
            .is_none());

        let legacy = Prewritten::new(
            &rules,
            StatusCode::TOO_MANY_REQUESTS,
            RateLimitHeaders::Both,
            b"x-own: 1\r\n",
        );
        let form = legacy
            .form(&both[1], both.iter(), RateLimitHeaders::Both)
            .expect("names fit for a header");
        let (lines, _) = answer(form, &[7, 4, 1, 0, 7, 2, 0, 7, 7]);
        assert_eq!(
            lines,
            "content-type: application/problem+json\r\n\
             ratelimit-policy: \"ip\";q=10;w=1, \"key\";q=2;w=1\r\nx-own: 1\r\n\
             retry-after: 7\r\nratelimit: \"ip\";r=4;t=1, \"key\";r=0;t=7\r\n\
             x-ratelimit-limit: 2\r\nx-ratelimit-remaining: 0\r\nx-ratelimit-reset: 7\r\n"
        );
        let none = Prewritten::new(
            &rules,
            StatusCode::TOO_MANY_REQUESTS,
            RateLimitHeaders::None,
            b"",
        );
        let form = none
            .form(&both[0], both.iter(), RateLimitHeaders::None)
            .expect("names fit for a header");
        let (lines, _) = answer(form, &[3, 3]);
        assert_eq!(
            lines,
            "content-type: application/problem+json\r\nretry-after: 3\r\n"
        );
    }

    /// The lines and body of an answer of `form` with `numbers`.
    fn answer(form: &Arc<Form>, numbers: &[u64]) -> (String, String) {
        assert_eq!(form.numbers(), numbers.len());
        let mut all = [0; crate::wire::body::MOST_NUMBERS];
        all[..numbers.len()].copy_from_slice(numbers);
        let mut rendered = crate::wire::body::Rendered::new(form.clone(), all);
        let (mut lines, mut body) = (Vec::new(), Vec::new());
        rendered.write_lines(&mut lines);
        rendered.write_body(&mut body);
        let text = |bytes| String::from_utf8(bytes).expect("text");
        (text(lines), text(body))
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
        let draft = RateLimitHeaders::Draft;
        assert!(texts.form(&configured[1], configured.iter(), draft).is_some());
        assert!(texts.form(&planned[1], planned.iter(), draft).is_none());
        assert!(texts.form(&configured[1], more.iter(), draft).is_none());
    }
}
