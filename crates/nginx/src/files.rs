//! Where the files of a configuration come from: the disk ([`Disk`]), or memory
//! ([`Memory`]) for tests.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Reads the files of a configuration.
pub trait Files {
    /// The bytes of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The names in a directory, in any order.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
}

/// The file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        std::fs::read_dir(dir)?
            .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
            .collect()
    }
}

/// Files held in memory, by path; a directory is any path prefix of one.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl Memory {
    pub fn new() -> Memory {
        Memory::default()
    }

    /// Adds (or replaces) a file.
    pub fn with(mut self, path: impl Into<PathBuf>, text: impl Into<Vec<u8>>) -> Memory {
        self.files.insert(path.into(), text.into());
        self
    }
}

impl Files for Memory {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if let Some(bytes) = self.files.get(path) {
            return Ok(bytes.clone());
        }
        let is_dir = self.files.keys().any(|p| p.starts_with(path) && p != path);
        Err(match is_dir {
            true => io::Error::other("Is a directory"),
            false => io::Error::from(io::ErrorKind::NotFound),
        })
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names: Vec<String> = self
            .files
            .keys()
            .filter_map(|p| p.strip_prefix(dir).ok())
            .filter_map(|rest| rest.iter().next())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.dedup();
        Ok(names)
    }
}
