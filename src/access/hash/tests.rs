//! Each format against lines Debian's `htpasswd` (apache2-utils 2.4.71, bookworm) wrote, and
//! the refusals. Runs against the installed `htpasswd` are in `basic/tests.rs`.

use super::{Hash, HashError};

/// `htpasswd -nb FLAGS alice secret` (bob's line: `-nbB -C 10 bob hunter2`), and the `$1$`,
/// `{SSHA}` and `{PLAIN}` lines nginx also reads (`openssl passwd -1`; the `{SSHA}` values
/// are base64(SHA-1("secret" ‖ salt) ‖ salt) for the salts `NaCl` and `8f 01 " salt!"`).
const REAL: &[(&str, &str, &str)] = &[
    ("default", "$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk/", "secret"),
    ("-m", "$apr1$JxQN0cD7$szbyaFpHxt0sg20OmPuvu/", "secret"),
    ("-m, a `:`", "$apr1$uUpwMXeB$NhzzwqHMKPNIc1lUIubfv/", "p@ss:w0rd"),
    (
        "-B",
        "$2y$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy",
        "secret",
    ),
    (
        "-B -C 10",
        "$2y$10$9xaBtNRGbvKFfxn4.bTZBuJnb1MbHcyZh3GR0UF6WI0bVc4wzVPHC",
        "hunter2",
    ),
    ("-s", "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=", "secret"),
    (
        "-2",
        "$5$aPXP/.F4lw3IjTZC$Y.oNuOSDJjkYHlYFqgcVCCm1Gyj1ZxiJ3Ue7oThZ6tB",
        "secret",
    ),
    (
        "-2 -r 10000",
        "$5$rounds=10000$X1CdSerQ6GFaeFKm$/y58HLBnwIBjMzUIvujifKXSJKo1XB0r2wzDLb/pnYA",
        "secret",
    ),
    (
        "-5",
        "$6$lZ07ZvEXKuuBXrc7$s3BsTpejJTbi7k.Dz4PlhOyqg.pq.G.qhoCbW9PuPKMk39wXBLNjT3tPOLYvAglfsAADDzsoPJ0k7H2SXYmJa.",
        "secret",
    ),
    ("openssl -1", "$1$5pZSV9va$azfrPr6af3Fc7dLblQXVa0", "password"),
    ("{SSHA}", "{SSHA}dj2lH1ocucmj5OQsjP6mQrVx6FhOYUNs", "secret"),
    (
        "{SSHA}, binary salt",
        "{SSHA}514E7NBzMs+KQ/NOXw4SZrS2uHuPASBzYWx0IQ==",
        "secret",
    ),
    ("{PLAIN}", "{PLAIN}secret", "secret"),
];

fn parsed(text: &str) -> Hash {
    Hash::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn every_format_verifies_the_password_htpasswd_was_given() {
    for (made_by, text, password) in REAL {
        assert!(parsed(text).verify(password.as_bytes()), "{made_by}: {text}");
    }
}

#[test]
fn every_format_refuses_a_wrong_password() {
    for (made_by, text, password) in REAL {
        let hash = parsed(text);
        for wrong in ["", "Secret", "secret ", "secre", "hunter3", "p@ss"] {
            assert!(!hash.verify(wrong.as_bytes()), "{made_by}: {wrong:?}");
        }
        let mut longer = password.as_bytes().to_vec();
        longer.push(0);
        assert!(!hash.verify(&longer), "{made_by}: a NUL after the password");
    }
}

/// bcrypt's variants differ in how old C libraries hashed non-ASCII bytes, not in the hash of
/// an ASCII password; `$2a$` and `$2b$` are read as `$2y$` is.
#[test]
fn bcrypt_2a_and_2b_read_as_2y() {
    let y = "$2y$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy";
    for prefix in ["$2a$", "$2b$"] {
        let text = y.replacen("$2y$", prefix, 1);
        assert!(parsed(&text).verify(b"secret"), "{prefix}");
    }
}

#[test]
fn what_htpasswd_writes_but_cannot_be_trusted_is_refused_with_its_reason() {
    let refused: &[(&str, HashError)] = &[
        ("", HashError::Empty),
        ("ZJpRNehYYCLuc", HashError::Des),
        ("secret", HashError::Plaintext),
        ("a longer plain password", HashError::Plaintext),
        (
            "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7",
            HashError::Yescrypt,
        ),
        (
            "$2x$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy",
            HashError::BuggyBcrypt,
        ),
        (
            "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$aGFzaA",
            HashError::Unknown("$argon2id$".into()),
        ),
        ("{MD5}Xr4ilOzQ4PCOq3aQ0qbuaQ==", HashError::Unknown("{MD5}".into())),
        ("{SSHA512}abc", HashError::Unknown("{SSHA512}".into())),
        ("$", HashError::Unknown("$".into())),
        ("{no end", HashError::Unknown("{".into())),
    ];
    for (text, reason) in refused {
        assert_eq!(Hash::parse(text).err().as_ref(), Some(reason), "{text:?}");
    }
}

/// A password kept as it is may start like a scheme: the error quotes only what looks like
/// a scheme's name.
#[test]
fn an_unknown_scheme_is_quoted_only_when_it_looks_like_one() {
    let error = Hash::parse("$my secret password$").expect_err("unknown");
    assert_eq!(error, HashError::Unknown("$".into()));
    assert!(!error.to_string().contains("secret"));
    assert!(!HashError::Plaintext.to_string().contains("hunter2"));
}

#[test]
fn malformed_hashes_of_known_schemes_are_refused() {
    let malformed = [
        "$apr1$v.PeWTmm",
        "$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk",
        "$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk/x",
        "$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHr!/",
        "$apr1$123456789$UaeMNTwzGyrJ1n60LqHrk/",
        "$1$5pZSV9va$azfrPr6af3Fc7dLblQXVa",
        "$2y$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7v",
        "$2y$5$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vyx",
        "$2y$03$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy",
        "$2y$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7v\u{e9}",
        "$5$aPXP/.F4lw3IjTZC$Y.oNuOSDJjkYHlYFqgcVCCm1Gyj1ZxiJ3Ue7oThZ6t",
        "$5$rounds=999$X1CdSerQ6GFaeFKm$/y58HLBnwIBjMzUIvujifKXSJKo1XB0r2wzDLb/pnYA",
        "$5$rounds=many$X1CdSerQ6GFaeFKm$/y58HLBnwIBjMzUIvujifKXSJKo1XB0r2wzDLb/pnYA",
        "$5$rounds=10000",
        "$5$aPXP/.F4lw3IjTZCx$Y.oNuOSDJjkYHlYFqgcVCCm1Gyj1ZxiJ3Ue7oThZ6tB",
        "$6$lZ07ZvEXKuuBXrc7$s3BsTpejJTbi7k",
        "$6$lZ07ZvEXKuuBXrc7",
        "{SHA}5en6G6MezRroT3XKqkdPOmY/Bf==",
        "{SHA}not base64!",
        "{SSHA}5en6G6MezRroT3XKqkdPOmY",
    ];
    for text in malformed {
        match Hash::parse(text) {
            Err(HashError::Malformed { .. }) => {}
            other => panic!("{text}: {other:?}"),
        }
    }
}

/// A cost a client could make the gateway pay per request is refused: bcrypt above
/// htpasswd's own 17, SHA-crypt above a million rounds.
#[test]
fn hashes_too_costly_to_verify_per_request_are_refused() {
    let bcrypt = "$2y$18$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy";
    let sha = "$6$rounds=1000001$lZ07ZvEXKuuBXrc7$s3BsTpejJTbi7k.Dz4PlhOyqg.pq.G.qhoCbW9PuPKMk39wXBLNjT3tPOLYvAglfsAADDzsoPJ0k7H2SXYmJa.";
    for text in [bcrypt, sha] {
        match Hash::parse(text) {
            Err(HashError::TooCostly { .. }) => {}
            other => panic!("{text}: {other:?}"),
        }
    }
    let highest = "$2y$17$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy";
    assert_eq!(parsed(highest).work(), ("bcrypt", 17));
}

#[test]
fn work_tells_scheme_and_cost() {
    let works: Vec<_> = REAL.iter().map(|(_, text, _)| parsed(text).work()).collect();
    assert_eq!(works[0], ("$apr1$", 0));
    assert_eq!(works[3], ("bcrypt", 5));
    assert_eq!(works[4], ("bcrypt", 10));
    assert_eq!(works[6], ("$5$", 5000));
    assert_eq!(works[7], ("$5$", 10000));
    assert_eq!(works[8], ("$6$", 5000));
}

/// A hash may be a password kept as it is: its debug form names the scheme only.
#[test]
fn debug_never_shows_the_hash() {
    let shown = format!("{:?}", parsed("{PLAIN}hunter2"));
    assert!(!shown.contains("hunter2"), "{shown}");
}
