//! `tollgate -t` past the file: what a valid configuration still needs from the machine
//! it starts on, checked without starting (as `nginx -t` opens its logs).

use crate::certs;
use crate::config::{dirs, Config};
use crate::log::Logs;

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Checked {
    /// Worth telling the operator, not wrong: names a static certificate covers though
    /// their site has `acme = true` (no certificate is ordered for them).
    pub notes: Vec<String>,
    /// Worth a warning, not wrong: a `root` or `alias` that is not a readable directory
    /// (a deploy may make it later), each `FILE:LINE:COL: message`.
    pub warnings: Vec<String>,
    /// The first thing that would fail the start, if any.
    pub problem: Option<String>,
}

/// Whether the access log can be opened, whether each `root` and `alias` is a readable
/// directory (a warning), expired certificates (a warning in the error
/// log), names a static certificate covers though their site has `acme = true` (a
/// note), and whether the `[acme]` storage and `client_body_temp_path` can be written,
/// without contacting the CA or making either directory.
pub fn check(config: &Config) -> Checked {
    let mut checked = Checked {
        warnings: unreadable_directories(config),
        ..Checked::default()
    };
    if let Err(err) = Logs::check(config) {
        checked.problem = Some(format!("cannot open the access log: {err}"));
        return checked;
    }
    if let Some(tls) = &config.tls {
        certs::warn_expired(&tls.certificates);
    }
    if let Some(acme) = &config.acme {
        checked.notes = acme
            .covered
            .iter()
            .map(|covered| {
                format!(
                    "{} is covered by the static certificate {}; no certificate is ordered for it",
                    covered.name,
                    covered.cert.display()
                )
            })
            .collect();
        if let Err(err) = acme.check_storage() {
            checked.problem = Some(err.to_string());
            return checked;
        }
    }
    let temp_path = &config.server.client_body_temp_path;
    if let Err(reason) = dirs::check_dir(temp_path) {
        let temp_path = temp_path.display();
        checked.problem = Some(format!(
            "cannot use {temp_path} as client_body_temp_path: {reason}"
        ));
    }
    checked
}

/// A warning for each `root` or `alias` that is not a directory tollgate can list: its
/// files would all answer 404 (or 403), which a deploy to come may well mend.
fn unreadable_directories(config: &Config) -> Vec<String> {
    config
        .directories
        .iter()
        .filter_map(|(dir, place)| {
            let shown = dir.display();
            let why = match std::fs::metadata(dir) {
                Err(err) => err.to_string(),
                Ok(meta) if !meta.is_dir() => "not a directory".to_owned(),
                Ok(_) => std::fs::read_dir(dir).err()?.to_string(),
            };
            Some(format!("{place}: {shown} cannot be served from: {why}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_that_is_not_a_readable_directory_is_a_warning_with_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let text = format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\n[log]\naccess = \"off\"\n\
             [[location]]\nmatch = \"/\"\nroot = \"{}\"\n\
             [[location]]\nmatch = \"/missing/\"\nalias = \"missing/\"\n\
             [[location]]\nmatch = \"/file/\"\nroot = \"file\"\n",
            dir.path().display()
        );
        let origin = dir.path().join("gateway.toml");
        let config = crate::config::from_str(&text, &origin).unwrap();
        let checked = check(&config);
        assert!(checked.problem.is_none(), "{:?}", checked.problem);
        let origin = origin.display();
        assert_eq!(checked.warnings.len(), 2, "{:?}", checked.warnings);
        assert!(checked.warnings[0].starts_with(&format!("{origin}:10:9: ")), "{}", checked.warnings[0]);
        assert!(checked.warnings[0].contains("missing"));
        assert!(checked.warnings[1].starts_with(&format!("{origin}:13:8: ")));
        assert!(checked.warnings[1].ends_with("not a directory"));
    }
}
