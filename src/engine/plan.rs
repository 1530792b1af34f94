//! What a check needs, resolved once from flags or webhook configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::resolution::{PlanError, PlatformCheck, Resolution, Route, SkipReason};
use crate::credentials::Keychain;
use crate::platform::Platform;
use crate::reference::Reference;
use crate::registry::hosts;

/// The registries whose node-level credential providers the kubelet uses on managed
/// clusters (kubelet `matchImages` glob syntax). Verdict 14 there is a pass with a warning.
pub(crate) const DEFAULT_NODE_CREDENTIAL_PATTERNS: &[&str] = &[
    "*.dkr.ecr.*.amazonaws.com",
    "*.dkr.ecr.*.amazonaws.com.cn",
    "*-docker.pkg.dev",
    "gcr.io",
    "*.gcr.io",
    "*.azurecr.io",
    "*.azurecr.cn",
];

/// Registries where every manifest GET counts as a pull (Docker Hub's rate limit).
pub(crate) const DEFAULT_METERED_REGISTRIES: &[&str] = &["docker.io"];

/// When to GET an index on a registry that counts every manifest GET as a pull (Docker
/// Hub: HEAD is free and states the quota left).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeteredGet {
    /// Only when the HEAD answer states no limit or more than `margin` pulls left.
    IfAffordable {
        /// Pulls that must stay left after the check's own GET.
        margin: u64,
    },
    /// Always (`--verify-platform-on-metered`).
    Always,
    /// Never: HEAD only, the platform is not verified.
    Never,
}

/// The default margin of [`MeteredGet::IfAffordable`], in pulls: what one node typically
/// pulls for a Job's pod (a few images, an init container) stays available to the kubelet.
pub(crate) const DEFAULT_METERED_MARGIN: u64 = 10;

/// Whose cloud identity the credential-provider plugins run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderIdentity {
    /// The caller's own (`check` in a shell or CI): a refusal of the provider's credential
    /// is the caller's answer, reported as 13 or 14.
    Caller,
    /// Not the nodes' (the webhook's own ServiceAccount identity): a refusal may not be
    /// what a node sees, so the image is assumed pullable, with a warning.
    NotTheNodes,
}

/// Which platforms an index must offer.
#[derive(Debug, Clone)]
pub(crate) enum PlatformPolicy {
    /// Skip the check (`--platform any`).
    Any,
    /// At least one of these must be present (the CLI passes one; the webhook passes the
    /// cluster's platforms).
    AnyOf(Vec<Platform>),
}

/// Everything a check needs, resolved once from flags or webhook configuration.
pub(crate) struct Plan {
    /// Credentials, in kubelet order.
    pub keychain: Keychain,
    /// containerd `certs.d` root (`--hosts-dir`).
    pub hosts_dir: Option<PathBuf>,
    /// `--insecure-registry` values.
    pub insecure: Vec<String>,
    /// Endpoints handed over by the webhook (`check --registry-config`), by registry host:
    /// used for those registries instead of `hosts_dir` and `insecure`.
    pub handed_over: BTreeMap<String, Vec<hosts::Endpoint>>,
    /// Target platforms.
    pub platform: PlatformPolicy,
    /// Registries that meter manifest GETs (`docker.io`).
    pub metered: Vec<String>,
    /// When the index is fetched on a metered registry.
    pub metered_get: MeteredGet,
    /// Node-credential registry patterns (`--node-credentials`).
    pub node_credentials: Vec<String>,
    /// Whose identity the credential-provider plugins run with, which decides what a
    /// refusal of their credential means.
    pub provider_identity: ProviderIdentity,
    /// The nodes' container runtime: which failure wins when every mirror and the upstream
    /// fail ([`super::host_loop::NodeRuntime::replaces`]).
    pub node_runtime: super::host_loop::NodeRuntime,
    /// Images checked at once.
    pub concurrency: usize,
    /// Overall deadline of the run.
    pub timeout: Duration,
    /// Who set [`Self::timeout`]: the details that mention the deadline name its flag.
    pub deadline_owner: DeadlineOwner,
}

/// Who set the overall deadline of a run, so the details that mention it name the flag
/// that moves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeadlineOwner {
    /// The CLI's `--timeout`.
    Timeout,
    /// The webhook's `--budget`.
    WebhookBudget,
}

impl DeadlineOwner {
    /// The detail of an image still unresolved when the deadline passed (its requests were
    /// sent, some answer never came).
    pub(crate) fn unresolved(self) -> &'static str {
        match self {
            DeadlineOwner::Timeout => "overall deadline reached (--timeout)",
            DeadlineOwner::WebhookBudget => "no verdict within the webhook's budget",
        }
    }

    /// The detail of an image whose turn came after the deadline (`timeout` long) had
    /// passed: nothing was sent for it, so nothing is known about it. Worded so that it can't
    /// be read as a registry timeout, with the two flags that give it a turn.
    pub(crate) fn not_started(self, timeout: Duration) -> String {
        let (what, flag) = match self {
            DeadlineOwner::Timeout => ("deadline", "--timeout"),
            DeadlineOwner::WebhookBudget => ("budget", "--budget"),
        };
        format!(
            "not checked: the {} s {what} ({flag}) passed before its turn; raise {flag} or --concurrency",
            seconds(timeout)
        )
    }
}

/// A duration in seconds as a person writes it: `2`, `0.5`, `1.25`.
fn seconds(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Plan {
    /// How `reference` will be resolved with `platform`. Errors only when `--hosts-dir`
    /// can't be read; a plan without a usable endpoint is returned as such
    /// ([`Resolution::require_route`]) so that `explain` can still show it.
    pub(crate) fn resolution(
        &self,
        reference: &Reference,
        platform: &PlatformPolicy,
    ) -> Result<Resolution, PlanError> {
        let all = match self.handed_over.get(reference.domain()) {
            Some(handed) => handed.clone(),
            None => hosts::endpoints(
                self.hosts_dir.as_deref(),
                reference.domain(),
                &self.insecure,
            )?,
        };
        let is_tag = reference.digest().is_none();
        let routes = all
            .into_iter()
            .map(|e| Route {
                used: if is_tag {
                    e.can_resolve_tags()
                } else {
                    e.capabilities.pull
                },
                credentials_allowed: !e.is_mirror,
                endpoint: e,
            })
            .collect();
        Ok(Resolution {
            reference: reference.clone(),
            routes,
            platform: self.platform_check(reference, platform),
            node_credentials: self.node_credential_match(reference),
        })
    }

    fn node_credential_match(&self, reference: &Reference) -> Option<String> {
        let name = reference.name();
        self.node_credentials
            .iter()
            .find(|p| crate::credentials::urls_match_str(p, &name))
            .cloned()
    }

    /// True when `reference`'s registry meters manifest GETs (`--metered-registry`).
    pub(crate) fn is_metered(&self, reference: &Reference) -> bool {
        self.metered
            .iter()
            .any(|m| m.eq_ignore_ascii_case(reference.domain()))
    }

    /// Whether to check the platform, or why not. Docker Hub counts every manifest GET as
    /// a pull and HEAD is free, so on metered registries the index is fetched only as
    /// [`MeteredGet`] allows.
    fn platform_check(&self, reference: &Reference, policy: &PlatformPolicy) -> PlatformCheck {
        match policy {
            PlatformPolicy::Any => PlatformCheck::Skip(SkipReason::AnyPlatform),
            PlatformPolicy::AnyOf(targets) => {
                let metered = self.is_metered(reference);
                match self.metered_get {
                    _ if !metered => PlatformCheck::Verify(targets.clone()),
                    MeteredGet::Always => PlatformCheck::Verify(targets.clone()),
                    MeteredGet::Never => PlatformCheck::Skip(SkipReason::Metered {
                        registry: reference.domain().to_string(),
                    }),
                    MeteredGet::IfAffordable { margin } => PlatformCheck::IfAffordable {
                        targets: targets.clone(),
                        margin,
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_started_names_the_deadline_and_the_flags_that_move_it() {
        assert_eq!(
            DeadlineOwner::Timeout.not_started(Duration::from_secs(2)),
            "not checked: the 2 s deadline (--timeout) passed before its turn; raise --timeout or --concurrency"
        );
        assert_eq!(
            DeadlineOwner::WebhookBudget.not_started(Duration::from_millis(2500)),
            "not checked: the 2.5 s budget (--budget) passed before its turn; raise --budget or --concurrency"
        );
        assert_eq!(seconds(Duration::from_millis(125)), "0.125");
    }
}
