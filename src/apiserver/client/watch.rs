//! A watch as the API server streams it: one JSON event per line (`ADDED`, `MODIFIED`,
//! `DELETED`, `BOOKMARK`, `ERROR` with a `Status`; k8s.io/apimachinery
//! `pkg/apis/meta/v1/types.go` `WatchEvent`), each line held to the call's cap.

use serde_json::Value;

use super::answer::{status_text, too_large, transport};
use crate::apiserver::error::{ApiError, BodyProblem, Verb};

/// One watch event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WatchEvent {
    /// ADDED: the object as it is now.
    Added(Value),
    /// MODIFIED: the object as it is now.
    Modified(Value),
    /// DELETED (or no longer matching the selector): the object as it was last.
    Deleted(Value),
    /// A newer resource version and no object change.
    Bookmark(String),
}

/// An open watch: events one at a time.
pub(crate) struct WatchStream {
    pub(super) path: String,
    pub(super) resp: reqwest::Response,
    pub(super) buf: Vec<u8>,
    pub(super) max_event: usize,
}

impl WatchStream {
    /// The next event; `Ok(None)` when the server ended the watch (its timeout). An `ERROR`
    /// event is an [`ApiError::Status`] with the event's code (410: list again).
    pub(crate) async fn next(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return parse_event(&self.path, &line).map(Some);
            }
            if self.buf.len() > self.max_event {
                return Err(too_large(Verb::Watch, &self.path, self.max_event));
            }
            match self.resp.chunk().await {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                Ok(None) => return Ok(None),
                Err(e) => return Err(transport(Verb::Watch, &self.path, &e)),
            }
        }
    }
}

/// One line of a watch stream (`path`: the watched collection, for messages).
fn parse_event(path: &str, line: &[u8]) -> Result<WatchEvent, ApiError> {
    let bad = || ApiError::Body {
        verb: Verb::Watch,
        path: path.to_string(),
        problem: BodyProblem::NotJson("a watch event"),
    };
    let mut v: Value = serde_json::from_slice(line).map_err(|_| bad())?;
    let object = v.get_mut("object").map(Value::take).unwrap_or(Value::Null);
    match v.get("type").and_then(Value::as_str) {
        Some("ADDED") => Ok(WatchEvent::Added(object)),
        Some("MODIFIED") => Ok(WatchEvent::Modified(object)),
        Some("DELETED") => Ok(WatchEvent::Deleted(object)),
        Some("BOOKMARK") => Ok(WatchEvent::Bookmark(
            object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )),
        Some("ERROR") => Err(ApiError::Status {
            verb: Verb::Watch,
            path: path.to_string(),
            status: object
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .unwrap_or(0),
            reason: status_text(&object, "reason"),
            message: status_text(&object, "message"),
            retry_after: None,
        }),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_lines() {
        let p = "/api/v1/pods";
        assert_eq!(
            parse_event(p, br#"{"type":"ADDED","object":{"metadata":{"name":"p"}}}"#).unwrap(),
            WatchEvent::Added(serde_json::json!({"metadata": {"name": "p"}}))
        );
        assert_eq!(
            parse_event(
                p,
                br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"42"}}}"#
            )
            .unwrap(),
            WatchEvent::Bookmark("42".into())
        );
        let gone = parse_event(p, br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version"}}"#).unwrap_err();
        assert_eq!(gone.status(), Some(410));
        let e = parse_event(
            p,
            br#"{"type":"ERROR","object":{"kind":"Status","code":500,"message":"etcd down"}}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "WATCH /api/v1/pods: HTTP 500: etcd down");
        assert!(e.is_retryable());
        assert_eq!(
            parse_event(p, b"garbage").unwrap_err().to_string(),
            "WATCH /api/v1/pods: the answer is not a watch event"
        );
    }
}
