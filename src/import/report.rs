//! What `tollgate import` says of each nginx directive: one line each, `FILE:LINE: NAME:`
//! and `exact`, `approx: <the difference>` or `unsupported: <what to do instead>`.

use std::fmt;

/// How a directive was translated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Answers as nginx does; the text, when there is one, says how (`Host` written).
    Exact(Option<String>),
    /// Translated, with this difference.
    Approx(String),
    /// Not translated (kept as a comment); what to do instead.
    Unsupported(String),
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The file as shown: relative to the main file's directory when under it.
    pub file: String,
    pub line: usize,
    /// The directive's name (`proxy_pass`).
    pub name: String,
    pub status: Status,
    /// Sorts the lines by file (in the order they were read), then line.
    pub(super) order: (usize, usize, usize),
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.name.as_str() {
            "" => "\"\"",
            name => name,
        };
        write!(f, "{}:{}: {name}: ", self.file, self.line)?;
        match &self.status {
            Status::Exact(None) => write!(f, "exact"),
            Status::Exact(Some(how)) => write!(f, "exact ({how})"),
            Status::Approx(difference) => write!(f, "approx: {difference}"),
            Status::Unsupported(instead) => write!(f, "unsupported: {instead}"),
        }
    }
}

/// Every directive's line, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub lines: Vec<Line>,
}

impl Report {
    /// The exit status of `tollgate import`: 0 when everything is exact or approx, 2
    /// when something is unsupported (1 is a file nginx would refuse).
    pub fn exit_code(&self) -> u8 {
        match self.unsupported() {
            0 => 0,
            _ => 2,
        }
    }

    /// How many lines are unsupported.
    pub fn unsupported(&self) -> usize {
        self.count(|s| matches!(s, Status::Unsupported(_)))
    }

    /// How many lines are approx.
    pub fn approx(&self) -> usize {
        self.count(|s| matches!(s, Status::Approx(_)))
    }

    /// How many lines are exact.
    pub fn exact(&self) -> usize {
        self.count(|s| matches!(s, Status::Exact(_)))
    }

    fn count(&self, which: impl Fn(&Status) -> bool) -> usize {
        self.lines.iter().filter(|l| which(&l.status)).count()
    }

    /// The line of the directive at `file:line` named `name`, if any.
    pub fn find(&self, file: &str, line: usize, name: &str) -> Option<&Line> {
        self.lines
            .iter()
            .find(|l| l.file == file && l.line == line && l.name == name)
    }

    pub(super) fn sort(&mut self) {
        self.lines.sort_by_key(|l| l.order);
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        write!(
            f,
            "{} directives: {} exact, {} approx, {} unsupported",
            self.lines.len(),
            self.exact(),
            self.approx(),
            self.unsupported()
        )
    }
}
