use std::process::Command;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;
use proptest::prelude::*;

use super::*;
use crate::vars::MAX_CREDENTIALS as MAX_DECODED;

fn basic(text: &[u8]) -> Vec<u8> {
    let mut value = b"Basic ".to_vec();
    value.extend_from_slice(STANDARD.encode(text).as_bytes());
    value
}

fn pair(value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    credentials(value).map(|c| (c.user().to_vec(), c.password().to_vec()))
}

fn some(user: &str, password: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    Some((user.into(), password.into()))
}

#[test]
fn basic_credentials_are_decoded_and_split_at_the_first_colon() {
    assert_eq!(pair(b"Basic YWxpY2U6c2VjcmV0"), some("alice", "secret"));
    assert_eq!(pair(&basic(b"alice:pa:ss")), some("alice", "pa:ss"));
    assert_eq!(pair(&basic(b"alice:")), some("alice", ""));
    assert_eq!(pair(&basic(b"alice::")), some("alice", ":"));
    assert_eq!(pair(&basic("j\u{f6}rg:p w".as_bytes())), some("j\u{f6}rg", "p w"));
}

/// nginx compares `Basic ` without case and skips the spaces after it (spaces only).
#[test]
fn the_scheme_is_read_in_any_case_and_spaces_after_it_are_skipped() {
    for value in [
        "basic YWxpY2U6c2VjcmV0",
        "BASIC YWxpY2U6c2VjcmV0",
        "bAsIc YWxpY2U6c2VjcmV0",
        "Basic      YWxpY2U6c2VjcmV0",
    ] {
        assert_eq!(pair(value.as_bytes()), some("alice", "secret"), "{value}");
    }
    for value in [
        "Basic\tYWxpY2U6c2VjcmV0",
        "Basic \tYWxpY2U6c2VjcmV0",
        "BasicYWxpY2U6c2VjcmV0",
        " Basic YWxpY2U6c2VjcmV0",
        "Bearer YWxpY2U6c2VjcmV0",
        "Basic YWxpY2U6c2VjcmV0 ",
    ] {
        assert_eq!(pair(value.as_bytes()), None, "{value:?}");
    }
}

/// `ngx_decode_base64`: padding optional, reading stops at the first `=`, the last
/// character's unused bits ignored.
#[test]
fn base64_is_read_as_leniently_as_nginx_reads_it() {
    for value in [
        "Basic Ym9iOnB3eA",
        "Basic Ym9iOnB3eA==",
        "Basic Ym9iOnB3eA=",
        "Basic Ym9iOnB3eA=garbage !!",
        "Basic Ym9iOnB3eB",
    ] {
        assert_eq!(pair(value.as_bytes()), some("bob", "pwx"), "{value}");
    }
}

#[test]
fn hostile_or_broken_credentials_are_declined() {
    let declined: &[&[u8]] = &[
        b"",
        b"Basic",
        b"Basic ",
        b"Basic      ",
        b"basic   xx",
        b"Basic =",
        b"Basic ====",
        b"Basic !!!!",
        b"Basic YWxp*2U6c2VjcmV0",
        b"Basic YWxpY2U6c2VjcmV0Z",
        b"Basic YWxpY2U",
        b"Basic OnNlY3JldA==",
        b"Basic \xff\xfe\xfd\xfc",
        b"Basic YWxp\0Y2U6c2VjcmV0",
    ];
    for value in declined {
        assert_eq!(pair(value), None, "{:?}", String::from_utf8_lossy(value));
    }
}

/// Bytes nothing can type still arrive as bytes: a NUL in the name or the password is kept
/// (and matches no entry), never cut at.
#[test]
fn nul_bytes_in_the_credentials_are_kept() {
    assert_eq!(
        pair(&basic(b"al\0ce:se\0cret")),
        Some((b"al\0ce".to_vec(), b"se\0cret".to_vec()))
    );
}

#[test]
fn credentials_decoding_to_more_than_4_kib_are_declined_before_decoding() {
    let at_limit = format!("u:{}", "p".repeat(MAX_DECODED - 2));
    assert!(credentials(&basic(at_limit.as_bytes())).is_some());
    let over = format!("u:{}", "p".repeat(MAX_DECODED - 1));
    assert_eq!(pair(&basic(over.as_bytes())), None);
    let mut huge = b"Basic ".to_vec();
    huge.resize(1 << 20, b'A');
    assert_eq!(pair(&huge), None);
}

#[test]
fn debug_shows_the_user_never_the_password() {
    let shown = format!("{:?}", credentials(&basic(b"alice:hunter2")).expect("valid"));
    assert!(shown.contains("alice") && !shown.contains("hunter2"), "{shown}");
}

proptest! {
    #[test]
    fn credentials_never_panic(value in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = credentials(&value);
        let mut prefixed = b"Basic ".to_vec();
        prefixed.extend_from_slice(&value);
        let _ = credentials(&prefixed);
    }

    #[test]
    fn credentials_round_trip(
        user in prop::collection::vec(any::<u8>().prop_filter("no colon", |&b| b != b':'), 1..24),
        password in prop::collection::vec(any::<u8>(), 0..24),
        padded in any::<bool>(),
    ) {
        let text = [user.as_slice(), b":", password.as_slice()].concat();
        let engine = if padded { &STANDARD } else { &STANDARD_NO_PAD };
        let value = format!("Basic {}", engine.encode(&text));
        let got = credentials(value.as_bytes()).expect("well-formed");
        prop_assert_eq!(got.user(), user.as_slice());
        prop_assert_eq!(got.password(), password.as_slice());
    }
}

const ALICE_APR1: &str = "alice:$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk/";
const BOB_SHA: &str = "bob:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=";

fn users(text: &str) -> Users {
    Users::parse(text.as_bytes()).unwrap_or_else(|bad| panic!("{bad:?}"))
}

#[test]
fn users_are_checked_against_their_own_entry() {
    let users = users(&format!("{ALICE_APR1}\n{BOB_SHA}\n"));
    assert_eq!(users.check(b"alice", b"secret"), Checked::Pass);
    assert_eq!(users.check(b"bob", b"secret"), Checked::Pass);
    assert_eq!(users.check(b"alice", b"Secret"), Checked::Mismatch);
    assert_eq!(users.check(b"bob", b""), Checked::Mismatch);
    assert_eq!(users.check(b"carol", b"secret"), Checked::NoSuchUser);
    assert_eq!(users.check(b"Alice", b"secret"), Checked::NoSuchUser);
    assert_eq!(users.check(b"", b"secret"), Checked::NoSuchUser);
}

/// nginx's line rules: `#` and CR lines and empty ones skipped, names untrimmed, the hash
/// ending at `:`, CR or LF, the first entry of a name winning.
#[test]
fn htpasswd_lines_are_read_as_nginx_reads_them() {
    let text = format!(
        "# comment: not a user\n\r\n\n{ALICE_APR1}:Alice Liddell\r\n \
         bob:{{PLAIN}}spaced\nbob:{{PLAIN}}first\nbob:{{PLAIN}}second\ncarol:{{PLAIN}}x\r\n\
         dave:{{PLAIN}}at the end without a newline"
    );
    let users = users(&text);
    assert_eq!(users.check(b"alice", b"secret"), Checked::Pass);
    assert_eq!(users.check(b" bob", b"spaced"), Checked::Pass);
    assert_eq!(users.check(b"bob", b"first"), Checked::Pass);
    assert_eq!(users.check(b"bob", b"second"), Checked::Mismatch);
    assert_eq!(users.check(b"carol", b"x"), Checked::Pass);
    assert_eq!(users.check(b"carol", b"x\r"), Checked::Mismatch);
    assert_eq!(users.check(b"dave", b"at the end without a newline"), Checked::Pass);
    assert_eq!(users.check(b"# comment", b" not a user"), Checked::NoSuchUser);
}

#[test]
fn every_refused_line_is_reported_with_its_number() {
    let text = "alice:$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk/\njust a name\n:{PLAIN}x\n\
                dan:ZJpRNehYYCLuc\neve:secret\nfay:\n";
    let bad = Users::parse(text.as_bytes()).expect_err("refused");
    let got: Vec<_> = bad.iter().map(|b| (b.line, b.error.clone())).collect();
    assert_eq!(
        got,
        [
            (2, LineError::NoColon),
            (3, LineError::EmptyUser),
            (4, LineError::Hash(HashError::Des)),
            (5, LineError::Hash(HashError::Plaintext)),
            (6, LineError::Hash(HashError::Empty)),
        ]
    );
    let bytes = Users::parse(b"gil:\xff\xfe\n").expect_err("not UTF-8");
    assert_eq!(bytes[0].error, LineError::Hash(HashError::Plaintext));
}

/// A user not in the table costs a verify of the kind most of the table has.
#[test]
fn an_unknown_user_is_verified_against_the_tables_most_common_kind() {
    let text = format!(
        "a:{{PLAIN}}x\n{BOB_SHA}\n{ALICE_APR1}\nb:$apr1$JxQN0cD7$szbyaFpHxt0sg20OmPuvu/\n"
    );
    let decoy = users(&text).decoy.expect("a decoy").work();
    assert_eq!(decoy, ("$apr1$", 0));
    let tie = users(&format!("{BOB_SHA}\n{ALICE_APR1}\n")).decoy.expect("a decoy");
    assert_eq!(tie.work(), ("{SHA}", 0), "the first kind among equals");
    assert!(users("# nobody\n").decoy.is_none());
    assert_eq!(users("").check(b"alice", b"secret"), Checked::NoSuchUser);
}

#[test]
fn the_challenge_names_the_realm_and_refuses_what_would_break_it() {
    assert_eq!(
        challenge("Admin area").expect("plain"),
        "Basic realm=\"Admin area\""
    );
    assert_eq!(challenge("").expect("empty"), "Basic realm=\"\"");
    assert_eq!(
        challenge("Zo\u{eb}").expect("UTF-8").as_bytes(),
        "Basic realm=\"Zo\u{eb}\"".as_bytes()
    );
    for (realm, bad) in [
        ("say \"hi\"", '"'),
        ("back\\slash", '\\'),
        ("two\r\nlines", '\r'),
        ("del\u{7f}", '\u{7f}'),
        ("nul\0", '\0'),
        ("c1\u{85}", '\u{85}'),
    ] {
        assert_eq!(challenge(realm), Err(RealmError(bad)), "{realm:?}");
    }
}

/// Lines made by the `htpasswd` on this machine (apache2-utils; .ci/run installs it), for a
/// password with a `:`, a space and a non-ASCII letter.
#[test]
fn lines_made_by_the_installed_htpasswd_are_verified_or_refused() {
    const PASSWORD: &str = "p:ss w\u{f6}rd";
    let run = |flags: &[&str]| {
        Command::new("htpasswd")
            .args(flags)
            .args(["user", PASSWORD])
            .output()
    };
    if run(&["-nb"]).is_err() {
        eprintln!("skipped: no htpasswd on PATH (apt-get install apache2-utils)");
        return;
    }
    let verified: &[&[&str]] = &[
        &["-nb"],
        &["-nbm"],
        &["-nbB"],
        &["-nbB", "-C", "4"],
        &["-nb2"],
        &["-nb2", "-r", "1000"],
        &["-nb5"],
        &["-nbs"],
    ];
    for flags in verified {
        let output = run(flags).expect("htpasswd runs");
        assert!(output.status.success(), "{flags:?}: {output:?}");
        let users = Users::parse(&output.stdout).unwrap_or_else(|bad| panic!("{flags:?}: {bad:?}"));
        assert_eq!(users.check(b"user", PASSWORD.as_bytes()), Checked::Pass, "{flags:?}");
        assert_eq!(users.check(b"user", b"p:ss word"), Checked::Mismatch, "{flags:?}");
    }
    for (flags, error) in [("-nbd", HashError::Des), ("-nbp", HashError::Plaintext)] {
        let output = run(&[flags]).expect("htpasswd runs");
        let bad = Users::parse(&output.stdout).expect_err(flags);
        assert_eq!(bad, [BadLine { line: 1, error: error.into() }], "{flags}");
    }
}
