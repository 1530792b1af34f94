//! Which listed objects the audit checks, and why the others are left out (pure).
//!
//! The rule is "the object whose template the next pod comes from": a Job a CronJob made is
//! a copy of the CronJob's template, a ReplicaSet a Deployment owns is the Deployment's, a
//! Pod with an owner is its controller's. Those are skipped so that a template is checked
//! (and reported) once, where a person would fix it. A finished Job makes no more pods; a
//! mirror pod is the kubelet's copy of a static pod whose image the node already has or
//! pulls from its own manifest file, not from the API.

use serde::Serialize;
use serde_json::Value;

/// The annotation the kubelet puts on the API copy of a static pod
/// (`kubernetes.io/config.mirror`, k8s.io/kubernetes `pkg/kubelet/types`).
pub(crate) const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The kinds whose Jobs are copies of their own template: such a Job is skipped, the owner
/// is audited.
const JOB_OWNERS: &[&str] = &["CronJob", "JobSet"];

/// How a Job ended (its `Complete` or `Failed` condition is `True`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum JobEnd {
    /// `type: Complete`.
    Complete,
    /// `type: Failed`.
    Failed,
    /// A Kueue Workload's `type: Finished`.
    Finished,
}

/// Why an object is not audited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub(crate) enum SkipReason {
    /// A Job that finished: it makes no more pods.
    Finished {
        /// Which condition says so.
        condition: JobEnd,
    },
    /// Its template is its owner's, audited there (or not read here at all: a Pod of a
    /// ReplicaSet is its Deployment's).
    Owned {
        /// The owner's kind.
        owner_kind: String,
        /// The owner's name.
        owner_name: String,
    },
    /// The API copy of a static pod.
    Mirror,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Finished { condition } => write!(f, "finished ({condition:?})"),
            SkipReason::Owned {
                owner_kind,
                owner_name,
            } => write!(f, "owned by {owner_kind}/{owner_name}"),
            SkipReason::Mirror => f.write_str("mirror pod"),
        }
    }
}

/// Whether the audit checks `obj`, an object of `kind` as listed.
pub(crate) fn skip_reason(kind: &str, obj: &Value) -> Option<SkipReason> {
    match kind {
        "Job" => finished(obj).or_else(|| {
            owner(obj, |o| {
                o.get("controller").and_then(Value::as_bool) == Some(true)
                    && JOB_OWNERS.contains(&o.get("kind").and_then(Value::as_str).unwrap_or(""))
            })
        }),
        // The kubelet sets the mirror annotation, and the mirror pod is owned by its Node:
        // the annotation is the more telling reason.
        "Pod" if annotation(obj, MIRROR_ANNOTATION).is_some() => Some(SkipReason::Mirror),
        "Pod" | "ReplicaSet" => owner(obj, |_| true),
        "Workload" => condition_true(obj, "Finished").then_some(SkipReason::Finished {
            condition: JobEnd::Finished,
        }),
        _ => None,
    }
}

/// The first owner reference matching `pick`, as a skip reason.
fn owner(obj: &Value, pick: impl Fn(&Value) -> bool) -> Option<SkipReason> {
    let o = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| pick(o))?;
    let field = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some(SkipReason::Owned {
        owner_kind: field("kind"),
        owner_name: field("name"),
    })
}

/// A Kueue Workload made for a job the audit read (an ownerReference whose UID is among
/// `read`): Kueue copies the job's pod templates into the Workload's pod sets, so the job
/// is audited and the Workload skipped as its copy. A Workload whose owner was not read
/// (a kind the audit doesn't know, a list refused) is audited: its pod sets are then the
/// only templates there are.
pub(crate) fn owned_workload(
    obj: &Value,
    read: &std::collections::HashSet<String>,
) -> Option<SkipReason> {
    owner(obj, |o| {
        o.get("uid")
            .and_then(Value::as_str)
            .is_some_and(|u| read.contains(u))
    })
}

/// A condition of `obj`'s `status.conditions` with this type and status `True`.
fn condition_true(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some(kind)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a Value> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
}

/// A Job's `Complete` or `Failed` condition with status `True` (batch/v1 `JobCondition`).
fn finished(job: &Value) -> Option<SkipReason> {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .find_map(|c| match c.get("type").and_then(Value::as_str) {
            Some("Complete") => Some(JobEnd::Complete),
            Some("Failed") => Some(JobEnd::Failed),
            _ => None,
        })
        .map(|condition| SkipReason::Finished { condition })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn owned(kind: &str, name: &str, controller: bool) -> Value {
        json!({"metadata": {"name": "x", "ownerReferences": [
            {"apiVersion": "v1", "kind": kind, "name": name, "uid": "u", "controller": controller}]}})
    }

    #[test]
    fn jobs_of_a_cronjob_or_jobset_and_finished_jobs_are_skipped() {
        assert_eq!(
            skip_reason("Job", &owned("CronJob", "nightly", true)),
            Some(SkipReason::Owned {
                owner_kind: "CronJob".into(),
                owner_name: "nightly".into()
            })
        );
        assert_eq!(
            skip_reason("Job", &owned("JobSet", "train", true)),
            Some(SkipReason::Owned {
                owner_kind: "JobSet".into(),
                owner_name: "train".into()
            })
        );
        // Another owner (a workflow engine) is not audited here: its Job's template is
        // the only one there is.
        assert_eq!(skip_reason("Job", &owned("Workflow", "wf", true)), None);
        // A CronJob reference that is not the controller does not make the Job a copy.
        assert_eq!(
            skip_reason("Job", &owned("CronJob", "nightly", false)),
            None
        );
        let done = json!({"status": {"conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"}]}});
        assert_eq!(
            skip_reason("Job", &done),
            Some(SkipReason::Finished {
                condition: JobEnd::Complete
            })
        );
        let failed = json!({"status": {"conditions": [{"type": "Failed", "status": "True"}]}});
        assert_eq!(
            skip_reason("Job", &failed).unwrap().to_string(),
            "finished (Failed)"
        );
        let suspended = json!({"spec": {"suspend": true}, "status": {"conditions": [
            {"type": "Suspended", "status": "True"}, {"type": "Failed", "status": "False"}]}});
        assert_eq!(skip_reason("Job", &suspended), None);
    }

    #[test]
    fn owned_pods_and_replicasets_and_mirror_pods_are_skipped() {
        assert_eq!(
            skip_reason("ReplicaSet", &owned("Deployment", "web", true))
                .unwrap()
                .to_string(),
            "owned by Deployment/web"
        );
        assert_eq!(skip_reason("ReplicaSet", &json!({"metadata": {}})), None);
        assert_eq!(
            skip_reason("Pod", &owned("ReplicaSet", "web-1", true))
                .unwrap()
                .to_string(),
            "owned by ReplicaSet/web-1"
        );
        let mut mirror = owned("Node", "n1", true);
        mirror["metadata"]["annotations"] = json!({MIRROR_ANNOTATION: "abc"});
        assert_eq!(skip_reason("Pod", &mirror), Some(SkipReason::Mirror));
        assert_eq!(
            skip_reason("Pod", &json!({"metadata": {"name": "bare"}})),
            None
        );
        // A Deployment's own owner (a Helm operator, Argo CD) changes nothing.
        assert_eq!(skip_reason("Deployment", &owned("App", "a", true)), None);
    }

    #[test]
    fn a_workload_is_skipped_as_a_copy_only_when_its_owner_was_read() {
        let read: std::collections::HashSet<String> = ["u".to_string()].into();
        // `owned` gives the owner uid "u".
        assert_eq!(
            owned_workload(&owned("Job", "train", true), &read),
            Some(SkipReason::Owned {
                owner_kind: "Job".into(),
                owner_name: "train".into()
            })
        );
        // An owner the audit did not read (a RayJob, a kind refused): the Workload's pod
        // sets are the only templates there are.
        assert_eq!(
            owned_workload(&owned("RayJob", "r", true), &Default::default()),
            None
        );
        let finished = json!({"status": {"conditions": [{"type": "Finished", "status": "True"}]}});
        assert_eq!(
            skip_reason("Workload", &finished).unwrap().to_string(),
            "finished (Finished)"
        );
        let admitted = json!({"status": {"conditions": [{"type": "Finished", "status": "False"}]}});
        assert_eq!(skip_reason("Workload", &admitted), None);
    }

    #[test]
    fn reasons_serialize_with_their_details() {
        let r = SkipReason::Owned {
            owner_kind: "CronJob".into(),
            owner_name: "n".into(),
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"reason": "owned", "owner_kind": "CronJob", "owner_name": "n"})
        );
        assert_eq!(
            serde_json::to_value(SkipReason::Finished {
                condition: JobEnd::Failed
            })
            .unwrap(),
            json!({"reason": "finished", "condition": "Failed"})
        );
        assert_eq!(
            serde_json::to_value(SkipReason::Mirror).unwrap(),
            json!({"reason": "mirror"})
        );
    }
}
