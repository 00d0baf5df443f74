//! The request headers a log line reads, taken from the request when it arrives: up to
//! [`INLINE`] kept in the record itself, so that the usual formats (`combined` reads two)
//! cost no allocation; more on the heap.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Headers kept without an allocation.
const INLINE: usize = 4;

/// The values of the headers a format names, in its order (`None`: not sent).
pub(crate) enum Captured {
    Inline([Option<HeaderValue>; INLINE]),
    Heap(Box<[Option<HeaderValue>]>),
}

impl Captured {
    /// The first value of each of `names` in `headers` (a copy of a reference count).
    pub(crate) fn of(names: &[HeaderName], headers: &HeaderMap) -> Captured {
        let value = |name: &HeaderName| headers.get(name).cloned();
        if names.len() <= INLINE {
            let mut inline: [Option<HeaderValue>; INLINE] = Default::default();
            for (slot, name) in inline.iter_mut().zip(names) {
                *slot = value(name);
            }
            return Captured::Inline(inline);
        }
        Captured::Heap(names.iter().map(value).collect())
    }

    /// The value of the `at`th name, if it was sent.
    pub(crate) fn get(&self, at: usize) -> Option<&HeaderValue> {
        match self {
            Captured::Inline(values) => values.get(at)?.as_ref(),
            Captured::Heap(values) => values.get(at)?.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_place_inline_or_not() {
        let mut headers = HeaderMap::new();
        headers.insert("x-b", HeaderValue::from_static("b"));
        let names: Vec<HeaderName> = ["x-a", "x-b", "x-c", "x-d", "x-e"].map(HeaderName::from_static).into();
        for count in [2, 5] {
            let captured = Captured::of(&names[..count], &headers);
            assert_eq!(matches!(captured, Captured::Inline(_)), count <= INLINE);
            assert_eq!(captured.get(0), None);
            assert_eq!(captured.get(1), Some(&HeaderValue::from_static("b")));
            assert_eq!(captured.get(9), None);
        }
    }
}
