//! What the keys of sites and locations are checked against: the names and values the
//! rest of the file defines, and where relative paths start.

use std::path::Path;

use super::limits;
use super::maps::Maps;

/// What every location is checked against.
pub(super) struct Context<'a> {
    /// The name of every `[upstreams.NAME]`, in the order of `Config::upstreams`.
    pub upstreams: &'a [String],
    pub zones: &'a [limits::ZoneInfo],
    pub maps: &'a Maps,
    /// The config file's directory: where a relative `root`, `alias` or `users` starts.
    pub base: &'a Path,
}
