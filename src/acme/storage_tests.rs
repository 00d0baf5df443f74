use super::*;

fn open() -> (tempfile::TempDir, Storage) {
    let root = tempfile::tempdir().unwrap();
    let storage = Storage::open(&root.path().join("acme"), "https://ca.test/dir").unwrap();
    (root, storage)
}

#[test]
fn a_directory_url_becomes_a_file_name() {
    let le = "https://acme-v02.api.letsencrypt.org/directory";
    assert_eq!(ca_dir_name(le), "acme-v02.api.letsencrypt.org-directory");
    assert_eq!(
        ca_dir_name("https://127.0.0.1:14000/dir"),
        "127.0.0.1_14000-dir"
    );
    assert_eq!(ca_dir_name("https://[::1]:1/a/../b"), "___1__1-a-..-b");
    assert_eq!(ca_dir_name("https://../"), "ca");
}

#[test]
fn storage_is_made_private_and_locks_exclude() {
    let (root, storage) = open();
    let mode = fs::metadata(root.path().join("acme"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
    let lock = storage.lock("example.com").unwrap().expect("free");
    assert!(storage.lock("example.com").unwrap().is_none());
    lock.refresh();
    assert!(storage.lock("example.com").unwrap().is_none());
    drop(lock);
    assert!(storage.lock("example.com").unwrap().is_some());
    assert!(storage.certificate("example.com").unwrap().is_none());
    assert!(storage.account().unwrap().is_none());
    // Names that are also file names of the CA's directory do not collide with it.
    assert!(storage.lock("account").unwrap().is_some());
    assert!(storage.lock("account.json").unwrap().is_some());
}

#[test]
fn a_lock_not_refreshed_is_taken_over_and_its_old_holder_leaves_the_new_one_alone() {
    let (_root, storage) = open();
    let old = storage.lock("example.com").unwrap().unwrap();
    let long_ago = SystemTime::now() - STALE_LOCK - Duration::from_secs(5);
    let file = OpenOptions::new().write(true).open(&old.path).unwrap();
    file.set_modified(long_ago).unwrap();
    let new = storage.lock("example.com").unwrap().expect("taken over");
    // The old holder finishing late does not remove the new holder's lock.
    drop(old);
    assert!(new.path.exists());
    assert!(storage.lock("example.com").unwrap().is_none());
}

#[test]
fn a_lock_of_a_process_gone_from_this_host_is_taken_over_at_once() {
    let (_root, storage) = open();
    let lock = storage.lock("example.com").unwrap().unwrap();
    // A pid no process has (above the kernel's pid_max).
    fs::write(&lock.path, format!("{} 99999999 x\n", host())).unwrap();
    assert!(storage.lock("example.com").unwrap().is_some());
    // On another host: only staleness tells.
    let other = storage.lock("other.com").unwrap().unwrap();
    fs::write(&other.path, "elsewhere 99999999 x\n").unwrap();
    assert!(storage.lock("other.com").unwrap().is_none());
}

#[test]
fn answers_are_shared_through_storage_and_names_are_checked() {
    let (_root, storage) = open();
    storage
        .publish_answer(Challenge::Http01, "tok-EN_1", "tok-EN_1.thumb")
        .unwrap();
    storage
        .publish_answer(Challenge::TlsAlpn01, "a.example.com", "x.y")
        .unwrap();
    assert!(storage
        .publish_answer(Challenge::Http01, "../x", "a")
        .is_err());
    assert!(storage
        .publish_answer(Challenge::Http01, ".hidden", "a")
        .is_err());
    let http = storage.answers(Challenge::Http01);
    assert_eq!(http, [("tok-EN_1".to_owned(), "tok-EN_1.thumb".to_owned())]);
    assert_eq!(storage.answers(Challenge::TlsAlpn01).len(), 1);
    storage.withdraw_answer(Challenge::Http01, "tok-EN_1");
    assert!(storage.answers(Challenge::Http01).is_empty());
}

#[test]
fn answers_read_are_bounded_in_number_size_and_kind() {
    let (_root, storage) = open();
    let dir = storage.dir.join("challenges").join("http-01");
    for i in 0..MOST_ANSWERS + 50 {
        storage
            .publish_answer(Challenge::Http01, &format!("t{i}"), "a")
            .unwrap();
    }
    fs::write(dir.join("big"), vec![b'a'; LONGEST_ANSWER as usize + 1]).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.join("link")).unwrap();
    fs::create_dir(dir.join("subdir")).unwrap();
    let answers = storage.answers(Challenge::Http01);
    assert_eq!(answers.len(), MOST_ANSWERS);
    assert!(answers.iter().all(|(key, _)| key.starts_with('t')));
}

#[test]
fn storage_under_a_file_is_a_clear_error() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("file");
    fs::write(&file, "").unwrap();
    let err = Storage::open(&file.join("acme"), "https://ca.test/dir").unwrap_err();
    assert!(err.to_string().contains("file/acme"), "{err}");
    assert!(err.to_string().contains("[acme] storage"), "{err}");
}

/// A certificate for `names` valid for `days` from now (negative: expired), and its key.
fn certificate(names: &[&str], days: i64) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(days);
    (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

#[test]
fn an_issued_certificate_is_checked_before_it_is_stored() {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let (chain, key) = certificate(&["example.com"], 90);
    assert!(check_issued("example.com", &chain, &key, now).is_ok());
    let err = check_issued("other.com", &chain, &key, now).unwrap_err();
    assert!(err.contains("not for other.com"), "{err}");
    let (expired, expired_key) = certificate(&["example.com"], -1);
    assert!(check_issued("example.com", &expired, &expired_key, now).is_err());
    let (_, other_key) = certificate(&["example.com"], 90);
    assert!(
        check_issued("example.com", &chain, &other_key, now).is_err(),
        "a key that does not match"
    );
    assert!(check_issued("example.com", "", &key, now).is_err());
    let long = chain.repeat(LONGEST_CHAIN + 1);
    let err = check_issued("example.com", &long, &key, now).unwrap_err();
    assert!(err.contains("chain of 6"), "{err}");
}

#[test]
fn a_stored_certificate_is_read_back_whole() {
    let (_root, storage) = open();
    let (chain, key) = certificate(&["example.com"], 90);
    storage
        .save_certificate("example.com", &chain, &key)
        .unwrap();
    let stored = storage.certificate("example.com").unwrap().unwrap();
    assert!(stored.certificate.covers("example.com"));
    assert!(stored.not_before < stored.certificate.not_after);
    let bundle = storage.bundle("example.com");
    assert_eq!(
        fs::metadata(&bundle).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Stored under another name's directory: refused.
    let other = storage.bundle("other.com");
    fs::create_dir_all(other.parent().unwrap()).unwrap();
    fs::copy(&bundle, &other).unwrap();
    assert!(storage
        .certificate("other.com")
        .unwrap_err()
        .contains("not for other.com"));
}
