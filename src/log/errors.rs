//! The error log's filter: `tracing`'s, from `RUST_LOG` (default `info`), with one rule
//! of ours on top. h2 warns of a client's protocol slips (a PING acknowledgement for a
//! PING never sent, a burst of reset streams), once per frame or connection, and keeps
//! nothing else at info or above; through the error log, any client could then have us
//! write a line per 17-byte frame. So h2 is silenced unless `RUST_LOG` names it. (rustls
//! is built without its logging feature, for the same reason.)

/// The dependency whose events stay out of the error log unless asked for by name.
const SILENCED: &str = "h2";

/// The filter directives for a `RUST_LOG` of `rust_log` (unset or empty: `info`).
pub fn directives(rust_log: Option<&str>) -> String {
    let asked = rust_log.map(str::trim).filter(|s| !s.is_empty());
    match asked {
        Some(asked) if names_silenced(asked) => asked.to_string(),
        Some(asked) => format!("{asked},{SILENCED}=off"),
        None => format!("info,{SILENCED}=off"),
    }
}

/// Some directive of `rust_log` is for the silenced crate (`h2`, `h2::proto=…`, `h2[…]`).
fn names_silenced(rust_log: &str) -> bool {
    rust_log.split(',').any(|directive| {
        let target = directive
            .trim()
            .split(['=', '['])
            .next()
            .unwrap_or_default();
        target
            .strip_prefix(SILENCED)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

#[cfg(test)]
mod tests {
    use super::directives;

    #[test]
    fn h2_is_off_unless_rust_log_names_it() {
        assert_eq!(directives(None), "info,h2=off");
        assert_eq!(directives(Some("  ")), "info,h2=off");
        assert_eq!(directives(Some("debug")), "debug,h2=off");
        assert_eq!(
            directives(Some("warn,tollgate=debug")),
            "warn,tollgate=debug,h2=off"
        );
        // A crate whose name merely starts with "h2" is not h2.
        assert_eq!(directives(Some("h2o=info")), "h2o=info,h2=off");
        for named in ["h2=debug", "info,h2", "h2::proto=trace", "h2[stream]=debug"] {
            assert_eq!(directives(Some(named)), named);
        }
    }

    #[test]
    fn every_default_parses_as_a_filter() {
        for rust_log in [None, Some("debug"), Some("info,h2=trace")] {
            let text = directives(rust_log);
            assert!(
                tracing_subscriber::EnvFilter::try_new(&text).is_ok(),
                "{text}"
            );
        }
    }
}
