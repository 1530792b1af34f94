//! `pullcheck check`: verdicts for images, exit code for podFailurePolicy.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::UsageError;
use super::args::{CheckArgs, Output};
use crate::engine::Engine;
use crate::report::{json, termination, text};
use crate::verdict::combined_exit_code;

/// Run the check and report; returns the exit code.
pub async fn run(a: CheckArgs) -> Result<u8, UsageError> {
    super::plan::validate_hosts(&a.resolve, &a.images)?;
    let (plan, registry) = super::plan::build(&a.resolve)?;
    let engine = Engine::new(plan, registry);
    let outcomes = engine.check_all(&a.images).await;
    let code = combined_exit_code(outcomes.iter().map(|o| o.verdict));
    if !a.quiet {
        let mut err = std::io::stderr().lock();
        for o in &outcomes {
            let _ = writeln!(err, "{}", text::line(o));
            for w in text::warnings(o) {
                let _ = writeln!(err, "{w}");
            }
        }
    }
    if a.output == Output::Json {
        let _ = std::io::stdout()
            .lock()
            .write_all(json::document(&outcomes, code).as_bytes());
    }
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
    Ok(code)
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
