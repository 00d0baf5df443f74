//! `index` and `try_files`, as nginx's modules answer.

use super::*;

fn redirect(served: Served) -> (String, Option<String>) {
    match served {
        Served::Redirect { path, query } => (String::from_utf8(path).unwrap(), query),
        Served::Answer(answer) => panic!("answered {}", answer.status()),
        Served::Upstream => panic!("upstream"),
    }
}

fn with_tries(tree: &Tree, items: &[&str], last: Last) -> Files {
    let tries = (items.iter())
        .map(|item| {
            let dir = item.ends_with('/');
            let text = VarText::parse(item.strip_suffix('/').unwrap_or(item)).unwrap();
            Try { text, dir }
        })
        .collect();
    let mut config = tree.config();
    config.try_files = Some(TryFiles { tries, last });
    Files::new(&config, OpenFiles::new(10))
}

fn uri(text: &str) -> Last {
    Last::Uri(VarText::parse(text).unwrap())
}

#[test]
fn a_directory_goes_to_its_first_index_that_exists_with_the_query() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.index = vec!["missing.html".into(), "index.html".into()];
    let files = Files::new(&config, OpenFiles::new(10));
    assert_eq!(redirect(Req::get("/").serve(&files)), ("/index.html".into(), None));
    assert_eq!(
        redirect(Req::get("/docs/?a=b").serve(&files)),
        ("/docs/index.html".into(), Some("a=b".into()))
    );
    let post = Req::get("/docs/").method(Method::POST).serve(&files);
    assert_eq!(redirect(post).0, "/docs/index.html", "POST goes to the index too");
}

#[test]
fn a_directory_without_an_index_is_forbidden_and_a_missing_one_not_found() {
    let tree = Tree::new();
    let files = tree.files();
    assert_eq!(Req::get("/sub/").answer(&files).status, StatusCode::FORBIDDEN);
    assert_eq!(Req::get("/nowhere/").answer(&files).status, StatusCode::NOT_FOUND);
    assert_eq!(Req::get("/a.txt/").answer(&files).status, StatusCode::NOT_FOUND);
    assert_eq!(Req::get("/out/").answer(&files).status, StatusCode::NOT_FOUND);
    assert_eq!(Req::get("/.git/").answer(&files).status, StatusCode::NOT_FOUND);
}

#[test]
fn an_index_name_starting_with_a_slash_redirects_at_once() {
    let tree = Tree::new();
    let mut config = tree.config();
    config.index = vec!["/fallback.html".into()];
    let files = Files::new(&config, OpenFiles::new(10));
    assert_eq!(redirect(Req::get("/sub/?q").serve(&files)), ("/fallback.html".into(), Some("q".into())));
}

#[test]
fn try_files_serves_the_first_item_that_exists_in_this_location() {
    let tree = Tree::new();
    let files = with_tries(&tree, &["$uri", "$uri/"], uri("/index.html"));
    assert_eq!(Req::get("/a.txt").answer(&files).body, b"0123456789");
    let dir = Req::get("/docs").answer(&files);
    assert_eq!(dir.status, StatusCode::MOVED_PERMANENTLY, "$uri/ found /docs: nginx's 301");
    assert_eq!(dir.header("location"), Some("http://example.com:8080/docs/"));
    assert_eq!(redirect(Req::get("/docs/").serve(&files)).0, "/docs/index.html");
    assert_eq!(redirect(Req::get("/settings/42?tab=1").serve(&files)), ("/index.html".into(), Some("tab=1".into())));
}

#[test]
fn a_directory_item_matches_only_a_directory_and_a_file_item_only_a_file() {
    let tree = Tree::new();
    let files = with_tries(&tree, &["$uri/"], Last::Status(StatusCode::NOT_FOUND));
    assert_eq!(Req::get("/a.txt").answer(&files).status, StatusCode::NOT_FOUND);
    let files = with_tries(&tree, &["$uri"], Last::Status(StatusCode::NOT_FOUND));
    assert_eq!(Req::get("/docs").answer(&files).status, StatusCode::NOT_FOUND);
}

#[test]
fn the_last_item_is_a_uri_with_its_own_query_a_status_or_the_upstream() {
    let tree = Tree::new();
    let files = with_tries(&tree, &["$uri"], uri("/index.php?q=$uri&$args"));
    assert_eq!(
        redirect(Req::get("/nothing?a=1").serve(&files)),
        ("/index.php".into(), Some("q=/nothing&a=1".into()))
    );
    let files = with_tries(&tree, &["$uri"], Last::Status(StatusCode::IM_A_TEAPOT));
    assert_eq!(Req::get("/nothing").answer(&files).status, StatusCode::IM_A_TEAPOT);
    let files = with_tries(&tree, &["$uri"], Last::Upstream);
    assert!(matches!(Req::get("/nothing").serve(&files), Served::Upstream));
    assert!(matches!(Req::get("/a.txt").serve(&files), Served::Answer(_)));
}

#[test]
fn try_files_runs_for_every_method_and_a_hidden_item_counts_as_missing() {
    let tree = Tree::new();
    let files = with_tries(&tree, &["$uri"], uri("/index.html"));
    assert_eq!(redirect(Req::get("/.env").serve(&files)).0, "/index.html");
    let delete = Req::get("/nothing").method(Method::DELETE).serve(&files);
    assert_eq!(redirect(delete).0, "/index.html");
    let delete = Req::get("/a.txt").method(Method::DELETE).answer(&files);
    assert_eq!(delete.status, StatusCode::METHOD_NOT_ALLOWED);
    let files = with_tries(&tree, &["$uri"], uri("/$arg_to"));
    assert_eq!(Req::get("/x?to=../../etc").answer(&files).status, StatusCode::NOT_FOUND);
}

#[test]
fn a_disguised_separator_names_no_file_but_still_reaches_the_last_item() {
    let tree = Tree::new();
    let files = with_tries(&tree, &["$uri"], uri("/index.html"));
    assert_eq!(redirect(Req::get("/docs%2findex.html").serve(&files)).0, "/index.html");
    assert_eq!(
        Req::get("/docs%2findex.html").answer(&tree.files()).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(Req::get("/../x").answer(&files).status, StatusCode::BAD_REQUEST);
}
