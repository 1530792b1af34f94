//! Take out of a workload everything `inject` (or the webhook) put in: `pullcheck inject
//! --remove`, for uninstalling.
//!
//! What pullcheck owns is named in one place each: the init container
//! ([`CONTAINER_NAME`]), the pod-template volumes ([`OWNED_VOLUMES`]) and annotations
//! ([`OWNED_ANNOTATIONS`]), and the podFailurePolicy rules ([`policy::is_pullcheck_rule`]).
//! Removing is idempotent, and undoes an injection byte for byte: key order and every other
//! field stay. One thing can't be undone, because nothing records what it was before:
//! `podReplacementPolicy: Failed`, which fail-fast writes over the API server's default
//! `TerminatingOrFailed` (a stored Job that had it keeps `Failed`, which is valid either way).
//!
//! Whether the result can be applied to the stored object depends on the kind: the pod
//! template of a Job, the `replicatedJobs` of a JobSet and the init containers of a Pod are
//! immutable once stored, so those must be recreated; see [`immutable_template`].

use serde_json::Value;

use super::inject::{OWNED_ANNOTATIONS, OWNED_VOLUMES, remove_named, set_annotation};
use super::templates::{Table, pod_templates};
use super::{CONTAINER_NAME, Warning, policy};

/// Why a stored object of this kind can't take the removal in an update, or `None` when its
/// templates are mutable (CronJob, Deployment, Kubeflow jobs, most runtimes' CRDs).
///
/// Facts: a Job's `spec.template` is immutable (`ValidateJobSpecUpdate` in kubernetes
/// `pkg/apis/batch/validation/validation.go`, apart from scheduling directives of a suspended
/// Job); a JobSet's `spec.replicatedJobs` is immutable (`ValidateUpdate` in kubernetes-sigs/jobset
/// `pkg/webhooks/jobset_webhook.go`, apart from a suspended JobSet's pod scheduling fields); a
/// Pod's init containers can't be added or removed (`ValidatePodUpdate` in
/// `pkg/apis/core/validation/validation.go`: only images and a few fields may change).
pub(crate) fn immutable_template(obj: &Value) -> Option<&'static str> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match (api_version, group, obj.get("kind").and_then(Value::as_str)) {
        ("batch/v1", _, Some("Job")) => Some("a stored Job's pod template is immutable"),
        (_, "jobset.x-k8s.io", Some("JobSet")) => {
            Some("a stored JobSet's replicatedJobs are immutable")
        }
        ("v1", _, Some("Pod")) => Some("a stored Pod's init containers are immutable"),
        _ => None,
    }
}

/// Remove pullcheck's init container, volumes, annotations and podFailurePolicy rules from
/// one object (a `v1 List` item by item), in place. Warnings: a kind the table doesn't know
/// that holds containers, and, when something was removed from a kind whose stored templates
/// are immutable, that it must be recreated.
pub fn remove_object(obj: &mut Value, table: &Table) -> Vec<Warning> {
    super::each_object_mut(obj, &mut |o| remove_one(o, table))
}

/// [`remove_object`] for one object (not a List).
fn remove_one(obj: &mut Value, table: &Table) -> Vec<Warning> {
    let mut out = Vec::new();
    if super::not_an_object(obj).is_some() {
        return out;
    }
    if table.lookup(obj).is_none() {
        if let Some(what) = super::templates::unknown_workload(obj, table) {
            out.push(Warning {
                path: String::new(),
                message: format!("{what}: left unchanged (add it with --kinds)"),
            });
        }
        return out;
    }
    // An object marked pullcheck.io/skip is cleaned too: the mark may have come after an
    // injection, and what is left of pullcheck in it is what the user asked to undo.
    let before = obj.clone();
    let templates = pod_templates(obj, table);
    for t in &templates {
        if let Some(template) = obj.pointer_mut(&t.pointer) {
            remove_from_template(template);
        }
    }
    let mut jobs: Vec<&str> = Vec::new();
    for job in templates.iter().filter_map(|t| t.job_spec.as_deref()) {
        if jobs.contains(&job) {
            continue;
        }
        jobs.push(job);
        if let Some(spec) = obj.pointer_mut(job) {
            remove_rules(spec);
        }
    }
    if *obj != before
        && let Some(why) = immutable_template(obj)
    {
        out.push(Warning {
            path: String::new(),
            message: format!("{why}: recreate it from this output (kubectl replace --force -f)"),
        });
    }
    out
}

/// The init container, the owned volumes and the owned annotations of one pod template.
fn remove_from_template(template: &mut Value) {
    for key in OWNED_ANNOTATIONS {
        set_annotation(template, key, None);
    }
    let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    remove_named(spec, "initContainers", CONTAINER_NAME);
    for name in OWNED_VOLUMES {
        remove_named(spec, "volumes", name);
    }
}

/// pullcheck's podFailurePolicy rules of one job spec; a policy left without rules (and
/// nothing else) goes too, as inject adds it whole.
fn remove_rules(job_spec: &mut Value) {
    let Some(spec) = job_spec.as_object_mut() else {
        return;
    };
    let Some(policy) = spec
        .get_mut("podFailurePolicy")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if let Some(Value::Array(rules)) = policy.get_mut("rules") {
        let before = rules.len();
        rules.retain(|r| !policy::is_pullcheck_rule(r));
        if rules.is_empty() && before > 0 {
            policy.shift_remove("rules");
        }
    }
    if policy.is_empty() {
        spec.shift_remove("podFailurePolicy");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::inject::{InjectOptions, inject_object};
    use serde_json::json;

    fn job() -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"backoffLimit": 0, "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
              "template": {"metadata": {"annotations": {"team": "ml"}}, "spec": {
                "restartPolicy": "Never",
                "imagePullSecrets": [{"name": "regcred"}],
                "initContainers": [{"name": "setup", "image": "busybox:1"}],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "containers": [{"name": "c", "image": "a:1"}]}}}})
    }

    /// inject (fail-fast, with index bodies) then remove gives the original back, keys in
    /// order; removing again changes nothing; the Job is told to be recreated.
    #[test]
    fn remove_undoes_inject_and_is_idempotent() {
        let table = Table::builtin();
        let original = job();
        let mut obj = original.clone();
        let opts = InjectOptions {
            fail_fast: true,
            index_bodies: [(
                "a:1".to_string(),
                vec![("sha256:aa".to_string(), std::sync::Arc::new(b"{}".to_vec()))],
            )]
            .into_iter()
            .collect(),
            ..InjectOptions::default()
        };
        inject_object(&mut obj, &opts, &table);
        let t = &obj["spec"]["template"];
        assert_eq!(t["spec"]["volumes"].as_array().unwrap().len(), 3);
        assert!(t["metadata"]["annotations"]["pullcheck.io/index-bodies"].is_string());
        let w = remove_object(&mut obj, &table);
        assert_eq!(
            serde_json::to_string(&obj).unwrap(),
            serde_json::to_string(&original).unwrap()
        );
        assert_eq!(
            w,
            vec![Warning {
                path: String::new(),
                message: "a stored Job's pod template is immutable: recreate it from this output (kubectl replace --force -f)".into()
            }]
        );
        assert!(
            remove_object(&mut obj, &table).is_empty(),
            "nothing left to remove"
        );
        assert_eq!(obj, original);
    }

    /// Only pullcheck's things go: a user's init container, volume or rule named otherwise
    /// stays, and a policy with only pullcheck's rules goes whole.
    #[test]
    fn only_owned_names_are_removed() {
        let table = Table::builtin();
        let mut obj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"jobTemplate": {"spec": {
              "podFailurePolicy": {"rules": policy::pullcheck_rules(crate::k8s::TransientAction::Count)},
              "template": {"spec": {
                "initContainers": [{"name": "pullcheck-helper", "image": "x:1"}, {"name": "pullcheck", "image": "p:1"}],
                "volumes": [{"name": "pullcheck-pull-secrets"}, {"name": "pullcheck-cache", "emptyDir": {}}],
                "containers": [{"name": "c", "image": "a:1"}]}}}}}});
        assert!(
            remove_object(&mut obj, &table).is_empty(),
            "a CronJob is mutable"
        );
        assert_eq!(
            obj["spec"]["jobTemplate"]["spec"],
            json!({"template": {"spec": {
                "initContainers": [{"name": "pullcheck-helper", "image": "x:1"}],
                "volumes": [{"name": "pullcheck-cache", "emptyDir": {}}],
                "containers": [{"name": "c", "image": "a:1"}]}}})
        );
    }

    #[test]
    fn immutable_kinds() {
        let kind = |api: &str, k: &str| immutable_template(&json!({"apiVersion": api, "kind": k}));
        assert_eq!(
            kind("batch/v1", "Job"),
            Some("a stored Job's pod template is immutable")
        );
        assert_eq!(
            kind("jobset.x-k8s.io/v1alpha2", "JobSet"),
            Some("a stored JobSet's replicatedJobs are immutable")
        );
        assert_eq!(
            kind("v1", "Pod"),
            Some("a stored Pod's init containers are immutable")
        );
        assert_eq!(kind("batch/v1", "CronJob"), None);
        assert_eq!(kind("apps/v1", "Deployment"), None);
        assert_eq!(kind("kubeflow.org/v1", "PyTorchJob"), None);
        assert_eq!(kind("example.com/v1", "Job"), None);
    }
}
