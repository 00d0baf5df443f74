//! The reader against nginx's rules: words, quotes, escapes, comments, blocks, the line
//! of each directive, includes with globs, and the errors nginx gives (with the line).

use std::path::Path;

use proptest::prelude::*;

use crate::glob::matches;
use crate::{read, Config, Directive, Memory};

fn parse(text: &str) -> Config {
    read(
        &Memory::new().with("/etc/nginx/nginx.conf", text),
        Path::new("/etc/nginx/nginx.conf"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn error(text: &str) -> String {
    read(&Memory::new().with("/n.conf", text), Path::new("/n.conf"))
        .expect_err("an error")
        .to_string()
}

/// `name arg arg` for each directive, nested ones indented.
fn outline(directives: &[Directive], depth: usize, out: &mut Vec<String>) {
    for d in directives {
        let mut line = "  ".repeat(depth) + &d.name;
        for arg in &d.args {
            line.push_str(&format!(" [{arg}]"));
        }
        out.push(format!("{}:{line}", d.place.line));
        if let Some(block) = &d.block {
            outline(block, depth + 1, out);
        }
    }
}

fn lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    outline(&parse(text).directives, 0, &mut out);
    out
}

#[test]
fn words_blocks_and_the_line_of_each_directive() {
    let text = "user nginx;\nhttp {\n  server {\n    listen 80 default_server;\n    location / { return 200; }\n  }\n}\n";
    assert_eq!(
        lines(text),
        [
            "1:user [nginx]",
            "2:http",
            "3:  server",
            "4:    listen [80] [default_server]",
            "5:    location [/]",
            "5:      return [200]",
        ]
    );
}

#[test]
fn quotes_and_escapes_as_nginx_resolves_them() {
    let text = r#"a "two words" 'single "q"' "esc \" \\ \n \x" plain\;semi;"#;
    assert_eq!(
        lines(text),
        [r#"1:a [two words] [single "q"] [esc " \ 
 \x] [plain\;semi]"#]
    );
}

#[test]
fn comments_only_where_a_word_starts() {
    assert_eq!(
        lines("a b#c; # all this\n# and this\nd;"),
        ["1:a [b#c]", "3:d"]
    );
}

#[test]
fn braces_of_variables_and_closing_braces_stay_in_words() {
    assert_eq!(
        lines("set $x ${host}a}; add_header X '${y}';"),
        ["1:set [$x] [${host}a}]", "1:add_header [X] [${y}]"]
    );
}

#[test]
fn a_word_spanning_lines_is_placed_at_its_start() {
    assert_eq!(
        lines("\n\nlog_format main\n  'a'\n  'b';"),
        ["3:log_format [main] [a] [b]"]
    );
}

#[test]
fn errors_name_the_line_and_what_is_wrong() {
    assert_eq!(
        error("http {\n  server {\n}\n"),
        "/n.conf:1: the \"http\" block opened here has no \"}\": the file ends first"
    );
    assert_eq!(
        error("a;\n}\n"),
        "/n.conf:2: unexpected \"}\": no block is open here"
    );
    assert_eq!(
        error("a \"open\n\n"),
        "/n.conf:1: unterminated \"-quoted string: no closing \" before the end of the file"
    );
    assert_eq!(
        error("http {\n listen 80\n}\n"),
        "/n.conf:3: unexpected \"}\": directive \"listen\" (line 2) has no \";\" before it"
    );
    assert_eq!(
        error("a b"),
        "/n.conf:1: directive \"a\" has no \";\": the file ends first"
    );
    assert_eq!(
        error("\n;"),
        "/n.conf:2: unexpected \";\": no directive name before it"
    );
    assert_eq!(
        error("a \"b\"c;"),
        "/n.conf:1: unexpected \"c\" after a quoted string: expected a space, \";\" or \"{\""
    );
    assert!(error(&"a{".repeat(100)).contains("nested more than"));
}

#[test]
fn include_reads_relative_to_the_main_file_and_globs_in_order() {
    let files = Memory::new()
        .with(
            "/etc/nginx/nginx.conf",
            "http {\n include conf.d/*.conf;\n include mime.types;\n}\n",
        )
        .with("/etc/nginx/conf.d/b.conf", "server { listen 81; }\n")
        .with("/etc/nginx/conf.d/a.conf", "\nserver { listen 80; }\n")
        .with("/etc/nginx/conf.d/.hidden.conf", "broken {")
        .with("/etc/nginx/mime.types", "types { text/html html; }\n");
    let config = read(&files, Path::new("/etc/nginx/nginx.conf")).unwrap();
    let mut out = Vec::new();
    outline(&config.directives, 0, &mut out);
    assert_eq!(
        out,
        [
            "1:http",
            "2:  include [conf.d/*.conf]",
            "2:  server",
            "2:    listen [80]",
            "1:  server",
            "1:    listen [81]",
            "3:  include [mime.types]",
            "1:  types",
            "1:    text/html [html]",
        ]
    );
    let paths: Vec<_> = config
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "/etc/nginx/nginx.conf",
            "/etc/nginx/conf.d/a.conf",
            "/etc/nginx/conf.d/b.conf",
            "/etc/nginx/mime.types"
        ]
    );
    assert_eq!(config.includes[0].files, [1, 2]);
    assert_eq!(
        config.path(config.directives[0].block.as_ref().unwrap()[1].place),
        Path::new("/etc/nginx/conf.d/a.conf")
    );
}

#[test]
fn include_problems_are_kept_and_the_rest_is_read() {
    let files = Memory::new()
        .with(
            "/n.conf",
            "include missing.conf;\ninclude none/*.conf;\ninclude self.conf;\nafter;\n",
        )
        .with("/self.conf", "include self.conf;\ninner;\n");
    let config = read(&files, Path::new("/n.conf")).unwrap();
    let problems: Vec<_> = config
        .includes
        .iter()
        .flat_map(|i| i.problems.clone())
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("cannot read /missing.conf"),
        "{problems:?}"
    );
    assert!(problems[1].contains("an include loop"), "{problems:?}");
    let names: Vec<_> = config.directives.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["include", "include", "include", "include", "inner", "after"]
    );
}

#[test]
fn an_error_in_an_included_file_names_that_file() {
    let files = Memory::new()
        .with("/n.conf", "include site.conf;\n")
        .with("/site.conf", "server {\n\n");
    let err = read(&files, Path::new("/n.conf")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/site.conf:1: the \"server\" block opened here has no \"}\": the file ends first"
    );
}

#[test]
fn includes_that_fan_out_stop_at_the_bound() {
    let mut files = Memory::new().with("/n.conf", "include f0.conf;\ninclude f0.conf;\n");
    for i in 0..30 {
        let text = format!("include f{0}.conf;\ninclude f{0}.conf;\n", i + 1);
        files = files.with(format!("/f{i}.conf"), text);
    }
    let config = read(&files, Path::new("/n.conf")).unwrap();
    assert!(config.files.len() <= crate::include::MAX_FILES);
    assert!(config.includes.iter().any(|i| !i.problems.is_empty()));
}

#[test]
fn glob_components_match_as_fnmatch_does() {
    assert!(matches(b"*.conf", b"a.conf"));
    assert!(!matches(b"*.conf", b".a.conf"));
    assert!(matches(b".*", b".a"));
    assert!(matches(b"s?te[0-9][!x]", b"site1y"));
    assert!(!matches(b"s?te[0-9][!x]", b"site1x"));
    assert!(matches(b"a[b", b"a[b"));
    assert!(matches(b"a\\*", b"a*"));
    assert!(!matches(b"a\\*", b"ab"));
    assert!(matches(b"*a*b*c*", b"xxaxxbxxc"));
    assert!(!matches(b"*a*b*c*d", b"xxaxxbxxc"));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let files = Memory::new().with("/n.conf", bytes.clone()).with("/i.conf", bytes);
        let _ = read(&files, Path::new("/n.conf"));
    }

    #[test]
    fn nginx_like_text_never_panics(text in "([a-z ;{}#'\"\\\\$\n]|include i.conf;){0,200}") {
        let files = Memory::new().with("/n.conf", text.clone()).with("/i.conf", text);
        let _ = read(&files, Path::new("/n.conf"));
    }

    #[test]
    fn written_words_read_back(words in proptest::collection::vec("[a-z$/{}'\" ;#\\\\]{1,8}", 1..6)) {
        // Each word written double-quoted with nginx's escapes reads back as itself.
        let mut text = String::new();
        for word in &words {
            text.push('"');
            for c in word.chars() {
                if c == '"' || c == '\\' { text.push('\\'); }
                text.push(c);
            }
            text.push_str("\" ");
        }
        text.push_str(";\n");
        let config = parse(&text);
        let d = &config.directives[0];
        let mut read: Vec<String> = vec![d.name.clone()];
        read.extend(d.args.clone());
        prop_assert_eq!(read, words);
    }
}
