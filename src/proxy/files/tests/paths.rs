//! Every way out of the root plan §4.2 lists, as raw targets: a 400 or a 404, never a
//! byte of the secret; and the same walks through the fallback for old kernels.

use std::os::fd::AsFd;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::*;

const ATTACKS: &[&str] = &[
    "/../secret",
    "/%2e%2e/secret",
    "/%2E%2e%2fsecret",
    "/a/..%2f..%2fsecret",
    "//../secret",
    "/./../secret",
    "/%2e%2e%5csecret",
    "/..\\secret",
    "/a\\..\\..\\secret",
    "/%00",
    "/index.html%00.txt",
    "/in\0dex.html",
    "/%c0%ae%c0%ae/secret",
    "/%e0%80%ae%e0%80%ae/",
    "/%ff",
    "/out",
    "/abs",
    "/sneaky",
    "/dirout/passwd",
    "/relout/passwd",
    "/dirout/",
    "/.env",
    "/.git/config",
    "/%2eenv",
    "/.git/",
    "/docs%2findex.html",
];

fn assert_refused(files: &Files, target: &str) {
    for method in [Method::GET, Method::HEAD] {
        let req = Req::get(target).method(method);
        match req.serve(files) {
            Served::Answer(response) => {
                let answer = Answer::of(response);
                assert!(
                    matches!(answer.status.as_u16(), 400 | 404),
                    "{target}: {}",
                    answer.status
                );
                assert!(
                    !answer.body.windows(SECRET.len()).any(|w| w == SECRET),
                    "{target}: the secret"
                );
            }
            Served::Redirect { path, .. } => {
                panic!("{target}: redirected to {}", String::from_utf8_lossy(&path))
            }
            Served::Upstream => panic!("{target}: upstream"),
        }
    }
}

#[test]
fn no_attack_leaves_the_root() {
    let tree = Tree::new();
    let files = tree.files();
    for target in ATTACKS {
        assert_refused(&files, target);
    }
}

#[test]
fn no_attack_leaves_the_root_through_try_files_either() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.try_files = Some(TryFiles {
        tries: vec![
            Try { text: VarText::parse("$uri").unwrap(), dir: false },
            Try { text: VarText::parse("/docs/$arg_f").unwrap(), dir: false },
        ],
        last: Last::Status(StatusCode::NOT_FOUND),
    });
    let files = Files::new(&config, OpenFiles::new(10));
    for target in ATTACKS {
        assert_refused(&files, target);
    }
    for query in ["f=../../secret", "f=..%2f..%2fsecret", "f=../../outside/passwd", "f=/../../secret"] {
        assert_refused(&files, &format!("/x?{query}"));
    }
}

#[test]
fn symlinks_inside_the_root_are_followed() {
    let tree = Tree::new();
    let files = tree.files();
    assert_eq!(Req::get("/in").answer(&files).body, b"<h1>home</h1>");
    assert_eq!(Req::get("/indir/index.html").answer(&files).body, b"<h1>docs</h1>");
}

#[test]
fn follow_symlinks_lets_them_lead_out() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.follow_symlinks = true;
    let files = Files::new(&config, OpenFiles::new(10));
    for target in ["/out", "/abs", "/dirout/passwd", "/relout/passwd", "/sneaky"] {
        let answer = Req::get(target).answer(&files);
        assert_eq!(answer.body, SECRET, "{target}");
    }
    assert_eq!(Req::get("/../secret").answer(&files).status, StatusCode::BAD_REQUEST);
}

#[test]
fn dotfiles_lets_them_be_served_and_well_known_always_is() {
    let tree = Tree::new();
    let files = tree.files();
    let token = Req::get("/.well-known/acme-challenge/token").answer(&files);
    assert_eq!(token.body, b"TOKEN");
    let mut config = tree.config();
    config.dotfiles = true;
    let files = Files::new(&config, OpenFiles::new(10));
    assert_eq!(Req::get("/.env").answer(&files).body, b"DOTENV");
    assert_eq!(Req::get("/%2eenv").answer(&files).body, b"DOTENV");
    assert_eq!(Req::get("/.git/config").answer(&files).body, b"GITCONFIG");
    assert_eq!(Req::get("/out").answer(&files).status, StatusCode::NOT_FOUND);
}

#[test]
fn a_redirected_pass_is_checked_on_its_own_path() {
    let tree = Tree::new();
    let files = tree.files();
    let answer = Req::get("/a.txt").redirected().answer(&files);
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(Req::get("/.env").redirected().answer(&files).status, StatusCode::NOT_FOUND);
}

/// The walk kernels before 5.6 get, on the same tree.
fn walked(tree: &Tree, rel: &str) -> Result<Vec<u8>, Errno> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root = rustix::fs::open(tree.www().as_path(), flags, Mode::empty()).unwrap();
    let read = OFlags::RDONLY | OFlags::CLOEXEC;
    let fd = open::walk(root.as_fd(), rel, read)?;
    let mut bytes = Vec::new();
    let _ = std::io::Read::read_to_end(&mut fs::File::from(fd), &mut bytes);
    Ok(bytes)
}

#[test]
fn the_walk_for_old_kernels_keeps_symlinks_inside_the_root() {
    let tree = Tree::new();
    assert_eq!(walked(&tree, "a.txt"), Ok(b"0123456789".to_vec()));
    assert_eq!(walked(&tree, "in"), Ok(b"<h1>home</h1>".to_vec()));
    assert_eq!(walked(&tree, "indir/index.html"), Ok(b"<h1>docs</h1>".to_vec()));
    assert!(walked(&tree, "docs/").is_ok());
    assert!(walked(&tree, "").is_ok());
    for (rel, errno) in [
        ("out", Errno::XDEV),
        ("abs", Errno::XDEV),
        ("sneaky", Errno::XDEV),
        ("dirout/passwd", Errno::XDEV),
        ("relout/passwd", Errno::XDEV),
        ("../secret", Errno::XDEV),
        ("nothing", Errno::NOENT),
        ("a.txt/x", Errno::NOTDIR),
        ("a.txt/", Errno::NOTDIR),
    ] {
        assert_eq!(walked(&tree, rel), Err(errno), "{rel}");
    }
    std::os::unix::fs::symlink("loop", tree.www().join("loop")).unwrap();
    assert_eq!(walked(&tree, "loop"), Err(Errno::LOOP));
}

#[test]
fn a_file_swapped_for_a_symlink_out_while_served_is_never_followed_out() {
    let tree = Tree::new();
    let www = tree.www();
    tree.write("www/swap", b"plain");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (www, stop) = (www.clone(), stop.clone());
        std::thread::spawn(move || {
            let secret = www.parent().unwrap().join("secret");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = fs::remove_file(www.join("swap.tmp"));
                std::os::unix::fs::symlink(&secret, www.join("swap.tmp")).unwrap();
                fs::rename(www.join("swap.tmp"), www.join("swap")).unwrap();
                fs::write(www.join("swap.tmp"), b"plain").unwrap();
                fs::rename(www.join("swap.tmp"), www.join("swap")).unwrap();
            }
        })
    };
    let files = tree.files();
    for _ in 0..2000 {
        let answer = Req::get("/swap").answer(&files);
        assert_ne!(answer.body, SECRET);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
}

/// Paths the property test starts from: files, symlinks in and out, dot tricks.
const SEEDS: &[&str] = &[
    "/a.txt",
    "/docs/index.html",
    "/in",
    "/indir/index.html",
    "/out",
    "/dirout/passwd",
    "/relout/passwd",
    "/sneaky",
    "/%2e%2e/secret",
    "/docs/../../secret",
    "/.env",
];

/// Bytes and escapes that move a path across segments.
const PATH_PIECES: &[&str] = &["/", "..", "../", "%2e", "%2E%2e", "%2f", "%5c", "\\", "%00", "%c0%ae", ".", "//"];

#[test]
fn mutated_paths_never_reach_the_secret() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let tree = Tree::new();
    let plain = tree.files();
    let mut config = tree.config();
    config.try_files = Some(TryFiles {
        tries: vec![
            Try { text: VarText::parse("$uri").unwrap(), dir: false },
            Try { text: VarText::parse("$uri").unwrap(), dir: true },
        ],
        last: Last::Status(StatusCode::NOT_FOUND),
    });
    let tried = Files::new(&config, OpenFiles::new(100));
    let piece = prop::sample::select(PATH_PIECES);
    let edits = (
        prop::sample::select(SEEDS),
        crate::props::mutations(6),
        prop::collection::vec((any::<prop::sample::Index>(), piece), 0..4),
    );
    let mut runner = TestRunner::new(Config::with_cases(512));
    let result = runner.run(&edits, |(seed, mutations, inserts)| {
        let mut bytes = seed.as_bytes().to_vec();
        crate::props::apply(&mut bytes, &mutations);
        for (at, piece) in inserts {
            let at = at.index(bytes.len() + 1);
            bytes.splice(at..at, piece.bytes());
        }
        let Ok(target) = String::from_utf8(bytes) else {
            return Ok(());
        };
        if target.contains('?') || target.contains('#') {
            return Ok(());
        }
        for files in [&plain, &tried] {
            if let Served::Answer(response) = Req::get(&target).serve(files) {
                let answer = Answer::of(response);
                prop_assert!(
                    !answer.body.windows(SECRET.len()).any(|w| w == SECRET),
                    "{target:?} gave the secret"
                );
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// A deploy that swaps the directory (a `current` symlink moved to a new release) is
/// seen once the kept handle is a second old; until then the old tree answers.
#[test]
fn a_swapped_directory_is_seen_within_a_second() {
    let base = tempfile::tempdir().unwrap();
    for (release, text) in [("one", "first"), ("two", "second")] {
        fs::create_dir(base.path().join(release)).unwrap();
        fs::write(base.path().join(release).join("a.txt"), text).unwrap();
    }
    let current = base.path().join("current");
    std::os::unix::fs::symlink("one", &current).unwrap();
    let dir = open::Directory::default();
    let start = std::time::Instant::now();
    let read = |at: Duration| {
        let root = dir.open(&current, false, start + at).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut root.open_file("a.txt").unwrap().file, &mut text).unwrap();
        text
    };
    assert_eq!(read(Duration::ZERO), "first");
    let swapped = base.path().join("swapped");
    std::os::unix::fs::symlink("two", &swapped).unwrap();
    fs::rename(&swapped, &current).unwrap();
    assert_eq!(read(Duration::from_millis(999)), "first", "the kept handle");
    assert_eq!(read(Duration::from_secs(1)), "second", "opened again");
    fs::remove_dir_all(base.path().join("two")).unwrap();
    assert!(dir.open(&current, false, start + Duration::from_secs(3)).is_err());
    assert!(dir.open(&current, false, start + Duration::from_secs(3)).is_err(), "tried again");
}
