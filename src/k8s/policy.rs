//! The Job-level half of fail-fast: pullcheck's podFailurePolicy rules, merging them into a
//! user's policy, and the restart-policy warnings for Jobs and Kubeflow replicas.
//!
//! Facts (kubernetes `pkg/apis/batch/validation/validation.go`, batch/v1 API): a
//! podFailurePolicy needs the pod template's `restartPolicy: Never`, holds at most 20 rules,
//! and `onExitCodes.containerName` must name a container or init container of the template;
//! `onExitCodes` also matches init container statuses.

use serde_json::{Value, json};

use super::templates::PodTemplateRef;
use super::{CONTAINER_NAME, TransientAction, Warning};
use crate::verdict::Verdict;

/// The most rules a Job's podFailurePolicy may have (batch validation).
pub(crate) const MAX_POD_FAILURE_RULES: usize = 20;

/// pullcheck's permanent exit codes (10–15), from [`Verdict::is_permanent`].
pub(crate) fn permanent_codes() -> Vec<u8> {
    Verdict::ALL
        .iter()
        .filter(|v| v.is_permanent())
        .map(|v| v.exit_code())
        .collect()
}

/// pullcheck's transient exit code (20).
pub(crate) fn transient_code() -> u8 {
    Verdict::Transient.exit_code()
}

/// The rules pullcheck owns, in order: `pullcheck watch`'s pod condition → FailJob,
/// permanent codes → FailJob, transient → Count (or Ignore).
///
/// The condition rule comes first: rules are first-match, and the kubelet gives the
/// containers of a pod deleted before they started exit code 137, which a user's own
/// exit-code rule further down could match (kubernetes `pkg/controller/job/pod_failure_policy.go`
/// `matchPodFailurePolicy`).
pub(crate) fn pullcheck_rules(transient: TransientAction) -> Vec<Value> {
    let action = match transient {
        // With restart rules the kubelet retries code 20 in place; a pod still failing with
        // it ran on a kubelet that ignores the rules, and costs a backoffLimit retry.
        TransientAction::Count | TransientAction::Restart => "Count",
        TransientAction::Ignore => "Ignore",
    };
    let on = |codes: Vec<u8>| json!({"containerName": CONTAINER_NAME, "operator": "In", "values": codes});
    vec![
        json!({"action": "FailJob", "onPodConditions": [{"type": super::IMAGE_PULL_FAILED_CONDITION, "status": "True"}]}),
        json!({"action": "FailJob", "onExitCodes": on(permanent_codes())}),
        json!({"action": action, "onExitCodes": on(vec![transient_code()])}),
    ]
}

/// The init container's own restart policy and rules (KEP-5307; k8s.io/api core/v1
/// `Container.restartPolicy` and `ContainerRestartRule`): with [`TransientAction::Restart`]
/// the container is never restarted but on the transient code, so a permanent code fails
/// the pod at once whatever the pod's restartPolicy. `None` for the other actions.
pub(crate) fn container_restart(transient: TransientAction) -> Option<(Value, Value)> {
    (transient == TransientAction::Restart).then(|| {
        (
            json!("Never"),
            json!([{
                "action": "Restart",
                "exitCodes": {"operator": "In", "values": [transient_code()]},
            }]),
        )
    })
}

/// Warnings for in-place retries that nothing bounds: a template with restartPolicy Never
/// (whose container restarts don't count toward backoffLimit: the Job controller's
/// `pastBackoffLimitOnFailure` counts them only under OnFailure) and no
/// activeDeadlineSeconds on the pod or its Job.
pub(super) fn unbounded_restarts(obj: &Value, injected: &[PodTemplateRef]) -> Vec<Warning> {
    injected
        .iter()
        .filter(|t| str_at(obj, &format!("{}/spec/restartPolicy", t.pointer)) == Some("Never"))
        .filter(|t| {
            let on_pod = format!("{}/spec/activeDeadlineSeconds", t.pointer);
            let on_job = t
                .job_spec
                .as_ref()
                .map(|j| format!("{j}/activeDeadlineSeconds"));
            obj.pointer(&on_pod).is_none() && on_job.is_none_or(|p| obj.pointer(&p).is_none())
        })
        .map(|t| Warning {
            path: t.job_spec.clone().unwrap_or_else(|| t.pointer.clone()),
            message: "code 20 restarts in place and no activeDeadlineSeconds: a registry outage retries forever".into(),
        })
        .collect()
}

/// True for a rule `inject` owns and rewrites: keyed on the pullcheck container, or on
/// `pullcheck watch`'s pod condition.
pub(crate) fn is_pullcheck_rule(rule: &Value) -> bool {
    let on_container = rule
        .pointer("/onExitCodes/containerName")
        .and_then(Value::as_str)
        == Some(CONTAINER_NAME);
    let on_condition = rule
        .get("onPodConditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(super::IMAGE_PULL_FAILED_CONDITION)
            })
        });
    on_container || on_condition
}

/// True when a podFailurePolicy sends every permanent pullcheck code to FailJob.
pub(crate) fn covers_pullcheck_codes(policy: &Value) -> bool {
    let rules = policy
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let mut covered: Vec<u64> = Vec::new();
    for r in rules.filter(|r| is_pullcheck_rule(r)) {
        let fail = r.get("action").and_then(Value::as_str) == Some("FailJob");
        let op_in = r.pointer("/onExitCodes/operator").and_then(Value::as_str) == Some("In");
        if fail && op_in {
            let vals = r
                .pointer("/onExitCodes/values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten();
            covered.extend(vals.filter_map(Value::as_u64));
        }
    }
    permanent_codes()
        .iter()
        .all(|c| covered.contains(&u64::from(*c)))
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(Value::as_str)
}

/// Set the podFailurePolicy on every job spec whose templates were injected, and warn about
/// restart policies (batch Jobs and Kubeflow replicas). Never changes a restartPolicy.
pub(super) fn apply(
    obj: &mut Value,
    injected: &[PodTemplateRef],
    all: &[PodTemplateRef],
    transient: TransientAction,
    out: &mut Vec<Warning>,
) {
    let mut done: Vec<&str> = Vec::new();
    for t in injected {
        let Some(job) = t.job_spec.as_deref() else {
            continue;
        };
        if done.contains(&job) {
            continue;
        }
        done.push(job);
        let restart = str_at(obj, &format!("{}/spec/restartPolicy", t.pointer)).unwrap_or("unset");
        if restart != "Never" {
            let msg = if restart == "OnFailure" {
                "restartPolicy OnFailure: no podFailurePolicy set (needs Never); init restarts count toward backoffLimit".to_string()
            } else {
                format!(
                    "restartPolicy {restart}: no podFailurePolicy set (needs Never); restartPolicy left unchanged"
                )
            };
            out.push(Warning {
                path: format!("{}/spec/restartPolicy", t.pointer),
                message: msg,
            });
            continue;
        }
        merge(obj, job, transient, out);
    }
    kubeflow_warnings(obj, all, out);
}

/// Prepend pullcheck's rules to the job spec's podFailurePolicy (dropping old copies).
fn merge(obj: &mut Value, job: &str, transient: TransientAction, out: &mut Vec<Warning>) {
    let deadline = obj
        .pointer(&format!("{job}/activeDeadlineSeconds"))
        .is_some();
    let Some(spec) = obj.pointer_mut(job).and_then(Value::as_object_mut) else {
        return;
    };
    let existing: Vec<Value> = spec
        .get("podFailurePolicy")
        .and_then(|p| p.get("rules"))
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter(|r| !is_pullcheck_rule(r))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let mut rules = pullcheck_rules(transient);
    rules.extend(existing);
    if rules.len() > MAX_POD_FAILURE_RULES {
        let n = rules.len();
        let msg = format!(
            "podFailurePolicy would have {n} rules (max {MAX_POD_FAILURE_RULES}): left unchanged"
        );
        out.push(Warning {
            path: format!("{job}/podFailurePolicy"),
            message: msg,
        });
        return;
    }
    let policy = spec.entry("podFailurePolicy").or_insert_with(|| json!({}));
    if !policy.is_object() {
        *policy = json!({});
    }
    policy["rules"] = Value::Array(rules);
    // A Job with a podFailurePolicy may replace only Failed pods
    // (`validatePodReplacementPolicy` in kubernetes pkg/apis/batch/validation/validation.go). The API server defaults
    // TerminatingOrFailed before mutating webhooks see the Job, so left alone the Job the
    // webhook mutates is refused (measured on kube-apiserver 1.35.4).
    if spec.get("podReplacementPolicy").and_then(Value::as_str) == Some("TerminatingOrFailed") {
        spec.insert("podReplacementPolicy".into(), json!("Failed"));
    }
    if transient == TransientAction::Ignore && !deadline {
        let msg = "transient code 20 ignored and no activeDeadlineSeconds: a registry outage retries forever";
        out.push(Warning {
            path: job.to_string(),
            message: msg.to_string(),
        });
    }
}

/// What a Kubeflow v1 replica's `restartPolicy` does to a failed check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplicaRestart {
    /// `ExitCode`: the operator fails the job on codes 1-127, so transient code 20 is
    /// final too.
    ExitCodeFinal,
    /// `OnFailure`, `Always` or unset: the failed pod restarts instead of failing the job.
    Restarts,
}

/// The judgement of a Kubeflow v1 replica's `restartPolicy` (`None`: unset), with its one
/// line, or `None` for `Never`, the only value with which a failed check fails the job.
/// `lint` and `inject` both say this, in these words (docs/fail-fast.md, "Recipe: Kubeflow
/// training jobs").
pub(crate) fn replica_restart(policy: Option<&str>) -> Option<(ReplicaRestart, String)> {
    match policy {
        Some("Never") => None,
        Some("ExitCode") => Some((
            ReplicaRestart::ExitCodeFinal,
            "restartPolicy ExitCode fails the job on codes 1-127: transient pullcheck code 20 is final too".into(),
        )),
        other => Some((
            ReplicaRestart::Restarts,
            format!(
                "replica restartPolicy {}: a failed pullcheck restarts instead of failing; set Never",
                other.unwrap_or("unset")
            ),
        )),
    }
}

/// Kubeflow v1-style operators create pods themselves: podFailurePolicy doesn't apply, so
/// warn where a replica or the runPolicy would keep a failed check from failing the job.
fn kubeflow_warnings(obj: &Value, all: &[PodTemplateRef], out: &mut Vec<Warning>) {
    let Some(run_policy) = all.iter().find_map(|t| t.run_policy.clone()) else {
        return;
    };
    for t in all {
        let replica = t.pointer.strip_suffix("/template").unwrap_or(&t.pointer);
        let path = format!("{replica}/restartPolicy");
        if let Some((_, message)) = replica_restart(str_at(obj, &path)) {
            out.push(Warning { path, message });
        }
    }
    if obj.pointer(&format!("{run_policy}/backoffLimit")).is_none() {
        out.push(Warning {
            path: run_policy,
            message:
                "runPolicy.backoffLimit unset: failed workers may restart forever; set it (e.g. 0)"
                    .into(),
        });
    }
}
