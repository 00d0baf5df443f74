//! One file's statements as a tree of directives (`ngx_conf_parse`): a `}` closes the
//! innermost block, and a file's blocks close in that file.

use crate::lex::{End, LexError, Lexer};
use crate::{Directive, Place};

/// Blocks nested deeper than this are refused (nginx has about five levels in practice;
/// the bound keeps hostile input from exhausting the stack).
pub(crate) const MAX_DEPTH: usize = 64;

/// The directives of one file's text; `file` is its index for [`Place`].
pub(crate) fn parse(bytes: &[u8], file: usize) -> Result<Vec<Directive>, LexError> {
    let mut lexer = Lexer::new(bytes);
    block(&mut lexer, file, None, 0)
}

/// The directives up to the `}` of the block opened at `opened` (`None`: the end of the
/// file).
fn block(
    lexer: &mut Lexer<'_>,
    file: usize,
    opened: Option<(&str, usize)>,
    depth: usize,
) -> Result<Vec<Directive>, LexError> {
    let mut directives = Vec::new();
    loop {
        let statement = lexer.next_statement()?;
        let mut words = statement.words.into_iter();
        match (statement.end, opened) {
            (End::Eof, None) | (End::Close, Some(_)) => return Ok(directives),
            (End::Eof, Some((name, line))) => {
                return Err(LexError {
                    line,
                    message: format!(
                        "the \"{name}\" block opened here has no \"}}\": the file ends first"
                    ),
                })
            }
            (End::Close, None) => {
                return Err(LexError {
                    line: statement.line,
                    message: "unexpected \"}\": no block is open here".to_owned(),
                })
            }
            (End::Semi | End::Open, _) => {}
        }
        // The lexer ends a `;` or `{` statement only after a word.
        let Some(first) = words.next() else {
            continue;
        };
        let place = Place {
            file,
            line: first.line,
        };
        let args = words.map(|w| w.text).collect();
        let block = match statement.end {
            End::Open if depth >= MAX_DEPTH => {
                return Err(LexError {
                    line: first.line,
                    message: format!("blocks nested more than {MAX_DEPTH} deep"),
                })
            }
            End::Open => Some(block(
                lexer,
                file,
                Some((&first.text, first.line)),
                depth + 1,
            )?),
            _ => None,
        };
        directives.push(Directive {
            name: first.text,
            args,
            block,
            place,
        });
    }
}
