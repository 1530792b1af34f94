//! The Kueue admission check's pure rules (issue 23): which checks of a Workload are ours
//! to answer, which images its pod sets pull, where its pods will land (the assigned
//! ResourceFlavors' node labels), what a set of verdicts answers
//! ([`decide`]), and the server-side-apply body that writes the answer
//! ([`admission_check_apply`]). No I/O: the controller that reads Workloads and applies
//! the answers is built on the shared controller runtime.
//!
//! The shapes are Kueue v0.19.2's `kueue.x-k8s.io/v1beta2` (`apis/kueue/v1beta2/`:
//! `workload_types.go` `WorkloadStatus.AdmissionChecks`, `AdmissionCheckState` with its
//! required `message` and `lastTransitionTime`, optional `requeueAfterSeconds`;
//! `admissioncheck_types.go` `CheckState`; `resourceflavor_types.go` `NodeLabels`).

pub(crate) mod api;
pub(crate) mod controller;
pub(crate) mod images;
pub(crate) mod stalled;

use std::time::Duration;

use serde_json::{Value, json};

use crate::platform::Platform;
use crate::verdict::Verdict;

/// [`run`], only while holding `lease` (`(namespace, name)`) when one is given
/// ([`crate::runtime::lease::lead`]); the identity is the pod's name (`HOSTNAME`) and this
/// process's id, as client-go's controllers name theirs.
pub(crate) async fn run_leading(
    state: std::sync::Arc<crate::webhook::handler::WebhookState>,
    client: crate::apiserver::ApiClient,
    unproven: UnprovenPolicy,
    lease: Option<(String, String)>,
) {
    use crate::runtime::lease::{ApiLease, Timing, lead};
    let Some((namespace, name)) = lease else {
        return run(state, client, unproven).await;
    };
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "pullcheck".into());
    let identity = format!("{host}_{}", std::process::id());
    let api = ApiLease::new(client.clone(), &namespace, &name);
    lead(
        api,
        identity,
        Timing::default(),
        crate::runtime::Clock::system(),
        move || run(state.clone(), client.clone(), unproven),
    )
    .await;
}

/// Run the admission check until the task running it is aborted: the AdmissionChecks and
/// the Workloads of every namespace, each on its own runtime loop ([`crate::runtime::run`]),
/// the images resolved by the webhook's `state`.
pub(crate) async fn run(
    state: std::sync::Arc<crate::webhook::handler::WebhookState>,
    client: crate::apiserver::ApiClient,
    unproven: UnprovenPolicy,
) {
    use crate::runtime::{self, Clock, Settings, Status, api::ApiSource};
    use std::sync::Arc;
    let api = Arc::new(api::KueueClient::new(client.clone()));
    let checks = ApiSource::new(client.clone(), api.url(None, "admissionchecks", &[]));
    let workloads = ApiSource::new(client, api.url(None, "workloads", &[]));
    let metrics = state.metrics.clone();
    let answers = controller::WorkloadReconciler::new(
        api.clone(),
        images::WebhookImages::new(state),
        unproven,
        Clock::system(),
        metrics,
    );
    let active = controller::CheckReconciler::new(api.clone(), Clock::system());
    controller::wait_until_served(api.as_ref()).await;
    tracing::info!(
        controller = controller::CONTROLLER_NAME,
        "answering Kueue admission checks"
    );
    tokio::join!(
        runtime::run(
            checks,
            Arc::new(active),
            Settings {
                kind: "admissionchecks",
                concurrency: 2,
            },
            Status::default(),
        ),
        runtime::run(
            workloads,
            Arc::new(answers),
            Settings {
                kind: "workloads",
                concurrency: 8,
            },
            Status::default(),
        ),
    );
}

/// Kueue's API group and version.
pub(crate) const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";
/// The first Retry's requeue delay; it doubles per retry up to [`MAX_REQUEUE`].
pub(crate) const FIRST_REQUEUE: Duration = Duration::from_secs(30);
/// The longest Retry requeue delay.
pub(crate) const MAX_REQUEUE: Duration = Duration::from_secs(600);

/// An admission check's state (Kueue `CheckState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CheckState {
    /// Not yet decided.
    Pending,
    /// Passed: the workload may be admitted.
    Ready,
    /// Not now: Kueue evicts the workload, releases its quota and requeues it.
    Retry,
    /// Never: Kueue deactivates the workload (evicted, quota released, job suspended).
    Rejected,
}

impl CheckState {
    /// The API's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckState::Pending => "Pending",
            CheckState::Ready => "Ready",
            CheckState::Retry => "Retry",
            CheckState::Rejected => "Rejected",
        }
    }

    /// From the API's spelling; `None` for anything else.
    pub(crate) fn parse(s: &str) -> Option<CheckState> {
        Some(match s {
            "Pending" => CheckState::Pending,
            "Ready" => CheckState::Ready,
            "Retry" => CheckState::Retry,
            "Rejected" => CheckState::Rejected,
            _ => return None,
        })
    }
}

/// What pullcheck answers for one check of one Workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// Ready, Retry or Rejected.
    pub state: CheckState,
    /// One line for `kubectl describe workload` (Kueue requires a message).
    pub message: String,
    /// For Retry: when Kueue should requeue the workload.
    pub requeue_after: Option<Duration>,
}

/// How a denied or unauthenticated image is answered: the nodes may hold credentials
/// pullcheck lacks (a kubelet credential provider, a node-wide config.json), so it is
/// never Rejected on that guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum UnprovenPolicy {
    /// Ready, saying it was not verified: the pods start, and the init container or the
    /// watch, with the node's credentials, fails them fast if they really can't pull.
    #[default]
    AssumeReady,
    /// Rejected: only when the check sees every credential the nodes have.
    Reject,
}

/// What resolving one image gave, as the admission check weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The engine's verdict.
    Verdict(Verdict),
    /// No verdict in time (the registry or the pull secrets too slow): ask again.
    NoTime,
    /// A pull secret could not be read or decoded and the image was not pullable with the
    /// others: not proven either way, and asking again gives the same answer.
    Credentials,
}

/// One resolved image: the line that says what happened (`CONTAINER: IMAGE: VERDICT
/// (DETAIL)`, as the webhook and the init container write it) and what it weighs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The line.
    pub line: String,
    /// What it weighs.
    pub found: Found,
}

/// The answer for a workload whose pulled images resolved as `images` (pod-set order), on
/// its `retry`-th Retry so far (0 for the first).
///
/// - any permanent failure the check can prove (invalid reference, not found, platform
///   missing) → Rejected, with that image's line;
/// - else any transient failure, or no verdict in time → Retry, with a delay of
///   [`FIRST_REQUEUE`] doubled per earlier retry, at most [`MAX_REQUEUE`];
/// - else denied, unauthenticated, or unreadable pull secrets → per `unproven`;
/// - else (every image pullable, or no image at all) → Ready.
pub(crate) fn decide(images: &[Resolved], retry: u32, unproven: UnprovenPolicy) -> Answer {
    let first = |f: &dyn Fn(Found) -> bool| images.iter().find(|r| f(r.found));
    let proven = |f: Found| matches!(f, Found::Verdict(v) if v.is_permanent_failure());
    if let Some(r) = first(&proven) {
        return Answer {
            state: CheckState::Rejected,
            message: format!("pullcheck: {}", r.line),
            requeue_after: None,
        };
    }
    if let Some(r) = first(&|f| matches!(f, Found::Verdict(Verdict::Transient) | Found::NoTime)) {
        let delay = FIRST_REQUEUE
            .saturating_mul(1 << retry.min(16))
            .min(MAX_REQUEUE);
        return Answer {
            state: CheckState::Retry,
            message: format!(
                "pullcheck: {}; asking again in {}s",
                r.line,
                delay.as_secs()
            ),
            requeue_after: Some(delay),
        };
    }
    let unproven_found = |f: Found| {
        matches!(
            f,
            Found::Verdict(Verdict::Denied | Verdict::Unauthenticated) | Found::Credentials
        )
    };
    if let Some(r) = first(&unproven_found) {
        return match unproven {
            UnprovenPolicy::AssumeReady => Answer {
                state: CheckState::Ready,
                message: format!(
                    "pullcheck: {}; not verified, admitted (the nodes may hold credentials pullcheck lacks)",
                    r.line
                ),
                requeue_after: None,
            },
            UnprovenPolicy::Reject => Answer {
                state: CheckState::Rejected,
                message: format!("pullcheck: {}", r.line),
                requeue_after: None,
            },
        };
    }
    Answer {
        state: CheckState::Ready,
        message: match images.len() {
            // Only images with imagePullPolicy Never (or no containers): nothing is pulled.
            0 => "pullcheck: no image is pulled (imagePullPolicy Never)".to_string(),
            1 => "pullcheck: the image is pullable".to_string(),
            n => format!("pullcheck: all {n} images pullable"),
        },
        requeue_after: None,
    }
}

/// The names of this Workload's checks that pullcheck must answer now: those in `ours`
/// (the AdmissionChecks whose `spec.controllerName` is `pullcheck.io/image-check`) still `Pending`,
/// and only while the workload holds quota (`QuotaReserved` True) and is active: Kueue runs
/// admission checks between quota reservation and admission.
pub(crate) fn checks_to_answer(workload: &Value, ours: &[String]) -> Vec<String> {
    // A deactivated workload (ours Rejected it, or its user did) holds nothing and is not
    // admitted: Kueue resets the entry to Pending while evicting it, before its quota is
    // released, and answering that again only writes twice (measured with Kueue v0.19.2).
    if workload.pointer("/spec/active") == Some(&Value::Bool(false)) {
        return Vec::new();
    }
    let reserved = workload
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("QuotaReserved")
                && c.get("status").and_then(Value::as_str) == Some("True")
        });
    if !reserved {
        return Vec::new();
    }
    workload
        .pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c.get("name")?.as_str()?;
            let state = CheckState::parse(c.get("state")?.as_str()?)?;
            (state == CheckState::Pending && ours.iter().any(|o| o == name))
                .then(|| name.to_string())
        })
        .collect()
}

/// The retry count Kueue keeps for check `name` (`retryCount`, 0 when absent).
pub(crate) fn retry_count(workload: &Value, name: &str) -> u32 {
    workload
        .pointer("/status/admissionChecks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|c| c.get("retryCount"))
        .and_then(Value::as_u64)
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The ResourceFlavors assigned to pod set `name` (its `podSetAssignments` entry's
/// `flavors`, a map resource → flavor), deduplicated, in order.
pub(crate) fn pod_set_flavors(workload: &Value, name: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in workload
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.get("name").and_then(Value::as_str) == Some(name))
        .filter_map(|a| a.get("flavors").and_then(Value::as_object))
        .flat_map(|m| m.values())
        .filter_map(Value::as_str)
    {
        if !out.iter().any(|o| o == f) {
            out.push(f.to_string());
        }
    }
    out
}

/// The platform a ResourceFlavor's `spec.nodeLabels` pin (`kubernetes.io/os`,
/// `kubernetes.io/arch`, the labels the kubelet sets from its GOOS and GOARCH); `None`
/// when the flavor pins no architecture (then the cluster's platforms apply).
pub(crate) fn flavor_platform(flavor: &Value) -> Option<Platform> {
    let labels = flavor.pointer("/spec/nodeLabels")?;
    let arch = labels.get("kubernetes.io/arch")?.as_str()?;
    let os = labels
        .get("kubernetes.io/os")
        .and_then(Value::as_str)
        .unwrap_or("linux");
    Platform::parse(&format!("{os}/{arch}")).ok()
}

/// The server-side-apply body of `status.admissionChecks[name]` for `answer`, at `now`
/// (RFC 3339), on the Workload as read (`resourceVersion` makes the write conditional).
/// Only this one entry: the list is a map keyed by `name`, so other checks' entries stay
/// with their owners. Apply it to `…/workloads/NAME/status` with pullcheck's own field manager and
/// force (Kueue applies every entry as `kueue-admission` with ForceOwnership).
pub(crate) fn admission_check_apply(
    workload: &Value,
    name: &str,
    answer: &Answer,
    now: &str,
) -> Value {
    let meta = workload.get("metadata");
    let field = |k: &str| meta.and_then(|m| m.get(k)).cloned().unwrap_or(Value::Null);
    let mut entry = json!({
        "name": name,
        "state": answer.state.as_str(),
        "message": crate::k8s::cut_chars(&answer.message, 32_768),
        "lastTransitionTime": now,
    });
    if let Some(d) = answer.requeue_after {
        entry["requeueAfterSeconds"] = json!(i32::try_from(d.as_secs()).unwrap_or(i32::MAX));
    }
    json!({
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": field("name"),
            "namespace": field("namespace"),
            "resourceVersion": field("resourceVersion"),
        },
        "status": {"admissionChecks": [entry]},
    })
}

#[cfg(test)]
mod tests;
