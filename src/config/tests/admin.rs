//! `[admin]`'s token: inline or from a file, checked, never printed, and `protect_reads`.

use super::*;

const ADMIN: &str = "[admin]\nlisten = \"127.0.0.1:9901\"\n";
const TOKEN: &str = "3f9c2a7e5b1d4c8a9e0f";

#[test]
fn a_token_is_read_inline_or_from_a_file() {
    let config = parse(&format!("{SERVER}{ADMIN}token = \"{TOKEN}\"\n"));
    let admin = config.admin.expect("[admin]");
    assert_eq!(
        admin.token.as_ref().map(AdminToken::as_bytes),
        Some(TOKEN.as_bytes())
    );
    assert!(!admin.protect_reads);
    // Never printed, in a debug dump of the config either.
    assert!(!format!("{admin:?}").contains(TOKEN));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("admin.token"), format!("{TOKEN}\r\n")).unwrap();
    let text = format!("{SERVER}{ADMIN}token_file = \"admin.token\"\nprotect_reads = true\n");
    let config = load_at(&text, &dir.path().join("gateway.toml")).unwrap();
    let admin = config.admin.expect("[admin]");
    assert_eq!(
        admin.token.as_ref().map(AdminToken::as_bytes),
        Some(TOKEN.as_bytes())
    );
    assert!(admin.protect_reads);
}

#[test]
fn a_token_must_be_long_and_visible_and_come_from_one_place() {
    for token in [
        "short",
        "has a space in it 123",
        "tab\tinside-the-token-1234",
    ] {
        let (line, _, message) = error(&format!("{ADMIN}token = \"{token}\"\n"));
        assert_eq!(line, 5, "{message}");
        assert!(
            message.contains("16 to 1024 visible ASCII"),
            "{token}: {message}"
        );
    }
    let (_, _, message) = error(&format!("{ADMIN}token = \"{TOKEN}\"\ntoken_file = \"t\"\n"));
    assert!(message.contains("exclude each other"), "{message}");
    let (_, _, message) = error(&format!("{ADMIN}token_file = \"/nonexistent/t\"\n"));
    assert!(
        message.starts_with("cannot read the admin token file /nonexistent/t"),
        "{message}"
    );
    let (_, _, message) = error(&format!("{ADMIN}protect_reads = true\n"));
    assert!(message.contains("needs `token`"), "{message}");
    let (line, _, message) = error(&format!("{ADMIN}explain = true\n"));
    assert_eq!(line, 5);
    assert!(message.starts_with("`explain` needs a token"), "{message}");
    let config = parse(&format!("{SERVER}{ADMIN}token = \"{TOKEN}\"\nexplain = true\n"));
    assert!(config.admin.expect("[admin]").explain);
}

#[test]
fn a_token_from_the_environment_is_checked_as_one_written() {
    use super::super::admin::{from_env, FromEnv};
    let token = from_env("TOLLGATE_ADMIN_TOKEN", Some(TOKEN.into()));
    let FromEnv::Token(token) = token else {
        panic!("{token:?}")
    };
    assert_eq!(token.as_bytes(), TOKEN.as_bytes());
    for short in ["short", "has a space in it 123"] {
        let FromEnv::Invalid(message) = from_env("T", Some(short.into())) else {
            panic!("{short}")
        };
        assert!(message.starts_with("T: an admin token must be"), "{message}");
    }
    for name in ["", "1ST", "A-B", "A B", "$HOME"] {
        let FromEnv::Invalid(message) = from_env(name, Some(TOKEN.into())) else {
            panic!("{name:?}")
        };
        assert!(message.starts_with("invalid token_env"), "{message}");
    }
}

#[test]
fn an_unset_token_variable_is_a_warning_and_no_token() {
    use super::super::admin::{from_env, FromEnv};
    for value in [None, Some(String::new().into())] {
        let FromEnv::Unset(warning) = from_env("TOLLGATE_ADMIN_TOKEN", value) else {
            panic!("unset")
        };
        assert!(
            warning.contains("TOLLGATE_ADMIN_TOKEN is not set")
                && warning.contains("refuses every call that changes state"),
            "{warning}"
        );
    }
    // A variable no test sets: the file loads, with no token and the warning at the key.
    let name = "TOLLGATE_TEST_TOKEN_NEVER_SET_4F1C";
    let config = parse(&format!("{SERVER}{ADMIN}token_env = \"{name}\"\n"));
    assert_eq!(config.admin.as_ref().expect("[admin]").token, None);
    let warnings = config.warnings().join("\n");
    assert!(
        warnings.contains(":5:13: `token_env`: TOLLGATE_TEST_TOKEN_NEVER_SET_4F1C is not set"),
        "{warnings}"
    );
    // ... and protect_reads cannot stand on it.
    let (_, _, message) = error(&format!(
        "{ADMIN}token_env = \"{name}\"\nprotect_reads = true\n"
    ));
    assert!(message.contains("names a variable that is not set"), "{message}");
    let (line, _, message) = error(&format!(
        "{ADMIN}token = \"{TOKEN}\"\ntoken_env = \"{name}\"\n"
    ));
    assert_eq!(line, 6);
    assert!(message.contains("exclude each other"), "{message}");
}
