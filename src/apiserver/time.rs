//! Timestamps as the Kubernetes API writes and reads them (`metav1.Time`: RFC 3339, whole
//! seconds, UTC), for conditions every controller writes.

use std::time::SystemTime;

/// RFC 3339 UTC in whole seconds, as the API writes timestamps (`2026-12-01T13:22:34Z`).
/// A time outside jiff's range (years -9999..=9999) is written as the epoch.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let ts = jiff::Timestamp::try_from(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    jiff::Timestamp::from_second(ts.as_second())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

/// A timestamp the API wrote (a condition's `lastTransitionTime`: RFC 3339); `None` when
/// it does not read as one.
pub(crate) fn parse_time(text: &str) -> Option<SystemTime> {
    text.parse::<jiff::Timestamp>().ok().map(SystemTime::from)
}
