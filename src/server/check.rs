//! `tollgate -t` past the file: what a valid configuration still needs from the machine
//! it starts on, checked without starting (as `nginx -t` opens its logs).

use crate::certs;
use crate::config::{dirs, Config};
use crate::log::AccessLog;

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Checked {
    /// Worth telling the operator, not wrong: names a static certificate covers though
    /// their site has `acme = true` (no certificate is ordered for them).
    pub notes: Vec<String>,
    /// The first thing that would fail the start, if any.
    pub problem: Option<String>,
}

/// Whether the access log can be opened, expired certificates (a warning in the error
/// log), names a static certificate covers though their site has `acme = true` (a
/// note), and whether the `[acme]` storage and `client_body_temp_path` can be written,
/// without contacting the CA or making either directory.
pub fn check(config: &Config) -> Checked {
    let mut checked = Checked::default();
    if let Err(err) = AccessLog::check(&config.log) {
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
