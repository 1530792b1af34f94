//! The admission-check controller: two reconcilers on the shared runtime
//! ([`crate::runtime`]), one for Kueue's AdmissionChecks and one for its Workloads.
//!
//! - [`CheckReconciler`] keeps the `Active` condition of every AdmissionCheck whose
//!   `spec.controllerName` is [`CONTROLLER_NAME`]: without it Kueue marks the ClusterQueues
//!   that use the check inactive (measured, docs/kueue.md). A check that names
//!   `spec.parameters` is `Active=False`: pullcheck reads no parameters object yet.
//! - [`WorkloadReconciler`] answers each Workload's checks that are ours, `Pending`, while
//!   it holds quota ([`super::checks_to_answer`]): every pulled image of every pod set
//!   resolved ([`Images`]) for the platform of the pod set's assigned ResourceFlavor, the
//!   verdicts weighed ([`super::decide`]), the answer applied to `workloads/status`
//!   ([`super::admission_check_apply`]).
//!
//! The shape follows Kueue's own ProvisioningRequest check
//! (`pkg/controller/admissionchecks/provisioning/`: `admissioncheck_reconciler.go` keeps
//! `Active`; `controller.go` answers the Workloads), with the status written by
//! server-side apply as field manager [`FIELD_MANAGER`], forced: Kueue applies every entry,
//! ours included, as `kueue-admission` with ForceOwnership, so an unforced apply conflicts
//! after any reset.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::future::Cache;
use serde_json::{Value, json};

use super::{
    API_VERSION, Answer, CheckState, Resolved, UnprovenPolicy, admission_check_apply,
    checks_to_answer, decide, flavor_platform, retry_count,
};
use crate::apiserver::ApiError;
use crate::apiserver::time::rfc3339;
use crate::k8s::event::{EventType, Reporter, controller_of, reference_to};
use crate::platform::Platform;
use crate::runtime::{Clock, Key, Reconciler, Requeue};
use crate::webhook::metrics::Metrics;

/// The `spec.controllerName` of pullcheck's AdmissionChecks.
pub(crate) const CONTROLLER_NAME: &str = "pullcheck.io/image-check";
/// The field manager of every status pullcheck applies.
pub(crate) const FIELD_MANAGER: &str = "pullcheck-image-check";
/// How long what an AdmissionCheck or ResourceFlavor says is kept (a check's controller
/// or a flavor's node labels seldom change; a change is seen within this long).
const LOOKUP_TTL: Duration = Duration::from_secs(30);
/// A reconcile whose API call failed runs again after this long.
const AFTER_ERROR: Duration = Duration::from_secs(5);
/// A write refused because the Workload changed since it was read: the newer version is
/// reconciled anyway (its event), this is the backstop.
const AFTER_CONFLICT: Duration = Duration::from_secs(2);

/// Who writes the admission check's Events.
const REPORTER: Reporter = Reporter {
    component: "pullcheck-admission-check",
    reporting: CONTROLLER_NAME,
};

/// The Event an answer gets on the Workload and on its job: `(type, reason)`; `None` for
/// Ready (Kueue's own `Admitted` Event says it) and Pending.
pub(crate) fn event_for(state: CheckState) -> Option<(EventType, &'static str)> {
    match state {
        CheckState::Rejected => Some((EventType::Warning, "PullcheckImageCheckRejected")),
        CheckState::Retry => Some((EventType::Normal, "PullcheckImageCheckRetry")),
        CheckState::Ready | CheckState::Pending => None,
    }
}

/// How a status apply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Written.
    Done,
    /// 409: the object's `resourceVersion` moved on since it was read.
    Conflict,
    /// 404: the object is gone.
    Gone,
}

/// The API calls of the admission check, behind a trait so the reconcilers are
/// unit-tested against a fake; `kueue::api` has the real one.
pub(crate) trait KueueApi: Send + Sync + 'static {
    /// Whether the API server serves Kueue's workloads, admissionchecks and
    /// resourceflavors at [`API_VERSION`] (its discovery document).
    fn served(&self) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// `GET admissionchecks/NAME`; `None` on 404.
    fn admission_check(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Value>, ApiError>> + Send;
    /// `GET resourceflavors/NAME`; `None` on 404.
    fn resource_flavor(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Value>, ApiError>> + Send;
    /// Server-side apply of `body` to `workloads/NAME/status` in `namespace`.
    fn apply_workload_status(
        &self,
        namespace: &str,
        name: &str,
        body: &Value,
    ) -> impl Future<Output = Result<Applied, ApiError>> + Send;
    /// Server-side apply of `body` to `admissionchecks/NAME/status`.
    fn apply_check_status(
        &self,
        name: &str,
        body: &Value,
    ) -> impl Future<Output = Result<Applied, ApiError>> + Send;
    /// Create the core/v1 Event `body` ([`crate::k8s::event::event`]) in its namespace.
    fn event(&self, body: &Value) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// Resolves the pulled images of pod templates, as the webhook resolves them (pull
/// secrets, credential providers, mirrors, the verdict cache); `kueue::images` has the
/// webhook's; the tests a table.
pub(crate) trait Images: Send + Sync + 'static {
    /// Every pulled image of `templates` (`(template, its JSON pointer)`) in `namespace`,
    /// `platforms[i]` for `templates[i]`, in template order.
    fn resolve(
        &self,
        namespace: &str,
        templates: &[(&Value, &str)],
        platforms: &[Vec<Platform>],
    ) -> impl Future<Output = Vec<Resolved>> + Send;

    /// The platforms a template lands on when no flavor pins one (the webhook's
    /// `--cluster-platform` rule, narrowed by the template's own node selectors).
    fn default_platforms(&self, template: &Value) -> Vec<Platform>;
}

/// How often [`wait_until_served`] asks discovery again.
pub(crate) const SERVED_EVERY: Duration = Duration::from_secs(30);

/// What is logged while Kueue's API is not served: without it the watches would fail with
/// a bare 404 forever.
pub(crate) const NOT_SERVED: &str = "the API server serves no kueue.x-k8s.io/v1beta2 workloads, admissionchecks and resourceflavors: install Kueue (v1beta2 API; tested with v0.19.2), or drop --kueue-admission-check (chart: admissionCheck.enabled=false)";

/// Return once the API server serves Kueue's API ([`KueueApi::served`]), asking every
/// [`SERVED_EVERY`] and logging [`NOT_SERVED`] each time it does not; the number of asks.
pub(crate) async fn wait_until_served<A: KueueApi>(api: &A) -> u32 {
    let mut asked = 0;
    loop {
        asked += 1;
        match api.served().await {
            Ok(true) => return asked,
            Ok(false) => {
                tracing::error!("{NOT_SERVED}; asking again in {}s", SERVED_EVERY.as_secs())
            }
            Err(e) => tracing::warn!(
                "cannot read Kueue's API discovery: {e}; asking again in {}s",
                SERVED_EVERY.as_secs()
            ),
        }
        tokio::time::sleep(SERVED_EVERY).await;
    }
}

/// Answers the Workloads' checks that are ours.
pub(crate) struct WorkloadReconciler<A, I> {
    api: Arc<A>,
    images: I,
    unproven: UnprovenPolicy,
    clock: Clock,
    /// AdmissionCheck name → whether its controller is ours and it is active (an
    /// AdmissionCheck of ours that is `Active=False`, [`active_condition`], is not answered:
    /// its ClusterQueues are inactive, and answering it would hide the fix).
    ours: Cache<String, bool>,
    /// ResourceFlavor name → the platform its node labels pin.
    flavors: Cache<String, Option<Platform>>,
    /// Where answers are counted (`pullcheck_admission_check_answers_total`, and the time
    /// since quota reservation): the webhook's `/metrics`.
    metrics: Arc<Metrics>,
}

impl<A: KueueApi, I: Images> WorkloadReconciler<A, I> {
    /// A reconciler answering through `api`, resolving with `images`.
    pub(crate) fn new(
        api: Arc<A>,
        images: I,
        unproven: UnprovenPolicy,
        clock: Clock,
        metrics: Arc<Metrics>,
    ) -> Self {
        WorkloadReconciler {
            api,
            images,
            unproven,
            clock,
            ours: Cache::builder().time_to_live(LOOKUP_TTL).build(),
            flavors: Cache::builder().time_to_live(LOOKUP_TTL).build(),
            metrics,
        }
    }

    /// The names of the Workload's `Pending` checks whose AdmissionCheck is ours.
    async fn ours(&self, workload: &Value) -> Result<Vec<String>, ApiError> {
        let pending: Vec<String> = workload
            .pointer("/status/admissionChecks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| c.get("state").and_then(Value::as_str) == Some("Pending"))
            .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        let mut ours = Vec::new();
        for name in pending {
            let api = self.api.clone();
            let asked = name.clone();
            let is_ours = self
                .ours
                .try_get_with(name.clone(), async move {
                    let check = api.admission_check(&asked).await?;
                    Ok::<_, ApiError>(check.is_some_and(|c| {
                        c.pointer("/spec/controllerName").and_then(Value::as_str)
                            == Some(CONTROLLER_NAME)
                            && active_condition(&c).0 == "True"
                    }))
                })
                .await
                .map_err(|e| (*e).clone())?;
            if is_ours {
                ours.push(name);
            }
        }
        Ok(ours)
    }

    /// The platforms each pod set lands on: its assigned flavors' where they pin one, else
    /// the default for its template.
    async fn platforms(
        &self,
        workload: &Value,
        templates: &[(&Value, &str)],
    ) -> Result<Vec<Vec<Platform>>, ApiError> {
        let sets = workload
            .pointer("/spec/podSets")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::with_capacity(templates.len());
        for (i, (template, _)) in templates.iter().enumerate() {
            let name = sets
                .get(i)
                .and_then(|s| s.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut pinned = Vec::new();
            for flavor in super::pod_set_flavors(workload, name) {
                let api = self.api.clone();
                let platform = self
                    .flavors
                    .try_get_with(flavor.clone(), async move {
                        let found = api.resource_flavor(&flavor).await?;
                        if found.is_none() {
                            // Kueue assigned a flavor that is gone (deleted since): its
                            // pods land where the template alone says.
                            tracing::warn!(
                                resource_flavor = %flavor,
                                "ResourceFlavor {flavor} not found; checking the images for the platforms the pod template allows"
                            );
                        }
                        Ok::<_, ApiError>(found.and_then(|f| flavor_platform(&f)))
                    })
                    .await
                    .map_err(|e| (*e).clone())?;
                if let Some(p) = platform
                    && !pinned.contains(&p)
                {
                    pinned.push(p);
                }
            }
            out.push(if pinned.is_empty() {
                self.images.default_platforms(template)
            } else {
                pinned
            });
        }
        Ok(out)
    }

    /// Answer the checks of `workload`; what to do next.
    async fn answer(&self, key: &Key, workload: &Value) -> Result<Requeue, ApiError> {
        let ours = self.ours(workload).await?;
        let to_answer = checks_to_answer(workload, &ours);
        if to_answer.is_empty() {
            return Ok(Requeue::Never);
        }
        let sets = workload
            .pointer("/spec/podSets")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let pointers: Vec<String> = (0..sets.len())
            .map(|i| format!("/spec/podSets/{i}/template"))
            .collect();
        let templates: Vec<(&Value, &str)> = sets
            .iter()
            .zip(&pointers)
            .filter_map(|(s, p)| Some((s.get("template")?, p.as_str())))
            .collect();
        let platforms = self.platforms(workload, &templates).await?;
        let started = Instant::now();
        let resolved = self
            .images
            .resolve(&key.namespace, &templates, &platforms)
            .await;
        let now = rfc3339(self.clock.now());
        let mut next = Requeue::Never;
        for name in to_answer {
            let answer: Answer = decide(&resolved, retry_count(workload, &name), self.unproven);
            let body = admission_check_apply(workload, &name, &answer, &now);
            match self
                .api
                .apply_workload_status(&key.namespace, &key.name, &body)
                .await?
            {
                Applied::Done => {
                    let waited = quota_reserved_at(workload)
                        .and_then(|t| self.clock.now().duration_since(t).ok())
                        .unwrap_or_default();
                    self.metrics
                        .check_answer(answer.state.as_str(), waited.as_secs_f64());
                    tracing::info!(
                        workload = %key,
                        check = %name,
                        state = answer.state.as_str(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "{}",
                        answer.message
                    );
                    if let Some((event_type, reason)) = event_for(answer.state) {
                        self.events(workload, event_type, reason, &answer.message, &now)
                            .await;
                    }
                }
                Applied::Conflict => next = Requeue::After(AFTER_CONFLICT),
                Applied::Gone => return Ok(Requeue::Never),
            }
        }
        Ok(next)
    }
}

impl<A: KueueApi, I: Images> WorkloadReconciler<A, I> {
    /// The answer's Event on the Workload and on its job (the Workload's controller), so
    /// `kubectl describe job` shows why it stays suspended. A failed Event is logged: the
    /// answer is written already.
    async fn events(
        &self,
        workload: &Value,
        event_type: EventType,
        reason: &str,
        message: &str,
        now: &str,
    ) {
        let instance =
            std::env::var("HOSTNAME").unwrap_or_else(|_| "pullcheck-webhook".to_string());
        // A list's items may lack apiVersion and kind; this one is a Workload.
        let mut this = reference_to(workload);
        this["apiVersion"] = json!(API_VERSION);
        this["kind"] = json!("Workload");
        for object in std::iter::once(this).chain(controller_of(workload)) {
            let body = crate::k8s::event::event(
                &object, event_type, reason, message, REPORTER, &instance, now,
            );
            if let Err(e) = self.api.event(&body).await {
                tracing::warn!(
                    kind = %object["kind"].as_str().unwrap_or_default(),
                    name = %object["name"].as_str().unwrap_or_default(),
                    "cannot record an Event: {e}"
                );
            }
        }
    }
}

/// When the Workload's `QuotaReserved` condition last turned (its `lastTransitionTime`).
fn quota_reserved_at(workload: &Value) -> Option<std::time::SystemTime> {
    workload
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("QuotaReserved"))?
        .get("lastTransitionTime")?
        .as_str()
        .and_then(crate::apiserver::time::parse_time)
}

impl<A: KueueApi, I: Images> Reconciler for WorkloadReconciler<A, I> {
    async fn reconcile(&self, key: &Key, object: Option<Arc<Value>>) -> Requeue {
        let Some(workload) = object else {
            return Requeue::Never;
        };
        match self.answer(key, &workload).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(workload = %key, "cannot answer its image check: {e}; trying again in {}s", AFTER_ERROR.as_secs());
                Requeue::After(AFTER_ERROR)
            }
        }
    }
}

/// Keeps the `Active` condition of our AdmissionChecks.
pub(crate) struct CheckReconciler<A> {
    api: Arc<A>,
    clock: Clock,
}

impl<A: KueueApi> CheckReconciler<A> {
    /// A reconciler writing through `api`.
    pub(crate) fn new(api: Arc<A>, clock: Clock) -> Self {
        CheckReconciler { api, clock }
    }
}

/// The `Active` condition an AdmissionCheck of ours should carry: `(status, reason,
/// message)`.
pub(crate) fn active_condition(check: &Value) -> (&'static str, &'static str, String) {
    match check.pointer("/spec/parameters") {
        Some(p) if !p.is_null() => (
            "False",
            "ParametersNotSupported",
            format!(
                "{CONTROLLER_NAME} reads no parameters object (spec.parameters names {}); remove spec.parameters: the check's settings are the pullcheck webhook's flags",
                p.get("name").and_then(Value::as_str).unwrap_or("one")
            ),
        ),
        _ => (
            "True",
            "Active",
            "pullcheck checks the images of every pod set before admission".to_string(),
        ),
    }
}

impl<A: KueueApi> Reconciler for CheckReconciler<A> {
    async fn reconcile(&self, key: &Key, object: Option<Arc<Value>>) -> Requeue {
        let Some(check) = object else {
            return Requeue::Never;
        };
        if check
            .pointer("/spec/controllerName")
            .and_then(Value::as_str)
            != Some(CONTROLLER_NAME)
        {
            return Requeue::Never;
        }
        let generation = check.pointer("/metadata/generation").cloned();
        let (status, reason, message) = active_condition(&check);
        let current = check
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Active"));
        if let Some(c) = current
            && c.get("status").and_then(Value::as_str) == Some(status)
            && c.get("reason").and_then(Value::as_str) == Some(reason)
            && c.get("observedGeneration") == generation.as_ref()
        {
            return Requeue::Never;
        }
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": "AdmissionCheck",
            "metadata": {"name": key.name},
            "status": {"conditions": [{
                "type": "Active",
                "status": status,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": rfc3339(self.clock.now()),
            }]},
        });
        match self.api.apply_check_status(&key.name, &body).await {
            Ok(Applied::Done) => {
                tracing::info!(admission_check = %key, active = status, reason, "{message}");
                Requeue::Never
            }
            Ok(Applied::Gone) => Requeue::Never,
            Ok(Applied::Conflict) => Requeue::After(AFTER_CONFLICT),
            Err(e) => {
                tracing::warn!(admission_check = %key, "cannot set its Active condition: {e}; trying again in {}s", AFTER_ERROR.as_secs());
                Requeue::After(AFTER_ERROR)
            }
        }
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
