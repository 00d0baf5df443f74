//! nginx's values as tollgate writes them: times (`1m30s`, `60`), sizes (`10m`),
//! variables (each checked against tollgate's), names of zones and groups.

use std::cell::RefCell;

use crate::vars::{Var, VarText};

thread_local! {
    /// The `map` names of the configuration being imported: `$NAME` is then a variable.
    static MAPS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// While it lives, [`vars`] takes `$NAME` of these maps (the http block's `map`s).
pub(super) struct MapsInScope {
    before: Vec<String>,
}

impl MapsInScope {
    pub(super) fn set(names: Vec<String>) -> MapsInScope {
        let before = MAPS.with(|m| std::mem::replace(&mut *m.borrow_mut(), names));
        MapsInScope { before }
    }
}

impl Drop for MapsInScope {
    fn drop(&mut self) {
        let before = std::mem::take(&mut self.before);
        MAPS.with(|m| *m.borrow_mut() = before);
    }
}

/// Whether `$name` is a map of the configuration being imported.
pub(super) fn is_map(name: &str) -> bool {
    MAPS.with(|m| m.borrow().iter().any(|n| n == name))
}

/// An nginx time (`ngx_parse_time`: `500ms`, `30s`, `1m30s`, `2h`, `1d`, a bare number
/// of seconds) in milliseconds; `None` when it does not parse.
pub(super) fn time_ms(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, width) = match rest.as_bytes() {
            [b'm', b's', ..] => (1, 2),
            [b's', ..] => (1000, 1),
            [b'm', ..] => (60_000, 1),
            [b'h', ..] => (3_600_000, 1),
            [b'd', ..] => (86_400_000, 1),
            [b'w', ..] => (604_800_000, 1),
            [b'M', ..] => (2_592_000_000, 1),
            [b'y', ..] => (31_536_000_000, 1),
            [] => (1000, 0),
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
        rest = &rest[width..];
    }
    Some(total)
}

/// A duration as tollgate writes it, in the largest unit that says it exactly;
/// `None` for zero (every tollgate duration is above zero) or what does not parse.
pub(super) fn duration(text: &str) -> Option<String> {
    let ms = time_ms(text)?;
    Some(match ms {
        0 => return None,
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    })
}

/// An nginx size (`1024`, `8k`, `10M`, `1g`) as tollgate writes it (the same units);
/// `None` when it does not parse.
pub(super) fn size(text: &str) -> Option<String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let unit = &text[digits..];
    let fits = text[..digits].parse::<u64>().is_ok();
    (fits && matches!(unit, "" | "k" | "K" | "m" | "M" | "g" | "G")).then(|| text.to_owned())
}

/// The bytes of a size, for comparisons (`None` as [`size`]).
pub(super) fn size_bytes(text: &str) -> Option<u64> {
    let written = size(text)?;
    let digits = written.bytes().take_while(u8::is_ascii_digit).count();
    let n: u64 = written[..digits].parse().ok()?;
    let unit: u64 = match &written[digits..] {
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        _ => 1,
    };
    n.checked_mul(unit)
}

/// `text` when every variable in it is one of tollgate's; else the first that is not,
/// named (`$request_body`), for the report.
pub(super) fn vars(text: &str) -> Result<&str, String> {
    // A map stands in as any variable: only whether the name is known matters here.
    let defined = |name: &str| is_map(name).then_some(Var::Scheme);
    match VarText::parse_with(text, defined, |_| None) {
        Ok(_) => Ok(text),
        Err(err) => {
            let after = &text[err.at + 1..];
            let name: String = match after.strip_prefix('{') {
                Some(braced) => braced.chars().take_while(|&c| c != '}').collect(),
                None => after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect(),
            };
            Err(format!("`${name}` is not a tollgate variable (docs/config.md, \"Variables\")"))
        }
    }
}

/// A name of a zone or an upstream group as tollgate takes it: letters, digits, `_`
/// and `-` (anything else becomes `_`).
pub(super) fn name(text: &str) -> String {
    let name: String = text
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            true => c,
            false => '_',
        })
        .collect();
    match name.is_empty() {
        true => "_".to_owned(),
        false => name,
    }
}

/// `on` / `off` as nginx spells a flag.
pub(super) fn flag(text: &str) -> Option<bool> {
    match text {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_nginx_reads_them_and_tollgate_writes_them() {
        assert_eq!(duration("60"), Some("1m".to_owned()));
        assert_eq!(duration("75s"), Some("75s".to_owned()));
        assert_eq!(duration("1m30s"), Some("90s".to_owned()));
        assert_eq!(duration("500ms"), Some("500ms".to_owned()));
        assert_eq!(duration("1d"), Some("24h".to_owned()));
        assert_eq!(duration("0"), None);
        assert_eq!(duration("5x"), None);
        assert_eq!(duration(""), None);
        assert_eq!(duration("99999999999999999999"), None);
    }

    #[test]
    fn sizes_and_variables() {
        assert_eq!(size("10m"), Some("10m".to_owned()));
        assert_eq!(size("10mb"), None);
        assert_eq!(size_bytes("1K"), Some(1024));
        assert_eq!(vars("https://$host$request_uri"), Ok("https://$host$request_uri"));
        assert_eq!(
            vars("$scheme://${proxy_host}/x"),
            Err("`$proxy_host` is not a tollgate variable (docs/config.md, \"Variables\")".to_owned())
        );
        assert!(vars("$request_body").unwrap_err().starts_with("`$request_body`"));
        assert_eq!(name("one:two"), "one_two");
    }
}
