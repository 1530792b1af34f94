//! The termination message: a summary of at most 4096 bytes that the kubelet copies into the
//! container status (`terminationMessagePath`, default `/dev/termination-log`), so
//! `kubectl describe pod` says which image failed and why.

use std::path::Path;

use crate::engine::Outcome;
use crate::verdict::Verdict;

/// The kubelet's limit for one container's termination message, in bytes.
pub(crate) const MAX_BYTES: usize = 4096;

/// The default path inside a Kubernetes container.
pub(crate) const DEFAULT_PATH: &str = "/dev/termination-log";

/// The summary text: a headline, then one line per failing image (pullable ones are only
/// counted), cut at a line boundary to fit [`MAX_BYTES`].
pub(crate) fn summary(outcomes: &[Outcome], exit_code: u8) -> String {
    let failing: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.verdict != Verdict::Pullable)
        .collect();
    let mut s = if failing.is_empty() {
        match outcomes.len() {
            1 => "pullcheck: the image is pullable\n".to_string(),
            n => format!("pullcheck: all {n} images pullable\n"),
        }
    } else {
        format!(
            // "1 of 1 images" stays: scripts/image-smoke.sh and recorded results match it.
            "pullcheck: exit {exit_code}: {} of {} images not pullable\n",
            failing.len(),
            outcomes.len()
        )
    };
    for (i, o) in failing.iter().enumerate() {
        let line = format!(
            "{} {}: {}\n",
            o.verdict.as_str(),
            super::printable(o.reference.as_deref().unwrap_or(&o.image)),
            super::printable(&o.detail)
        );
        let more = format!("… and {} more\n", failing.len() - i);
        if s.len() + line.len() + more.len() > MAX_BYTES {
            s.push_str(&more);
            break;
        }
        s.push_str(&line);
    }
    truncate_at_char(s, MAX_BYTES)
}

fn truncate_at_char(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// Write the summary to `path`. Errors are returned for the caller to log; a failed write
/// never changes the exit code.
///
/// Opened with `O_NONBLOCK`, so the write can't hold the exit past every deadline: the
/// kubelet's file is a regular file, and a named pipe with no reader is an error at once
/// ("a named pipe with no reader") instead of an `open` that waits for one. The summary is
/// at most [`MAX_BYTES`], within one pipe buffer, so a pipe with a reader takes it whole.
pub(crate) fn write(path: &Path, outcomes: &[Outcome], exit_code: u8) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => std::io::Error::other("a named pipe with no reader"),
            _ => e,
        })?;
    file.write_all(summary(outcomes, exit_code).as_bytes())
}
