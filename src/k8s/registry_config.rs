//! The registry configuration handed to the injected check, as the pod template sees it:
//! one annotation ([`ANNOTATION`]) whose text comes from a [`RegistryHandOver`] source.
//!
//! What goes into it, and how `check --registry-config` reads it back, is decided where the
//! registry settings live (`engine::handover`, which implements [`RegistryHandOver`]);
//! this module only names the annotation, carries the source through `InjectOptions`, and
//! tells node-only addresses apart, so `k8s` needs nothing of the registry client.

use std::sync::Arc;

/// The pod-template annotation holding the registry configuration.
pub(crate) const ANNOTATION: &str = "pullcheck.io/registry-config";

/// The hand-over for one template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandOver {
    /// The annotation's text; `None` when nothing differs from a check without flags.
    pub text: Option<String>,
    /// `(registry, endpoint host)` for every endpoint handed over, in order.
    pub hosts: Vec<(String, String)>,
    /// Lines for whoever injects, about settings that did not apply (an
    /// `--insecure-registry HOST` given without the port of the image's `HOST:PORT`).
    pub notes: Vec<String>,
}

/// Where a template's hand-over comes from: the registry settings of whoever injects.
pub trait RegistryHandOver: std::fmt::Debug + Send + Sync {
    /// The hand-over for a template whose images are on `registries` (reference domains,
    /// each once). `Err`: why none can be written (a header that is never copied, an
    /// unreadable file), naming the registry; the template then gets no check.
    fn hand_over(&self, registries: &[String]) -> Result<HandOver, Refusal>;
}

/// Why no hand-over can be written for a template: the check is then not injected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The registry's `hosts.toml` or one of its CA files can't be read.
    #[error("registry {registry}: {message}")]
    Unreadable {
        /// The registry host of the image.
        registry: String,
        /// What failed, naming the file.
        message: String,
    },
    /// An endpoint of the registry sends `header` entries, which are never handed over.
    #[error(
        "registry {registry}: hosts.toml sends header {} to {endpoint}, never copied into workloads",
        .headers.join(", ")
    )]
    Headers {
        /// The registry host of the image.
        registry: String,
        /// The endpoint (`host[:port]`) the headers go to.
        endpoint: String,
        /// The header names (never their values).
        headers: Vec<String>,
    },
    /// The node presents client certificates to an endpoint of the registry (hosts.toml
    /// `client`, `*.cert`), which the checker never does: a check there would be refused
    /// where the node is not, and fail a healthy Job.
    #[error(
        "registry {registry}: hosts.toml gives {endpoint} client certificates, which the check can't present"
    )]
    ClientCertificates {
        /// The registry host of the image.
        registry: String,
        /// The endpoint (`host[:port]`) they go to.
        endpoint: String,
    },
}

/// An optional [`RegistryHandOver`], comparable by identity (so `InjectOptions` stays `Eq`).
#[derive(Clone, Default)]
pub struct HandOverSource(pub Option<Arc<dyn RegistryHandOver>>);

impl HandOverSource {
    /// The hand-over for these registries; none without a source.
    pub(crate) fn hand_over(&self, registries: &[String]) -> Result<HandOver, Refusal> {
        match &self.0 {
            Some(s) => s.hand_over(registries),
            None => Ok(HandOver::default()),
        }
    }
}

impl PartialEq for HandOverSource {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for HandOverSource {}

impl std::fmt::Debug for HandOverSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(s) => s.fmt(f),
            None => f.write_str("no registry hand-over"),
        }
    }
}

/// Why `host` (`host[:port]`) is reachable from the node but not from a pod's network
/// namespace: the node's loopback, a link-local address, or a `localhost` name. `None` for
/// any other address (a node-only DNS name can't be told from its text).
pub fn node_only_address(host: &str) -> Option<&'static str> {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => match host.rsplit_once(':') {
            Some((h, port)) if !h.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        },
    };
    let lower = name.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return Some("a localhost name");
    }
    match name.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_loopback() => Some("a loopback address"),
        Ok(std::net::IpAddr::V4(v4)) if v4.is_link_local() => Some("a link-local address"),
        Ok(std::net::IpAddr::V6(v6)) if (v6.segments()[0] & 0xffc0) == 0xfe80 => {
            Some("a link-local address")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_only_addresses() {
        for (host, want) in [
            ("127.0.0.1:5000", Some("a loopback address")),
            ("127.1.2.3", Some("a loopback address")),
            ("[::1]:5000", Some("a loopback address")),
            ("localhost:5000", Some("a localhost name")),
            ("registry.localhost", Some("a localhost name")),
            ("169.254.10.1:5000", Some("a link-local address")),
            ("[fe80::1]:5000", Some("a link-local address")),
            ("10.0.0.5:5000", None),
            ("[fd00::5]:5000", None),
            ("registry.internal", None),
            ("localhost.example.com", None),
        ] {
            assert_eq!(node_only_address(host), want, "{host}");
        }
    }
}
