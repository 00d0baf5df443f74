//! nginx's tokenizer (`ngx_conf_read_token` in src/core/ngx_conf_file.c), state for state:
//! words end at whitespace, `;` or `{`; a `"` or `'` only opens a quoted word at a
//! word's start, and a quoted word must be followed by whitespace, `;`, `{` or `)`; `\`
//! escapes the next byte everywhere; `#` starts a comment only where a word could start
//! (`a#b` is one word); `${` keeps the `{` in the word (`${var}`), and `}` never ends a
//! word (`a}` is one word, as in nginx). In a word, `\"`, `\'` and `\\` stand for the
//! byte after the backslash, `\t`, `\r` and `\n` for those controls; any other backslash
//! is kept.

use crate::Word;

/// What ended a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// `;`
    Semi,
    /// `{` after a directive's words.
    Open,
    /// `}` with no words before it.
    Close,
    /// The end of the text, with no words pending.
    Eof,
}

/// The words of one statement and what ended it.
pub(crate) struct Statement {
    pub words: Vec<Word>,
    pub end: End,
    /// The line of the byte that ended it (`;`, `{`, `}`).
    pub line: usize,
}

/// A problem of the text: its line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub line: usize,
    pub message: String,
}

pub(crate) struct Lexer<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: usize,
}

fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The word state of the statement being read.
#[derive(Default)]
struct State {
    need_space: bool,
    in_word: bool,
    comment: bool,
    variable: bool,
    escaped: bool,
    single: bool,
    double: bool,
    start: usize,
    start_line: usize,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Lexer<'a> {
        Lexer {
            bytes,
            pos: 0,
            line: 1,
        }
    }

    /// The next statement: its words up to `;`, `{`, `}` or the end of the text.
    pub(crate) fn next_statement(&mut self) -> Result<Statement, LexError> {
        let mut words: Vec<Word> = Vec::new();
        let mut s = State {
            start_line: self.line,
            ..State::default()
        };
        loop {
            let Some(&ch) = self.bytes.get(self.pos) else {
                return self.at_end(words, &s);
            };
            self.pos += 1;
            if ch == b'\n' {
                self.line += 1;
                s.comment = false;
            }
            if s.comment {
                continue;
            }
            if s.escaped {
                s.escaped = false;
                continue;
            }
            if s.need_space {
                if space(ch) {
                    s.in_word = false;
                    s.need_space = false;
                    continue;
                }
                match ch {
                    b';' => return Ok(self.ended(words, End::Semi)),
                    b'{' => return Ok(self.ended(words, End::Open)),
                    b')' => {
                        s.in_word = false;
                        s.need_space = false;
                    }
                    _ => return Err(self.unexpected(ch, &words)),
                }
            }
            if !s.in_word {
                s.start = self.pos - 1;
                s.start_line = self.line;
                if space(ch) {
                    continue;
                }
                s.in_word = true;
                match ch {
                    b';' | b'{' if words.is_empty() => return Err(self.unexpected(ch, &words)),
                    b';' => return Ok(self.ended(words, End::Semi)),
                    b'{' => return Ok(self.ended(words, End::Open)),
                    b'}' if !words.is_empty() => return Err(self.unexpected(ch, &words)),
                    b'}' => return Ok(self.ended(words, End::Close)),
                    b'#' => {
                        s.in_word = false;
                        s.comment = true;
                    }
                    b'\\' => s.escaped = true,
                    b'"' => {
                        s.start += 1;
                        s.double = true;
                    }
                    b'\'' => {
                        s.start += 1;
                        s.single = true;
                    }
                    b'$' => s.variable = true,
                    _ => {}
                }
                continue;
            }
            if ch == b'{' && s.variable {
                continue;
            }
            s.variable = false;
            match ch {
                b'\\' => {
                    s.escaped = true;
                    continue;
                }
                b'$' => {
                    s.variable = true;
                    continue;
                }
                _ => {}
            }
            let found = if s.double || s.single {
                let closing = if s.double { b'"' } else { b'\'' };
                let closed = ch == closing;
                if closed {
                    s.double = false;
                    s.single = false;
                    s.need_space = true;
                }
                closed
            } else if space(ch) || ch == b';' || ch == b'{' {
                s.in_word = false;
                true
            } else {
                false
            };
            if found {
                words.push(Word {
                    text: unescape(&self.bytes[s.start..self.pos - 1]),
                    line: s.start_line,
                });
                match ch {
                    b';' => return Ok(self.ended(words, End::Semi)),
                    b'{' => return Ok(self.ended(words, End::Open)),
                    _ => {}
                }
            }
        }
    }

    fn ended(&self, words: Vec<Word>, end: End) -> Statement {
        Statement {
            words,
            end,
            line: self.line,
        }
    }

    fn at_end(&self, words: Vec<Word>, s: &State) -> Result<Statement, LexError> {
        if s.in_word && (s.double || s.single) {
            let quote = if s.double { '"' } else { '\'' };
            return Err(LexError {
                line: s.start_line,
                message: format!("unterminated {quote}-quoted string: no closing {quote} before the end of the file"),
            });
        }
        if let Some(first) = words.first() {
            return Err(LexError {
                line: first.line,
                message: format!(
                    "directive \"{}\" has no \";\": the file ends first",
                    first.text
                ),
            });
        }
        if s.in_word {
            let word = unescape(&self.bytes[s.start..self.pos]);
            return Err(LexError {
                line: s.start_line,
                message: format!("directive \"{word}\" has no \";\": the file ends first"),
            });
        }
        Ok(self.ended(words, End::Eof))
    }

    fn unexpected(&self, ch: u8, words: &[Word]) -> LexError {
        let shown = char::from(ch);
        let message = match (ch, words.first()) {
            (b'}', Some(first)) => format!(
                "unexpected \"}}\": directive \"{}\" (line {}) has no \";\" before it",
                first.text, first.line
            ),
            (b';' | b'{', None) => format!("unexpected \"{shown}\": no directive name before it"),
            _ => format!(
                "unexpected \"{}\" after a quoted string: expected a space, \";\" or \"{{\"",
                shown.escape_default()
            ),
        };
        LexError {
            line: self.line,
            message,
        }
    }
}

/// A word's bytes as nginx keeps them (escapes resolved), as UTF-8 (invalid bytes
/// replaced: the output is a TOML file, which is UTF-8).
fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' {
            match raw.get(i + 1) {
                Some(b'"' | b'\'' | b'\\') => i += 1,
                Some(b't') => {
                    out.push(b'\t');
                    i += 2;
                    continue;
                }
                Some(b'r') => {
                    out.push(b'\r');
                    i += 2;
                    continue;
                }
                Some(b'n') => {
                    out.push(b'\n');
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
