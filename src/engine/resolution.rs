//! The plan for one reference: which endpoints are tried in which order, which of them may
//! receive credentials, whether the platform is checked, and whether a 14 would pass as
//! node credentials. `check` executes it; `explain` prints it; nothing else re-derives it.

use crate::platform::Platform;
use crate::reference::Reference;
use crate::registry::hosts::{Endpoint, HostsError};
use crate::registry::quota::Quota;

/// One endpoint of a [`Resolution`], in the order containerd tries them.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    /// The endpoint (a mirror or the registry itself).
    pub endpoint: Endpoint,
    /// Whether this reference is fetched from it: tags need the `resolve` capability,
    /// digests `pull` (containerd `core/remotes/docker/resolver.go` `Resolve`).
    pub used: bool,
    /// Whether the credentials that matched the reference are sent to it. Never to a
    /// mirror on another host: deliberately stricter than containerd, which sends them to
    /// every host it tries.
    pub credentials_allowed: bool,
}

/// Whether the platform step runs for this reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlatformCheck {
    /// An index must have an entry for one of these (GET the index, HEAD the child).
    Verify(Vec<Platform>),
    /// A metered registry: HEAD first (free); GET an index only when that answer states no
    /// limit or more than `margin` pulls left, else report the platform not verified with
    /// the quota seen.
    IfAffordable {
        /// As in `Verify`.
        targets: Vec<Platform>,
        /// Pulls that must stay left.
        margin: u64,
    },
    /// Not checked: HEAD only.
    Skip(SkipReason),
}

/// Why a platform check is skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SkipReason {
    /// `--platform any`.
    AnyPlatform,
    /// The registry counts every manifest GET as a pull (Docker Hub) and the index is
    /// never fetched there (`--metered-get never`).
    Metered {
        /// The registry host, e.g. `docker.io`.
        registry: String,
    },
    /// A metered registry whose answer stated too few pulls left to spend one on the index.
    QuotaLow {
        /// The registry host.
        registry: String,
        /// What its HEAD answer stated.
        quota: Quota,
        /// The margin that had to stay left.
        margin: u64,
    },
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::AnyPlatform => f.write_str("--platform any"),
            SkipReason::Metered { registry } => write!(
                f,
                "{registry} counts every manifest GET as a pull; pass --verify-platform-on-metered to check"
            ),
            SkipReason::QuotaLow {
                registry,
                quota,
                margin,
            } => write!(
                f,
                "{registry} states {quota}, not more than the margin of {margin} (--metered-quota-margin); pass --verify-platform-on-metered to check anyway"
            ),
        }
    }
}

/// How one reference will be resolved.
#[derive(Debug, Clone)]
pub(crate) struct Resolution {
    /// The normalized reference.
    pub reference: Reference,
    /// Every configured endpoint, in order; only those with `used` are contacted.
    pub routes: Vec<Route>,
    /// The platform step.
    pub platform: PlatformCheck,
    /// The `--node-credentials` pattern the registry matches: there a 14 passes, assumed.
    pub node_credentials: Option<String>,
}

impl Resolution {
    /// The endpoints that will be contacted, in order.
    pub(crate) fn used_routes(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().filter(|r| r.used)
    }

    /// An error when no endpoint can serve this reference (tags need `resolve`).
    pub(crate) fn require_route(&self) -> Result<(), PlanError> {
        if self.used_routes().next().is_some() {
            return Ok(());
        }
        Err(PlanError::NoEndpoint {
            registry: self.reference.domain().to_string(),
            capability: if self.reference.digest().is_none() {
                "resolve"
            } else {
                "pull"
            },
        })
    }
}

/// Why no plan could be made: the verdict is transient (the node's configuration may
/// differ), and the message names the file or capability.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum PlanError {
    /// `--hosts-dir` could not be read.
    #[error("{0}")]
    Hosts(String),
    /// No endpoint has the capability this reference needs.
    #[error("no endpoint for {registry} has the {capability} capability in --hosts-dir")]
    NoEndpoint {
        /// The registry host.
        registry: String,
        /// `resolve` (tags) or `pull` (digests).
        capability: &'static str,
    },
}

impl From<HostsError> for PlanError {
    fn from(e: HostsError) -> PlanError {
        PlanError::Hosts(e.to_string())
    }
}
