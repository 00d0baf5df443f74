//! The `tollgate` command: flags, logging and exit codes. Everything else is the library.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use tollgate::{Config, Gateway, Intent, Signals};

/// jemalloc, so that the memory of connections gone goes back to the system: its background
/// thread purges freed pages after `dirty_decay_ms` (set in .cargo/config.toml), where glibc's
/// malloc kept a fragmented heap at many times its start (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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

/// An nginx-style edge gateway: allow/deny, exact rate limits, forwarding.
#[derive(Parser)]
#[command(name = "tollgate", version = VERSION, about)]
struct Cli {
    /// Configuration file.
    #[arg(short = 'c', long = "config", default_value = "gateway.toml")]
    config: PathBuf,
    /// Check the configuration, print every problem as FILE:LINE:COL, and exit.
    #[arg(short = 't', long = "test")]
    test: bool,
    /// Binary upgrade: start beside a tollgate already serving these addresses (both
    /// accept, each with its own limits, until the old one is stopped with SIGTERM).
    /// Without it, an address another process listens on fails the start.
    #[arg(long = "upgrade")]
    upgrade: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Translate an nginx configuration (includes followed) into a gateway.toml, and
    /// report each directive on stderr: exact, approx (the difference) or unsupported
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Import { nginx_conf, output }) = &cli.command {
        return import(nginx_conf, output.as_deref());
    }
    tracing_subscriber::fmt()
        .with_env_filter(error_log_filter())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let config = match tollgate::load(&cli.config) {
        Ok(config) => {
            for warning in config.warnings() {
                eprintln!("warning: {warning}");
            }
            config
        }
        Err(errors) => {
            eprintln!("{errors}");
            if cli.test {
                eprintln!("configuration test failed");
            }
            return ExitCode::FAILURE;
        }
    };
    if cli.test {
        return test(&config, &cli.config);
    }
    run(config, &cli.config, cli.upgrade)
}

/// `RUST_LOG` (default `info`) with h2 kept quiet unless named
/// ([`tollgate::error_log_directives`]);
/// a `RUST_LOG` that does not parse is left for the default, as before.
fn error_log_filter() -> tracing_subscriber::EnvFilter {
    use tollgate::error_log_directives as directives;
    let rust_log = std::env::var("RUST_LOG").ok();
    tracing_subscriber::EnvFilter::try_new(directives(rust_log.as_deref()))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives(None)))
}

/// `-t` on a valid file: what the file check cannot say ([`tollgate::check`]).
fn test(config: &Config, path: &Path) -> ExitCode {
    let checked = tollgate::check(config);
    for note in &checked.notes {
        eprintln!("note: {note}");
    }
    if let Some(problem) = checked.problem {
        eprintln!("{}: {problem}", path.display());
        eprintln!("configuration test failed");
        return ExitCode::FAILURE;
    }
    println!("configuration ok");
    ExitCode::SUCCESS
}

/// `tollgate import`: the gateway.toml to `output` (or stdout), the report to stderr,
/// then what `-t` would say of the file written, if anything.
fn import(nginx_conf: &Path, output: Option<&Path>) -> ExitCode {
    let imported = match tollgate::import(nginx_conf) {
        Ok(imported) => imported,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    let written = match output {
        Some(path) => std::fs::write(path, &imported.toml),
        None => std::io::Write::write_all(&mut std::io::stdout(), imported.toml.as_bytes()),
    };
    if let Err(err) = written {
        let to = output.map_or("stdout".into(), |p| p.display().to_string());
        eprintln!("tollgate import: cannot write {to}: {err}");
        return ExitCode::FAILURE;
    }
    eprintln!("{}", imported.report);
    let mut code = imported.report.exit_code();
    // Relative paths in the file are read from its directory, as `-t` would.
    let origin = output.map_or_else(
        || Path::new("gateway.toml").to_path_buf(),
        Path::to_path_buf,
    );
    if let Err(errors) = tollgate::from_str(&imported.toml, &origin) {
        eprintln!("the gateway.toml written does not pass `tollgate -t` yet:\n{errors}");
        code = 2;
    }
    ExitCode::from(code)
}

fn run(config: Config, path: &Path, upgrade: bool) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("tollgate: cannot start: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let mut signals = match Signals::install() {
            Ok(signals) => signals,
            Err(err) => {
                eprintln!("tollgate: cannot install signal handlers: {err}");
                return ExitCode::FAILURE;
            }
        };
        let started = match upgrade {
            true => Gateway::start_beside(config),
            false => Gateway::start(config),
        };
        let gateway = match started {
            Ok(gateway) => gateway,
            Err(err) => {
                eprintln!("tollgate: {err}");
                return ExitCode::FAILURE;
            }
        };
        loop {
            match signals.next().await {
                Intent::Stop => break,
                Intent::Reload => reload(&gateway, path),
                Intent::ReopenLogs => match gateway.reopen_logs() {
                    Ok(()) => tracing::info!("SIGUSR1: access log reopened"),
                    Err(err) => tracing::error!("SIGUSR1: cannot reopen the access log: {err}"),
                },
            }
        }
        tracing::info!("shutting down: no new connections, draining open ones");
        let stopped = gateway.stop();
        tokio::pin!(stopped);
        tokio::select! {
            () = &mut stopped => ExitCode::SUCCESS,
            _ = signals.next() => {
                tracing::warn!("second stop signal: exiting without waiting");
                ExitCode::FAILURE
            }
        }
    })
}

/// SIGHUP: re-reads and validates the file, then puts it in force; an invalid file
/// changes nothing, and its every problem goes to the error log.
fn reload(gateway: &Gateway, path: &Path) {
    let in_force = gateway.generation();
    match gateway.reload_file(path) {
        Ok(generation) => tracing::info!(generation, "reloaded {}", path.display()),
        Err(err) => tracing::error!(
            generation = in_force,
            "reload failed, the configuration in force stays:\n{err}"
        ),
    }
}
