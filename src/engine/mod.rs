//! The engine: runs each image through reference → credentials → registry → platform →
//! verdict, concurrently (bounded) and within one overall deadline.
//!
//! The per-image algorithm mirrors the kubelet + containerd pull:
//! - credentials from the keychain are tried in lookup order until one gives a pullable
//!   verdict (the kubelet moves on after any pull error, 404 included); none matching means
//!   one anonymous attempt (kubernetes pkg/kubelet/kuberuntime/kuberuntime_image.go);
//! - for each credential the endpoints from `hosts.toml` are tried in order, mirrors first,
//!   tags only on hosts with the `resolve` capability (containerd core/remotes/docker
//!   resolver.go); a 404 moves to the next host;
//! - HEAD first; GET only after 405, a missing `Docker-Content-Digest`, or when the platform
//!   check needs the index body (then GET directly); never after 404.
//!
//! Which endpoints, which credentials where, and whether the platform is checked is decided
//! once per reference, in a [`Resolution`] ([`Engine::plan_for`]): `check` executes it and
//! `explain` prints it. Each credential-and-endpoint try is a value ([`resolve`]'s
//! `Attempt`); the best one becomes the [`Outcome`].

mod artifact;
pub(crate) use artifact::plan_line as artifact_plan_line;
pub(crate) mod classify;
pub(crate) mod handover;
mod host_loop;
pub(crate) use host_loop::NodeRuntime;
mod outcome;
mod plan;
mod resolution;
mod resolve;

pub(crate) use outcome::{NotChecked, Outcome, PlatformResult};
pub(crate) use plan::{
    DEFAULT_METERED_MARGIN, DEFAULT_METERED_REGISTRIES, DEFAULT_NODE_CREDENTIAL_PATTERNS,
    DeadlineOwner, MeteredGet, Plan, PlatformPolicy, ProviderIdentity,
};
pub(crate) use resolution::{PlanError, PlatformCheck, Resolution, SkipReason};

use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::credentials::provider::{ProviderOutcome, ProviderUse};
use crate::credentials::{Credential, Keychain};
use crate::reference::Reference;
use crate::registry::client::Registry;
use crate::verdict::Verdict;
use resolve::{Attempt, Resolver};

/// Why a handed-over index body was not kept ([`Engine::remember_index_bodies`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyRefused {
    /// The key is not a digest (`sha256:` and 64 lowercase hex digits, or another known
    /// algorithm).
    NotADigest,
    /// The body does not hash to its digest.
    Mismatch,
}

/// Shared engine: one per process (the webhook keeps it for its lifetime).
pub(crate) struct Engine {
    plan: Plan,
    registry: Registry,
    indexes: resolve::IndexBodies,
}

impl Engine {
    /// Build an engine over a transport.
    pub(crate) fn new(plan: Plan, registry: Registry) -> Engine {
        Engine {
            plan,
            registry,
            indexes: resolve::index_bodies(),
        }
    }

    /// Keep index bodies read elsewhere (the webhook's, handed to the init container:
    /// [`crate::k8s::index_bodies`]), by digest, each only when it hashes to its digest: a
    /// wrong or forged entry is never used, and a kept one is used only when a HEAD answers
    /// that very digest (`resolve::Resolver::index_body`). Returns the entries refused.
    pub(crate) async fn remember_index_bodies(
        &self,
        bodies: Vec<(String, Vec<u8>)>,
    ) -> Vec<(String, BodyRefused)> {
        let mut refused = Vec::new();
        for (digest, body) in bodies {
            match crate::reference::Digest::parse(&digest) {
                Err(_) => refused.push((digest, BodyRefused::NotADigest)),
                Ok(d) if !d.verify(&body) => refused.push((digest, BodyRefused::Mismatch)),
                Ok(_) => self.indexes.insert(digest, std::sync::Arc::new(body)).await,
            }
        }
        refused
    }

    /// The body of the index `digest` names, when this process has read it (verified
    /// against the digest when it was kept).
    pub(crate) async fn index_body(&self, digest: &str) -> Option<std::sync::Arc<Vec<u8>>> {
        self.indexes.get(digest).await
    }

    /// The transport (request counters, guard).
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The configuration it checks with (deadline and concurrency for callers that
    /// schedule their own checks, as `scan` does).
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Check every image, `concurrency` at a time, each deduplicated input once. Results
    /// are in input order. Never fails: problems are verdicts.
    pub(crate) async fn check_all(&self, images: &[String]) -> Vec<Outcome> {
        let deadline = Instant::now() + self.plan.timeout;
        // Linear in the input: `check -f` takes lists of tens of thousands of references, and
        // a quadratic dedupe alone outlasted --timeout there (found by a newcomer's trial).
        let mut slot: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::with_capacity(images.len());
        let mut unique: Vec<&str> = Vec::new();
        let order: Vec<usize> = images
            .iter()
            .map(|i| {
                *slot.entry(i.as_str()).or_insert_with(|| {
                    unique.push(i.as_str());
                    unique.len() - 1
                })
            })
            .collect();
        let results: Vec<Outcome> =
            futures_util::stream::iter(unique.iter().map(|i| self.check_one(i, deadline)))
                .buffered(self.plan.concurrency.max(1))
                .collect()
                .await;
        order.into_iter().map(|u| results[u].clone()).collect()
    }

    /// Check one image with an absolute deadline, with the plan's credentials and platform.
    pub(crate) async fn check_one(&self, image: &str, deadline: Instant) -> Outcome {
        self.check_one_with(image, deadline, &self.plan.keychain, &self.plan.platform)
            .await
    }

    /// Check one image with this call's credentials and platform policy (the webhook's
    /// vary per namespace and pod template); everything else, the transport with its
    /// connections and credential-keyed token cache included, is shared.
    pub(crate) async fn check_one_with(
        &self,
        image: &str,
        deadline: Instant,
        keychain: &Keychain,
        platform: &PlatformPolicy,
    ) -> Outcome {
        let started = Instant::now();
        // The inner deadline leaves room to report; the outer timeout is the backstop that
        // guarantees an answer even if something below ignores its deadline.
        let backstop =
            deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(500);
        let mut out = match tokio::time::timeout(
            backstop,
            self.check_inner(image, deadline, keychain, platform),
        )
        .await
        {
            Ok(o) => o,
            Err(_) => Outcome::new(
                image,
                Verdict::Transient,
                self.plan.deadline_owner.unresolved().into(),
            ),
        };
        out.elapsed_ms = started.elapsed().as_millis() as u64;
        out
    }

    /// How `reference` will be resolved with `platform`: the one plan `check` executes
    /// and `explain` prints ([`Plan::resolution`]).
    pub(crate) fn plan_for(
        &self,
        reference: &Reference,
        platform: &PlatformPolicy,
    ) -> Result<Resolution, PlanError> {
        self.plan.resolution(reference, platform)
    }

    async fn check_inner(
        &self,
        image: &str,
        deadline: Instant,
        keychain: &Keychain,
        platform: &PlatformPolicy,
    ) -> Outcome {
        let reference = match Reference::parse(image) {
            Ok(r) => r,
            Err(e) => return Outcome::new(image, Verdict::InvalidReference, e.to_string()),
        };
        let base = Outcome {
            reference: Some(reference.full()),
            registry: Some(reference.domain().to_string()),
            ..Outcome::new(image, Verdict::Transient, String::new())
        };
        let plan = match self
            .plan_for(&reference, platform)
            .and_then(|p| p.require_route().map(|()| p))
        {
            Ok(p) => p,
            Err(e) => {
                return Outcome {
                    detail: e.to_string(),
                    ..base
                };
            }
        };
        // Everything above is offline. Past the deadline nothing more is tried: a request
        // sent now could only time out at once, and would be reported as the registry's.
        if Instant::now() >= deadline {
            return Outcome {
                detail: self.plan.deadline_owner.not_started(self.plan.timeout),
                not_checked: Some(NotChecked::Deadline),
                ..base
            };
        }
        let found = keychain.lookup(&reference.name(), reference.domain()).await;
        let credentials = found.credentials;
        let attempts: Vec<Option<&Credential>> = if credentials.is_empty() {
            vec![None]
        } else {
            credentials.iter().map(Some).collect()
        };
        let mut best: Option<(Attempt, Option<&Credential>)> = None;
        for credential in attempts {
            let attempt = self.try_routes(&plan, credential, deadline).await;
            if attempt.verdict == Verdict::Pullable {
                return outcome(base, attempt, credential);
            }
            best = Some(match best {
                Some(b) if b.0.verdict.more_informative(attempt.verdict) == b.0.verdict => b,
                _ => (attempt, credential),
            });
        }
        let (best, credential) = best.expect("at least one attempt");
        let guard_refused = best.guard_refused;
        let mut out = outcome(base, best, credential);
        let node = NodeView {
            registry_answered: !guard_refused,
            providers: &found.providers,
            provider_credential: credential
                .is_some_and(|c| c.source.origin.starts_with("credential provider ")),
            anonymous: credential.is_none(),
            node_pattern: plan.node_credentials.as_deref(),
            identity: self.plan.provider_identity,
        };
        // A provider whose answer matches nothing is the kubelet's problem too: no assumption,
        // but say why its credential was not used.
        out.warnings.extend(
            found
                .providers
                .iter()
                .filter(|u| matches!(u.outcome, ProviderOutcome::NoMatchingKey { .. }))
                .map(|u| u.describe()),
        );
        if let Some((why, detail)) = node.assumed(out.verdict, reference.domain()) {
            out.warnings
                .push(format!("{why}; not verified ({})", out.detail));
            out.verdict = Verdict::Pullable;
            out.exit_code = Verdict::Pullable.exit_code();
            out.detail = detail.into();
            out.assumed = true;
        }
        out
    }

    /// containerd's host loop for one credential: hosts in order until one resolves the tag
    /// (that host's attempt is the answer, platform step included); when none does, the
    /// failure the node's runtime would report ([`host_loop::NodeRuntime::replaces`]).
    async fn try_routes(
        &self,
        plan: &Resolution,
        credential: Option<&Credential>,
        deadline: Instant,
    ) -> Attempt {
        let resolver = Resolver {
            registry: &self.registry,
            indexes: &self.indexes,
            reference: &plan.reference,
            credential,
            deadline,
            runtime: self.plan.node_runtime,
        };
        let runtime = self.plan.node_runtime;
        let mut kept: Option<Attempt> = None;
        for route in plan.used_routes() {
            let attempt = resolver.on(route, &plan.platform).await;
            if attempt.verdict == Verdict::Pullable || attempt.digest.is_some() {
                return attempt;
            }
            kept = Some(match kept {
                Some(prev) if !runtime.replaces(failure_of(&prev), failure_of(&attempt)) => prev,
                _ => attempt,
            });
        }
        kept.expect("a plan has at least one used route")
    }
}

/// An unresolved attempt's failure class; one that ended before a request (a deadline) ranks
/// as an error of the request.
fn failure_of(a: &Attempt) -> host_loop::HostFailure {
    a.host_failure.unwrap_or(host_loop::HostFailure::Error)
}

/// What the kubelet on a node would have that this check did not: node credential
/// providers (the `--node-credentials` patterns) or credential-provider plugins that failed
/// here, had no token, or answered with pullcheck's identity rather than the node's.
struct NodeView<'a> {
    /// The verdict is a registry's answer (not pullcheck's address guard refusing): only a
    /// registry's refusal can differ on a node.
    registry_answered: bool,
    providers: &'a [ProviderUse],
    /// The best attempt used a credential a provider plugin gave.
    provider_credential: bool,
    /// The best attempt was anonymous.
    anonymous: bool,
    /// The `--node-credentials` pattern the registry matches.
    node_pattern: Option<&'a str>,
    /// Whose identity the plugins ran with.
    identity: ProviderIdentity,
}

impl NodeView<'_> {
    /// `Some((warning, detail))` when `verdict` is not what the node would see and the
    /// image is therefore assumed pullable; `None` when the verdict stands.
    ///
    /// - A provider's credential refused (13, 14) where the plugins ran with an identity
    ///   that is not the nodes' ([`ProviderIdentity::NotTheNodes`], the webhook): their
    ///   permissions may differ. With the caller's own identity the refusal stands.
    /// - A provider that failed or had no token, and the verdict is a refusal, or a 404
    ///   seen anonymously (some registries hide private repositories behind a 404).
    /// - No provider involved: a 14 on a `--node-credentials` registry.
    ///
    /// 11 with a provider's credential and 12 are definitive: the registry answered about
    /// the image itself.
    fn assumed(&self, verdict: Verdict, registry: &str) -> Option<(String, &'static str)> {
        if !self.registry_answered {
            return None;
        }
        let refused = matches!(verdict, Verdict::Denied | Verdict::Unauthenticated);
        if self.provider_credential && refused && self.identity == ProviderIdentity::NotTheNodes {
            let who = self
                .providers
                .iter()
                .find(|u| matches!(u.outcome, ProviderOutcome::Answered { .. }))
                .map_or(String::new(), |u| format!(" {}", u.provider));
            return Some((
                format!(
                    "{registry} refused the credential of credential provider{who} under pullcheck's identity; the nodes' identity may have other permissions"
                ),
                "assumed pullable: the credential provider's credential was refused with pullcheck's identity",
            ));
        }
        if self.provider_credential && refused {
            return None;
        }
        if let Some(u) = self
            .providers
            .iter()
            .find(|u| u.gave_nothing_unlike_the_kubelet())
            && (refused || (verdict == Verdict::NotFound && self.anonymous))
        {
            return Some((
                u.describe(),
                "assumed pullable: a credential provider the kubelet uses gave pullcheck nothing",
            ));
        }
        if verdict == Verdict::Unauthenticated
            && self.providers.is_empty()
            && let Some(pattern) = self.node_pattern
        {
            return Some((
                format!(
                    "{registry} matches node-credential pattern {pattern}: the kubelet may pull with node credentials this pod can't see"
                ),
                "assumed pullable: registry uses node credentials (--node-credentials)",
            ));
        }
        None
    }
}

/// The outcome of an image from its best attempt and the credential that made it.
fn outcome(base: Outcome, a: Attempt, credential: Option<&Credential>) -> Outcome {
    Outcome {
        verdict: a.verdict,
        exit_code: a.verdict.exit_code(),
        detail: a.detail,
        digest: a.digest,
        media_type: a.media_type,
        platform: a.platform,
        artifact: a.artifact,
        endpoint: a.endpoint,
        credential: credential.map(|c| c.source.to_string()),
        warnings: a.warnings,
        quota: a.quota,
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::provider::{CacheKeyType, PluginError};

    fn used(outcome: ProviderOutcome) -> ProviderUse {
        ProviderUse {
            provider: "ecr-credential-provider".into(),
            matched: "*.dkr.ecr.*.amazonaws.com".into(),
            outcome,
        }
    }

    fn answered() -> ProviderUse {
        used(ProviderOutcome::Answered {
            key_type: CacheKeyType::Registry,
            key: "r".into(),
            cached: false,
        })
    }

    fn failed() -> ProviderUse {
        used(ProviderOutcome::Failed(PluginError::Failed {
            name: "ecr-credential-provider".into(),
            status: "exit status: 1".into(),
            stderr: "no EC2 IMDS role found".into(),
        }))
    }

    fn view(
        providers: &[ProviderUse],
        provider_credential: bool,
        anonymous: bool,
        identity: ProviderIdentity,
    ) -> NodeView<'_> {
        NodeView {
            registry_answered: true,
            providers,
            provider_credential,
            anonymous,
            node_pattern: Some("*.dkr.ecr.*.amazonaws.com"),
            identity,
        }
    }

    /// providers, provider credential, anonymous, identity, verdict → the detail, if assumed.
    type Row<'a> = (
        &'a [ProviderUse],
        bool,
        bool,
        ProviderIdentity,
        Verdict,
        Option<&'a str>,
    );

    /// The decision table of `NodeView::assumed`, row by row.
    #[test]
    fn what_is_assumed_and_what_stands() {
        use ProviderIdentity::{Caller, NotTheNodes};
        use Verdict::*;
        let ok = [answered()];
        let bad = [failed()];
        let none: [ProviderUse; 0] = [];
        let cases: &[Row] = &[
            // The provider's credential: 11 and 12 are definitive; refusals depend on whose
            // identity.
            (&ok, true, false, NotTheNodes, NotFound, None),
            (&ok, true, false, NotTheNodes, PlatformMissing, None),
            (
                &ok,
                true,
                false,
                NotTheNodes,
                Denied,
                Some(
                    "assumed pullable: the credential provider's credential was refused with pullcheck's identity",
                ),
            ),
            (
                &ok,
                true,
                false,
                NotTheNodes,
                Unauthenticated,
                Some(
                    "assumed pullable: the credential provider's credential was refused with pullcheck's identity",
                ),
            ),
            (&ok, true, false, Caller, Denied, None),
            (&ok, true, false, Caller, Unauthenticated, None),
            // A provider that gave nothing here: refusals and an anonymous 404 are assumed.
            (
                &bad,
                false,
                true,
                Caller,
                Unauthenticated,
                Some(
                    "assumed pullable: a credential provider the kubelet uses gave pullcheck nothing",
                ),
            ),
            (
                &bad,
                false,
                true,
                Caller,
                NotFound,
                Some(
                    "assumed pullable: a credential provider the kubelet uses gave pullcheck nothing",
                ),
            ),
            (&bad, false, false, Caller, NotFound, None),
            (&bad, false, true, Caller, PlatformMissing, None),
            (&bad, false, true, Caller, Transient, None),
            // No provider: the --node-credentials pattern, for 14 only.
            (
                &none,
                false,
                true,
                Caller,
                Unauthenticated,
                Some("assumed pullable: registry uses node credentials (--node-credentials)"),
            ),
            (&none, false, true, Caller, NotFound, None),
            (&none, false, true, Caller, Denied, None),
        ];
        for (i, (providers, cred, anon, identity, verdict, want)) in cases.iter().enumerate() {
            let got = view(providers, *cred, *anon, *identity).assumed(*verdict, "r.io");
            assert_eq!(got.map(|g| g.1), *want, "row {i}");
        }
        // pullcheck's own address guard refusing is no registry's answer: never assumed.
        for providers in [&ok[..], &bad[..], &none[..]] {
            let guard = NodeView {
                registry_answered: false,
                ..view(providers, true, false, NotTheNodes)
            };
            assert_eq!(guard.assumed(Denied, "r.io"), None);
        }
        let (why, _) = view(&bad, false, true, Caller)
            .assumed(Unauthenticated, "r.io")
            .unwrap();
        assert_eq!(
            why,
            "credential provider ecr-credential-provider: failed (exit status: 1): no EC2 IMDS role found"
        );
    }
}
