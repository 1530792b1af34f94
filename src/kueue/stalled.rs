//! Whether the admission check is answering at all. Kueue has no timeout for a Pending
//! check and `Active` never expires, so a stopped controller leaves Workloads holding quota
//! (GPUs) indefinitely (docs/kueue.md, "When the controller stops"). Every replica, leader
//! or not, exports the age of the oldest check of ours still Pending on a Workload that
//! holds quota ([`oldest_pending`]), and the chart's alert fires on it: a standby shows a
//! leader that stopped answering.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::checks_to_answer;
use super::controller::CONTROLLER_NAME;
use crate::apiserver::ApiClient;
use crate::apiserver::client::Limits;
use crate::webhook::metrics::Metrics;

/// How often the Workloads are listed for the gauge.
pub(crate) const EVERY: Duration = Duration::from_secs(30);
/// Bounds of one list page (500 Workloads of tens of KiB each at most).
const PAGE: Limits = Limits::new(Duration::from_secs(20), 64 * 1024 * 1024);

/// The age at `now` of the oldest check named in `ours` that is `Pending` on a Workload of
/// `workloads` holding quota (the rule of [`checks_to_answer`]), from the entry's
/// `lastTransitionTime` (Kueue sets it when it resets the entry to Pending). Zero when
/// there is none; an entry without a readable time counts from `now`.
pub(crate) fn oldest_pending(workloads: &[Value], ours: &[String], now: SystemTime) -> Duration {
    workloads
        .iter()
        .flat_map(|w| {
            checks_to_answer(w, ours).into_iter().map(move |name| {
                w.pointer("/status/admissionChecks")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|c| c["name"] == name.as_str()))
                    .and_then(|c| c.get("lastTransitionTime")?.as_str())
                    .and_then(crate::apiserver::time::parse_time)
                    .and_then(|t| now.duration_since(t).ok())
                    .unwrap_or_default()
            })
        })
        .max()
        .unwrap_or_default()
}

/// The names of the AdmissionChecks whose `spec.controllerName` is ours.
pub(crate) fn our_checks(checks: &[Value]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| {
            c.pointer("/spec/controllerName").and_then(Value::as_str) == Some(CONTROLLER_NAME)
        })
        .filter_map(|c| c.pointer("/metadata/name")?.as_str().map(str::to_string))
        .collect()
}

/// Sets `pullcheck_admission_check_oldest_pending_seconds` every [`EVERY`] until aborted.
/// A failed list leaves the last value and is logged at debug (the reconcilers log the
/// same API errors louder).
pub(crate) async fn export(client: ApiClient, metrics: Arc<Metrics>) {
    let url = |resource: &str| client.url(&["apis", "kueue.x-k8s.io", "v1beta2", resource]);
    let (checks_url, workloads_url) = (url("admissionchecks"), url("workloads"));
    loop {
        let listed = async {
            let checks = client.list(&checks_url, 500, PAGE).await?;
            let workloads = client.list(&workloads_url, 500, PAGE).await?;
            Ok::<_, crate::apiserver::ApiError>((checks.items, workloads.items))
        };
        match listed.await {
            Ok((checks, workloads)) => {
                let age = oldest_pending(&workloads, &our_checks(&checks), SystemTime::now());
                metrics.oldest_pending(age);
            }
            Err(e) => tracing::debug!("cannot list Workloads for the oldest Pending check: {e}"),
        }
        tokio::time::sleep(EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(quota: bool, checks: Value) -> Value {
        json!({"spec": {}, "status": {
            "conditions": [{"type": "QuotaReserved", "status": if quota { "True" } else { "False" }}],
            "admissionChecks": checks}})
    }

    #[test]
    fn the_oldest_of_our_pending_checks_on_workloads_holding_quota() {
        let now = crate::apiserver::time::parse_time("2026-12-03T09:00:00Z").unwrap();
        let ours = vec!["image-check".to_string()];
        let pending = |at: &str| {
            json!([
                {"name": "image-check", "state": "Pending", "lastTransitionTime": at},
                {"name": "other", "state": "Pending", "lastTransitionTime": "2026-12-01T00:00:00Z"},
            ])
        };
        let workloads = vec![
            workload(true, pending("2026-12-03T08:55:00Z")),
            workload(true, pending("2026-12-03T08:59:30Z")),
            // No quota: not ours to answer yet, however old.
            workload(false, pending("2026-12-02T00:00:00Z")),
            // Answered.
            workload(
                true,
                json!([{"name": "image-check", "state": "Ready", "lastTransitionTime": "2026-12-02T00:00:00Z"}]),
            ),
        ];
        assert_eq!(
            oldest_pending(&workloads, &ours, now),
            Duration::from_secs(300)
        );
        assert_eq!(oldest_pending(&workloads[2..], &ours, now), Duration::ZERO);
        assert_eq!(oldest_pending(&[], &ours, now), Duration::ZERO);
    }

    #[test]
    fn our_checks_are_those_naming_our_controller() {
        let checks = vec![
            json!({"metadata": {"name": "image-check"}, "spec": {"controllerName": CONTROLLER_NAME}}),
            json!({"metadata": {"name": "prov"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}),
        ];
        assert_eq!(our_checks(&checks), vec!["image-check".to_string()]);
    }
}
