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

pub(crate) mod classify;
mod outcome;
mod plan;
mod resolution;
mod resolve;

pub(crate) use outcome::{Outcome, PlatformResult};
pub(crate) use plan::{
    DEADLINE_TIMEOUT, DEFAULT_METERED_MARGIN, DEFAULT_METERED_REGISTRIES,
    DEFAULT_NODE_CREDENTIAL_PATTERNS, MeteredGet, Plan, PlatformPolicy,
};
pub(crate) use resolution::{PlanError, PlatformCheck, Resolution, SkipReason};

use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::credentials::{Credential, Keychain};
use crate::reference::Reference;
use crate::registry::client::Registry;
use crate::verdict::Verdict;
use resolve::{Attempt, Resolver};

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
        let mut unique: Vec<&String> = Vec::new();
        for i in images {
            if !unique.contains(&i) {
                unique.push(i);
            }
        }
        let results: Vec<Outcome> =
            futures_util::stream::iter(unique.iter().map(|i| self.check_one(i, deadline)))
                .buffered(self.plan.concurrency.max(1))
                .collect()
                .await;
        images
            .iter()
            .map(|i| results[unique.iter().position(|u| *u == i).expect("deduplicated")].clone())
            .collect()
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
            Err(_) => Outcome::new(image, Verdict::Transient, self.plan.deadline_message.into()),
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
        let credentials = keychain.lookup(&reference.name(), reference.domain()).await;
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
        let mut out = outcome(base, best, credential);
        if out.verdict == Verdict::Unauthenticated
            && let Some(pattern) = &plan.node_credentials
        {
            out.warnings.push(format!(
                "{} matches node-credential pattern {pattern}: the kubelet may pull with node credentials this pod can't see; not verified ({})",
                reference.domain(),
                out.detail
            ));
            out.verdict = Verdict::Pullable;
            out.exit_code = Verdict::Pullable.exit_code();
            out.detail =
                "assumed pullable: registry uses node credentials (--node-credentials)".into();
            out.assumed = true;
        }
        out
    }

    /// containerd's host loop for one credential: 404 → next host; the most severe error
    /// wins at the end (other errors over not-found).
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
        };
        let mut last: Option<Attempt> = None;
        for route in plan.used_routes() {
            let attempt = resolver.on(route, &plan.platform).await;
            if attempt.verdict == Verdict::Pullable {
                return attempt;
            }
            last = Some(match last {
                Some(prev)
                    if prev.verdict != Verdict::NotFound
                        && attempt.verdict == Verdict::NotFound =>
                {
                    prev
                }
                _ => attempt,
            });
        }
        last.expect("a plan has at least one used route")
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
        endpoint: a.endpoint,
        credential: credential.map(|c| c.source.to_string()),
        warnings: a.warnings,
        quota: a.quota,
        ..base
    }
}
