//! Which error a node's runtime reports when every host of its host loop (the `hosts.toml`
//! mirrors, then the upstream) failed: the one rule the engine's [`super::Engine`] follows,
//! with the runtime as an input.
//!
//! - **containerd 2.x** (`core/remotes/docker/resolver.go`, `Resolve`, v2.2.0): each failure
//!   has a priority — an error out of the request itself (no answer, or an authorization
//!   the resolver gave up on: a 401) is 1, a 404 is 2, any other status of 400 and above is
//!   3 — and the first failure of the highest priority seen is reported. So a mirror that
//!   times out in front of an upstream answering 404 reads "not found".
//! - **containerd 1.7** (`remotes/docker/resolver.go`, `Resolve`): the first failure that
//!   is not a 404 is reported; only when every host said 404 is it "not found".
//!
//! - **CRI-O** (1.34.0, through containers/image v5.35.0, `docker/docker_image_src.go`,
//!   `newImageSource`): the mirrors are tried in order and the upstream always last; when
//!   every one failed, the error returned is the upstream's (the mirrors' errors are only
//!   prefixed as text, "(Mirrors also failed: …)"). So a mirror's 404 never decides, and an
//!   upstream that times out behind a mirror's 404 reads "transient".
//!
//! All three stop at the first host that resolves the tag (whatever the platform step
//! finds next), so a resolved attempt never enters this ranking.

use crate::registry::error::RegistryError;

/// The runtime whose host loop a verdict must match. containerd 2.x is the default: it is
/// what the node harness runs and what current managed node images ship.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum NodeRuntime {
    /// containerd 2.0 and later.
    #[default]
    Containerd2,
    /// containerd 1.7 (out of LTS since 2026-09).
    Containerd1_7,
    /// CRI-O (containers/image): the upstream, tried last, decides.
    CriO,
}

impl NodeRuntime {
    /// Every runtime, in `--node-runtime`'s order.
    pub(crate) const ALL: [NodeRuntime; 3] = [
        NodeRuntime::Containerd2,
        NodeRuntime::Containerd1_7,
        NodeRuntime::CriO,
    ];

    /// The `--node-runtime` spelling (and the chart's `nodeRuntime`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NodeRuntime::Containerd2 => "containerd-2",
            NodeRuntime::Containerd1_7 => "containerd-1.7",
            NodeRuntime::CriO => "cri-o",
        }
    }

    /// From the `--node-runtime` spelling; `None` for anything else.
    pub(crate) fn parse(s: &str) -> Option<NodeRuntime> {
        NodeRuntime::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// What one host's failed try was, in the terms the runtimes rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostFailure {
    /// No HTTP answer (connection, DNS, TLS, timeout), a failed token fetch, or a 401 the
    /// resolver's authorizer turned into an error ("pull access denied …", "no basic auth
    /// credentials").
    Error,
    /// The registry answered 404.
    NotFound,
    /// Any other status of 400 and above (403, 429, 5xx, …), or an unusable answer.
    Status,
}

impl HostFailure {
    /// The class of a failed request to one host.
    pub(crate) fn of(e: &RegistryError) -> HostFailure {
        match e {
            RegistryError::Transport { .. } => HostFailure::Error,
            RegistryError::Status {
                from_token_endpoint: true,
                ..
            } => HostFailure::Error,
            RegistryError::Status { status: 401, .. } => HostFailure::Error,
            RegistryError::Status { status: 404, .. } => HostFailure::NotFound,
            RegistryError::Status { .. } | RegistryError::Protocol { .. } => HostFailure::Status,
        }
    }

    /// containerd 2.x's `firstErrPriority` for this failure.
    fn priority(self) -> u8 {
        match self {
            HostFailure::Error => 1,
            HostFailure::NotFound => 2,
            HostFailure::Status => 3,
        }
    }
}

impl NodeRuntime {
    /// Whether the failure of a later host (`next`) replaces the one kept so far (`kept`)
    /// as the error this runtime reports for the whole host loop.
    ///
    /// A 404 after a 404 replaces it in both: the runtimes' "not found" names no host, so the
    /// report names the last host asked (the upstream: the one the user must fix).
    pub(crate) fn replaces(self, kept: HostFailure, next: HostFailure) -> bool {
        if kept == HostFailure::NotFound && next == HostFailure::NotFound {
            return true;
        }
        match self {
            // Strictly higher priority only: among equals the first host's error stays.
            NodeRuntime::Containerd2 => next.priority() > kept.priority(),
            // A 404 never sets containerd 1.7's firstErr; the first other failure does.
            NodeRuntime::Containerd1_7 => {
                kept == HostFailure::NotFound && next != HostFailure::NotFound
            }
            // The last host's error is the one returned: every later failure replaces.
            NodeRuntime::CriO => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HostFailure::{Error, NotFound, Status};
    use super::*;

    /// The reported failure of a host loop whose hosts failed in this order.
    fn reported(runtime: NodeRuntime, hosts: &[HostFailure]) -> HostFailure {
        let mut kept = hosts[0];
        for &next in &hosts[1..] {
            if runtime.replaces(kept, next) {
                kept = next;
            }
        }
        kept
    }

    #[test]
    fn containerd_2_ranks_a_404_above_a_transport_error() {
        let c2 = NodeRuntime::Containerd2;
        // mirror timed out, upstream 404: not found (the case that read "transient").
        assert_eq!(reported(c2, &[Error, NotFound]), NotFound);
        assert_eq!(reported(c2, &[NotFound, Error]), NotFound);
        // another status outranks a 404, either order.
        assert_eq!(reported(c2, &[Status, NotFound]), Status);
        assert_eq!(reported(c2, &[NotFound, Status]), Status);
        assert_eq!(reported(c2, &[Error, Status, NotFound]), Status);
        // all transport errors: the first is kept (replaces is false among equals).
        assert!(!c2.replaces(Error, Error));
        assert!(!c2.replaces(Status, Status));
        // 404 after 404: the same verdict, reported from the later host.
        assert!(c2.replaces(NotFound, NotFound));
    }

    #[test]
    fn containerd_1_7_keeps_the_first_failure_that_is_not_a_404() {
        let c17 = NodeRuntime::Containerd1_7;
        assert_eq!(reported(c17, &[Error, NotFound]), Error);
        assert_eq!(reported(c17, &[NotFound, Error]), Error);
        assert_eq!(reported(c17, &[NotFound, NotFound]), NotFound);
        assert!(c17.replaces(NotFound, NotFound));
        assert_eq!(reported(c17, &[Status, Error]), Status);
        assert_eq!(reported(c17, &[Error, Status]), Error);
    }

    #[test]
    fn cri_o_reports_the_upstreams_failure() {
        let crio = NodeRuntime::CriO;
        // mirror 404, upstream timed out: transient (containerd 2.x says not found).
        assert_eq!(reported(crio, &[NotFound, Error]), Error);
        assert_eq!(
            reported(NodeRuntime::Containerd2, &[NotFound, Error]),
            NotFound
        );
        // mirror timed out, upstream 404: not found.
        assert_eq!(reported(crio, &[Error, NotFound]), NotFound);
        // a mirror's 403 does not outrank the upstream's 404, as it does in containerd 2.x.
        assert_eq!(reported(crio, &[Status, NotFound]), NotFound);
        assert_eq!(reported(crio, &[Error, Status, Error]), Error);
    }
}
