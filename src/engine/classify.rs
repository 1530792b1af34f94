//! Registry error → verdict: one exhaustive match, so a new error kind can't silently
//! become exit 1. The rules follow the OCI distribution-spec error codes
//! (`spec.md`, "Error Codes"), containerd's `core/remotes/docker/resolver.go` (a 404 moves to
//! the next host, other errors are kept) and the vendor behaviour README's notes on the verdicts
//! list (Docker Hub, ECR and Harbor answer 401 for repositories that don't exist).

use crate::registry::error::{Failure, RegistryError, is_retryable_status};
use crate::verdict::Verdict;

/// When the guard refused the registry endpoint itself (`endpoint`: `host` or `host:port`)
/// because it is on a loopback address: the detail of a `transient` "not checked". The
/// webhook's guard refuses loopback registries (the CLI's allows them), yet the node's runtime
/// may well pull from one (kind's local registry, a node-local mirror), so this is no fact
/// about the image and must not deny a Job. A registry that sends pullcheck to a loopback
/// realm or redirect target is another host: that stays `denied`.
pub(crate) fn loopback_registry_refused(e: &RegistryError, endpoint: &str) -> Option<String> {
    let RegistryError::Transport {
        failure: Failure::Guard(g),
        ..
    } = e
    else {
        return None;
    };
    let (host, class) = g.refused.as_ref()?;
    let endpoint_host = match endpoint.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => endpoint,
    };
    let endpoint_host = endpoint_host.trim_start_matches('[').trim_end_matches(']');
    (*class == crate::registry::guard::AddrClass::Loopback && host == endpoint_host).then(|| {
        format!(
            "not checked: the address guard refuses loopback registries ({g}); allow them with --allow-loopback-registries (chart: registry.allowLoopback)"
        )
    })
}

/// The verdict and one-line detail for a failed request.
pub(crate) fn verdict_for(e: &RegistryError) -> (Verdict, String) {
    match e {
        RegistryError::Status {
            status,
            diagnostics,
            credential_sent,
            from_token_endpoint,
            ..
        } => {
            let code = diagnostics.first().map(|d| d.code.as_str()).unwrap_or("");
            match status {
                404 => {
                    let what = match code {
                        "NAME_UNKNOWN" => "repository unknown",
                        "MANIFEST_UNKNOWN" => "manifest unknown",
                        _ => "not found",
                    };
                    (Verdict::NotFound, format!("{what} ({e})"))
                }
                401 | 403 if *credential_sent => {
                    let by = if *from_token_endpoint {
                        "token endpoint refused the credentials"
                    } else {
                        "credentials refused or grant lacks pull"
                    };
                    (Verdict::Denied, format!("{by} ({e})"))
                }
                401 | 403 => (
                    Verdict::Unauthenticated,
                    format!(
                        "missing or private: the registry wants credentials and none matched ({e})"
                    ),
                ),
                s if is_retryable_status(*s) => (Verdict::Transient, format!("{e} after retries")),
                // 501, 505…: not retried, still the server's fault.
                500..=599 => (Verdict::Transient, format!("{e}")),
                405 => (
                    Verdict::METHOD_NOT_ALLOWED,
                    format!("the registry refuses HEAD and GET ({e})"),
                ),
                400..=499 => (
                    Verdict::OTHER_CLIENT_ERROR,
                    format!("registry refused the request ({e})"),
                ),
                _ => (Verdict::Transient, format!("unexpected answer ({e})")),
            }
        }
        RegistryError::Transport { failure, .. } => match failure {
            Failure::Guard(m) => (
                Verdict::Denied,
                format!("blocked by pullcheck's address guard: {m}"),
            ),
            Failure::TooLarge(n) => (
                Verdict::NotFound,
                format!("manifest larger than {n} bytes: containerd rejects it as not found ({e})"),
            ),
            // Transient, not retried: containerd fails the same pull without a hosts.toml
            // naming http://, but the node may have one (or an insecure-registry setting)
            // that the pod or webhook running pullcheck lacks, so it is no fact about the
            // image. Retrying would only repeat the same answer, hence no retries.
            // Both protocol mismatches are the probe's configuration, not a fact about the
            // image: the node may be configured differently (containerd's hosts.toml), so
            // they stay transient and are never retried.
            Failure::PlainHttp(_) | Failure::HttpsOnly(_) => (Verdict::Transient, format!("{e}")),
            Failure::Dns(_)
            | Failure::Connect(_)
            | Failure::Tls(_)
            | Failure::Timeout
            | Failure::Redirect(_)
            | Failure::Other(_) => (Verdict::Transient, format!("{e}")),
        },
        RegistryError::Protocol { .. } => (Verdict::Transient, format!("{e}")),
    }
}

/// True when the failure is pullcheck's own address guard refusing the request: a refusal
/// no registry gave, so it says nothing about the image or a credential.
pub(crate) fn is_guard_refusal(e: &RegistryError) -> bool {
    matches!(
        e,
        RegistryError::Transport {
            failure: Failure::Guard(_),
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> RegistryError {
        RegistryError::Status {
            method: "HEAD".into(),
            url: "https://r.example/v2/app/manifests/v1".into(),
            status: code,
            diagnostics: vec![],
            retry_after: None,
            credential_sent: false,
            from_token_endpoint: false,
        }
    }

    #[test]
    fn only_retried_statuses_say_after_retries() {
        assert_eq!(
            verdict_for(&status(503)),
            (
                Verdict::Transient,
                "HEAD https://r.example/v2/app/manifests/v1: HTTP 503 (HEAD has no body) after retries"
                    .to_string()
            )
        );
        assert_eq!(
            verdict_for(&status(501)),
            (
                Verdict::Transient,
                "HEAD https://r.example/v2/app/manifests/v1: HTTP 501 (HEAD has no body)"
                    .to_string()
            )
        );
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(crate::registry::error::is_retryable_status(s), "{s}");
        }
        assert!(!crate::registry::error::is_retryable_status(501));
    }
}
