//! The one async step: decode the review, resolve the images within the budget, and let
//! [`super::review`] decide.
//!
//! Undecodable bodies get HTTP 400 with an `AdmissionResponse::invalid` review (never a 500
//! or a hang); a decodable review without a request gets that same answer with HTTP 200, as
//! kube-core's example does. Every other answer starts from `AdmissionResponse::from(&req)`.

mod hand_over;
mod resolve;
mod trainjob;
mod transient;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use http::StatusCode;
use kube::core::admission::AdmissionResponse;
use serde_json::Value;

use super::WebhookError;
use super::cache::VerdictCache;
use super::cluster::Cluster;
use super::config::Config;
use super::metrics::{Answer, Metrics};
use super::review::{self, Policy};
use super::triage::{self, Decoded, Triage, Undecodable, Webhook};
use crate::engine::Engine;
use crate::k8s::inject::{InjectOptions, TransientAction};
use crate::k8s::trainjob::is_train_job;
use crate::registry::guard::Guard;
use hand_over::{HAND_OVER_BUDGET, has_metered_images, index_bodies};
use resolve::resolve;
pub(crate) use resolve::resolve_pod_templates;
use transient::transient_action;

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
                let (checks, notes) = if is_train_job(&obj) {
                    // Its pod templates are the runtime's: lint has nothing of the TrainJob's
                    // own to say (the trainer's JobSet is linted when it is created).
                    trainjob::resolve_train_job(state, &obj, &namespace, started, cfg.budget).await
                } else {
                    let (checks, mut notes) =
                        resolve(state, &obj, &namespace, started, cfg.budget).await;
                    notes.extend(review::lint_notes(&obj, &cfg.table));
                    (checks, notes)
                };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_fit_in_the_budget() {
        let t = Instant::now();
        let b = Duration::from_secs(8);
        assert!(engine_deadline(t, b) < answer_by(t, b));
        assert!(answer_by(t, b) < t + b);
    }
}
