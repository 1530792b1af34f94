//! One line per image: verdict, normalized reference, digest, platform, registry, elapsed ms,
//! and for failures the detail.

use crate::engine::{Outcome, PlatformResult};

/// The line for one outcome (no trailing newline).
pub(crate) fn line(o: &Outcome) -> String {
    let reference = super::printable(o.reference.as_deref().unwrap_or(&o.image));
    let mut s = format!("{:<17} {}", o.verdict.as_str(), reference);
    if let Some(d) = &o.digest {
        s.push_str(&format!(" {}", short_digest(d)));
    }
    if let Some(t) = &o.platform.target {
        let m = o.platform.matched.as_deref().unwrap_or("-");
        s.push_str(&format!(" platform={t}:{}:{m}", o.platform.result.as_str()));
    } else if o.platform.result == PlatformResult::NotChecked {
        s.push_str(" platform=not-checked");
    }
    if let Some(r) = &o.registry {
        s.push_str(&format!(" registry={r}"));
    }
    if let Some(e) = &o.endpoint
        && Some(e) != o.registry.as_ref()
    {
        s.push_str(&format!(" endpoint={e}"));
    }
    s.push_str(&format!(" {}ms", o.elapsed_ms));
    if o.verdict != crate::verdict::Verdict::Pullable || o.assumed {
        s.push_str(&format!(": {}", super::printable(&o.detail)));
    }
    s
}

/// Extra lines for warnings, each prefixed so they read as belonging to the image.
pub(crate) fn warnings(o: &Outcome) -> Vec<String> {
    let reference = super::printable(o.reference.as_deref().unwrap_or(&o.image));
    let mut w: Vec<String> = o
        .warnings
        .iter()
        .map(|w| format!("warning: {reference}: {w}"))
        .collect();
    if let Some(n) = &o.platform.note
        && o.platform.result == PlatformResult::NotChecked
    {
        w.push(format!("note: {reference}: {n}"));
    }
    w
}

/// Every outcome's warnings and notes, on stderr: they are diagnostics, not results, so
/// stdout carries only the per-image lines or the JSON document whatever the format.
pub(crate) fn print_warnings(outcomes: &[Outcome]) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    for w in outcomes.iter().flat_map(warnings) {
        let _ = writeln!(err, "{w}");
    }
}

/// `sha256:0123456789ab` (first 12 hex characters).
pub(crate) fn short_digest(d: &str) -> String {
    match d.split_once(':') {
        Some((alg, hex)) => format!("{alg}:{}", &hex[..hex.len().min(12)]),
        None => d.to_string(),
    }
}
