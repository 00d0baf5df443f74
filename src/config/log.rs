//! `[log]`, and the `log` table of a site or location (nginx's `access_log` in a `server`
//! or `location` block): where lines go (`access`) and how they read (`format`, with
//! `escape` for a template).
//!
//! A site's or location's `log` takes what it does not write from the table above, key
//! by key: a location that writes only `format` still writes to its site's file, and
//! `access = "off"` in a location silences only it. `escape` belongs to the `format` of
//! its own table, so it needs one there.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::diag::Diagnostics;
use super::log_format::{Escape, LogTemplate};
use super::raw::RawLog;
use super::Config;

/// `[log]`, and what a site's or location's `log` makes of it: one access log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Log {
    pub access: AccessLog,
    pub format: LogFormat,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AccessLog {
    Off,
    Stdout,
    /// Absolute, or resolved against the config file's directory.
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogFormat {
    /// nginx `combined` plus the limit status and upstream time
    /// ([`super::log_format::COMBINED`]).
    Combined,
    Json,
    /// An nginx `log_format` template.
    Template(Arc<LogTemplate>),
}

/// A site's or location's `log` as written: `None` where it takes the key from above.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogSetting {
    pub access: Option<AccessLog>,
    pub format: Option<LogFormat>,
}

impl Default for Log {
    /// Without `[log]`: `combined` to stdout.
    fn default() -> Log {
        Log {
            access: AccessLog::Stdout,
            format: LogFormat::Combined,
        }
    }
}

impl Log {
    /// The log a site or location with `setting` (`None`: no `log` of its own) writes to.
    pub(crate) fn with(&self, setting: Option<&LogSetting>) -> Log {
        let Some(setting) = setting else {
            return self.clone();
        };
        Log {
            access: setting.access.clone().unwrap_or_else(|| self.access.clone()),
            format: setting.format.clone().unwrap_or_else(|| self.format.clone()),
        }
    }
}

impl LogSetting {
    /// A location's `log` (`self`, if it has one) over its site's.
    pub(crate) fn over(own: Option<LogSetting>, site: Option<&LogSetting>) -> Option<LogSetting> {
        let Some(site) = site else {
            return own;
        };
        let own = own.unwrap_or_default();
        Some(LogSetting {
            access: own.access.or_else(|| site.access.clone()),
            format: own.format.or_else(|| site.format.clone()),
        })
    }
}

impl Config {
    /// Every access log the file names: `[log]`'s, then each site's and location's that
    /// differs from it, each once (what `tollgate -t` opens, and a reload).
    pub(crate) fn logs(&self) -> Vec<Log> {
        let mut logs = vec![self.log.clone()];
        for site in &self.sites {
            let own = std::iter::once(site.log.as_ref());
            for setting in own.chain(site.locations.iter().map(|l| l.log.as_ref())) {
                let log = self.log.with(setting);
                if !logs.contains(&log) {
                    logs.push(log);
                }
            }
        }
        logs
    }
}

/// `[log]`: every key has its default.
pub(super) fn top(raw: &RawLog, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Log> {
    let setting = setting(raw, base, diag)?;
    Some(Log::default().with(Some(&setting)))
}

/// A `log` table as written.
pub(super) fn setting(raw: &RawLog, base: &Path, diag: &mut Diagnostics<'_>) -> Option<LogSetting> {
    let access = match &raw.access {
        None => Some(None),
        Some(access) => match access.get_ref().as_str() {
            "off" => Some(Some(AccessLog::Off)),
            "stdout" => Some(Some(AccessLog::Stdout)),
            "" => {
                let message = r#"invalid access log "": expected "off", "stdout" or a file path"#;
                diag.error(access.span(), message);
                None
            }
            path => Some(Some(AccessLog::File(base.join(path)))),
        },
    };
    let format = format(raw, diag);
    Some(LogSetting {
        access: access?,
        format: format?,
    })
}

/// `format` and `escape`: a named format, or a template read with its escaping.
fn format(raw: &RawLog, diag: &mut Diagnostics<'_>) -> Option<Option<LogFormat>> {
    let escape = match raw.escape.as_ref().map(|e| (e.get_ref().as_str(), e.span())) {
        None | Some(("default", _)) => Escape::Default,
        Some(("json", _)) => Escape::Json,
        Some(("none", _)) => Escape::None,
        Some((other, span)) => {
            diag.error(span, format!("invalid escape {other:?}: expected \"default\", \"json\" or \"none\""));
            return None;
        }
    };
    let Some(format) = &raw.format else {
        if let Some(escape) = &raw.escape {
            diag.error(escape.span(), "`escape` is for a template: write the `format` it escapes beside it");
            return None;
        }
        return Some(None);
    };
    let named = match format.get_ref().as_str() {
        "combined" => Some(LogFormat::Combined),
        "json" => Some(LogFormat::Json),
        _ => None,
    };
    if let Some(named) = named {
        if let Some(escape) = &raw.escape {
            diag.error(escape.span(), "`escape` is for a template: the named formats escape their own way");
            return None;
        }
        return Some(Some(named));
    }
    match LogTemplate::parse(format.get_ref(), escape) {
        Ok(template) => Some(Some(LogFormat::Template(Arc::new(template)))),
        Err(problem) => {
            diag.error_in_string(format.span(), format.get_ref(), problem.at.start, problem.message);
            None
        }
    }
}
