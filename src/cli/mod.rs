//! The command-line shell over the engine: parse flags, build a plan once, run, report.

pub mod args;
pub mod check;
pub mod explain;
pub mod inject;
pub mod lint;
pub mod plan;
pub mod scan;
pub mod webhook;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::verdict::code;

/// A problem with the user's input: printed as one line, exit 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parse argv, run the command, and return the process exit code.
pub fn run() -> ExitCode {
    let cli = args::Cli::parse();
    init_logging(cli.verbose);
    let result = match cli.command {
        args::Command::Completion { shell } => {
            clap_complete::generate(
                shell,
                &mut args::Cli::command(),
                "pullcheck",
                &mut std::io::stdout(),
            );
            Ok(code::OK)
        }
        args::Command::Check(a) => cli_runtime().and_then(|rt| rt.block_on(check::run(a))),
        args::Command::Explain(a) => cli_runtime().and_then(|rt| rt.block_on(explain::run(a))),
        args::Command::Scan(a) => cli_runtime().and_then(|rt| rt.block_on(scan::run(a))),
        args::Command::Inject(a) => inject::run(a),
        args::Command::Lint(a) => lint::run(a),
        args::Command::Webhook(a) => runtime().and_then(|rt| rt.block_on(webhook::run(*a))),
    };
    match result {
        Ok(c) => ExitCode::from(c),
        Err(e) => {
            eprintln!("pullcheck: {e}");
            ExitCode::from(code::USAGE)
        }
    }
}

/// The server's runtime: one worker per core it is given (the webhook serves many clients).
fn runtime() -> Result<tokio::runtime::Runtime, UsageError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| UsageError(format!("cannot start the async runtime: {e}")))
}

/// The one-shot commands' runtime: a single thread. All checks of one run are futures
/// polled by one task and the work is I/O-bound (docs/benchmarks.md), so worker threads
/// only add start-up cost (thread creation, cross-thread wake-ups) to every pod start.
fn cli_runtime() -> Result<tokio::runtime::Runtime, UsageError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| UsageError(format!("cannot start the async runtime: {e}")))
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "pullcheck=debug",
        _ => "pullcheck=trace,reqwest=debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .with_target(false)
        .try_init();
}
