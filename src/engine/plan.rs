//! What a check needs, resolved once from flags or webhook configuration.

use std::path::PathBuf;
use std::time::Duration;

use super::resolution::{PlanError, PlatformCheck, Resolution, Route, SkipReason};
use crate::credentials::Keychain;
use crate::platform::Platform;
use crate::reference::Reference;
use crate::registry::hosts;

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
    /// The detail of an image still unresolved at the deadline, in the words of whoever
    /// set it: [`DEADLINE_TIMEOUT`] for the CLI's `--timeout`, the webhook its budget.
    pub deadline_message: &'static str,
}

/// [`Plan::deadline_message`] of the CLI commands.
pub const DEADLINE_TIMEOUT: &str = "overall deadline reached (--timeout)";

impl Plan {
    /// How `reference` will be resolved with `platform`. Errors only when `--hosts-dir`
    /// can't be read; a plan without a usable endpoint is returned as such
    /// ([`Resolution::require_route`]) so that `explain` can still show it.
    pub fn resolution(
        &self,
        reference: &Reference,
        platform: &PlatformPolicy,
    ) -> Result<Resolution, PlanError> {
        let all = hosts::endpoints(
            self.hosts_dir.as_deref(),
            reference.domain(),
            &self.insecure,
        )?;
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

    /// Whether to check the platform, or why not. Docker Hub counts every manifest GET as
    /// a pull and HEAD is free, so on metered registries the index is not fetched unless
    /// asked for.
    fn platform_check(&self, reference: &Reference, policy: &PlatformPolicy) -> PlatformCheck {
        match policy {
            PlatformPolicy::Any => PlatformCheck::Skip(SkipReason::AnyPlatform),
            PlatformPolicy::AnyOf(targets) => {
                let metered = self
                    .metered
                    .iter()
                    .any(|m| m.eq_ignore_ascii_case(reference.domain()));
                if metered && !self.verify_platform_on_metered {
                    PlatformCheck::Skip(SkipReason::Metered {
                        registry: reference.domain().to_string(),
                    })
                } else {
                    PlatformCheck::Verify(targets.clone())
                }
            }
        }
    }
}
