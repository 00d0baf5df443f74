//! The layering `docs/architecture.md` describes, checked on the source: no cycle between
//! the crate's top-level modules, none of the imports the layering forbids, and no clock
//! read inside the limiter. A failure names the file and line of each offending path.
//!
//! The source is read as tokens (comments, strings and character literals skipped), and
//! every path that leaves its own top-level module counts: `crate::x`, the members of
//! `crate::{x, y}`, and `super::` chains that climb to the crate root.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// No import circle inside a module (among siblings), in src/ and each pure crate.
mod circles;
// The pure crates under crates/ list nothing of the runtime in their Cargo.toml.
mod crates;

/// The pure core: it imports nothing but itself. (`vars` is a crate of its own below it,
/// `crates/vars`, whose Cargo.toml keeps it pure.)
const CORE: &[&str] = &["routing", "access"];

/// What `config` must not import: it turns text into values and knows nothing of how
/// they run.
const NOT_FROM_CONFIG: &[&str] = &[
    "snapshot",
    "proxy",
    "upstream",
    "admission",
    "shared",
    "server",
    "admin",
    "metrics",
    "log",
    "state",
];

/// What the request path (`proxy`, `upstream`, and the `admission` and `shared` layers
/// the limit phase calls) must not import: they serve one request with the generation
/// they are handed, and never reach for the gateway around them.
const NOT_FROM_PIPELINE: &[&str] = &["snapshot", "server", "admin", "state"];

/// What `wire` must not import: it holds what both sides of the gateway speak (HTTP/1.1
/// codec parts, the bodies that cross it), and knows neither side, the request path's
/// layers nor the gateway.
const NOT_FROM_WIRE: &[&str] = &[
    "server",
    "upstream",
    "proxy",
    "admission",
    "shared",
    "snapshot",
    "admin",
    "state",
];

/// Modules only tests use (generators for property tests): any module's tests may use
/// them.
const TEST_ONLY: &[&str] = &["props"];

/// Calls that read a clock, which nothing in the pure crates (`crates/limit`,
/// `crates/vars`, `crates/nginx`) may make.
const CLOCK_READS: &[[&str; 2]] = &[["Instant", "now"], ["SystemTime", "now"]];

#[test]
fn top_level_modules_form_no_cycle() {
    let graph = Graph::of_crate();
    let cycles = graph.cycles();
    assert!(
        cycles.is_empty(),
        "cycles between top-level modules:\n{}",
        cycles
            .iter()
            .map(|cycle| graph.describe_cycle(cycle))
            .collect::<String>()
    );
}

#[test]
fn the_core_config_and_pipeline_import_only_what_the_layering_allows() {
    let graph = Graph::of_crate();
    let mut report = String::new();
    for ((from, to), places) in &graph.edges {
        if let Some(rule) = forbidden(from, to) {
            let _ = writeln!(report, "{from} -> {to}: {rule}");
            for place in places {
                let _ = writeln!(report, "    {place}");
            }
        }
    }
    assert!(report.is_empty(), "forbidden imports:\n{report}");
}

#[test]
fn nothing_in_the_pure_crates_reads_a_clock() {
    let mut report = String::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates =
        ["crates/limit/src", "crates/vars/src", "crates/nginx/src"].map(|dir| root.join(dir));
    for file in crates.iter().flat_map(|dir| rust_files(dir)) {
        let tokens = tokens(&std::fs::read_to_string(&file).unwrap());
        for window in tokens.windows(3) {
            let [a, colons, b] = window else { continue };
            if colons.text == "::" && CLOCK_READS.contains(&[a.text.as_str(), b.text.as_str()]) {
                let _ = writeln!(
                    report,
                    "    {}:{}: {}::{}",
                    relative(&file),
                    a.line,
                    a.text,
                    b.text
                );
            }
        }
    }
    assert!(
        report.is_empty(),
        "the limiter reads a clock (its callers must pass the time in):\n{report}"
    );
}

/// The checker itself finds imports: a scanner that found nothing would pass the tests
/// above whatever the code says.
#[test]
fn the_checker_sees_the_imports_that_are_there() {
    let graph = Graph::of_crate();
    for (from, to) in [
        ("server", "proxy"),
        ("proxy", "admission"),
        ("snapshot", "config"),
    ] {
        assert!(
            graph.edges.contains_key(&(from.to_owned(), to.to_owned())),
            "{from} -> {to} not found; found: {:?}",
            graph.edges.keys().collect::<Vec<_>>()
        );
    }
    let sample = "use crate::{a::B, c};\nfn f() { super::super::d::e(); let s = \"crate::x\"; }\n// crate::y\n";
    let found: Vec<(String, usize)> = paths_out(&tokens(sample), 2)
        .into_iter()
        .map(|(module, token)| (module, token.line))
        .collect();
    assert_eq!(
        found,
        [
            ("a".to_owned(), 1),
            ("c".to_owned(), 1),
            ("d".to_owned(), 2)
        ]
    );
}

/// Why `from` may not import `to`, if it may not.
fn forbidden(from: &str, to: &str) -> Option<&'static str> {
    if TEST_ONLY.contains(&to) {
        return None;
    }
    if CORE.contains(&from) && !CORE.contains(&to) {
        return Some("the pure core (routing, access; the limiter and the variables are crates of their own) imports only itself");
    }
    if from == "config" && NOT_FROM_CONFIG.contains(&to) {
        return Some("config produces values; it knows nothing of the runtime");
    }
    if matches!(from, "proxy" | "upstream" | "admission" | "shared")
        && NOT_FROM_PIPELINE.contains(&to)
    {
        return Some("the pipeline is handed its generation; it does not reach for the gateway");
    }
    if from == "wire" && NOT_FROM_WIRE.contains(&to) {
        return Some("wire is what both sides speak; it knows neither side");
    }
    None
}

/// The top-level modules and, for each import from one into another, where it is made.
struct Graph {
    edges: BTreeMap<(String, String), Vec<String>>,
}

impl Graph {
    fn of_crate() -> Graph {
        let src = src();
        let modules = top_level_modules(&src);
        let mut edges: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for file in rust_files(&src) {
            let rel = file.strip_prefix(&src).unwrap();
            let path = module_path(rel);
            let Some(from) = path.first().filter(|m| modules.contains(*m)) else {
                continue; // lib.rs, main.rs
            };
            let tokens = tokens(&std::fs::read_to_string(&file).unwrap());
            for (to, token) in paths_out(&tokens, path.len()) {
                if &to != from && modules.contains(&to) {
                    let place = format!("{}:{}", relative(&file), token.line);
                    edges.entry((from.clone(), to)).or_default().push(place);
                }
            }
        }
        Graph { edges }
    }

    /// Each strongly connected set of more than one module, as a cycle through it.
    fn cycles(&self) -> Vec<Vec<String>> {
        let nodes: BTreeSet<&String> = self.edges.keys().flat_map(|(a, b)| [a, b]).collect();
        let mut seen = BTreeSet::new();
        let mut cycles = Vec::new();
        for start in nodes {
            if seen.contains(start) {
                continue;
            }
            if let Some(cycle) = self.cycle_through(start) {
                seen.extend(cycle.iter().cloned());
                cycles.push(cycle);
            }
        }
        cycles
    }

    /// A shortest path from `start` back to itself, if there is one (breadth first).
    fn cycle_through(&self, start: &str) -> Option<Vec<String>> {
        let mut came_from: BTreeMap<String, String> = BTreeMap::new();
        let mut frontier = vec![start.to_owned()];
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for node in frontier {
                for (_, to) in self.edges.keys().filter(|(from, _)| *from == node) {
                    if to == start {
                        let mut cycle = vec![node.clone()];
                        while let Some(previous) = came_from.get(cycle.last().unwrap()) {
                            cycle.push(previous.clone());
                        }
                        cycle.reverse();
                        return Some(cycle);
                    }
                    if !came_from.contains_key(to) {
                        came_from.insert(to.clone(), node.clone());
                        next.push(to.clone());
                    }
                }
            }
            frontier = next;
        }
        None
    }

    fn describe_cycle(&self, cycle: &[String]) -> String {
        let mut text = format!("  {} -> {}\n", cycle.join(" -> "), cycle[0]);
        for (i, from) in cycle.iter().enumerate() {
            let to = &cycle[(i + 1) % cycle.len()];
            let places = &self.edges[&(from.clone(), to.clone())];
            let _ = writeln!(text, "    {from} -> {to}: {}", places.join(", "));
        }
        text
    }
}

/// The top-level modules a path inside a file of module depth `depth` names, with the
/// token that names each: `crate::m`, each member `m` of `crate::{m, ...}`, and
/// `super::` chains that climb `depth` levels (inline `mod x { }` blocks add a level).
fn paths_out(tokens: &[Token], depth: usize) -> Vec<(String, &Token)> {
    let mut found = Vec::new();
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut braces = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let text = tokens[i].text.as_str();
        match text {
            "{" => braces += 1,
            "}" => {
                braces = braces.saturating_sub(1);
                if inline_mods.last() == Some(&braces) {
                    inline_mods.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t.text == "{") => {
                inline_mods.push(braces);
            }
            _ => {}
        }
        let root_at = if text == "crate" {
            Some(i + 1)
        } else if text == "super" && (i == 0 || tokens[i - 1].text != "::") {
            let mut j = i;
            let mut climbs = 0;
            while tokens.get(j).is_some_and(|t| t.text == "super")
                && tokens.get(j + 1).is_some_and(|t| t.text == "::")
            {
                climbs += 1;
                j += 2;
            }
            (climbs == depth + inline_mods.len()).then(|| j - 1)
        } else {
            None
        };
        if let Some(colons) = root_at {
            if tokens.get(colons).is_some_and(|t| t.text == "::") {
                found.extend(members(tokens, colons + 1));
            }
        }
        i += 1;
    }
    found
}

/// The module names at `at`: one identifier, or the first identifier of each member of
/// a `{ ... }` group.
fn members(tokens: &[Token], at: usize) -> Vec<(String, &Token)> {
    let Some(first) = tokens.get(at) else {
        return Vec::new();
    };
    if first.text != "{" {
        return vec![(first.text.clone(), first)];
    }
    let mut found = Vec::new();
    let mut depth = 0;
    let mut expect_member = true;
    for token in &tokens[at..] {
        match token.text.as_str() {
            "{" => {
                depth += 1;
                expect_member = depth == 1;
            }
            "}" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            "," if depth == 1 => expect_member = true,
            name if expect_member && depth == 1 => {
                if name != "self" {
                    found.push((name.to_owned(), token));
                }
                expect_member = false;
            }
            _ => {}
        }
    }
    found
}

/// One identifier, `::`, or punctuation character, and the line it is on.
#[derive(Debug)]
struct Token {
    text: String,
    line: usize,
}

/// Rust source as tokens, with comments, strings and character literals left out.
fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    let count_lines =
        |from: usize, to: usize| chars[from..to].iter().filter(|c| **c == '\n').count();
    while i < chars.len() {
        let c = chars[i];
        let rest = |k: usize| chars.get(i + k).copied();
        let start = i;
        if c == '/' && rest(1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && rest(1) == Some('*') {
            i = block_comment_end(&chars, i);
        } else if c == '"' || (c == 'b' && rest(1) == Some('"')) {
            i = string_end(&chars, if c == 'b' { i + 1 } else { i });
        } else if (c == 'r' || (c == 'b' && rest(1) == Some('r')))
            && raw_string_start(&chars, if c == 'b' { i + 1 } else { i }).is_some()
        {
            let from = if c == 'b' { i + 1 } else { i };
            i = raw_string_end(&chars, from);
        } else if c == '\'' {
            i = char_literal_end(&chars, i).unwrap_or(i + 1);
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token {
                text: chars[start..i].iter().collect(),
                line,
            });
        } else if c == ':' && rest(1) == Some(':') {
            tokens.push(Token {
                text: "::".to_owned(),
                line,
            });
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(Token {
                    text: c.to_string(),
                    line,
                });
            }
            i += 1;
        }
        line += count_lines(start, i);
    }
    tokens
}

fn block_comment_end(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => {
                depth += 1;
                i += 2;
            }
            ('*', '/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    chars.len()
}

/// Just past the string that opens at `i` (a `"`).
fn string_end(chars: &[char], mut i: usize) -> usize {
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// The number of `#`s of a raw string that opens at `i` (an `r`), if one does.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
    (chars.get(i + 1 + hashes) == Some(&'"')).then_some(hashes)
}

fn raw_string_end(chars: &[char], i: usize) -> usize {
    let hashes = raw_string_start(chars, i).unwrap_or(0);
    let mut j = i + hashes + 2;
    while j < chars.len() {
        if chars[j] == '"'
            && chars[j + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return j + 1 + hashes;
        }
        j += 1;
    }
    chars.len()
}

/// Just past the character literal that opens at `i`, or `None` for a lifetime.
fn char_literal_end(chars: &[char], i: usize) -> Option<usize> {
    match chars.get(i + 1)? {
        '\\' => {
            let close = chars[i + 2..].iter().position(|c| *c == '\'')?;
            Some(i + 3 + close)
        }
        _ if chars.get(i + 2) == Some(&'\'') => Some(i + 3),
        _ => None,
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn relative(file: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}

/// `src/x.rs` and `src/x/` for each top-level module `x`.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_dir(src)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_stem()?.to_str()?.to_owned();
            let is_module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
            (is_module && name != "lib" && name != "main").then_some(name)
        })
        .collect()
}

/// A file's module path from `src/`: `proxy/limit_phase.rs` is `[proxy, limit_phase]`,
/// `proxy/mod.rs` is `[proxy]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}
