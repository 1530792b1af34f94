//! One credential on one endpoint: HEAD-first resolution and the platform step, as one
//! value ([`Attempt`]) that the engine compares with the others.

use std::sync::Arc;
use std::time::Instant;

use http::Method;

use super::NodeRuntime;
use super::artifact::{artifact_use, indexed_artifact_use};
use super::classify;
use super::host_loop::HostFailure;
use super::outcome::{PlatformReport, PlatformResult};
use super::resolution::{PlatformCheck, Route, SkipReason};
use crate::credentials::Credential;
use crate::manifest::artifact::{self, Artifact, Shape};
use crate::manifest::{self, Selection};
use crate::platform::Platform;
use crate::reference::{Digest, Reference};
use crate::registry::client::{ManifestRequest, ManifestResponse, Registry};
use crate::registry::error::{Failure, RegistryError};
use crate::registry::quota::Quota;
use crate::verdict::Verdict;

/// Index bodies by digest, bounded by their total size.
pub(crate) type IndexBodies = moka::future::Cache<String, Arc<Vec<u8>>>;

/// The cache of index bodies: 16 MiB, weighed by body size (an index is a few KiB; the
/// webhook pays at most one GET per distinct index digest on a metered registry).
pub(super) fn index_bodies() -> IndexBodies {
    moka::future::Cache::builder()
        .max_capacity(16 * 1024 * 1024)
        .weigher(|k: &String, v: &Arc<Vec<u8>>| {
            u32::try_from(k.len() + v.len()).unwrap_or(u32::MAX)
        })
        .build()
}

/// What one credential found on one endpoint.
#[derive(Debug, Clone)]
pub(super) struct Attempt {
    pub verdict: Verdict,
    pub detail: String,
    pub digest: Option<String>,
    pub media_type: Option<String>,
    pub platform: PlatformReport,
    /// The OCI artifact the tag (or the chosen index entry) resolved to.
    pub artifact: Option<Artifact>,
    /// The endpoint host, once one was tried.
    pub endpoint: Option<String>,
    pub warnings: Vec<String>,
    /// The pull quota the last answer stated.
    pub quota: Option<Quota>,
    /// The verdict is pullcheck's own address guard refusing, not a registry's answer.
    pub guard_refused: bool,
    /// How the host failed before the tag resolved, as the runtimes rank it
    /// ([`super::host_loop`]); `None` when nothing failed or nothing was sent.
    pub host_failure: Option<HostFailure>,
}

impl Attempt {
    /// An attempt that ended with `verdict` before anything was resolved.
    pub(crate) fn ended(verdict: Verdict, detail: String) -> Attempt {
        Attempt {
            verdict,
            detail,
            digest: None,
            media_type: None,
            platform: PlatformReport::default(),
            artifact: None,
            endpoint: None,
            warnings: Vec::new(),
            quota: None,
            guard_refused: false,
            host_failure: None,
        }
    }

    fn with(mut self, verdict: Verdict, detail: impl Into<String>) -> Attempt {
        self.verdict = verdict;
        self.detail = detail.into();
        self
    }

    fn failed(mut self, route: &Route, e: &RegistryError) -> Attempt {
        // A loopback registry the guard refused is no registry's answer and no hostile
        // referral: pullcheck did not look (transient, "not checked").
        let (v, mut detail) = classify::loopback_registry_refused(e, &route.endpoint.host)
            .map(|d| (Verdict::Transient, d))
            .unwrap_or_else(|| classify::verdict_for(e));
        if let (
            Some(value),
            RegistryError::Transport {
                failure: Failure::PlainHttp(host),
                ..
            },
        ) = (&route.endpoint.insecure_port_mismatch, e)
        {
            detail.push_str(&format!(
                "; --insecure-registry {value} does not cover {host}: the port is part of the \
registry's name"
            ));
        }
        self.guard_refused = classify::is_guard_refusal(e);
        if self.digest.is_none() {
            self.host_failure = Some(HostFailure::of(e));
        }
        self.with(v, detail)
    }

    fn found(self) -> Attempt {
        self.with(Verdict::Pullable, "manifest found")
    }

    fn not_checked(self, reason: &SkipReason) -> Attempt {
        Attempt {
            platform: PlatformReport {
                result: PlatformResult::NotChecked,
                note: Some(format!("platform not verified: {reason}")),
                ..Default::default()
            },
            ..self
        }
    }
}

/// The fetches of one attempt: the registry, the reference, the endpoint, the credential
/// and the deadline, fixed for all of its requests.
pub(super) struct Resolver<'a> {
    pub registry: &'a Registry,
    /// Index bodies by digest, shared by every check of the process.
    pub indexes: &'a IndexBodies,
    pub reference: &'a Reference,
    pub credential: Option<&'a Credential>,
    pub deadline: Instant,
    /// The node's runtime, which decides what an OCI artifact is worth
    /// ([`super::artifact::artifact_use`]).
    pub runtime: NodeRuntime,
}

/// How many nested indexes are walked below the first. containerd has no limit
/// (`core/images/handlers.go` walks children until it reaches manifests); a bound keeps a
/// hostile registry from leading a check through an endless chain (README's deviation list).
pub(crate) const MAX_NESTED_INDEXES: usize = 4;

impl Resolver<'_> {
    async fn fetch(
        &self,
        route: &Route,
        target: &str,
        method: Method,
    ) -> Result<ManifestResponse, RegistryError> {
        let ep = &route.endpoint;
        let credential = if route.credentials_allowed {
            self.credential
        } else {
            None
        };
        self.registry
            .manifest(&ManifestRequest {
                endpoint: ep,
                repository: self.reference.path(),
                reference: target,
                ns: ep.is_mirror.then(|| self.reference.domain()),
                scope: &self.reference.pull_scope(),
                method,
                credential,
                deadline: self.deadline,
            })
            .await
    }

    /// HEAD-first resolution on one endpoint, with the platform check.
    pub(crate) async fn on(&self, route: &Route, platform: &PlatformCheck) -> Attempt {
        let attempt = Attempt {
            endpoint: Some(route.endpoint.host.clone()),
            ..Attempt::ended(Verdict::Transient, String::new())
        };
        let target = self.reference.manifest_reference();
        // The platform check needs the index body: GET at once rather than HEAD then GET,
        // except where a GET is a pull (HEAD is free there).
        let (first, targets, margin) = match platform {
            PlatformCheck::Verify(t) => (Method::GET, Some(t), None),
            PlatformCheck::IfAffordable { targets, margin } => {
                (Method::HEAD, Some(targets), Some(*margin))
            }
            PlatformCheck::Skip(_) => (Method::HEAD, None, None),
        };
        let mut resp = self.fetch(route, &target, first.clone()).await;
        if first == Method::HEAD {
            let need_get = match &resp {
                Err(e) => e.status() == Some(405),
                Ok(r) => r.digest.is_none(),
            };
            if need_get {
                resp = self.fetch(route, &target, Method::GET).await;
            }
        }
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return attempt.failed(route, &e),
        };
        let digest = match verified_digest(self.reference, &resp) {
            Ok(d) => d,
            Err(problem) => {
                return Attempt {
                    host_failure: Some(HostFailure::Status),
                    ..attempt
                }
                .with(Verdict::NotFound, problem.to_string());
            }
        };
        let attempt = Attempt {
            digest: Some(digest.clone()),
            media_type: resp.media_type.clone(),
            quota: resp.quota,
            ..attempt
        };
        let Some(targets) = targets else {
            let PlatformCheck::Skip(reason) = platform else {
                unreachable!("only Skip has no targets")
            };
            return attempt.not_checked(reason).found();
        };
        let target_text = targets
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",");
        if !resp.media_type.as_deref().is_some_and(manifest::is_index) {
            // A GET read the body: an OCI artifact is told from an image here (a HEAD on a
            // metered registry reads none, and says nothing about it).
            if let Some(Shape::Artifact(a)) = resp.body.as_deref().and_then(artifact::shape)
                && !a.has_image_config()
            {
                return self.single_artifact(a, target_text, attempt);
            }
            return Attempt {
                platform: PlatformReport {
                    target: Some(target_text),
                    result: PlatformResult::SingleManifest,
                    note: Some(
                        "single-platform manifest: containerd does not filter it by platform"
                            .into(),
                    ),
                    ..Default::default()
                },
                ..attempt
            }
            .found();
        }
        let body = match (resp.body, margin) {
            (Some(body), _) => {
                // verified_digest checked it against the digest: keep it for whoever asks
                // by digest (the webhook hands bodies to the nodes it injects).
                self.indexes
                    .insert(digest.clone(), Arc::new(body.clone()))
                    .await;
                body
            }
            (None, margin) => match self.index_body(route, &digest, resp.quota, margin).await {
                Ok(Some(body)) => body,
                Ok(None) => {
                    let reason = SkipReason::QuotaLow {
                        registry: self.reference.domain().to_string(),
                        quota: resp.quota.expect("a low quota was stated"),
                        margin: margin.unwrap_or_default(),
                    };
                    return attempt.not_checked(&reason).found();
                }
                Err(e) => return attempt.failed(route, &e),
            },
        };
        self.index(route, &body, targets, target_text, margin, attempt)
            .await
    }

    /// A single manifest that is an OCI artifact: no platform to match, and the verdict is
    /// what the node's runtime does with it.
    fn single_artifact(&self, a: Artifact, target_text: String, attempt: Attempt) -> Attempt {
        let u = artifact_use(self.runtime, &a);
        let mut attempt = Attempt {
            platform: PlatformReport {
                target: Some(target_text),
                result: PlatformResult::Artifact,
                note: Some(
                    "an OCI artifact has no platform; containerd matches none for a single manifest"
                        .into(),
                ),
                ..Default::default()
            },
            artifact: Some(a),
            ..attempt
        };
        attempt.warnings.extend(u.warning);
        attempt.with(u.verdict, u.detail)
    }

    /// The platform step on an index: choose the child the node pulls, then HEAD it.
    /// `margin`: the pulls that must stay left on a metered registry (`None`: not metered,
    /// or GETs allowed regardless).
    async fn index(
        &self,
        route: &Route,
        body: &[u8],
        targets: &[Platform],
        target_text: String,
        margin: Option<u64>,
        attempt: Attempt,
    ) -> Attempt {
        let index = match manifest::parse_index(body) {
            Ok(i) => i,
            Err(e) => {
                return attempt.with(
                    Verdict::NotFound,
                    format!("index could not be decoded: {e}"),
                );
            }
        };
        let mut missing_available = Vec::new();
        for t in targets {
            let (entry, result, note) = match manifest::select(t, &index.manifests) {
                Selection::Exact(e) => (e, PlatformResult::Exact, None),
                Selection::Fallback(e) => (
                    e,
                    PlatformResult::Fallback,
                    Some(format!(
                        "only a fallback platform matches {t}: containerd < 2.1 pulls it, containerd >= 2.1 with default settings does not"
                    )),
                ),
                Selection::NoPlatformField(e) => (
                    e,
                    PlatformResult::NoPlatformField,
                    Some("index entry without a platform field matches any platform".to_string()),
                ),
                Selection::Missing { available } => {
                    missing_available = available;
                    continue;
                }
            };
            let mut attempt = Attempt {
                platform: PlatformReport {
                    target: Some(target_text.clone()),
                    result,
                    matched: entry.platform.as_ref().map(|p| p.to_string()),
                    child_digest: Some(entry.digest.clone()),
                    note: note.clone(),
                },
                ..attempt
            };
            attempt.warnings.extend(note);
            let leaf = match self.descend(route, entry, t, attempt.quota, margin).await {
                Ok(leaf) => leaf,
                Err(Descent::Failed(v, detail)) => return attempt.with(v, detail),
                Err(Descent::NotAffordable(quota)) => {
                    let reason = SkipReason::QuotaLow {
                        registry: self.reference.domain().to_string(),
                        quota,
                        margin: margin.unwrap_or_default(),
                    };
                    return attempt.not_checked(&reason).found();
                }
            };
            if leaf.digest != entry.digest {
                attempt.platform.matched = leaf.platform.as_ref().map(|p| p.to_string());
                attempt.platform.child_digest = Some(leaf.digest.clone());
            }
            // The chosen child must exist too: HEAD by digest (pull capability suffices).
            // A child without a platform is matched by containerd from its config, so it is
            // read (GET, where a GET is not a metered pull) to tell an OCI artifact.
            let platformless = leaf.platform.is_none() && margin.is_none();
            let method = if platformless {
                Method::GET
            } else {
                Method::HEAD
            };
            return match self.fetch(route, &leaf.digest, method).await {
                Ok(resp) => {
                    let verified = Digest::parse(&leaf.digest)
                        .ok()
                        .zip(resp.body.as_deref())
                        .filter(|(d, body)| d.verify(body));
                    match verified.and_then(|(_, body)| artifact::shape(body)) {
                        Some(Shape::Artifact(a)) if platformless && !a.has_image_config() => {
                            let u = indexed_artifact_use(self.runtime, &a, &leaf.digest);
                            // "matches any platform" is not so for an artifact.
                            let any = attempt.platform.note.take();
                            attempt.warnings.retain(|w| Some(w) != any.as_ref());
                            attempt.platform.note = Some(
                                "an index entry without a platform is matched by its config, and an OCI artifact's config has no platform".into(),
                            );
                            attempt.platform.result = PlatformResult::Artifact;
                            attempt.artifact = Some(a);
                            attempt.warnings.extend(u.warning);
                            attempt.with(u.verdict, u.detail)
                        }
                        _ => attempt.found(),
                    }
                }
                Err(e) => {
                    let (v, detail) = classify::verdict_for(&e);
                    let detail = format!(
                        "index entry for {} ({}) : {detail}",
                        leaf.platform
                            .as_ref()
                            .map(|p| p.to_string())
                            .unwrap_or_else(|| "any platform".into()),
                        leaf.digest
                    );
                    attempt.guard_refused = classify::is_guard_refusal(&e);
                    attempt.with(v, detail)
                }
            };
        }
        let available = missing_available
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let detail = format!(
            "index has no entry for {target_text} (available: {})",
            if available.is_empty() {
                "none"
            } else {
                &available
            }
        );
        Attempt {
            platform: PlatformReport {
                target: Some(target_text),
                result: PlatformResult::Missing,
                ..Default::default()
            },
            ..attempt
        }
        .with(Verdict::PlatformMissing, detail)
    }

    /// The body of the index a HEAD resolved to on a metered registry: from the cache of
    /// bodies by digest (content-addressed, never stale), else a GET by digest when the
    /// HEAD's quota affords one (no limit stated, or more than `margin` pulls left).
    /// `Ok(None)`: not affordable.
    async fn index_body(
        &self,
        route: &Route,
        digest: &str,
        quota: Option<Quota>,
        margin: Option<u64>,
    ) -> Result<Option<Vec<u8>>, RegistryError> {
        if let Some(body) = self.indexes.get(digest).await {
            return Ok(Some(body.to_vec()));
        }
        if let (Some(q), Some(m)) = (quota, margin)
            && q.remaining <= m
        {
            return Ok(None);
        }
        let resp = self.fetch(route, digest, Method::GET).await?;
        let body = resp.body.unwrap_or_default();
        if Digest::parse(digest).is_ok_and(|d| d.verify(&body)) {
            self.indexes
                .insert(digest.to_string(), Arc::new(body.clone()))
                .await;
        }
        Ok(Some(body))
    }
}

impl Resolver<'_> {
    /// From a chosen index entry down to the manifest the node pulls: while the entry is
    /// itself an index, read it by digest (from the cache of bodies, else a verified GET,
    /// which is kept) and choose again for `target`, as containerd walks nested indexes.
    /// On a metered registry a GET is sent only while `quota` stays above `margin`, as for
    /// the top index. `Err` says why it stopped.
    async fn descend(
        &self,
        route: &Route,
        entry: &manifest::IndexEntry,
        target: &Platform,
        quota: Option<Quota>,
        margin: Option<u64>,
    ) -> Result<manifest::IndexEntry, Descent> {
        let mut entry = entry.clone();
        for _ in 0..MAX_NESTED_INDEXES {
            if !manifest::is_index(&entry.media_type) {
                return Ok(entry);
            }
            let body = match self.indexes.get(&entry.digest).await {
                Some(body) => body,
                None => {
                    if let (Some(q), Some(m)) = (quota, margin)
                        && q.remaining <= m
                    {
                        return Err(Descent::NotAffordable(q));
                    }
                    let resp = self
                        .fetch(route, &entry.digest, Method::GET)
                        .await
                        .map_err(|e| {
                            let (v, d) = classify::verdict_for(&e);
                            Descent::Failed(v, format!("nested index {}: {d}", entry.digest))
                        })?;
                    let body = resp.body.unwrap_or_default();
                    let verified = Digest::parse(&entry.digest).is_ok_and(|d| d.verify(&body));
                    if !verified {
                        return Err(Descent::Failed(
                            Verdict::NotFound,
                            format!("nested index {} does not match its digest", entry.digest),
                        ));
                    }
                    let body = Arc::new(body);
                    self.indexes
                        .insert(entry.digest.clone(), body.clone())
                        .await;
                    body
                }
            };
            let index = manifest::parse_index(&body).map_err(|e| {
                Descent::Failed(
                    Verdict::NotFound,
                    format!("nested index {} could not be decoded: {e}", entry.digest),
                )
            })?;
            entry = match manifest::select(target, &index.manifests) {
                Selection::Exact(e) | Selection::Fallback(e) | Selection::NoPlatformField(e) => {
                    e.clone()
                }
                Selection::Missing { available } => {
                    let available = available
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(Descent::Failed(
                        Verdict::PlatformMissing,
                        format!(
                            "nested index {} has no entry for {target} (available: {})",
                            entry.digest,
                            if available.is_empty() {
                                "none"
                            } else {
                                &available
                            }
                        ),
                    ));
                }
            };
        }
        if manifest::is_index(&entry.media_type) {
            return Err(Descent::Failed(
                Verdict::NotFound,
                format!(
                    "indexes nested more than {MAX_NESTED_INDEXES} deep below the tag: pullcheck stops there"
                ),
            ));
        }
        Ok(entry)
    }
}

/// Why [`Resolver::descend`] stopped above a manifest.
enum Descent {
    /// A nested index can't be read, doesn't match its digest, or lacks the platform: the
    /// verdict and its detail.
    Failed(Verdict, String),
    /// Reading a nested index would spend a pull the quota (stated here) can't afford.
    NotAffordable(Quota),
}

/// Why the digest of an answer can't be trusted: the image is reported `not_found` with this
/// line (a runtime stores fetched content only under the digest it expected, so a pull of
/// such a manifest fails too).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum DigestProblem {
    /// The `Docker-Content-Digest` header is not a digest.
    #[error("registry sent an invalid Docker-Content-Digest: {0}")]
    InvalidHeader(String),
    /// The body does not hash to the header's digest.
    #[error("manifest content does not match its Docker-Content-Digest {0}")]
    BodyNotHeader(Digest),
    /// The body does not hash to the digest the reference asked for.
    #[error("manifest content does not match the requested digest {0}")]
    BodyNotRequested(Digest),
    /// No body to hash, and the header names another digest than the one asked for.
    #[error("registry answered digest {answered} for requested {requested}")]
    Answered { answered: Digest, requested: Digest },
    /// Neither a header nor a body.
    #[error("registry sent neither a digest nor a body")]
    Nothing,
}

/// The digest of what the reference resolved to, verified where the body allows it.
fn verified_digest(
    reference: &Reference,
    resp: &ManifestResponse,
) -> Result<String, DigestProblem> {
    let header = resp
        .digest
        .as_deref()
        .map(Digest::parse)
        .transpose()
        .map_err(|e| DigestProblem::InvalidHeader(e.to_string()))?;
    if let Some(body) = &resp.body {
        if let Some(h) = &header
            && !h.verify(body)
        {
            return Err(DigestProblem::BodyNotHeader(h.clone()));
        }
        if let Some(want) = reference.digest()
            && !want.verify(body)
        {
            return Err(DigestProblem::BodyNotRequested(want.clone()));
        }
    } else if let (Some(want), Some(h)) = (reference.digest(), &header)
        && want != h
    {
        return Err(DigestProblem::Answered {
            answered: h.clone(),
            requested: want.clone(),
        });
    }
    match (header, &resp.body, reference.digest()) {
        (Some(h), _, _) => Ok(h.to_string()),
        (None, _, Some(want)) => Ok(want.to_string()),
        (None, Some(body), None) => Ok(Digest::sha256_of(body).to_string()),
        (None, None, None) => Err(DigestProblem::Nothing),
    }
}
