//! The `tollgate` command: flags, logging and exit codes. Everything else is the library.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

use tollgate::{Config, Gateway, Intent, Signals};

mod cli;

use cli::{Cli, Command};

/// jemalloc, so that the memory of connections gone goes back to the system: its background
/// thread purges freed pages after `dirty_decay_ms` (set in .cargo/config.toml), where glibc's
/// malloc kept a fragmented heap at many times its start (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Import { nginx_conf, output }) => {
            return import(nginx_conf, output.as_deref())
        }
        Some(Command::Completions { shell }) => return printed(cli::completions(*shell)),
        Some(Command::Man) => return printed(cli::man()),
        Some(Command::Reload { config }) => {
            return control(config.as_deref().unwrap_or(&cli.config), tollgate::reload)
        }
        Some(Command::Stop { config }) => {
            return control(config.as_deref().unwrap_or(&cli.config), tollgate::stop)
        }
        None => {}
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

/// `tollgate reload` and `tollgate stop`: the file checked as `-t` does (a problem: exit
/// 1, nothing sent), then `command`'s outcome printed.
fn control(path: &Path, command: fn(&Config, &Path) -> tollgate::Outcome) -> ExitCode {
    let config = match tollgate::load(path) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("configuration test failed: nothing was sent");
            return ExitCode::FAILURE;
        }
    };
    if let Some(problem) = tollgate::check(&config).problem {
        eprintln!("{}: {problem}", path.display());
        eprintln!("configuration test failed: nothing was sent");
        return ExitCode::FAILURE;
    }
    let outcome = command(&config, path);
    match outcome.done {
        true => println!("{}", outcome.text),
        false => eprintln!("tollgate: {}", outcome.text),
    }
    ExitCode::from(u8::from(!outcome.done))
}

/// The exit status of printing a completion script or the man page.
fn printed(result: std::io::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("tollgate: cannot write to stdout: {err}");
            ExitCode::FAILURE
        }
    }
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
    for warning in &checked.warnings {
        eprintln!("warning: {warning}");
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
/// changes nothing, and its every problem goes to the error log. Either way one line
/// at info level or above says so (`tollgate reload` reads the same from `/status`).
fn reload(gateway: &Gateway, path: &Path) {
    // The numbers go in the text, not in tracing fields, which the log would print
    // after the last line of the errors.
    let in_force = gateway.generation();
    match gateway.reload_file(path) {
        Ok(generation) => tracing::info!("reloaded {}: generation {generation}", path.display()),
        Err(err) => tracing::error!("reload failed; generation {in_force} stays in force:\n{err}"),
    }
}
