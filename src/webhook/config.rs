//! The webhook's settings, resolved once from flags by `cli::webhook`. Nothing below the CLI
//! sees clap types.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::credentials::provider::Providers;
use crate::k8s::inject::InjectOptions;
use crate::k8s::templates::Table;
use crate::platform::Platform;

/// What the validating webhook does with an image that can't be pulled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Deny the workload (one line per failing image).
    Enforce,
    /// Admit it with a warning per failing image: the safe first rollout.
    Warn,
}

pub use crate::apiserver::ApiServer;

/// `--transient` as given: what pullcheck's transient code 20 does in mutated workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    /// Restart where the API server has container restart rules, else count, quietly.
    Auto,
    /// Restart where the API server has container restart rules, else count, warned.
    Restart,
    /// The podFailurePolicy rule retries through the Job's backoffLimit.
    Count,
    /// No rule for code 20.
    Ignore,
}

/// Verdict-cache sizing and lifetimes.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// How long a pullable verdict is reused.
    pub positive_ttl: Duration,
    /// How long a failing verdict (not found, denied, …) is reused. Transient ones never are.
    pub negative_ttl: Duration,
    /// Upper bound of the cache's memory estimate, in bytes.
    pub max_bytes: u64,
    /// How long a Secret or ServiceAccount read from the API is reused.
    pub secret_ttl: Duration,
}

impl CacheConfig {
    /// The defaults, which the webhook's `--cache-*` and `--secret-cache-ttl` flags show.
    pub const DEFAULT: CacheConfig = CacheConfig {
        positive_ttl: Duration::from_secs(600),
        negative_ttl: Duration::from_secs(30),
        max_bytes: 32 * 1024 * 1024,
        secret_ttl: Duration::from_secs(10),
    };
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig::DEFAULT
    }
}

/// The platforms assumed for the cluster's nodes when `--cluster-platform` names none
/// (OS/ARCH[/VARIANT], the flag's syntax): the two that batch clusters run.
pub const DEFAULT_CLUSTER_PLATFORMS: &[&str] = &["linux/amd64", "linux/arm64"];

/// Everything the webhook needs, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address (`0.0.0.0:8443`; port 0 picks one and prints it).
    pub listen: SocketAddr,
    /// Server certificate chain (PEM).
    pub tls_cert: PathBuf,
    /// Server private key (PEM).
    pub tls_key: PathBuf,
    /// How often the certificate files are compared with what is being served.
    pub reload_interval: Duration,
    pub mode: Mode,
    /// Deny when an image could not be verified within the budget (default: admit + warn).
    pub fail_closed: bool,
    /// Time from receiving a review to answering it; below the webhook's timeoutSeconds.
    pub budget: Duration,
    /// Platforms the cluster's nodes run; an index must offer at least one of them.
    pub cluster_platforms: Vec<Platform>,
    /// The init container `/mutate` injects.
    pub inject: InjectOptions,
    /// Rewrite `image: repo:tag` to `repo:tag@<index digest>` in `/mutate`.
    pub pin_digests: bool,
    /// `--transient`: what code 20 does in mutated workloads. `inject.transient` is filled
    /// per review from this (`handler/transient.rs`: restart only where the cluster has
    /// container restart rules).
    pub transient: Transient,
    /// Where restart rules are first tried on a dry-run Pod (`--probe-namespace`); `None`:
    /// the API server's version alone decides.
    pub restart_rules_probe: Option<super::ProbeTarget>,
    /// Kind → pod-template table.
    pub table: Table,
    /// Kubernetes API access; `None` = no namespace credentials (anonymous checks only).
    pub apiserver: Option<ApiServer>,
    /// Verdict and secret caches.
    pub cache: CacheConfig,
    /// How long in-flight requests may finish after SIGTERM.
    pub shutdown_grace: Duration,
    /// containerd `certs.d` root.
    pub hosts_dir: Option<PathBuf>,
    /// The nodes' container runtime (`--node-runtime`).
    pub(crate) node_runtime: crate::engine::NodeRuntime,
    /// `--insecure-registry` values.
    pub insecure: Vec<String>,
    /// Extra CA files for registries.
    pub ca_files: Vec<PathBuf>,
    /// Node-credential registry patterns.
    pub node_credentials: Vec<String>,
    /// The kubelet's credential-provider plugins (`--image-credential-provider-config`).
    pub(crate) providers: Option<Arc<Providers>>,
    /// Request ServiceAccount tokens for token-mode providers
    /// (`--provider-token-requests`).
    pub provider_token_requests: bool,
    /// Registries metering manifest GETs.
    pub metered: Vec<String>,
    /// When an index is fetched on metered registries.
    pub metered_get: crate::engine::MeteredGet,
    /// Deadline of one registry HTTP request.
    pub request_timeout: Duration,
    /// Images resolved at once per review.
    pub concurrency: usize,
    /// What a pull secret the API refused to let us read (403) does to its images.
    pub refused_secrets: RefusedSecrets,
}

/// What an image check does when the API refuses (403) a pull secret or ServiceAccount
/// its template needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedSecrets {
    /// The image is not proven unpullable (the webhook, the Kueue check): the node may
    /// pull it with the secret we could not read.
    Unproven,
    /// The image is checked with the credentials that could be read, and the check is
    /// marked as such (its `SecretAccess` is `Refused`): `pullcheck audit`, run under a
    /// user's RBAC that may not read Secrets.
    CheckWithout,
}
