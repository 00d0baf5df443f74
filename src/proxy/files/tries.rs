//! `try_files` and `index`: which URI of the location's directory is served, or where
//! the request goes instead (nginx's try_files and index modules).

use http::StatusCode;

use super::open::{Failure, Kind, Root};
use super::{error, resolve, Ask, Served};
use crate::config::files::{Last, TryFiles};
use crate::config::Files;

/// The first tested item of `try_files` that exists (a directory for an item written
/// with a trailing `/`, anything else for the others): the URI the location serves
/// instead, as nginx sets `$uri` to it. `None`: the last item decides.
pub(super) fn first(
    config: &Files,
    ask: &Ask<'_>,
    root: &Result<Root, Failure>,
    try_files: &TryFiles,
) -> Option<Vec<u8>> {
    let root = root.as_ref().ok()?;
    try_files.tries.iter().find_map(|item| {
        let mut value = Vec::new();
        item.text.render(ask.vars, &mut value);
        let uri = resolve::clean(&value)?;
        let rel = resolve::relative(&config.base, &uri, config.dotfiles).ok()?;
        let meta = root.probe(rel).ok()?;
        ((meta.kind == Kind::Dir) == item.dir).then_some(uri)
    })
}

/// The last item of `try_files`, none of the others existing.
pub(super) fn last(ask: &Ask<'_>, last: &Last) -> Served {
    match last {
        Last::Status(status) => error(*status),
        Last::Upstream => Served::Upstream,
        Last::Uri(text) => {
            let mut value = Vec::new();
            text.render(ask.vars, &mut value);
            redirect(ask, &value)
        }
    }
}

/// An internal redirect to `target`: its query, after a `?`, replaces the request's
/// (nginx's `ngx_http_split_args`); without one the request's is kept.
fn redirect(ask: &Ask<'_>, target: &[u8]) -> Served {
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(at) => (&target[..at], Some(String::from_utf8_lossy(&target[at + 1..]).into_owned())),
        None => (target, ask.query.map(str::to_owned)),
    };
    match resolve::clean(path) {
        Some(path) => Served::Redirect { path, query },
        None => error(StatusCode::NOT_FOUND),
    }
}

/// A URI ending `/`: the first `index` name that exists there, as an internal
/// redirect; 403 when none does (no listing), 404 when the directory itself is missing.
pub(super) fn index(config: &Files, ask: &Ask<'_>, root: &Result<Root, Failure>, uri: &[u8]) -> Served {
    let dir = match resolve::relative(&config.base, uri, config.dotfiles) {
        Ok(dir) => dir,
        Err(refused) => return error(refused.status()),
    };
    let root = match root {
        Ok(root) => root,
        Err(failure) => return error(failure.status()),
    };
    let mut dir_tested = false;
    for name in &config.index {
        if name.starts_with('/') {
            return redirect_kept(ask, name.as_bytes().to_vec());
        }
        match root.probe(&format!("{dir}{name}")) {
            Ok(_) => {
                let mut path = uri.to_vec();
                path.extend_from_slice(name.as_bytes());
                return redirect_kept(ask, path);
            }
            Err(Failure::Missing) => {}
            Err(failure) => return error(failure.status()),
        }
        if !dir_tested {
            match root.probe(dir) {
                Ok(meta) if meta.kind == Kind::Dir => dir_tested = true,
                Ok(_) => return error(StatusCode::NOT_FOUND),
                Err(failure) => return error(failure.status()),
            }
        }
    }
    // nginx: "directory index of … is forbidden".
    error(StatusCode::FORBIDDEN)
}

/// An internal redirect to `path`, the query kept.
fn redirect_kept(ask: &Ask<'_>, path: Vec<u8>) -> Served {
    Served::Redirect {
        path,
        query: ask.query.map(str::to_owned),
    }
}
