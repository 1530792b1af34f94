//! The one error of a Kubernetes API call: [`ApiError`]. Every face that talks to the API
//! (the webhook's reads and writes, the watch, the controllers to come) gets this value, so
//! "is it worth asking again" and "what does the user fix" are answered once
//! ([`ApiError::is_retryable`], [`ApiError::status`]).

use std::fmt;
use std::time::Duration;

use super::auth::CredentialError;
use crate::registry::error::Failure;

/// What a call does, as its messages name it. `List` and `Watch` are GETs on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=1`.
    Watch,
    /// POST.
    Create,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl Verb {
    /// The HTTP method on the wire.
    pub(crate) fn method(self) -> reqwest::Method {
        match self {
            Verb::Get | Verb::List | Verb::Watch => reqwest::Method::GET,
            Verb::Create => reqwest::Method::POST,
            Verb::Patch => reqwest::Method::PATCH,
            Verb::Delete => reqwest::Method::DELETE,
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Create => "POST",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
        })
    }
}

/// What was wrong with an answer's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyProblem {
    /// Longer than the call's cap (bytes); reading stopped there.
    TooLarge(usize),
    /// Not the JSON expected (what was expected, e.g. "a JSON object", "a watch event").
    NotJson(&'static str),
}

impl fmt::Display for BodyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyProblem::TooLarge(n) => write!(f, "larger than {n} bytes"),
            BodyProblem::NotJson(what) => write!(f, "the answer is not {what}"),
        }
    }
}

/// A Kubernetes API call that failed. One line: the verb, the URL path, what went wrong.
/// Cheap to clone (caches hand one error to every waiter).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ApiError {
    /// The caller's budget ended before the request could start.
    #[error("{verb} {path}: no time left")]
    NoTimeLeft {
        /// The call.
        verb: Verb,
        /// The URL path.
        path: String,
    },
    /// No credential to send: the token file can't be read, the exec plugin failed.
    #[error("{verb} {path}: {source}")]
    Credentials {
        /// The call.
        verb: Verb,
        /// The URL path.
        path: String,
        /// Why (boxed: an exec plugin's error names its command and kubeconfig entry, and
        /// every `Result<_, ApiError>` would carry that size).
        source: Box<CredentialError>,
    },
    /// No answer: DNS, connect, TLS, timeout (the registry layer's classification,
    /// [`crate::registry::http::classify_transport`]).
    #[error("{verb} {server}{path}: {failure}")]
    Transport {
        /// The call.
        verb: Verb,
        /// The API server, `scheme://host:port` (which server did not answer is the first
        /// thing to check, as kubectl's "Unable to connect to the server" names it).
        server: String,
        /// The URL path.
        path: String,
        /// What failed.
        failure: Failure,
    },
    /// An HTTP status the call does not expect, with the API's `Status` fields when the
    /// body is one (`reason` such as `Forbidden`, `message` cut to 300 characters) and the
    /// `Retry-After` header (API Priority and Fairness answers 429 with one).
    #[error("{verb} {path}: HTTP {status}{}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    Status {
        /// The call.
        verb: Verb,
        /// The URL path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// `Status.reason`, or empty.
        reason: String,
        /// `Status.message`, or empty.
        message: String,
        /// `Retry-After`, in whole seconds as the header gives it.
        retry_after: Option<Duration>,
    },
    /// The body is too large or not the JSON expected.
    #[error("{verb} {path}: {problem}")]
    Body {
        /// The call.
        verb: Verb,
        /// The URL path.
        path: String,
        /// What is wrong with it.
        problem: BodyProblem,
    },
}

impl ApiError {
    /// The HTTP status, when the server answered with one.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when asking again later may succeed: no answer at all (transport), or a status
    /// that says "later" ([`super::is_retryable_status`]). A refused credential, a missing
    /// permission or a malformed answer are the caller's to fix.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            ApiError::Transport { .. } | ApiError::NoTimeLeft { .. } => true,
            ApiError::Status { status, .. } => super::is_retryable_status(*status),
            ApiError::Credentials { source, .. } => source.is_retryable(),
            ApiError::Body { .. } => false,
        }
    }
}
