//! What the API server answered: the body read within the call's cap, and the one typed
//! [`ApiError`] for an answer the call did not expect or a request that got none.

use std::time::Duration;

use serde_json::Value;

use crate::apiserver::error::{ApiError, BodyProblem, Verb};

/// What an untrusted API server certificate's message tells the user to do.
const CA_HINT: &str = "pass the API server's CA with --apiserver-ca-file (or certificate-authority in the kubeconfig)";
/// Characters of a `Status.message` kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;

/// An answer of any status, its body read within the call's cap.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
    /// `Retry-After`, whole seconds.
    pub retry_after: Option<Duration>,
}

impl Answer {
    /// The body as JSON, if it is.
    pub(crate) fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// The body of `resp`, read chunk by chunk and refused past `max` bytes (before the rest
/// is read: a hostile or broken server can't make the client buffer more).
pub(super) async fn read_answer(
    verb: Verb,
    path: &str,
    mut resp: reqwest::Response,
    max: usize,
) -> Result<Answer, ApiError> {
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_large(verb, path, max));
    }
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(too_large(verb, path, max));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return Err(transport(verb, path, &e)),
        }
    }
    Ok(Answer {
        status,
        body,
        retry_after,
    })
}

/// A request or body read that got no (whole) answer, classified as registry requests are.
pub(super) fn transport(verb: Verb, path: &str, e: &reqwest::Error) -> ApiError {
    ApiError::Transport {
        verb,
        server: e
            .url()
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default(),
        path: path.to_string(),
        failure: crate::registry::http::classify_transport(e, CA_HINT),
    }
}

pub(super) fn too_large(verb: Verb, path: &str, max: usize) -> ApiError {
    ApiError::Body {
        verb,
        path: path.to_string(),
        problem: BodyProblem::TooLarge(max),
    }
}

/// The [`ApiError::Status`] for an answer the call did not expect, with the `Status`
/// object's `reason` and `message` when the body is one.
pub(crate) fn status_error(verb: Verb, path: &str, answer: &Answer) -> ApiError {
    let v = answer.json().unwrap_or(Value::Null);
    ApiError::Status {
        verb,
        path: path.to_string(),
        status: answer.status,
        reason: status_text(&v, "reason"),
        message: status_text(&v, "message"),
        retry_after: answer.retry_after,
    }
}

/// A text field of a `Status` object, cut to [`MAX_MESSAGE_CHARS`]; empty when absent.
pub(super) fn status_text(status: &Value, key: &str) -> String {
    status
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .take(MAX_MESSAGE_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_answers_keep_reason_message_and_retry_after() {
        let answer = Answer {
            status: 429,
            body: br#"{"kind":"Status","reason":"TooManyRequests","message":"too many requests, please try again later","code":429}"#.to_vec(),
            retry_after: Some(Duration::from_secs(1)),
        };
        let e = status_error(Verb::List, "/api/v1/pods", &answer);
        assert_eq!(
            e.to_string(),
            "LIST /api/v1/pods: HTTP 429: too many requests, please try again later"
        );
        assert!(e.is_retryable());
        assert!(matches!(
            &e,
            ApiError::Status { reason, retry_after: Some(d), .. }
                if reason == "TooManyRequests" && *d == Duration::from_secs(1)
        ));
        let forbidden = status_error(
            Verb::Get,
            "/api/v1/namespaces/a/secrets/s",
            &Answer {
                status: 403,
                body: b"not json".to_vec(),
                retry_after: None,
            },
        );
        assert_eq!(
            forbidden.to_string(),
            "GET /api/v1/namespaces/a/secrets/s: HTTP 403"
        );
        assert!(!forbidden.is_retryable());
    }
}
