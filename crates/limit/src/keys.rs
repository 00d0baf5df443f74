//! A request's key in each zone of a location's `limit` list, rendered once, when the
//! request arrives ([`Keys::render`]), and read by everything that needs one: the local
//! decision, the penalty box, a Redis zone's call, the most-limited sketch. No key is
//! rendered twice, and none passes through a side channel.

use std::ops::Range;

use super::rule::{LimitRule, MAX_LIMITS};
use crate::vars::Request;

/// The keys of one request, end to end in one buffer, and where each rule's is.
#[derive(Debug, Default)]
pub struct Keys {
    bytes: Vec<u8>,
    /// Rule `i`'s key is `bytes[start..end]`; `start == end` when its key is empty (or
    /// too long): the zone does not apply to the request.
    spans: [(u32, u32); MAX_LIMITS],
    /// Rule `i`'s plan id when its zone reads one from the request (`plan`).
    plans: [Option<u16>; MAX_LIMITS],
}

impl Keys {
    /// Renders each of `rules`' keys for `req` into `buffer` (cleared first, its
    /// capacity reused: a connection hands the same one to its requests in turn).
    pub fn render(rules: &[LimitRule], req: &Request<'_>, mut buffer: Vec<u8>) -> Keys {
        buffer.clear();
        let mut spans = [(0, 0); MAX_LIMITS];
        let mut plans = [None; MAX_LIMITS];
        for (i, rule) in rules.iter().enumerate().take(MAX_LIMITS) {
            let start = buffer.len();
            let rendered = rule.zone.template.render_append(req, &mut buffer);
            match (rendered, u32::try_from(start), u32::try_from(buffer.len())) {
                (true, Ok(start), Ok(end)) => spans[i] = (start, end),
                _ => {
                    buffer.truncate(start);
                    continue;
                }
            }
            if let Some(plan_from) = &rule.zone.plan_from {
                plans[i] = plan_from
                    .plan(req, &mut buffer)
                    .and_then(|id| u16::try_from(id).ok());
            }
        }
        Keys {
            bytes: buffer,
            spans,
            plans,
        }
    }

    /// Rule `rule`'s key, `None` when the zone does not apply to the request.
    pub fn get(&self, rule: usize) -> Option<&[u8]> {
        self.bytes.get(self.span(rule)?)
    }

    /// Rule `rule`'s plan as its zone reads it from the request; `None` when the zone
    /// reads none (the request's `[api_keys]` plan applies) or the request names none.
    pub fn plan(&self, rule: usize) -> Option<usize> {
        self.plans.get(rule).copied().flatten().map(usize::from)
    }

    /// Where rule `rule`'s key is in [`Keys::bytes`].
    pub fn span(&self, rule: usize) -> Option<Range<usize>> {
        let &(start, end) = self.spans.get(rule)?;
        (end > start).then_some(start as usize..end as usize)
    }

    /// The keys of the rules at `indices` (of the list these keys were rendered for), as
    /// keys of the shorter list they make: `selected.get(i)` is `self.get(indices[i])`.
    pub fn select(&self, indices: &[usize]) -> Keys {
        let mut selected = Keys::default();
        for (i, &index) in indices.iter().enumerate().take(MAX_LIMITS) {
            let Some(key) = self.get(index) else {
                continue;
            };
            let start = selected.bytes.len();
            selected.bytes.extend_from_slice(key);
            // Within u32: no longer than the keys selected from.
            let end = selected.bytes.len();
            selected.spans[i] = (start as u32, end as u32);
            selected.plans[i] = self.plans[index];
        }
        selected
    }

    /// Every key, end to end.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The buffer, for the next request to render into.
    pub fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }
}
