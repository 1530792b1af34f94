//! The command-line shell over the engine: parse flags, build a plan once, run, report.

pub(crate) mod args;
pub(crate) mod audit;
pub(crate) mod check;
pub(crate) mod explain;
pub(crate) mod init_container;
pub(crate) mod inject;
pub(crate) mod input;
pub(crate) mod lint;
pub(crate) mod plan;
pub(crate) mod plugin;
pub(crate) mod scan;
pub(crate) mod watch;
pub(crate) mod webhook;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::verdict::code;

/// The examples under `--help`, each line starting with `PROGRAM`.
const EXAMPLES: &str = "\
Examples:
  PROGRAM check busybox:1.36 ghcr.io/org/app@sha256:0123…
  PROGRAM check --pull-secrets /var/run/secrets/pullcheck registry.example.com/team/app:v2
  PROGRAM check --platform linux/arm64 --output json nginx:1.27
  PROGRAM explain --pull-secrets ./regcred.json registry.example.com:5000/app:v1
  PROGRAM check --image-credential-provider-config /etc/eks/image-credential-provider/config.json \\
      --image-credential-provider-bin-dir /etc/eks/image-credential-provider \\
      123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app:v1
  PROGRAM check -f refs.txt                     # one reference a line; -f - reads stdin
  PROGRAM scan -f job.yaml
  PROGRAM scan -f k8s/ -f extra.yaml --kinds rayjob-kinds.yaml
  PROGRAM inject --fail-fast --image registry.example.com/pullcheck@sha256:… -f job.yaml | kubectl apply -f -
  PROGRAM inject --remove -f cronjob.yaml | kubectl apply -f -
  PROGRAM lint --strict -f job.yaml
  PROGRAM watch --once -o json
  PROGRAM audit -A                              # which workloads' next pod would fail to pull
  PROGRAM completion bash > /etc/bash_completion.d/pullcheck";

fn after_help() -> String {
    after_help_for("pullcheck")
}

/// `pullcheck webhook --help`'s examples (the chart passes these flags).
const WEBHOOK_EXAMPLES: &str = "\
Examples:
  pullcheck webhook --tls-cert tls.crt --tls-key tls.key --mode warn
  pullcheck webhook --tls-cert tls.crt --tls-key tls.key --fail-fast --transient restart
  pullcheck webhook --tls-cert tls.crt --tls-key tls.key \\
      --image-credential-provider-config /etc/pullcheck/credential-providers/config.yaml \\
      --image-credential-provider-bin-dir /credential-providers/bin
  helm install pullcheck charts/pullcheck -n pullcheck-system --create-namespace";

/// `pullcheck watch --help`'s examples.
const WATCH_EXAMPLES: &str = "\
Examples:
  pullcheck watch --once                     # what it would do now, in a table
  pullcheck watch --once --exit-code         # non-zero (11-14, 20) when it would act
  pullcheck watch --dry-run                  # run, log, count; change nothing
  pullcheck watch --namespace-label pullcheck.io/enabled=true --transient-grace 600
  helm upgrade pullcheck charts/pullcheck --set watch.enabled=true";

/// The examples and the exit-code table, for `program` (`pullcheck`, or `kubectl pullcheck`
/// when run as a kubectl plugin).
pub(crate) fn after_help_for(program: &str) -> String {
    format!(
        "{}\n\nExit codes:\n{}",
        EXAMPLES.replace("PROGRAM", program),
        crate::verdict::exit_code_table(false)
    )
}

/// `pullcheck audit --help`'s epilogue: its examples and the exit codes (`scan`'s rule).
fn audit_help() -> String {
    format!(
        "{}\n\nExit codes (the lowest permanent code among all images, else 20, else 0):\n{}",
        audit::EXAMPLES,
        crate::verdict::exit_code_table(false)
    )
}

/// Fail Kubernetes Jobs fast when an image can't be pulled.
#[derive(Debug, Parser)]
#[command(name = "pullcheck", version, about, long_about = "Decide, the way the kubelet would, \
whether container images can be pulled: kubelet/containerd reference normalization, kubelet \
keyring credential matching, containerd platform matching, HEAD-first resolution. Each failure \
has its own exit code, for Job podFailurePolicy rules.", after_long_help = after_help())]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
    /// More log output on stderr (-v debug, -vv trace). Secrets are never logged.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Output",
        long_help = "More log output on stderr: -v for debug, -vv for trace. Requests are logged \
with redacted URLs; credentials and tokens never appear at any level. RUST_LOG overrides.")]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check images: one verdict per image, exit code for podFailurePolicy.
    #[command(after_long_help = after_help())]
    Check(check::CheckArgs),
    /// Show how an image would be resolved: endpoints, credential keys, platform.
    #[command(after_long_help = after_help())]
    Explain(explain::ExplainArgs),
    /// Check every image referenced by Kubernetes manifests (CI, before kubectl apply).
    #[command(after_long_help = after_help())]
    Scan(scan::ScanArgs),
    /// Add the pullcheck init container (and with --fail-fast a podFailurePolicy).
    Inject(inject::InjectArgs),
    /// Report what keeps a broken image from failing fast (exit 30 with --strict).
    Lint(lint::LintArgs),
    /// Serve the admission webhook (validate and mutate workloads).
    #[command(after_long_help = WEBHOOK_EXAMPLES)]
    Webhook(Box<webhook::WebhookArgs>),
    /// Fail Jobs whose pods the kubelet can't pull images for (a controller).
    #[command(after_long_help = WATCH_EXAMPLES)]
    Watch(Box<watch::WatchArgs>),
    /// Which workloads of a live cluster would fail to pull in their next pod, and why.
    #[command(after_long_help = audit_help())]
    Audit(Box<audit::AuditArgs>),
    /// Print a shell completion script.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum, long_help = "The shell to generate completions for.")]
        shell: clap_complete::Shell,
    },
}

/// A problem with the user's input: printed as one line, exit 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a command ended without its own exit code.
#[derive(Debug)]
pub(crate) enum CliError {
    /// The user's input: one line, exit 2.
    Usage(UsageError),
    /// stdout could not be written (closed pipe, full disk).
    Write(std::io::Error),
    /// pullcheck itself could not run (the async runtime did not start): exit 1, never the
    /// usage code, which says the input was wrong.
    Internal(String),
}

impl From<crate::report::json::RenderError> for CliError {
    fn from(e: crate::report::json::RenderError) -> Self {
        CliError::Internal(e.to_string())
    }
}

impl From<UsageError> for CliError {
    fn from(e: UsageError) -> Self {
        CliError::Usage(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Write(e)
    }
}

/// Parse argv, run the command, and return the process exit code.
///
/// Output errors are handled here once, as ripgrep does: a closed pipe (`| head`) ends the
/// run quietly with 0, since the reader has all it wanted; any other write error (a full
/// disk) is one line and exit 1 (`internal` in the exit-code table), because the output the
/// caller relies on is incomplete and must not pass for a verdict.
pub fn run() -> ExitCode {
    let mut args = std::env::args_os();
    let invocation = plugin::invocation(args.next().as_deref());
    if invocation == plugin::Invocation::KubectlComplete {
        let words: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        return match print(&plugin::complete(&words)) {
            Ok(()) => ExitCode::from(code::OK),
            Err(_) => ExitCode::from(code::INTERNAL),
        };
    }
    let matches = match plugin::command(invocation).try_get_matches() {
        Ok(m) => m,
        Err(e) => return flag_error(e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return flag_error(e),
    };
    let json = cli.command.wants_json();
    init_logging(cli.verbose);
    let result = match cli.command {
        Command::Completion { shell } => completion(shell),
        Command::Check(a) => cli_runtime().and_then(|rt| rt.block_on(check::run(a))),
        Command::Explain(a) => cli_runtime().and_then(|rt| rt.block_on(explain::run(a))),
        Command::Scan(a) => cli_runtime().and_then(|rt| rt.block_on(scan::run(a))),
        Command::Inject(a) => inject::run(a),
        Command::Lint(a) => lint::run(a),
        Command::Webhook(a) => runtime().and_then(|rt| rt.block_on(webhook::run(*a))),
        Command::Watch(a) => runtime().and_then(|rt| rt.block_on(watch::run(*a))),
        Command::Audit(a) => cli_runtime().and_then(|rt| rt.block_on(audit::run(*a))),
    };
    match result {
        Ok(c) => ExitCode::from(c),
        Err(CliError::Usage(e)) => {
            eprintln!("pullcheck: {e}");
            if json {
                // Best effort: the exit code says "usage" even if stdout is gone.
                let _ = print(&json_error(code::USAGE, &e.0));
            }
            ExitCode::from(code::USAGE)
        }
        Err(CliError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::from(code::OK)
        }
        Err(CliError::Write(e)) => {
            eprintln!("pullcheck: cannot write output: {e}");
            ExitCode::from(code::INTERNAL)
        }
        Err(CliError::Internal(e)) => {
            eprintln!("pullcheck: internal error: {e}");
            ExitCode::from(code::INTERNAL)
        }
    }
}

impl Command {
    /// True when the command was asked for one JSON document on stdout (`-o json`).
    fn wants_json(&self) -> bool {
        match self {
            Command::Check(a) => a.output == args::Output::Json,
            Command::Explain(a) => a.output == args::Output::Json,
            Command::Scan(a) => a.output == args::Output::Json,
            Command::Lint(a) => a.output == lint::LintOutput::Json,
            Command::Watch(a) => a.output == args::Output::Json,
            Command::Audit(a) => a.output == audit::AuditOutput::Json,
            Command::Inject(_) | Command::Webhook(_) | Command::Completion { .. } => false,
        }
    }
}

/// The document `-o json` prints when the command ends without its own, e.g. on a usage
/// error: `{"schema_version": 1, "exit_code": 2, "error": "…"}` (docs/json-schema.md), so a
/// script reading stdout always gets a document naming the exit code.
pub(crate) fn json_error(exit_code: u8, error: &str) -> String {
    // A json! value of strings and numbers always serializes.
    crate::report::json::render(&serde_json::json!({
        "schema_version": crate::report::json::SCHEMA_VERSION,
        "exit_code": exit_code,
        "error": error,
    }))
    .expect("a JSON value serializes")
}

/// A flag clap rejects: clap's own message on stderr and exit 2, and with `-o json` (or
/// `--output json`, `--output=json`, `-ojson`) on the command line also [`json_error`] on
/// stdout. `--help` and `--version` are printed as clap prints them.
fn flag_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let _ = e.print();
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if asks_for_json(&argv) {
        let rendered = e.render().to_string();
        let first = rendered.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        let _ = print(&json_error(code::USAGE, message));
    }
    ExitCode::from(code::USAGE)
}

/// The raw command line asks for JSON output, in any of the spellings clap accepts.
fn asks_for_json(argv: &[String]) -> bool {
    argv.iter().enumerate().any(|(i, a)| {
        matches!(a.as_str(), "--output=json" | "-ojson" | "-o=json")
            || (matches!(a.as_str(), "-o" | "--output")
                && argv.get(i + 1).is_some_and(|v| v == "json"))
    })
}

/// Write `text` to stdout and flush it, so that a failed write is seen here rather than
/// lost when the buffer is dropped at exit.
/// Write a command's result and return its exit code. A reader that went away (`| head`)
/// does not change the code: unlike ripgrep's search, the code is the verdict, and a
/// pipeline with `pipefail` must still see a missing image.
pub(crate) fn print_result(text: &str, code: u8) -> Result<u8, CliError> {
    match print(text) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(code),
        Err(e) => Err(CliError::Write(e)),
        Ok(()) => Ok(code),
    }
}

pub(crate) fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn completion(shell: clap_complete::Shell) -> Result<u8, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "pullcheck", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(code::OK)
}

/// The server's runtime: one worker per core it is given (the webhook serves many clients).
fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Internal(format!("cannot start the async runtime: {e}")))
}

/// The one-shot commands' runtime: a single thread. All checks of one run are futures
/// polled by one task and the work is I/O-bound (docs/benchmarks.md), so worker threads
/// only add start-up cost (thread creation, cross-thread wake-ups) to every pod start.
fn cli_runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Internal(format!("cannot start the async runtime: {e}")))
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
