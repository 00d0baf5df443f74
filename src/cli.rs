//! The `tollgate` command line as clap sees it (flags, subcommands, the help's closing
//! sections), and the shell completions and man page generated from it. Part of the
//! binary, not the library.

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

/// What `--version` prints: the release, the commit it was built from and the build's
/// date (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("TOLLGATE_COMMIT"),
    ", built ",
    env!("TOLLGATE_BUILD_DATE"),
    ")"
);

/// The end of `--help` (and of the man page): what the signals mean to a running
/// gateway (src/signals.rs), how the error log is filtered (src/log/errors.rs), and the
/// exit statuses.
const AFTER_HELP: &str = "\
Signals (to the gateway's process; tollgate reload and stop send them by pid_file):
  HUP        re-read the configuration and put it in force; a file with a problem
             changes nothing (the error log says why)
  TERM, INT  stop accepting, let requests under way finish (up to shutdown_timeout),
             exit; a second one exits at once
  USR1       reopen the access log (after logrotate moved it)

Environment:
  RUST_LOG   the error log's filter (stderr), in tracing's EnvFilter syntax, such as
             debug or info,tollgate::acme=debug; default info. h2's events stay off
             unless named.

Exit status:
  0  ran and stopped cleanly; -t: the configuration is ok; reload, stop: done
  1  a problem in the configuration, a start that failed, an exit forced by a second
     stop signal; reload: the reload failed or gave no outcome in time; stop: the
     process still ran after shutdown_timeout
  2  import: some directive is unsupported (the file is still written)";

/// An nginx-style edge gateway: allow/deny, exact rate limits, forwarding.
#[derive(Parser)]
#[command(name = "tollgate", version = VERSION, about, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Configuration file.
    #[arg(short = 'c', long = "config", default_value = "gateway.toml")]
    pub config: PathBuf,
    /// Check the configuration, print every problem as FILE:LINE:COL, and exit.
    #[arg(short = 't', long = "test")]
    pub test: bool,
    /// Binary upgrade: start beside a tollgate already serving these addresses (both
    /// accept, each with its own limits, until the old one is stopped with SIGTERM).
    /// Without it, an address another process listens on fails the start.
    #[arg(long = "upgrade")]
    pub upgrade: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Reload the running gateway (SIGHUP by pid_file) and print the outcome.
    ///
    /// Checks the configuration as -t does (nothing is sent when it has a problem), sends
    /// SIGHUP to the process its pid_file names, and, with [admin], prints the outcome
    /// read back from /status ("reloaded: generation N", or the errors). Exit 0 when
    /// reloaded, 1 when not or when no outcome came within 10 s. Without [admin], exit
    /// 0 once the signal is sent: the outcome is in the gateway's error log.
    Reload {
        /// Configuration file (as given to the gateway; overrides the -c before `reload`).
        #[arg(short = 'c', long = "config")]
        config: Option<PathBuf>,
    },
    /// Stop the running gateway (SIGTERM by pid_file) and wait until it has exited.
    ///
    /// Sends SIGTERM to the process its pid_file names and waits until it has drained
    /// and exited, for at most shutdown_timeout and 5 s. Exit 0 when it has, 1 when not.
    Stop {
        /// Configuration file (as given to the gateway; overrides the -c before `stop`).
        #[arg(short = 'c', long = "config")]
        config: Option<PathBuf>,
    },
    /// Translate an nginx configuration into a gateway.toml, reporting each directive.
    ///
    /// Includes are followed. Each directive is reported on stderr: exact, approx (the
    /// difference) or unsupported
    /// (what to do instead). Exit status 0 when nothing is unsupported, 2 when something
    /// is (the file is still written, those directives as comments), 1 when nginx would
    /// refuse the file too.
    Import {
        /// The main nginx configuration file (nginx.conf).
        nginx_conf: PathBuf,
        /// Where to write the gateway.toml (default: stdout).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
    /// Print the completion script for SHELL (bash, zsh, fish, …) to stdout.
    Completions { shell: clap_complete::Shell },
    /// Print the man page, tollgate(1), to stdout.
    Man,
}

/// `tollgate completions SHELL`. Made in memory first: clap_complete panics on a write
/// that fails (a closed pipe), where this reports it.
pub(crate) fn completions(shell: clap_complete::Shell) -> std::io::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "tollgate", &mut script);
    let mut out = std::io::stdout().lock();
    std::io::Write::write_all(&mut out, &script)?;
    std::io::Write::flush(&mut out)
}

/// `tollgate man`: one page, tollgate(1), with each subcommand described in it (where
/// clap_mangen's own page would point to a page per subcommand, which no package ships).
pub(crate) fn man() -> std::io::Result<()> {
    let command = Cli::command();
    let page = clap_mangen::Man::new(command.clone());
    let mut roff = Vec::new();
    page.render_title(&mut roff)?;
    page.render_name_section(&mut roff)?;
    page.render_synopsis_section(&mut roff)?;
    page.render_description_section(&mut roff)?;
    page.render_options_section(&mut roff)?;
    roff.extend_from_slice(commands_section(&command).as_bytes());
    roff.extend_from_slice(after_help_sections().as_bytes());
    page.render_version_section(&mut roff)?;
    let mut out = std::io::stdout().lock();
    let page = once_defined(&String::from_utf8_lossy(&roff));
    std::io::Write::write_all(&mut out, page.as_bytes())?;
    std::io::Write::flush(&mut out)
}

/// Each part of [`AFTER_HELP`] as a section of its own (SIGNALS, ENVIRONMENT, EXIT
/// STATUS), its lines kept as written: they are laid out as a table.
fn after_help_sections() -> String {
    let mut roff = String::new();
    for part in AFTER_HELP.split("\n\n") {
        let (title, body) = part.split_once('\n').unwrap_or((part, ""));
        let title = title
            .split(" (")
            .next()
            .unwrap_or(title)
            .trim_end_matches(':');
        roff += &format!(
            ".SH {}\n.nf\n{}\n.fi\n",
            title.to_uppercase(),
            escaped(body)
        );
    }
    roff
}

/// `roff` with the definition each clap_mangen part opens with (the `Aq` string, two
/// lines) kept only at the top.
fn once_defined(roff: &str) -> String {
    let mut kept = String::with_capacity(roff.len());
    let mut past_top = false;
    for line in roff.lines() {
        let definition = line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq");
        if definition && past_top {
            continue;
        }
        past_top |= !definition;
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

/// The COMMANDS section: each subcommand's synopsis and whole description.
fn commands_section(command: &clap::Command) -> String {
    let mut roff = String::from(".SH COMMANDS\n");
    let shown = command.get_subcommands().filter(|sub| !sub.is_hide_set());
    for sub in shown.filter(|sub| sub.get_name() != "help") {
        let args: Vec<String> = sub
            .get_arguments()
            .filter(|arg| !arg.is_hide_set() && arg.get_id() != "help")
            .map(synopsis)
            .collect();
        let about = sub.get_long_about().or(sub.get_about());
        let about = about.map(ToString::to_string).unwrap_or_default();
        let about: Vec<String> = about.split("\n\n").map(|p| escaped(p.trim())).collect();
        let name = sub.get_name();
        roff += &format!(".TP\n\\fBtollgate {name}\\fR {}\n", args.join(" "));
        roff += &about.join("\n.sp\n");
        roff.push('\n');
    }
    roff
}

/// An argument as a synopsis shows it: `[-c FILE]`, or `SHELL` for a positional one.
fn synopsis(arg: &clap::Arg) -> String {
    let value = arg.get_value_names().and_then(|names| names.first());
    let value = value.map_or_else(|| arg.get_id().as_str().to_uppercase(), ToString::to_string);
    match (arg.get_short(), arg.get_long()) {
        (Some(short), _) => format!("[\\fB\\-{short}\\fR \\fI{value}\\fR]"),
        (None, Some(long)) => format!("[\\fB\\-\\-{long}\\fR \\fI{value}\\fR]"),
        (None, None) => format!("\\fI{value}\\fR"),
    }
}

/// Text as roff reads it literally: backslashes and hyphens escaped, and no line
/// starting with a control character.
fn escaped(text: &str) -> String {
    let text = text.replace('\\', "\\e").replace('-', "\\-");
    let lines = text
        .lines()
        .map(|line| match line.starts_with(['.', '\'']) {
            true => format!("\\&{line}"),
            false => line.to_owned(),
        });
    lines.collect::<Vec<_>>().join("\n")
}
