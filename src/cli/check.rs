//! `pullcheck check`: verdicts for images, exit code for podFailurePolicy.

use std::path::{Path, PathBuf};

use clap::Args;

use super::args::{Output, ResolveArgs};
use super::input::{read_references, stdin_at_most_once};
use super::{CliError, UsageError};
use crate::engine::Engine;
use crate::report::{json, termination, text};
use crate::verdict::combined_exit_code;

/// Arguments of `pullcheck check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Image references, as written in a pod spec.
    #[arg(
        value_name = "IMAGE",
        required_unless_present = "files",
        help_heading = "Input",
        long_help = "Image references exactly as in a pod spec (busybox, ghcr.io/org/app:v1, \
repo@sha256:…). They are normalized like the kubelet does (docker.io, library/, latest)."
    )]
    pub images: Vec<String>,

    /// File of image references, one a line, or - for stdin (repeatable).
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        help_heading = "Input",
        long_help = "A file of image references, one a line, or '-' to read them from stdin; \
repeatable, and combined with IMAGE arguments (those first, then each file in order). Surrounding \
whitespace is trimmed; blank lines and lines starting with # are skipped. A line with whitespace \
inside is an error naming the file and line. A path is a regular file or a pipe (-f <(…)), read \
while it keeps sending; a named pipe silent for 30 s is an error."
    )]
    pub files: Vec<PathBuf>,

    #[command(flatten)]
    pub resolve: ResolveArgs,

    /// Output format, on stdout (warnings go to stderr).
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT", default_value_t = Output::Text, help_heading = "Output",
        long_help = "text: one line per image on stdout. json: only the JSON document on stdout \
(docs/json-schema.md); the text lines are not printed at all. Warnings and notes go to stderr \
in both formats.")]
    pub output: Output,

    /// Termination-message file (default /dev/termination-log when it exists).
    #[arg(
        long = "termination-log",
        value_name = "FILE",
        help_heading = "Output",
        env = "PULLCHECK_TERMINATION_LOG",
        hide_env_values = true,
        long_help = "Where to write a summary of at most 4 KiB for `kubectl describe pod`. \
Default: /dev/termination-log if it exists (inside Kubernetes), else nothing."
    )]
    pub termination_log: Option<PathBuf>,

    /// Index bodies already read (the webhook's annotation, as a file): HEADs suffice then.
    #[arg(
        long = "index-bodies",
        value_name = "FILE",
        env = "PULLCHECK_INDEX_BODIES",
        help_heading = "Input",
        long_help = "A JSON object from index digest to index body, as the webhook writes it into the \
pod-template annotation pullcheck.io/index-bodies and the injected init container reads it (downward-API \
volume). A body is used only when it hashes to its digest and the tag's HEAD answers that digest, so on a \
metered registry (Docker Hub) the platform is verified without a GET. An unreadable or empty file, or a body \
that doesn't match its digest, is skipped with a warning: the check goes on as without it."
    )]
    pub index_bodies: Option<PathBuf>,

    /// Registry configuration handed over by the webhook (its annotation, as a file).
    #[arg(
        long = "registry-config",
        value_name = "FILE",
        env = "PULLCHECK_REGISTRY_CONFIG",
        help_heading = "Input",
        long_help = "The JSON the webhook (or inject --insecure-registry/--ca-file/--hosts-dir) writes into \
the pod-template annotation pullcheck.io/registry-config, read by the injected init container through a \
downward-API volume: the endpoints of each registry it lists (plain HTTP, mirrors, skip_verify, their CAs) \
replace --hosts-dir and --insecure-registry for that registry, its caBundles are trusted beside --ca-file, \
its metered settings replace --metered-registry and --metered-get. An unreadable or malformed file is a usage \
error (exit 2): checking without it would report the webhook's registries as unreachable. An empty file \
(the annotation was removed) is a warning, and the check runs with the flags alone."
    )]
    pub registry_config: Option<PathBuf>,

    /// No per-image lines, warnings or notes; the exit code alone.
    #[arg(
        long,
        short,
        help_heading = "Output",
        long_help = "Print no per-image lines, warnings or notes: the exit code (and the \
termination log) carry the verdict. With --output json the document is still printed."
    )]
    pub quiet: bool,
}

/// Run the check and report; returns the exit code.
pub(crate) async fn run(mut a: CheckArgs) -> Result<u8, CliError> {
    if a.images.iter().any(|i| i == "-") {
        return Err(UsageError(
            "'-' is not an image reference; to read references from stdin, use -f -".into(),
        )
        .into());
    }
    stdin_at_most_once(&a.files)?;
    for f in &a.files {
        a.images.extend(read_references(f)?);
    }
    super::plan::validate_hosts(&a.resolve, &a.images)?;
    let handed = match &a.registry_config {
        Some(path) => read_registry_config(path, a.quiet)?,
        None => None,
    };
    let (plan, registry) = super::plan::build_handed(&a.resolve, handed)?;
    let engine = Engine::new(plan, registry);
    if let Some(path) = &a.index_bodies {
        for w in remember_index_bodies(&engine, path).await {
            if !a.quiet {
                eprintln!("pullcheck: warning: {w}");
            }
        }
    }
    let outcomes = engine.check_all(&a.images).await;
    let code = combined_exit_code(outcomes.iter().map(|o| o.verdict));
    if !a.quiet {
        text::print_warnings(&outcomes);
    }
    // The termination log is written even when stdout fails: it is what the Job's pod shows.
    let printed = match a.output {
        Output::Json => super::print_result(&json::document(&outcomes, code)?, code),
        Output::Text if a.quiet => Ok(code),
        Output::Text => {
            let lines: String = outcomes.iter().map(|o| text::line(o) + "\n").collect();
            super::print_result(&lines, code)
        }
    };
    if let Some(path) = termination_path(a.termination_log.as_deref())
        && let Err(e) = termination::write(&path, &outcomes, code)
    {
        eprintln!("pullcheck: termination log {}: {e}", path.display());
    }
    tracing::debug!(
        requests = engine.registry().requests_sent(),
        token_fetches = engine.registry().token_fetches(),
        "done"
    );
    printed
}

/// Largest `--registry-config` file read (the annotation fits the 64 KiB budget).
const MAX_REGISTRY_CONFIG_FILE: u64 = 1024 * 1024;

/// Read and decode `--registry-config`. Strict: a file that can't be used is a usage error
/// naming it, since checking without it reports the webhook's registries as unreachable
/// (exit 20, retried) or untrusted; an empty file is a warning (the annotation is gone).
fn read_registry_config(
    path: &Path,
    quiet: bool,
) -> Result<Option<crate::engine::handover::Received>, CliError> {
    let shown = path.display();
    let bad = |e: String| {
        super::UsageError(format!(
            "--registry-config {shown}: {e}; it must be the pullcheck.io/registry-config annotation the webhook wrote (inject again, or use a checker image as new as the webhook)"
        ))
    };
    let text = crate::files::read_capped_text(path, MAX_REGISTRY_CONFIG_FILE)
        .map_err(|e| bad(e.to_string()))?;
    let received = crate::engine::handover::decode(&text).map_err(|e| bad(e.to_string()))?;
    if received.is_none() && !quiet {
        eprintln!(
            "pullcheck: warning: --registry-config {shown}: empty (the pod template has no pullcheck.io/registry-config annotation); checking with the flags alone"
        );
    }
    Ok(received)
}

/// Largest `--index-bodies` file read (the annotation is at most 64 KiB).
const MAX_INDEX_BODIES_FILE: u64 = 1024 * 1024;

/// Load `--index-bodies` into the engine; the warnings, at most one line per kind of
/// problem. Never fails: the file only spares GETs, so without it the check runs as it
/// always does.
async fn remember_index_bodies(engine: &Engine, path: &Path) -> Vec<String> {
    use crate::engine::BodyRefused;
    let shown = path.display();
    let text = match crate::files::read_capped_text(path, MAX_INDEX_BODIES_FILE) {
        Ok(t) => t,
        Err(e) => return vec![format!("--index-bodies {shown}: {e}; checking without it")],
    };
    let bodies = match crate::k8s::index_bodies::decode(&text) {
        Ok(b) => b,
        Err(e) => return vec![format!("--index-bodies {shown}: {e}; checking without it")],
    };
    let refused = engine.remember_index_bodies(bodies).await;
    let line = |kind: BodyRefused, one: &dyn Fn(&str) -> String, many: &str| {
        let of_kind: Vec<&str> = refused
            .iter()
            .filter(|(_, k)| *k == kind)
            .map(|(d, _)| d.as_str())
            .collect();
        match of_kind.as_slice() {
            [] => None,
            [d] => Some(format!("--index-bodies {shown}: {}: not used", one(d))),
            [d, ..] => Some(format!(
                "--index-bodies {shown}: {} {many} (the first: {d}): not used",
                of_kind.len()
            )),
        }
    };
    [
        line(
            BodyRefused::NotADigest,
            &|d| format!("{d} is not a digest"),
            "keys are not digests",
        ),
        line(
            BodyRefused::Mismatch,
            &|d| format!("the body for {d} does not hash to that digest"),
            "bodies do not hash to their digests",
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn termination_path(flag: Option<&Path>) -> Option<PathBuf> {
    match flag {
        Some(p) => Some(p.to_path_buf()),
        None => {
            let d = Path::new(termination::DEFAULT_PATH);
            d.exists().then(|| d.to_path_buf())
        }
    }
}
