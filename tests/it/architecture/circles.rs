//! No import circle inside a module: among the children of any module (each child with
//! everything under it), in the gateway's `src/` and in each crate under `crates/`, no
//! child imports another that imports it back, directly or around a longer loop. A
//! circle means neither side can be read, changed or moved without the other.
//!
//! A file's imports are the paths it names (`use` trees expanded) that start with
//! `crate`, `self`, `super` or a child module it declares, resolved to the deepest file
//! module they reach. Test code is left out: files named `tests.rs`, `props.rs` or
//! `loom.rs`, files under a `tests/` directory, and an inline `#[cfg(test)] mod` to the
//! end of its file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use super::{module_path, relative, rust_files, tokens, Token};

/// The source roots checked: the gateway's and each pure crate's.
const ROOTS: &[&str] = &[
    "src",
    "crates/limit/src",
    "crates/vars/src",
    "crates/nginx/src",
];

/// Files that only tests compile.
const TEST_FILES: &[&str] = &["tests.rs", "props.rs", "loom.rs"];

#[test]
fn no_module_imports_its_siblings_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut report = String::new();
    for dir in ROOTS {
        let files = Files::read(&root.join(dir));
        for circle in files.circles() {
            report.push_str(&circle);
        }
    }
    assert!(
        report.is_empty(),
        "import circles inside modules:\n{report}"
    );
}

#[test]
fn the_circle_check_sees_a_circle() {
    // Two siblings naming each other, one through a `use` group, one by a full path.
    let mut files = Files::default();
    let a = tokens("use super::b::{self, B};\nfn f() {}");
    let b =
        tokens("fn g() { crate::m::a::f(); }\n#[cfg(test)]\nmod tests { use super::super::c; }");
    files.add(vec!["m".into(), "a".into()], "m/a.rs", &a);
    files.add(vec!["m".into(), "b".into()], "m/b.rs", &b);
    files.add(vec!["m".into(), "c".into()], "m/c.rs", &[]);
    let circles = files.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].starts_with("  m: a -> b -> a"), "{}", circles[0]);
}

/// The file modules under one root and, for each, the file modules it imports (with the
/// place of one import of each).
#[derive(Default)]
struct Files {
    modules: BTreeSet<Vec<String>>,
    /// Each file module's source file and what it names.
    named: BTreeMap<Vec<String>, Named>,
}

/// What one file names: its paths out, unresolved (the path as written, its line), and
/// the child modules it declares.
struct Named {
    file: String,
    paths: Vec<(Vec<String>, usize)>,
    children: BTreeSet<String>,
}

impl Files {
    fn read(dir: &Path) -> Files {
        let mut files = Files::default();
        for file in rust_files(dir) {
            let rel = file.strip_prefix(dir).unwrap();
            let name = rel.file_name().unwrap().to_string_lossy();
            let in_tests = rel.iter().any(|part| part == "tests");
            if TEST_FILES.contains(&&*name) || in_tests || name == "main.rs" {
                continue;
            }
            let mut path = module_path(rel);
            if path.last().is_some_and(|last| last == "lib") {
                path.pop();
            }
            let tokens = tokens(&std::fs::read_to_string(&file).unwrap());
            files.add(path, &relative(&file), &tokens);
        }
        files
    }

    fn add(&mut self, module: Vec<String>, file: &str, tokens: &[Token]) {
        let tokens = before_tests(tokens);
        let children = declared_children(tokens);
        self.modules.insert(module.clone());
        let named = Named {
            file: file.to_owned(),
            paths: named_paths(tokens),
            children,
        };
        self.named.insert(module, named);
    }

    /// Each file module's imports of other file modules: (from, to) → `file:line`.
    fn edges(&self) -> BTreeMap<(Vec<String>, Vec<String>), String> {
        let mut edges = BTreeMap::new();
        for (module, named) in &self.named {
            for (path, line) in &named.paths {
                let Some(target) = self.resolve(module, &named.children, path) else {
                    continue;
                };
                if &target != module {
                    let place = format!("{}:{line}", named.file);
                    edges.entry((module.clone(), target)).or_insert(place);
                }
            }
        }
        edges
    }

    /// The deepest file module `path`, named in `module`, reaches.
    fn resolve(
        &self,
        module: &[String],
        children: &BTreeSet<String>,
        path: &[String],
    ) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut full: Vec<String> = match first.as_str() {
            "crate" => path[1..].to_vec(),
            "self" => [module, &path[1..]].concat(),
            "super" => {
                let climbs = path.iter().take_while(|part| *part == "super").count();
                let base = module.get(..module.len().checked_sub(climbs)?)?;
                [base, &path[climbs..]].concat()
            }
            child if children.contains(child) => [module, path].concat(),
            _ => return None,
        };
        while !full.is_empty() && !self.modules.contains(&full) {
            full.pop();
        }
        (!full.is_empty() || self.modules.contains(&full)).then_some(full)
    }

    /// One line per circle among the children of one module, with the imports on it.
    fn circles(&self) -> Vec<String> {
        let edges = self.edges();
        let parents: BTreeSet<&[String]> = self
            .modules
            .iter()
            .filter(|module| !module.is_empty())
            .map(|module| &module[..module.len() - 1])
            .collect();
        let mut found = Vec::new();
        for parent in parents {
            let kid = |module: &Vec<String>| {
                (module.len() > parent.len() && module.starts_with(parent))
                    .then(|| module[parent.len()].clone())
            };
            let mut siblings: BTreeMap<(String, String), &String> = BTreeMap::new();
            for ((from, to), place) in &edges {
                if let (Some(a), Some(b)) = (kid(from), kid(to)) {
                    if a != b {
                        siblings.entry((a, b)).or_insert(place);
                    }
                }
            }
            for circle in cycles(&siblings) {
                let name = if parent.is_empty() {
                    "(root)".to_owned()
                } else {
                    parent.join("::")
                };
                let mut text = format!("  {name}: {} -> {}\n", circle.join(" -> "), circle[0]);
                for (i, from) in circle.iter().enumerate() {
                    let to = &circle[(i + 1) % circle.len()];
                    let place = siblings[&(from.clone(), to.clone())];
                    let _ = writeln!(text, "    {from} -> {to}: {place}");
                }
                found.push(text);
            }
        }
        found
    }
}

/// A cycle through each strongly connected set of more than one node, found breadth
/// first from the smallest node not yet in one.
fn cycles(edges: &BTreeMap<(String, String), &String>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut found = Vec::new();
    for start in nodes {
        if seen.contains(start) {
            continue;
        }
        let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
        let mut frontier = vec![start];
        'search: while !frontier.is_empty() {
            let mut next = Vec::new();
            for node in frontier {
                for (_, to) in edges.keys().filter(|(from, _)| from == node) {
                    if to == start {
                        let mut cycle = vec![node.clone()];
                        while let Some(previous) = came_from.get(cycle.last().unwrap()) {
                            cycle.push((*previous).clone());
                        }
                        cycle.reverse();
                        seen.extend(cycle.iter().cloned());
                        found.push(cycle);
                        break 'search;
                    }
                    if !came_from.contains_key(to) {
                        came_from.insert(to, node);
                        next.push(to);
                    }
                }
            }
            frontier = next;
        }
    }
    found
}

/// The tokens before an inline `#[cfg(test)] mod name {`, which holds tests to the end
/// of the file by this codebase's habit.
fn before_tests(tokens: &[Token]) -> &[Token] {
    let texts: Vec<&str> = tokens.iter().map(|token| token.text.as_str()).collect();
    let marker = ["#", "[", "cfg", "(", "test", ")", "]", "mod"];
    let end = (0..texts.len()).find(|&i| {
        texts[i..].starts_with(&marker) && texts.get(i + marker.len() + 1) == Some(&"{")
    });
    &tokens[..end.unwrap_or(tokens.len())]
}

/// The child modules a file declares in files of their own (`mod name;`).
fn declared_children(tokens: &[Token]) -> BTreeSet<String> {
    let texts: Vec<&str> = tokens.iter().map(|token| token.text.as_str()).collect();
    texts
        .windows(3)
        .filter(|window| window[0] == "mod" && window[2] == ";")
        .map(|window| window[1].to_owned())
        .collect()
}

/// Every path of two or more segments the tokens name, `use` groups expanded, with the
/// line it is on.
fn named_paths(tokens: &[Token]) -> Vec<(Vec<String>, usize)> {
    let mut found = Vec::new();
    for i in 0..tokens.len() {
        let starts = is_ident(&tokens[i].text)
            && (i == 0 || tokens[i - 1].text != "::")
            && tokens.get(i + 1).is_some_and(|t| t.text == "::");
        if starts {
            path_at(tokens, i, Vec::new(), &mut found);
        }
    }
    found
}

/// The paths of the use tree at `at`, each after `prefix`.
fn path_at(
    tokens: &[Token],
    mut at: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, usize)>,
) {
    let line = tokens[at].line;
    while let Some(token) = tokens.get(at).filter(|t| is_ident(&t.text)) {
        prefix.push(token.text.clone());
        if tokens.get(at + 1).is_none_or(|t| t.text != "::") {
            break;
        }
        at += 2;
        if tokens.get(at).is_some_and(|t| t.text == "{") {
            group_at(tokens, at, &prefix, out);
            return;
        }
    }
    out.push((prefix, line));
}

/// Each member of the `{ … }` group at `at`, after `prefix`.
fn group_at(tokens: &[Token], at: usize, prefix: &[String], out: &mut Vec<(Vec<String>, usize)>) {
    let mut depth = 0;
    let mut member_start = true;
    for (i, token) in tokens.iter().enumerate().skip(at) {
        match token.text.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return;
                }
            }
            "," if depth == 1 => member_start = true,
            text if depth == 1 && member_start && is_ident(text) => {
                member_start = false;
                if text != "self" {
                    path_at(tokens, i, prefix.to_vec(), out);
                }
            }
            _ => {}
        }
    }
}

fn is_ident(text: &str) -> bool {
    text.starts_with(|c: char| c.is_alphabetic() || c == '_')
}
