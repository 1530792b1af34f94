//! Transport errors that carry protocol facts: method, redacted URL, status, the registry's
//! decoded `errors` array, and the kind of network failure. The engine turns them into
//! verdicts; nothing here decides one.

use std::fmt;
use std::time::Duration;

/// One entry of a registry error body `{"errors":[{"code","message","detail"}]}`
/// (OCI distribution-spec "Error Codes").
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub(crate) struct Diagnostic {
    /// Spec code such as `MANIFEST_UNKNOWN`, `NAME_UNKNOWN`, `DENIED`.
    #[serde(default)]
    pub code: String,
    /// Registry-provided message.
    #[serde(default)]
    pub message: String,
}

/// Decode the `errors` array of an error body; anything else gives an empty list.
pub(crate) fn parse_diagnostics(body: &[u8]) -> Vec<Diagnostic> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Diagnostic>,
    }
    serde_json::from_slice::<Envelope>(body)
        .map(|e| e.errors)
        .unwrap_or_default()
}

/// Why a request produced no HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The name did not resolve (the pod's DNS can differ from the node's).
    Dns(String),
    /// TCP connection refused, reset or unreachable.
    Connect(String),
    /// TLS handshake failed, e.g. the certificate is not trusted or is for another name.
    Tls(String),
    /// An HTTPS request got a plain-HTTP answer from `HOST:PORT`: the registry serves
    /// plain HTTP and was not configured as such. Not retried: the answer won't change.
    PlainHttp(String),
    /// A plain-HTTP request to `HOST:PORT` got the answer of a server that speaks HTTPS
    /// there: the registry was configured insecure but serves TLS. Not retried.
    HttpsOnly(String),
    /// The request's deadline passed.
    Timeout,
    /// Redirect loop or a redirect the guard refused.
    Redirect(String),
    /// A body exceeded its cap (bytes).
    TooLarge(usize),
    /// The guard refused the destination before anything was sent.
    Guard(super::guard::GuardError),
    /// Anything else from the HTTP stack.
    Other(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Dns(m) => write!(f, "cannot resolve host: {m}"),
            Failure::Connect(m) => write!(f, "cannot connect: {m}"),
            Failure::Tls(m) => write!(f, "TLS: {m}"),
            Failure::PlainHttp(host) => write!(
                f,
                "{host} answered HTTPS with plain HTTP; if it serves plain HTTP, pass \
--insecure-registry {host} or give it a hosts.toml with server = \"http://{host}\""
            ),
            Failure::HttpsOnly(host) => write!(
                f,
                "{host} speaks HTTPS, not plain HTTP; drop --insecure-registry {host} (or the \
http:// server in its hosts.toml) and trust its certificate with --ca-file, or skip_verify in hosts.toml"
            ),
            Failure::Timeout => f.write_str("timed out"),
            Failure::Redirect(m) => write!(f, "redirect: {m}"),
            Failure::TooLarge(n) => write!(f, "response body larger than {n} bytes"),
            Failure::Guard(m) => write!(f, "refused by the address guard: {m}"),
            Failure::Other(m) => f.write_str(m),
        }
    }
}

/// A failed registry request: either an HTTP status the caller must interpret, or no
/// response at all.
#[derive(Debug, Clone)]
pub(crate) enum RegistryError {
    /// The registry (or token server) answered with a non-success status.
    Status {
        /// `HEAD`, `GET`.
        method: String,
        /// The URL without query string or credentials.
        url: String,
        /// HTTP status code.
        status: u16,
        /// Decoded error body (empty for HEAD: HEAD responses have no body).
        diagnostics: Vec<Diagnostic>,
        /// `Retry-After`, when given in seconds.
        retry_after: Option<Duration>,
        /// Whether an `Authorization` header derived from a credential was sent.
        credential_sent: bool,
        /// True when the status came from the token endpoint, not the registry.
        from_token_endpoint: bool,
    },
    /// No HTTP response.
    Transport {
        /// `HEAD`, `GET`.
        method: String,
        /// The URL without query string or credentials.
        url: String,
        /// What went wrong.
        failure: Failure,
    },
    /// The registry answered, but with something unusable (bad digest header, undecodable
    /// token response, mismatched content).
    Protocol {
        /// The URL without query string or credentials.
        url: String,
        /// What was wrong.
        message: String,
    },
}

/// The statuses worth retrying: 408, 429, 500, 502, 503, 504 — the answers of a registry
/// or proxy that is overloaded or restarting (go-containerregistry
/// `pkg/v1/remote/transport/retry.go` retries the same set; containerd's docker resolver
/// leaves retries to its callers). The one definition: the transport retries exactly
/// these, and the engine calls them transient "after retries".
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

impl RegistryError {
    /// True for failures worth retrying: no response (except guard refusals, oversized
    /// bodies, redirect loops and a plain-HTTP answer), and [`is_retryable_status`].
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            RegistryError::Status { status, .. } => is_retryable_status(*status),
            RegistryError::Transport { failure, .. } => !matches!(
                failure,
                Failure::Guard(_)
                    | Failure::TooLarge(_)
                    | Failure::Redirect(_)
                    | Failure::PlainHttp(_)
                    | Failure::HttpsOnly(_)
            ),
            RegistryError::Protocol { .. } => false,
        }
    }

    /// True for a definite "no" that asking again soon will not change: a status that is
    /// not retried (401, 403, 404…) or a destination the guard refuses. Timeouts, outages
    /// and undecodable answers are not refusals.
    pub(crate) fn is_refusal(&self) -> bool {
        match self {
            RegistryError::Status { status, .. } => !is_retryable_status(*status),
            RegistryError::Transport { failure, .. } => matches!(failure, Failure::Guard(_)),
            RegistryError::Protocol { .. } => false,
        }
    }

    /// `Retry-After` of a status error.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            RegistryError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// HTTP status, if any.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            RegistryError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::Status {
                method,
                url,
                status,
                diagnostics,
                from_token_endpoint,
                ..
            } => {
                let what = if *from_token_endpoint {
                    "token endpoint"
                } else {
                    method.as_str()
                };
                write!(f, "{what} {url}: HTTP {status}")?;
                if method == "HEAD" && diagnostics.is_empty() && !from_token_endpoint {
                    f.write_str(" (HEAD has no body)")?;
                }
                for d in diagnostics.iter().take(3) {
                    write!(f, "; {}: {}", d.code, one_line(&d.message, 160))?;
                }
                Ok(())
            }
            RegistryError::Transport {
                method,
                url,
                failure,
            } => {
                write!(f, "{method} {url}: {failure}")
            }
            RegistryError::Protocol { url, message } => write!(f, "{url}: {message}"),
        }
    }
}

impl std::error::Error for RegistryError {}

/// Collapse whitespace and cut to `max` characters: registry text goes into one-line output.
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let mut out: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.chars().count() > max {
        out = out.chars().take(max).collect::<String>() + "…";
    }
    out
}

pub(crate) use super::redact::redact_url;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_decode_and_ignore_garbage() {
        let d = parse_diagnostics(br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"x"}}]}"#);
        assert_eq!(
            d,
            vec![Diagnostic {
                code: "MANIFEST_UNKNOWN".into(),
                message: "manifest unknown".into()
            }]
        );
        assert_eq!(parse_diagnostics(b"<html>"), vec![]);
    }

    #[test]
    fn redaction_drops_userinfo_and_query() {
        let u = url::Url::parse("https://user:pw@example.com/token?scope=x&account=user").unwrap();
        assert_eq!(redact_url(&u), "https://example.com/token");
    }
}
