//! `pullcheck webhook`: the admission webhook. It rejects a workload whose images can't be
//! pulled before any pod exists, and injects the `pullcheck` init container into the ones it
//! admits.
//!
//! One request flows through these parts, in order:
//! - [`server`]: HTTPS (rustls, certificate reloaded when its files change), the routes,
//!   body limit, graceful shutdown;
//! - [`triage`]: decode the review and decide whether its object is checked at all (pure);
//! - [`handler`]: the only async step: read the namespace's pull secrets ([`cluster`]),
//!   resolve every image of the pod templates through the engine and the verdict cache
//!   ([`cache`], [`engines`]) within the budget, for the platforms each template can land on
//!   ([`platforms`]), then hand everything to [`review`];
//! - [`review`]: pure functions from (request, verdicts, policy) to an `AdmissionResponse`:
//!   the deny message, the warnings, the mutation patch.
//!
//! [`config`] holds the settings the CLI resolved once; [`metrics`] the Prometheus families.

pub(crate) mod cache;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod engines;
pub(crate) mod handler;
pub(crate) mod metrics;
pub mod platforms;
pub(crate) mod restart_rules;
pub mod review;
pub(crate) mod server;
pub mod triage;

pub use config::{Config, Mode};
pub use restart_rules::ProbeTarget;

/// Why the webhook could not start, or stopped serving.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebhookError {
    /// A registry CA file (`--ca-file`, `SSL_CERT_FILE`) does not load.
    #[error(transparent)]
    Registry(#[from] crate::registry::tls::TlsError),
    /// The Kubernetes API client can't be built from the `--apiserver*` settings.
    #[error(transparent)]
    Cluster(#[from] cluster::ClusterError),
    /// The HTTPS server could not start or failed.
    #[error(transparent)]
    Serve(#[from] server::ServeError),
}
