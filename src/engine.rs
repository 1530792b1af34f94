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

pub mod classify;
mod outcome;
mod plan;

pub use outcome::{Outcome, PlatformReport};
pub use plan::{
    DEFAULT_METERED_REGISTRIES, DEFAULT_NODE_CREDENTIAL_PATTERNS, Plan, PlatformPolicy,
};

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http::Method;

use crate::credentials::{Credential, Keychain};
use crate::manifest;
use crate::platform::{self, Platform, Selection};
use crate::reference::{Digest, Reference};
use crate::registry::client::{ManifestResponse, Registry};
use crate::registry::error::RegistryError;
use crate::registry::hosts::{self, Endpoint};
use crate::verdict::Verdict;

/// Shared engine: one per process (the webhook keeps it for its lifetime).
pub struct Engine {
    plan: Plan,
    registry: Registry,
}

impl Engine {
    /// Build an engine over a transport.
    pub fn new(plan: Plan, registry: Registry) -> Engine {
        Engine { plan, registry }
    }

    /// The transport (request counters, guard).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Check every image, `concurrency` at a time, each deduplicated input once. Results
    /// are in input order. Never fails: problems are verdicts.
    pub async fn check_all(&self, images: &[String]) -> Vec<Outcome> {
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
    pub async fn check_one(&self, image: &str, deadline: Instant) -> Outcome {
        self.check_one_with(image, deadline, &self.plan.keychain, &self.plan.platform)
            .await
    }

    /// Check one image with this call's credentials and platform policy (the webhook's
    /// vary per namespace and pod template); everything else, the transport with its
    /// connections and credential-keyed token cache included, is shared.
    pub async fn check_one_with(
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
                "overall deadline reached (--timeout)".into(),
            ),
        };
        out.elapsed_ms = started.elapsed().as_millis() as u64;
        out
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
        let mut out = Outcome::new(image, Verdict::Transient, String::new());
        out.reference = Some(reference.full());
        out.registry = Some(reference.domain().to_string());
        let endpoints = match self.endpoints(&reference) {
            Ok(e) => e,
            Err(detail) => {
                out.set_verdict(Verdict::Transient, detail);
                return out;
            }
        };
        let credentials = keychain.lookup(&reference.name(), reference.domain()).await;
        let platforms = self.platform_targets(&reference, platform);
        let attempts: Vec<Option<&Credential>> = if credentials.is_empty() {
            vec![None]
        } else {
            credentials.iter().map(Some).collect()
        };
        let mut best: Option<Outcome> = None;
        for credential in attempts {
            let mut attempt = out.clone();
            self.try_endpoints(
                &reference,
                &endpoints,
                credential,
                &platforms,
                deadline,
                &mut attempt,
            )
            .await;
            attempt.credential = credential.map(|c| c.source.to_string());
            if attempt.verdict == Verdict::Pullable {
                return attempt;
            }
            best = Some(match best {
                None => attempt,
                Some(b) if b.verdict.more_informative(attempt.verdict) == b.verdict => b,
                Some(_) => attempt,
            });
        }
        let mut best = best.expect("at least one attempt");
        if best.verdict == Verdict::Unauthenticated
            && let Some(pattern) = self.node_credential_match(&reference)
        {
            best.warnings.push(format!(
                "{} matches node-credential pattern {pattern}: the kubelet may pull with node credentials this pod can't see; not verified ({})",
                reference.domain(),
                best.detail
            ));
            best.set_verdict(
                Verdict::Pullable,
                "assumed pullable: registry uses node credentials (--node-credentials)".into(),
            );
        }
        best
    }

    fn endpoints(&self, reference: &Reference) -> Result<Vec<Endpoint>, String> {
        let all = hosts::endpoints(
            self.plan.hosts_dir.as_deref(),
            reference.domain(),
            &self.plan.insecure,
        )
        .map_err(|e| e.to_string())?;
        let is_tag = reference.digest().is_none();
        let usable: Vec<Endpoint> = all
            .into_iter()
            .filter(|e| {
                if is_tag {
                    e.can_resolve_tags()
                } else {
                    e.capabilities.pull
                }
            })
            .collect();
        if usable.is_empty() {
            return Err(format!(
                "no endpoint for {} has the {} capability in --hosts-dir",
                reference.domain(),
                if is_tag { "resolve" } else { "pull" }
            ));
        }
        Ok(usable)
    }

    fn node_credential_match(&self, reference: &Reference) -> Option<String> {
        let name = reference.name();
        self.plan
            .node_credentials
            .iter()
            .find(|p| crate::credentials::urls_match_str(p, &name))
            .cloned()
    }

    /// Whether to check the platform, or why not.
    fn platform_targets(
        &self,
        reference: &Reference,
        policy: &PlatformPolicy,
    ) -> Result<Vec<Platform>, String> {
        match policy {
            PlatformPolicy::Any => Err("--platform any".into()),
            PlatformPolicy::AnyOf(targets) => {
                let metered = self
                    .plan
                    .metered
                    .iter()
                    .any(|m| m.eq_ignore_ascii_case(reference.domain()));
                if metered && !self.plan.verify_platform_on_metered {
                    Err(format!(
                        "{} counts every manifest GET as a pull; pass --verify-platform-on-metered to check",
                        reference.domain()
                    ))
                } else {
                    Ok(targets.clone())
                }
            }
        }
    }

    /// containerd's host loop for one credential: 404 → next host; the most severe error
    /// wins at the end (other errors over not-found).
    async fn try_endpoints(
        &self,
        reference: &Reference,
        endpoints: &[Endpoint],
        credential: Option<&Credential>,
        platforms: &Result<Vec<Platform>, String>,
        deadline: Instant,
        out: &mut Outcome,
    ) {
        let mut last: Option<Outcome> = None;
        for ep in endpoints {
            let mut attempt = out.clone();
            attempt.endpoint = Some(ep.host.clone());
            // Credentials go only to the registry they matched, never to a mirror on
            // another host (deliberately stricter than containerd, which sends them to
            // every host it tries).
            let cred = if ep.is_mirror { None } else { credential };
            self.resolve_on(reference, ep, cred, platforms, deadline, &mut attempt)
                .await;
            if attempt.verdict == Verdict::Pullable {
                *out = attempt;
                return;
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
        if let Some(l) = last {
            *out = l;
        }
    }

    async fn fetch(
        &self,
        reference: &Reference,
        ep: &Endpoint,
        target: &str,
        method: Method,
        credential: Option<&Credential>,
        deadline: Instant,
    ) -> Result<ManifestResponse, RegistryError> {
        let ns = ep.is_mirror.then(|| reference.domain());
        self.registry
            .manifest(
                ep,
                reference.path(),
                target,
                ns,
                &reference.pull_scope(),
                method,
                credential,
                deadline,
            )
            .await
    }

    /// HEAD-first resolution on one endpoint, with the platform check.
    async fn resolve_on(
        &self,
        reference: &Reference,
        ep: &Endpoint,
        credential: Option<&Credential>,
        platforms: &Result<Vec<Platform>, String>,
        deadline: Instant,
        out: &mut Outcome,
    ) {
        let target = reference.manifest_reference();
        let first = if platforms.is_ok() {
            Method::GET
        } else {
            Method::HEAD
        };
        let mut resp = self
            .fetch(reference, ep, &target, first.clone(), credential, deadline)
            .await;
        if first == Method::HEAD {
            let need_get = match &resp {
                Err(e) => e.status() == Some(405),
                Ok(r) => r.digest.is_none(),
            };
            if need_get {
                resp = self
                    .fetch(reference, ep, &target, Method::GET, credential, deadline)
                    .await;
            }
        }
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                let (v, detail) = classify::verdict_for(&e);
                out.set_verdict(v, detail);
                return;
            }
        };
        let digest = match verified_digest(reference, &resp) {
            Ok(d) => d,
            Err(detail) => {
                out.set_verdict(Verdict::NotFound, detail);
                return;
            }
        };
        out.digest = Some(digest);
        out.media_type = resp.media_type.clone();
        let is_index = resp.media_type.as_deref().is_some_and(manifest::is_index);
        let targets = match platforms {
            Err(reason) => {
                out.platform = PlatformReport {
                    result: "not_checked".into(),
                    note: Some(format!("platform not verified: {reason}")),
                    ..Default::default()
                };
                out.set_verdict(Verdict::Pullable, "manifest found".into());
                return;
            }
            Ok(t) => t,
        };
        let target_text = targets
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",");
        if !is_index {
            out.platform = PlatformReport {
                target: Some(target_text),
                result: "single_manifest".into(),
                note: Some(
                    "single-platform manifest: containerd does not filter it by platform".into(),
                ),
                ..Default::default()
            };
            out.set_verdict(Verdict::Pullable, "manifest found".into());
            return;
        }
        self.check_index(
            reference,
            ep,
            credential,
            deadline,
            &resp,
            targets,
            target_text,
            out,
        )
        .await;
    }

    #[allow(clippy::too_many_arguments)]
    async fn check_index(
        &self,
        reference: &Reference,
        ep: &Endpoint,
        credential: Option<&Credential>,
        deadline: Instant,
        resp: &ManifestResponse,
        targets: &[Platform],
        target_text: String,
        out: &mut Outcome,
    ) {
        let body = resp.body.as_deref().unwrap_or_default();
        let index = match manifest::parse_index(body) {
            Ok(i) => i,
            Err(e) => {
                out.set_verdict(
                    Verdict::NotFound,
                    format!("index could not be decoded: {e}"),
                );
                return;
            }
        };
        let mut missing_available = Vec::new();
        for t in targets {
            let (entry, result, note) = match platform::select(t, &index.manifests) {
                Selection::Exact(e) => (e, "exact", None),
                Selection::Fallback(e) => (
                    e,
                    "fallback",
                    Some(format!(
                        "only a fallback platform matches {t}: containerd < 2.1 pulls it, containerd >= 2.1 with default settings does not"
                    )),
                ),
                Selection::NoPlatformField(e) => (
                    e,
                    "no_platform_field",
                    Some("index entry without a platform field matches any platform".to_string()),
                ),
                Selection::Missing { available } => {
                    missing_available = available;
                    continue;
                }
            };
            out.platform = PlatformReport {
                target: Some(target_text.clone()),
                result: result.into(),
                matched: entry.platform.as_ref().map(|p| p.to_string()),
                child_digest: Some(entry.digest.clone()),
                note: note.clone(),
            };
            if let Some(n) = note {
                out.warnings.push(n);
            }
            // The chosen child must exist too: HEAD by digest (pull capability suffices).
            match self
                .fetch(
                    reference,
                    ep,
                    &entry.digest,
                    Method::HEAD,
                    credential,
                    deadline,
                )
                .await
            {
                Ok(_) => out.set_verdict(Verdict::Pullable, "manifest found".into()),
                Err(e) => {
                    let (v, detail) = classify::verdict_for(&e);
                    let detail = format!(
                        "index entry for {} ({}) : {detail}",
                        entry
                            .platform
                            .as_ref()
                            .map(|p| p.to_string())
                            .unwrap_or_else(|| "any platform".into()),
                        entry.digest
                    );
                    out.set_verdict(v, detail);
                }
            }
            return;
        }
        let available = missing_available
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        out.platform = PlatformReport {
            target: Some(target_text.clone()),
            result: "missing".into(),
            ..Default::default()
        };
        out.set_verdict(
            Verdict::PlatformMissing,
            format!(
                "index has no entry for {target_text} (available: {})",
                if available.is_empty() {
                    "none"
                } else {
                    &available
                }
            ),
        );
    }
}

/// The digest of what the reference resolved to, verified where the body allows it.
fn verified_digest(reference: &Reference, resp: &ManifestResponse) -> Result<String, String> {
    let header = resp
        .digest
        .as_deref()
        .map(Digest::parse)
        .transpose()
        .map_err(|e| format!("registry sent an invalid Docker-Content-Digest: {e}"))?;
    if let Some(body) = &resp.body {
        if let Some(h) = &header
            && !h.verify(body)
        {
            return Err(format!(
                "manifest content does not match its Docker-Content-Digest {h}"
            ));
        }
        if let Some(want) = reference.digest()
            && !want.verify(body)
        {
            return Err(format!(
                "manifest content does not match the requested digest {want}"
            ));
        }
    } else if let (Some(want), Some(h)) = (reference.digest(), &header)
        && want != h
    {
        return Err(format!("registry answered digest {h} for requested {want}"));
    }
    match (header, &resp.body, reference.digest()) {
        (Some(h), _, _) => Ok(h.to_string()),
        (None, _, Some(want)) => Ok(want.to_string()),
        (None, Some(body), None) => Ok(Digest::sha256_of(body).to_string()),
        (None, None, None) => Err("registry sent neither a digest nor a body".into()),
    }
}
