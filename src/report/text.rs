//! One line per image: verdict, normalized reference, whole digest, platform, registry,
//! elapsed ms, and for failures the detail.

use crate::engine::{Outcome, PlatformResult};

/// The line for one outcome (no trailing newline).
pub(crate) fn line(o: &Outcome) -> String {
    let reference = super::printable(o.reference.as_deref().unwrap_or(&o.image));
    let mut s = format!("{:<17} {}", o.verdict.as_str(), reference);
    // The whole digest, as `crane digest` prints it: it is what a user pins
    // (`image@sha256:…`), and a prefix can't be pinned.
    if let Some(d) = &o.digest {
        s.push_str(&format!(" {d}"));
    }
    if let Some(p) = platform(o) {
        s.push(' ');
        s.push_str(&p);
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

/// The platform step in words, e.g. `platform linux/amd64 (single-platform image)`, or for
/// an OCI artifact `artifact TYPE (no platform)`; the JSON document keeps the structured
/// `platform` and `artifact` objects. `None` when the step was not reached.
fn platform(o: &Outcome) -> Option<String> {
    let p = &o.platform;
    if p.result == PlatformResult::Artifact {
        // An artifact has no platform to name: say what it is instead.
        let what = o.artifact.as_ref().map_or("?", |a| a.type_name());
        return Some(format!("artifact {} (no platform)", super::printable(what)));
    }
    let Some(target) = &p.target else {
        // Why it was skipped is the note printed under the line.
        return (p.result == PlatformResult::NotChecked).then(|| "platform not verified".into());
    };
    // The entry chosen, when it is spelled differently from the target (linux/arm64/v8).
    let entry = match p.matched.as_deref() {
        Some(m) if m != target => format!(": {m}"),
        _ => String::new(),
    };
    let how = match p.result {
        PlatformResult::Exact => format!("exact match in the index{entry}"),
        PlatformResult::Fallback => format!("only a fallback matches in the index{entry}"),
        PlatformResult::NoPlatformField => "an index entry without a platform matches".into(),
        PlatformResult::SingleManifest => "single-platform image".into(),
        PlatformResult::Artifact => unreachable!("named above"),
        PlatformResult::Missing => "not in the index".into(),
        PlatformResult::NotChecked => "not verified".into(),
        PlatformResult::NotReached => return None,
    };
    Some(format!("platform {target} ({how})"))
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
