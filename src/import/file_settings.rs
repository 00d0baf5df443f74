//! What a level of an nginx configuration sets for files and compression
//! (`import/files.rs` reads the directives; `import/level.rs` keeps one per level).

/// What a level sets for files and compression, `None` where it sets nothing.
#[derive(Clone, Debug, Default)]
pub(super) struct FileSettings {
    pub root: Option<String>,
    /// Not inherited: it replaces its own location's prefix.
    pub alias: Option<String>,
    pub index: Option<Vec<String>>,
    /// Not inherited (nginx runs a location's own `try_files`), as tollgate writes it.
    pub try_files: Option<Vec<String>>,
    /// The named location a `try_files` ending `"@upstream"` stands for.
    pub named: Option<String>,
    /// `error_page` lines of the level, as tollgate's keys and values; a level with
    /// one replaces the pages of the level above, as nginx.
    pub error_pages: Option<Vec<(String, String)>>,
    pub expires: Option<Option<String>>,
    pub gzip: Option<bool>,
    pub gzip_types: Option<Vec<String>>,
    pub gzip_min_length: Option<String>,
    pub gzip_static: Option<bool>,
    pub brotli: Option<bool>,
    pub brotli_types: Option<Vec<String>>,
    pub brotli_static: Option<bool>,
    pub intercept_errors: Option<bool>,
    pub follow_symlinks: Option<bool>,
}

impl FileSettings {
    /// This level's over `parent`'s.
    pub(super) fn under(self, parent: &FileSettings) -> FileSettings {
        let p = parent.clone();
        FileSettings {
            root: self.root.or(p.root),
            alias: self.alias,
            index: self.index.or(p.index),
            try_files: self.try_files,
            named: self.named,
            error_pages: self.error_pages.or(p.error_pages),
            expires: self.expires.or(p.expires),
            gzip: self.gzip.or(p.gzip),
            gzip_types: self.gzip_types.or(p.gzip_types),
            gzip_min_length: self.gzip_min_length.or(p.gzip_min_length),
            gzip_static: self.gzip_static.or(p.gzip_static),
            brotli: self.brotli.or(p.brotli),
            brotli_types: self.brotli_types.or(p.brotli_types),
            brotli_static: self.brotli_static.or(p.brotli_static),
            intercept_errors: self.intercept_errors.or(p.intercept_errors),
            follow_symlinks: self.follow_symlinks.or(p.follow_symlinks),
        }
    }
}
