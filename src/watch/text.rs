//! The words the watch writes: the condition's and Events' text about a failure, why a
//! failure is only reported; what a pod wrote is escaped for a terminal or a log line by
//! [`printable`] (the report's rule).

use super::decide::{Owner, Why};
use super::pod::Failure;
// What a pod writes (image names, messages) is escaped by the same rule as every report line.
pub(crate) use crate::report::printable;
use crate::verdict::Verdict;

/// The text of the condition and the Events: the container, the image, what the kubelet
/// said and what it means.
pub(crate) fn explain_failure(f: &Failure, verdict: Verdict) -> String {
    let reason = f
        .classification
        .reason
        .map(|r| r.as_str())
        .unwrap_or("unknown");
    let phrase = f
        .classification
        .matched
        .phrase()
        .unwrap_or("no known phrase");
    let said = if phrase == reason {
        reason.to_string()
    } else {
        format!("{reason}: {phrase}")
    };
    let what = match &f.volume {
        Some(v) => format!("image volume {}", printable(v)),
        None => "image".to_string(),
    };
    format!(
        "container {}: {what} {}: {} ({said})",
        printable(&f.container),
        printable(&f.image),
        verdict.as_str()
    )
}

/// Why a failure is only reported, in a sentence.
pub(crate) fn why_text(why: &Why) -> String {
    match why {
        Why::Unknown => "the kubelet's message matches no known pull failure; nothing done".into(),
        Why::BehindMirrors { kubelet } => format!(
            "the kubelet says {} through registry mirrors, which may hide the upstream's answer; nothing done",
            kubelet.as_str()
        ),
        Why::TransientGraceOff => {
            "a transient failure and --transient-grace is off; the kubelet keeps retrying".into()
        }
        // A bare pod has nobody to recreate it: deleting it would only lose it.
        Why::NotAJob {
            owner: Owner::BarePod,
            verdict,
        } => format!(
            "{} but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done",
            verdict.as_str()
        ),
        Why::NotAJob { owner, verdict } => format!(
            "{} but the pod's controller is {}, not a batch/v1 Job: deleting it would only make its controller recreate it; nothing done",
            verdict.as_str(),
            owner.describe()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_a_job_names_the_owner_in_words() {
        let rs = why_text(&Why::NotAJob {
            owner: Owner::ReplicaSet,
            verdict: Verdict::NotFound,
        });
        assert_eq!(
            rs,
            "not_found but the pod's controller is a ReplicaSet (a Deployment's), not a batch/v1 Job: deleting it would only make its controller recreate it; nothing done"
        );
        // A bare pod has no controller to recreate it (the text once said "controller is BarePod").
        let bare = why_text(&Why::NotAJob {
            owner: Owner::BarePod,
            verdict: Verdict::NotFound,
        });
        assert_eq!(
            bare,
            "not_found but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done"
        );
    }

    #[test]
    fn what_a_pod_writes_is_printed_escaped() {
        assert_eq!(
            printable("r.io/a\u{1b}[31mX\tb:v1"),
            "r.io/a\\u{1b}[31mX\\tb:v1"
        );
        assert_eq!(printable("plain/ünïcode:v1"), "plain/ünïcode:v1");
    }
}
