//! The one async step: decode the review, resolve the images within the budget, and let
//! [`super::review`] decide.
//!
//! Undecodable bodies get HTTP 400 with an `AdmissionResponse::invalid` review (never a 500
//! or a hang); a decodable review without a request gets that same answer with HTTP 200, as
//! kube-core's example does. Every other answer starts from `AdmissionResponse::from(&req)`.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use http::StatusCode;
use kube::core::admission::AdmissionResponse;
use serde_json::Value;

use super::WebhookError;
use super::cache::{VerdictCache, VerdictKey};
use super::cluster::{Cluster, TemplateCredentials};
use super::config::Config;
use super::engines::platforms_key;
use super::metrics::{Answer, Cache, Metrics};
use super::platforms::template_platforms;
use super::restart_rules;
use super::review::{self, Checked, ImageCheck, Policy, Unchecked};
use super::triage::{self, Decoded, Triage, Undecodable, Webhook};
use crate::credentials::Keychain;
use crate::credentials::provider::Workload;
use crate::engine::{Engine, PlatformPolicy};
use crate::k8s::inject::{IndexBodies, InjectOptions, TransientAction};
use crate::k8s::templates::{Table, pod_templates, template_images};
use crate::platform::Platform;
use crate::reference::Reference;
use crate::registry::guard::Guard;
use crate::verdict::Verdict;

/// Everything a request needs, shared by all of them.
pub(crate) struct WebhookState {
    pub config: Arc<Config>,
    /// The one engine; credentials and platforms are passed per image (see [`super::engines`]).
    pub engine: Engine,
    pub verdicts: VerdictCache,
    /// Kubernetes API access for pull secrets (`None`: anonymous only).
    pub cluster: Option<Arc<Cluster>>,
    pub metrics: Arc<Metrics>,
    /// False until serving, and again once shutdown starts.
    pub ready: AtomicBool,
    /// The `--transient` action the API server's version allows, once known.
    transient: tokio::sync::OnceCell<TransientAction>,
    /// When deciding it last failed: the API isn't asked again for [`TRANSIENT_RETRY`].
    transient_failed: std::sync::Mutex<Option<Instant>>,
}

impl WebhookState {
    /// The state for `config`: the engine behind `guard`, the API client when there is an API
    /// server, empty caches. A bad `--ca-file` or `--apiserver*` setting fails here, at
    /// startup, rather than per request.
    pub(crate) fn new(config: Config, guard: Guard) -> Result<WebhookState, WebhookError> {
        let metrics = Arc::new(Metrics::new());
        let engine = super::engines::build(&config, guard)?;
        let cluster = match &config.apiserver {
            Some(api) => {
                if let Some(line) = api.source.announce() {
                    tracing::info!("{line}");
                }
                Some(Arc::new(Cluster::new(
                    api,
                    config.cache.secret_ttl,
                    metrics.clone(),
                )?))
            }
            None => {
                tracing::warn!(
                    "no Kubernetes API (no --apiserver or kubeconfig, not in a cluster): images are checked without namespace pull secrets"
                );
                None
            }
        };
        Ok(WebhookState {
            verdicts: VerdictCache::new(&config.cache),
            config: Arc::new(config),
            engine,
            cluster,
            metrics,
            ready: AtomicBool::new(false),
            transient: tokio::sync::OnceCell::new(),
            transient_failed: std::sync::Mutex::new(None),
        })
    }
}

/// How long after a failed decision the reviews write count without asking the API again
/// (a hung API server would otherwise cost every review its request timeout).
const TRANSIENT_RETRY: Duration = Duration::from_secs(30);

/// `--transient` as the cluster can carry it out ([`super::restart_rules`]): decided on
/// the first review that needs it and kept; an API error falls back to count, logged once,
/// and the API is asked again after [`TRANSIENT_RETRY`].
async fn transient_action(state: &WebhookState, deadline: Instant) -> TransientAction {
    let cfg = &state.config;
    if cfg.inject.transient != TransientAction::Restart {
        return cfg.inject.transient;
    }
    if let Some(action) = state.transient.get() {
        return *action;
    }
    let failed_at = *state
        .transient_failed
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if failed_at.is_some_and(|t| t.elapsed() < TRANSIENT_RETRY) {
        return TransientAction::Count;
    }
    let resolved = state
        .transient
        .get_or_try_init(|| async {
            let r = restart_rules::resolve(
                state.cluster.as_deref(),
                &cfg.inject,
                cfg.transient_auto,
                cfg.restart_rules_probe.as_ref(),
                deadline,
            )
            .await?;
            match r.loudness {
                restart_rules::Loudness::Info => tracing::info!("{}", r.message),
                restart_rules::Loudness::Warn => tracing::warn!("{}", r.message),
            }
            Ok::<_, restart_rules::ProbeError>(r.action)
        })
        .await;
    match resolved {
        Ok(action) => *action,
        Err(e) => {
            let flag = restart_rules::flag_value(cfg.transient_auto);
            tracing::warn!(
                "container restart rules unknown ({e}): --transient {flag} writes count until the API server answers (asked again in {}s)",
                TRANSIENT_RETRY.as_secs()
            );
            *state
                .transient_failed
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            TransientAction::Count
        }
    }
}

/// How long `/mutate` resolves images only to hand their index bodies to the nodes.
const HAND_OVER_BUDGET: Duration = Duration::from_secs(3);

/// True when an image of `obj` is on a metered registry (Docker Hub).
fn has_metered_images(state: &WebhookState, obj: &Value) -> bool {
    let (_, images) = images_to_resolve(obj, &state.config.table);
    images
        .iter()
        .any(|i| Reference::parse(&i.image).is_ok_and(|r| state.engine.plan().is_metered(&r)))
}

/// The index bodies to hand over (`k8s::index_bodies`), by image as the injected template
/// will write it (pinned or not): for each image on a metered registry whose index this
/// process holds, that index and the indexes nested in it that it holds too.
/// Single-platform manifests have none: the node's HEAD is enough there.
async fn index_bodies(
    state: &WebhookState,
    checks: &[ImageCheck],
    pins: &[(String, String)],
) -> IndexBodies {
    let mut out = IndexBodies::new();
    for c in checks {
        let Checked::Done(o) = &c.result else {
            continue;
        };
        let Some(digest) = &o.digest else {
            continue;
        };
        if !Reference::parse(&c.image).is_ok_and(|r| state.engine.plan().is_metered(&r)) {
            continue;
        }
        let bodies = held_bodies(&state.engine, digest).await;
        if bodies.is_empty() {
            continue;
        }
        if let Some((_, pinned)) = pins.iter().find(|(p, _)| *p == c.pointer) {
            out.insert(pinned.clone(), bodies.clone());
        }
        out.insert(c.image.clone(), bodies);
    }
    out
}

/// The body of the index `digest` and of the indexes nested in it, as far as `engine`
/// holds them (at most 16: the engine walks 4 levels), the top one first.
async fn held_bodies(engine: &Engine, digest: &str) -> Vec<(String, Arc<Vec<u8>>)> {
    let mut out: Vec<(String, Arc<Vec<u8>>)> = Vec::new();
    let mut queue = vec![digest.to_string()];
    while let Some(d) = queue.pop() {
        if out.len() >= 16 || out.iter().any(|(seen, _)| *seen == d) {
            continue;
        }
        let Some(body) = engine.index_body(&d).await else {
            continue;
        };
        if let Ok(index) = crate::manifest::parse_index(&body) {
            queue.extend(
                index
                    .manifests
                    .iter()
                    .filter(|e| crate::manifest::is_index(&e.media_type))
                    .map(|e| e.digest.clone())
                    .rev(),
            );
        }
        out.push((d, body));
    }
    out
}

/// The time left for registry work: the answer must leave before the budget ends.
fn answer_by(started: Instant, budget: Duration) -> Instant {
    started + budget.saturating_sub(Duration::from_millis(150).min(budget / 4))
}

/// The engine's own deadline: early enough that its backstop still fits in the budget.
fn engine_deadline(started: Instant, budget: Duration) -> Instant {
    started + budget.saturating_sub(Duration::from_millis(900).min(budget / 2))
}

/// Serialize a review; the status is 200 unless the input was undecodable.
///
/// The patch goes out as the base64 string admission.k8s.io/v1 specifies (`patch` is
/// `[]byte` in k8s.io/api `admission/v1/types.go`). kube-core 5 serializes its `Vec<u8>`
/// as an array of numbers (kube-rs/kube issue 1781): the API server happens to accept that
/// too, but it is about four times the size, and a patch with index bodies is tens of KiB.
fn encode(resp: AdmissionResponse) -> Value {
    let mut review = serde_json::to_value(resp.into_review()).unwrap_or(Value::Null);
    if let Some(slot) = review.pointer_mut("/response/patch")
        && let Ok(bytes) = serde_json::from_value::<Vec<u8>>(slot.clone())
    {
        use base64::Engine as _;
        *slot = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    review
}

/// Answer one review. Returns the HTTP status and the AdmissionReview JSON.
pub(crate) async fn admit(
    state: &WebhookState,
    webhook: Webhook,
    body: &[u8],
) -> (StatusCode, Value) {
    let started = Instant::now();
    let seconds = || started.elapsed().as_secs_f64();
    let cfg = &state.config;
    let decoded = match triage::decode(body, &cfg.table, webhook) {
        Ok(d) => d,
        Err(e) => {
            state
                .metrics
                .admission(webhook, "unknown", Answer::Invalid, seconds());
            let status = match e {
                Undecodable::Body(_) => StatusCode::BAD_REQUEST,
                Undecodable::NoRequest(_) => StatusCode::OK,
            };
            return (status, encode(e.response()));
        }
    };
    let namespace = decoded.namespace();
    let Decoded {
        req,
        object,
        triage,
        ..
    } = decoded;
    let kind = req.kind.kind.clone();
    let (resp, label) = match (triage, object) {
        (Triage::Check, Some(obj)) => match webhook {
            Webhook::Validate => {
                let (checks, mut notes) =
                    resolve(state, &obj, &namespace, started, cfg.budget).await;
                notes.extend(review::lint_notes(&obj, &cfg.table));
                let policy = Policy {
                    mode: cfg.mode,
                    fail_closed: cfg.fail_closed,
                };
                let resp = review::validate(&req, &checks, &notes, policy);
                let label = if !resp.allowed {
                    Answer::Denied
                } else if checks.iter().any(|c| c.failed() || c.unverified()) {
                    Answer::Warned
                } else {
                    Answer::Allowed
                };
                (resp, label)
            }
            Webhook::Mutate => {
                // Resolved here to pin digests, or to hand the nodes the index bodies of
                // images on metered registries (the validating review then finds the
                // verdicts cached).
                let checks = if cfg.pin_digests {
                    resolve(state, &obj, &namespace, started, cfg.budget)
                        .await
                        .0
                } else if has_metered_images(state, &obj) {
                    // Only to spare the nodes GETs: a slow registry delays the mutation by
                    // at most HAND_OVER_BUDGET (the node then checks as it always did).
                    let budget = cfg.budget.min(HAND_OVER_BUDGET);
                    resolve(state, &obj, &namespace, started, budget).await.0
                } else {
                    Vec::new()
                };
                let pins = if cfg.pin_digests {
                    review::pins(&checks)
                } else {
                    Vec::new()
                };
                let inject = InjectOptions {
                    transient: transient_action(state, answer_by(started, cfg.budget)).await,
                    index_bodies: index_bodies(state, &checks, &pins).await,
                    ..cfg.inject.clone()
                };
                let resp = review::mutate(&req, &obj, &pins, &inject, &cfg.table);
                let label = if resp.patch.is_some() {
                    Answer::Patched
                } else {
                    Answer::Allowed
                };
                (resp, label)
            }
        },
        (t, _) => {
            if let Triage::Skip(s) = &t {
                tracing::debug!(uid = %req.uid, kind = %kind, reason = s.as_str(), "skipped");
            }
            (AdmissionResponse::from(&req), Answer::Skipped)
        }
    };
    tracing::info!(
        webhook = webhook.as_str(),
        uid = %req.uid,
        kind = %kind,
        namespace = req.namespace.as_deref().unwrap_or(""),
        name = %req.name,
        answer = label.as_str(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "admission"
    );
    state.metrics.admission(webhook, &kind, label, seconds());
    (StatusCode::OK, encode(resp))
}

/// One image the kubelet would pull, waiting for a verdict; `template` indexes the pod
/// templates whose credentials and platforms apply to it.
#[derive(Debug)]
struct ImageToResolve {
    container: String,
    image: String,
    pointer: String,
    template: usize,
}

/// The pod templates of `obj` and, in document order, the images of each that the kubelet
/// would pull ([`crate::k8s::templates::ImageUse::is_pulled`]).
fn images_to_resolve<'a>(obj: &'a Value, table: &Table) -> (Vec<&'a Value>, Vec<ImageToResolve>) {
    let found: Vec<(&Value, String)> = pod_templates(obj, table)
        .into_iter()
        .filter_map(|t| Some((obj.pointer(&t.pointer)?, t.pointer)))
        .collect();
    let templates: Vec<(&Value, &str)> = found.iter().map(|(t, p)| (*t, p.as_str())).collect();
    images_of(&templates)
}

/// Resolve every image of `obj` within the budget. Returns the checks (in document order)
/// and notes about credentials.
async fn resolve(
    state: &WebhookState,
    obj: &Value,
    namespace: &str,
    started: Instant,
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let cfg = &state.config;
    let (templates, pending) = images_to_resolve(obj, &cfg.table);
    let platforms: Vec<Vec<Platform>> = templates
        .iter()
        .map(|t| template_platforms(t, &cfg.cluster_platforms))
        .collect();
    resolve_templates(
        state, namespace, &templates, &platforms, pending, started, budget,
    )
    .await
}

/// Every pulled image of these pod templates of `namespace` ([`images_of`]), each template
/// for its own platforms (`platforms[i]` for `templates[i]`; the Kueue admission check
/// gives a pod set's assigned flavor's), resolved as [`admit`] resolves them: the
/// template's pull secrets, the verdict cache, the budget. The checks in template order.
pub(crate) async fn resolve_pod_templates(
    state: &WebhookState,
    namespace: &str,
    templates: &[(&Value, &str)],
    platforms: &[Vec<Platform>],
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let started = Instant::now();
    let (refs, pending) = images_of(templates);
    resolve_templates(state, namespace, &refs, platforms, pending, started, budget).await
}

/// The templates and their pulled images, as [`images_to_resolve`] gives them for an
/// object's own templates: `(template, its JSON pointer)`.
fn images_of<'a>(templates: &[(&'a Value, &str)]) -> (Vec<&'a Value>, Vec<ImageToResolve>) {
    let mut images = Vec::new();
    for (index, (template, pointer)) in templates.iter().enumerate() {
        for u in template_images(template, pointer) {
            if u.is_pulled() {
                images.push(ImageToResolve {
                    container: u.container,
                    image: u.image,
                    pointer: u.pointer,
                    template: index,
                });
            }
        }
    }
    (templates.iter().map(|(t, _)| *t).collect(), images)
}

/// The images `pending` of `templates`, resolved within the budget.
async fn resolve_templates(
    state: &WebhookState,
    namespace: &str,
    templates: &[&Value],
    platforms: &[Vec<Platform>],
    pending: Vec<ImageToResolve>,
    started: Instant,
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let cfg = &state.config;
    let by = answer_by(started, budget);
    let engine_by = engine_deadline(started, budget);
    let budget_text = format!(
        "no verdict within the webhook's {}s budget",
        budget.as_secs_f64()
    );
    let mut notes = Vec::new();
    // Credentials, one lookup per template (the API reads are cached and coalesced).
    let creds: Vec<TemplateCredentials> = match &state.cluster {
        None => templates
            .iter()
            .map(|_| TemplateCredentials::anonymous())
            .collect(),
        Some(cluster) => {
            let all = futures_util::future::join_all(
                templates
                    .iter()
                    .map(|t| cluster.credentials(namespace, t, by)),
            );
            match tokio::time::timeout_at(by.into(), all).await {
                Ok(c) => c,
                Err(_) => {
                    let checks = pending
                        .into_iter()
                        .map(|j| ImageCheck {
                            container: j.container,
                            image: j.image,
                            pointer: j.pointer,
                            result: Checked::NotVerified(
                                Unchecked::NoTime,
                                format!("pull secrets not read in time; {budget_text}"),
                            ),
                        })
                        .collect();
                    return (checks, notes);
                }
            }
        }
    };
    for c in &creds {
        for p in &c.problems {
            if !notes.contains(p) {
                notes.push(p.clone());
            }
        }
    }
    let mut results: Vec<Option<Checked>> = vec![None; pending.len()];
    {
        let mut futures: Vec<BoxFuture<'_, (usize, Checked)>> = Vec::with_capacity(pending.len());
        for (i, j) in pending.iter().enumerate() {
            let creds = &creds[j.template];
            let platforms = &platforms[j.template];
            futures.push(Box::pin(async move {
                (
                    i,
                    check_image(state, &j.image, namespace, creds, platforms, engine_by).await,
                )
            }));
        }
        let work = futures_util::stream::iter(futures).buffer_unordered(cfg.concurrency.max(1));
        futures_util::pin_mut!(work);
        loop {
            match tokio::time::timeout_at(by.into(), work.next()).await {
                Ok(Some((i, checked))) => results[i] = Some(checked),
                Ok(None) => break,
                Err(_) => break,
            }
        }
    }
    let checks = pending
        .into_iter()
        .zip(results)
        .map(|(j, r)| {
            let result = r.unwrap_or_else(|| {
                state.metrics.budget_exhausted.inc();
                Checked::NotVerified(Unchecked::NoTime, budget_text.clone())
            });
            ImageCheck {
                container: j.container,
                image: j.image,
                pointer: j.pointer,
                result,
            }
        })
        .collect();
    (checks, notes)
}

/// The keychain the kubelet would have for a pod of this template, less the node's
/// docker config: its pull secrets, then the credential providers, run for the template's
/// ServiceAccount when token requests are enabled (`--provider-token-requests`).
fn template_keychain(
    state: &WebhookState,
    namespace: &str,
    creds: &TemplateCredentials,
) -> Keychain {
    let workload = match (&state.cluster, state.config.provider_token_requests) {
        (Some(cluster), true) => Some(Workload {
            namespace: namespace.to_string(),
            service_account: Some(creds.service_account.clone()),
            tokens: cluster.clone(),
        }),
        _ => None,
    };
    Keychain::new(creds.keyring.clone(), None)
        .with_providers(state.config.providers.clone(), workload)
}

/// Resolve one image: through the verdict cache, else the shared engine with these
/// credentials and platforms.
async fn check_image(
    state: &WebhookState,
    image: &str,
    namespace: &str,
    creds: &TemplateCredentials,
    platforms: &[Platform],
    deadline: Instant,
) -> Checked {
    let engine = &state.engine;
    let keychain = template_keychain(state, namespace, creds);
    let policy = PlatformPolicy::AnyOf(platforms.to_vec());
    let reference = match Reference::parse(image) {
        Ok(r) => r,
        // No request is made for an invalid reference: no need to cache it.
        Err(_) => {
            return Checked::Done(Box::new(
                engine
                    .check_one_with(image, deadline, &keychain, &policy)
                    .await,
            ));
        }
    };
    let credentials = keychain
        .identity(&reference.name(), reference.domain())
        .await;
    let key = VerdictKey {
        reference: reference.full(),
        credentials,
        platforms: platforms_key(platforms),
    };
    let metrics = &state.metrics;
    let (found, hit) = state
        .verdicts
        .get_or_check(key, async {
            let t = Instant::now();
            let o = engine
                .check_one_with(image, deadline, &keychain, &policy)
                .await;
            metrics.lookup(o.verdict, t.elapsed().as_secs_f64());
            if let (Some(q), Some(r)) = (&o.quota, &o.registry) {
                metrics.quota(r, q.remaining);
            }
            o
        })
        .await;
    metrics.cache(Cache::Verdict, hit);
    let found = (*found).clone();
    if found.verdict != Verdict::Pullable && !creds.problems.is_empty() {
        return Checked::NotVerified(
            Unchecked::Credentials,
            format!("{}; {}", found.detail, creds.problems.join("; ")),
        );
    }
    Checked::Done(Box::new(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn images_never_pulled_are_not_resolved_in_any_slot() {
        // An image volume with pullPolicy Never is no more pulled than a container with
        // imagePullPolicy Never: neither is sent to a registry.
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
            "initContainers": [{"name": "i", "image": "r.example/init:v1", "imagePullPolicy": "Never"}],
            "containers": [{"name": "c", "image": "r.example/app:v1"}],
            "volumes": [
                {"name": "local", "image": {"reference": "r.example/local:v1", "pullPolicy": "Never"}},
                {"name": "model", "image": {"reference": "r.example/model:v1", "pullPolicy": "IfNotPresent"}},
            ],
        }}}});
        let (templates, pending) = images_to_resolve(&job, &Table::builtin());
        assert_eq!(templates.len(), 1);
        let images: Vec<&str> = pending.iter().map(|p| p.image.as_str()).collect();
        assert_eq!(images, vec!["r.example/app:v1", "r.example/model:v1"]);
    }

    #[test]
    fn deadlines_fit_in_the_budget() {
        let t = Instant::now();
        let b = Duration::from_secs(8);
        assert!(engine_deadline(t, b) < answer_by(t, b));
        assert!(answer_by(t, b) < t + b);
    }
}
