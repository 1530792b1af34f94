//! What a check needs, resolved once from flags or webhook configuration.

use std::path::PathBuf;
use std::time::Duration;

use crate::credentials::Keychain;
use crate::platform::Platform;

/// The registries whose node-level credential providers the kubelet uses on managed
/// clusters (kubelet `matchImages` glob syntax). Verdict 14 there is a pass with a warning.
pub const DEFAULT_NODE_CREDENTIAL_PATTERNS: &[&str] = &[
    "*.dkr.ecr.*.amazonaws.com",
    "*.dkr.ecr.*.amazonaws.com.cn",
    "*-docker.pkg.dev",
    "gcr.io",
    "*.gcr.io",
    "*.azurecr.io",
    "*.azurecr.cn",
];

/// Registries where every manifest GET counts as a pull (Docker Hub's rate limit).
pub const DEFAULT_METERED_REGISTRIES: &[&str] = &["docker.io"];

/// Which platforms an index must offer.
#[derive(Debug, Clone)]
pub enum PlatformPolicy {
    /// Skip the check (`--platform any`).
    Any,
    /// At least one of these must be present (the CLI passes one; the webhook passes the
    /// cluster's platforms).
    AnyOf(Vec<Platform>),
}

/// Everything a check needs, resolved once from flags or webhook configuration.
pub struct Plan {
    /// Credentials, in kubelet order.
    pub keychain: Keychain,
    /// containerd `certs.d` root (`--hosts-dir`).
    pub hosts_dir: Option<PathBuf>,
    /// `--insecure-registry` values.
    pub insecure: Vec<String>,
    /// Target platforms.
    pub platform: PlatformPolicy,
    /// Registries that meter manifest GETs (`docker.io`).
    pub metered: Vec<String>,
    /// Check platforms on metered registries anyway.
    pub verify_platform_on_metered: bool,
    /// Node-credential registry patterns (`--node-credentials`).
    pub node_credentials: Vec<String>,
    /// Images checked at once.
    pub concurrency: usize,
    /// Overall deadline of the run.
    pub timeout: Duration,
}
