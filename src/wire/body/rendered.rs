//! An answer of tollgate's own written beforehand but for a few numbers (a 429: its
//! `Retry-After`, the zones' requests left and seconds to reset): a [`Form`], the header
//! lines and body as text with holes, made once per location, and the numbers of one
//! answer ([`Rendered`]). An HTTP/1.1 connection writes both straight into its write
//! buffer ([`Rendered::write_lines`], [`Rendered::write_body`]), so a refusal costs no
//! header map, no text put together per request and no allocation; HTTP/2, whose encoder
//! takes a map, has the lines put into one ([`Rendered::lines_into`]). Under a flood the
//! numbers repeat (one client, `Retry-After: 1`, none left), so each worker keeps the
//! last answer it wrote ([`LAST`]) and copies it whole while form and numbers are the same.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::wire::h1::push_decimal;

/// The most numbers one form takes: a form that would need more is not made (its answers
/// are written otherwise). Nine: `Retry-After`, two zones' `RateLimit` items, the legacy
/// three and the body's `retry_after`; a [`Rendered`] then takes no more room in a
/// response body than an upstream's body does.
pub(crate) const MOST_NUMBERS: usize = 9;

/// Header lines (`name: value\r\n` each, never a framing or connection header) and a
/// body, written beforehand with a hole wherever a number goes. The numbers fill the
/// head's holes first, then the body's.
#[derive(Debug)]
pub(crate) struct Form {
    /// This form among all made since the start (never reused, unlike an address).
    id: u64,
    head: Holed,
    body: Holed,
}

/// The id of the next form made.
static NEXT_FORM: AtomicU64 = AtomicU64::new(1);

/// A worker's last answer written: the form's id and the numbers, and the text they gave.
struct Last {
    form: u64,
    numbers: [u64; MOST_NUMBERS],
    head: Vec<u8>,
    body: Vec<u8>,
}

thread_local! {
    static LAST: RefCell<Last> = const {
        RefCell::new(Last { form: 0, numbers: [0; MOST_NUMBERS], head: Vec::new(), body: Vec::new() })
    };
}

/// Text and where, in it, each number goes (offsets, in order).
#[derive(Debug)]
struct Holed {
    text: Box<[u8]>,
    holes: Box<[usize]>,
}

impl Holed {
    /// `pieces`, one number between each two of them.
    fn new(pieces: &[&[u8]]) -> Holed {
        let mut text = Vec::new();
        let mut holes = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                holes.push(text.len());
            }
            text.extend_from_slice(piece);
        }
        Holed {
            text: text.into(),
            holes: holes.into(),
        }
    }

    fn write(&self, out: &mut Vec<u8>, numbers: &[u64]) {
        let mut at = 0;
        for (&hole, &number) in self.holes.iter().zip(numbers) {
            out.extend_from_slice(&self.text[at..hole]);
            push_decimal(out, number);
            at = hole;
        }
        out.extend_from_slice(&self.text[at..]);
    }

    fn len(&self, numbers: &[u64]) -> u64 {
        let digits: u64 = numbers.iter().take(self.holes.len()).map(|&n| digits(n)).sum();
        self.text.len() as u64 + digits
    }
}

/// How many decimal digits `n` takes.
fn digits(mut n: u64) -> u64 {
    let mut count = 1;
    while n >= 10 {
        n /= 10;
        count += 1;
    }
    count
}

impl Form {
    /// A form of `head` and `body` pieces, a number between each two of a list; `None`
    /// if it would take more than [`MOST_NUMBERS`].
    pub(crate) fn new(head: &[&[u8]], body: &[&[u8]]) -> Option<Form> {
        let numbers = head.len().saturating_sub(1) + body.len().saturating_sub(1);
        (numbers <= MOST_NUMBERS).then(|| Form {
            id: NEXT_FORM.fetch_add(1, Ordering::Relaxed),
            head: Holed::new(head),
            body: Holed::new(body),
        })
    }

    /// How many numbers an answer of this form gives.
    pub(crate) fn numbers(&self) -> usize {
        self.head.holes.len() + self.body.holes.len()
    }
}

/// One answer of a [`Form`]: its numbers, and what of it has been taken.
#[derive(Debug)]
pub(crate) struct Rendered {
    form: Arc<Form>,
    numbers: [u64; MOST_NUMBERS],
    /// The lines were moved into a map ([`Rendered::lines_into`]).
    moved: bool,
    /// The body was written or handed out.
    taken: bool,
}

impl Rendered {
    /// `numbers` fill the form's holes in order (the head's, then the body's).
    pub(crate) fn new(form: Arc<Form>, numbers: [u64; MOST_NUMBERS]) -> Rendered {
        Rendered {
            form,
            numbers,
            moved: false,
            taken: false,
        }
    }

    fn body_numbers(&self) -> &[u64] {
        let head = self.form.head.holes.len().min(MOST_NUMBERS);
        &self.numbers[head..]
    }

    /// Appends the header lines, in order (nothing once they were moved into a map).
    pub(crate) fn write_lines(&self, out: &mut Vec<u8>) {
        if !self.moved && !self.taken {
            self.with_text(|head, _| out.extend_from_slice(head));
        }
    }

    /// `f` of this answer's head and body text: the worker's last ones when they were
    /// written for the same form and numbers, else written afresh (and kept as the last).
    fn with_text<R>(&self, f: impl FnOnce(&[u8], &[u8]) -> R) -> R {
        LAST.with(|last| {
            let mut last = last.borrow_mut();
            if last.form != self.form.id || last.numbers != self.numbers {
                let last = &mut *last;
                last.head.clear();
                last.body.clear();
                self.form.head.write(&mut last.head, &self.numbers);
                self.form.body.write(&mut last.body, self.body_numbers());
                last.form = self.form.id;
                last.numbers = self.numbers;
            }
            f(&last.head, &last.body)
        })
    }

    /// The body's length (0 once taken).
    pub(crate) fn len(&self) -> u64 {
        if self.taken {
            return 0;
        }
        self.form.body.len(self.body_numbers())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the body, if not yet taken; its length.
    pub(crate) fn write_body(&mut self, out: &mut Vec<u8>) -> u64 {
        if self.taken {
            return 0;
        }
        let written = self.with_text(|_, body| {
            out.extend_from_slice(body);
            body.len() as u64
        });
        self.taken = true;
        written
    }

    /// The body as one piece, if not yet taken (the lines are let go with it).
    pub(crate) fn next_piece(&mut self) -> Option<Bytes> {
        let mut body = Vec::new();
        self.write_body(&mut body);
        Some(Bytes::from(body)).filter(|body| !body.is_empty())
    }

    /// Moves the header lines into `headers`. A line that does not read as a header
    /// (none does: tollgate wrote them) is left out.
    pub(crate) fn lines_into(&mut self, headers: &mut HeaderMap) {
        let mut lines = Vec::new();
        self.write_lines(&mut lines);
        for line in lines.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
            let parsed = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value));
            debug_assert!(
                parsed.0.is_ok() && parsed.1.is_ok(),
                "a rendered line: {line:?}"
            );
            if let (Ok(name), Ok(value)) = parsed {
                headers.append(name, value);
            }
        }
        self.moved = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Arc<Form> {
        let head: [&[u8]; 3] = [
            b"content-type: application/problem+json\r\nretry-after: ",
            b"\r\nratelimit: \"ip\";r=",
            b";t=",
        ];
        let head = [head[0], head[1], head[2], b"\r\n"];
        Arc::new(Form::new(&head, &[b"{\"a\":", b"}\n"]).expect("a form"))
    }

    fn numbers(list: &[u64]) -> [u64; MOST_NUMBERS] {
        let mut numbers = [0; MOST_NUMBERS];
        numbers[..list.len()].copy_from_slice(list);
        numbers
    }

    #[test]
    fn the_numbers_go_in_the_holes_of_head_and_body() {
        let form = form();
        assert_eq!(form.numbers(), 4);
        let mut rendered = Rendered::new(form, numbers(&[3, 0, 12, 3]));
        let mut out = Vec::new();
        rendered.write_lines(&mut out);
        assert_eq!(
            out,
            b"content-type: application/problem+json\r\nretry-after: 3\r\n\
              ratelimit: \"ip\";r=0;t=12\r\n"
        );
        assert_eq!(rendered.len(), 8);
        let mut body = Vec::new();
        assert_eq!(rendered.write_body(&mut body), 8);
        assert_eq!(body, b"{\"a\":3}\n");
        assert!(rendered.is_empty());
        assert_eq!(rendered.write_body(&mut body), 0);
        assert_eq!(rendered.next_piece(), None);
    }

    #[test]
    fn lines_become_headers_and_the_body_comes_whole() {
        let mut rendered = Rendered::new(form(), numbers(&[3, 0, 3, 1234567]));
        assert_eq!(rendered.len(), 14);
        let mut headers = HeaderMap::new();
        rendered.lines_into(&mut headers);
        assert_eq!(headers.len(), 3);
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(headers["retry-after"], "3");
        assert_eq!(headers["ratelimit"], "\"ip\";r=0;t=3");
        let mut lines = Vec::new();
        rendered.write_lines(&mut lines);
        assert!(lines.is_empty());
        assert_eq!(rendered.len(), 14);
        assert_eq!(
            rendered.next_piece().as_deref(),
            Some(&b"{\"a\":1234567}\n"[..])
        );
        assert_eq!(rendered.next_piece(), None);
        assert!(rendered.is_empty());
    }

    #[test]
    fn a_form_takes_at_most_so_many_numbers() {
        let pieces = [&b"x"[..]; MOST_NUMBERS + 2];
        assert!(Form::new(&pieces[..MOST_NUMBERS + 1], &pieces[..2]).is_none());
        assert!(Form::new(&pieces[..MOST_NUMBERS], &pieces[..2]).is_some());
        for n in [0, 9, 10, 99, 100, u64::MAX] {
            assert_eq!(digits(n), n.to_string().len() as u64);
        }
    }
}
