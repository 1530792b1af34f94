//! What one pod object says, for the watch: which container waits on which image pull
//! failure, who controls the pod, and whether pullcheck already marked it. Pure: a pod in,
//! a [`Finding`] out, tested on pod objects shaped like the API's.

use serde_json::Value;

use super::api::PodId;
use super::classify::{Classification, classify};
use super::decide::Owner;
use crate::verdict::Verdict;

/// The pod condition the watch sets before it deletes a pod: the marker that makes every
/// replica and every restart act on a pod once, and what a Job's `podFailurePolicy`
/// `onPodConditions` rule matches (`k8s::policy::pullcheck_rules` puts that rule first).
pub(crate) const CONDITION_TYPE: &str = crate::k8s::IMAGE_PULL_FAILED_CONDITION;

/// One container's pull failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The container's name (init or app container).
    pub container: String,
    /// The image the kubelet tried, as written in the spec: the container's own, or the
    /// reference of the image volume it mounts when the kubelet's message names that one.
    pub image: String,
    /// The image volume whose pull failed (KEP-4639: the kubelet reports it on the
    /// container that mounts it), when it was not the container's own image.
    pub volume: Option<String>,
    /// The kubelet's waiting reason and message, classified.
    pub classification: Classification,
    /// The kubelet's message.
    pub message: String,
}

/// What the watch needs to know about a Pending pod.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finding {
    pub pod: PodId,
    /// `metadata.resourceVersion`, the precondition of the mark.
    pub resource_version: String,
    /// The most telling pull failure of its containers (`None`: none is failing).
    pub failure: Option<Failure>,
    /// Its controller.
    pub owner: Owner,
    /// The controller as an Event `involvedObject` (`None` without one).
    pub owner_object: Option<Value>,
    /// Whether pullcheck's condition is already True.
    pub mark: Mark,
    /// Whether the pod's deletion has started.
    pub lifecycle: Lifecycle,
    /// Whether the pod opted out.
    pub scope: Scope,
}

/// pullcheck's condition on the pod: the marker that says some watch acted (or is acting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// No [`CONDITION_TYPE`] condition with status True.
    Unmarked,
    /// [`CONDITION_TYPE`] is True.
    Marked,
}

/// Where the pod is in its life, as far as the watch cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    /// No `metadata.deletionTimestamp`.
    Live,
    /// Deletion has started (`metadata.deletionTimestamp` is set): nothing more to do.
    Terminating,
}

/// Whether the watch looks at the pod at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The default.
    Watched,
    /// `pullcheck.io/skip: "true"` on the pod.
    Skipped,
}

/// Read `pod`; `None` when it lacks a namespace, name or uid.
pub(crate) fn finding(pod: &Value) -> Option<Finding> {
    let id = PodId::of(pod)?;
    let meta = pod.get("metadata");
    let controller = meta
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true));
    let owner = Owner::from_controller(
        controller.and_then(|r| Some((r.get("apiVersion")?.as_str()?, r.get("kind")?.as_str()?))),
    );
    let owner_object = controller.map(|r| {
        serde_json::json!({
            "apiVersion": r.get("apiVersion"),
            "kind": r.get("kind"),
            "name": r.get("name"),
            "uid": r.get("uid"),
            "namespace": id.namespace,
        })
    });
    let marked = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some(CONDITION_TYPE)
                && c.get("status").and_then(Value::as_str) == Some("True")
        });
    Some(Finding {
        resource_version: meta
            .and_then(|m| m.get("resourceVersion"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        failure: worst_failure(pod),
        owner,
        owner_object,
        mark: if marked { Mark::Marked } else { Mark::Unmarked },
        lifecycle: if meta.and_then(|m| m.get("deletionTimestamp")).is_some() {
            Lifecycle::Terminating
        } else {
            Lifecycle::Live
        },
        scope: if meta
            .and_then(|m| m.pointer("/annotations/pullcheck.io~1skip"))
            .and_then(Value::as_str)
            == Some("true")
        {
            Scope::Skipped
        } else {
            Scope::Watched
        },
        pod: id,
    })
}

/// The image volume (`name`, `reference`) the kubelet's `message` is about, when it quotes
/// a `spec.volumes[].image.reference` and not the container's own `image` (an image volume's
/// failed pull is reported on the container that mounts it, with the volume's reference in
/// the runtime's message: `failed to pull and unpack image "REF"`, `Failed to pull image
/// "REF"`).
fn failing_volume(pod: &Value, image: &str, message: &str) -> Option<(String, String)> {
    let quoted = |r: &str| message.contains(&format!("\"{r}\""));
    if !image.is_empty() && quoted(image) {
        return None;
    }
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|v| {
            let reference = v.pointer("/image/reference").and_then(Value::as_str)?;
            let name = v.get("name").and_then(Value::as_str)?;
            quoted(reference).then(|| (name.to_string(), reference.to_string()))
        })
}

/// Of the init and app containers waiting on a pull, the one to act on: a permanent
/// verdict first, then any verdict, then an unknown one; init containers before app
/// containers at equal rank (they run first).
fn worst_failure(pod: &Value) -> Option<Failure> {
    let spec_image = |name: &str| -> Option<String> {
        ["initContainers", "containers"]
            .iter()
            .flat_map(|k| {
                pod.pointer(&format!("/spec/{k}"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|c| c.get("image").and_then(Value::as_str))
            .map(str::to_string)
    };
    let rank = |c: &Classification| match c.verdict {
        Some(v) if v.is_permanent() => 0,
        Some(_) => 1,
        None => 2,
    };
    let mut best: Option<Failure> = None;
    for key in ["initContainerStatuses", "containerStatuses"] {
        for status in pod
            .pointer(&format!("/status/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(waiting) = status.pointer("/state/waiting") else {
                continue;
            };
            let reason = waiting.get("reason").and_then(Value::as_str).unwrap_or("");
            let message = waiting.get("message").and_then(Value::as_str).unwrap_or("");
            let classification = classify(reason, message);
            if classification.reason.is_none() {
                continue;
            }
            let container = status
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let image = spec_image(&container)
                .or_else(|| {
                    status
                        .get("image")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let (image, volume) = match failing_volume(pod, &image, message) {
                Some((name, reference)) => (reference, Some(name)),
                None => (image, None),
            };
            let candidate = Failure {
                container,
                image,
                volume,
                classification,
                message: message.to_string(),
            };
            if best
                .as_ref()
                .is_none_or(|b| rank(&candidate.classification) < rank(&b.classification))
            {
                best = Some(candidate);
            }
        }
    }
    best
}

/// A kubelet older than 1.32 writes `ImagePullBackOff` without the pull error
/// (kubernetes#127918 added it); its `Failed` Events still carry it: `Failed to pull image
/// "IMAGE": <error>`. Classify the newest such Event for `image` (`messages` oldest first),
/// keeping the back-off reason. `None` when no Event says more.
pub(crate) fn from_events(image: &str, messages: &[String]) -> Option<Classification> {
    let prefix = format!("Failed to pull image \"{image}\": ");
    let error = messages
        .iter()
        .rev()
        .find_map(|m| m.strip_prefix(prefix.as_str()))?;
    let c = classify("ErrImagePull", error);
    c.verdict.map(|_| Classification {
        reason: Some(super::classify::Reason::ImagePullBackOff),
        ..c
    })
}

/// True when the kubelet's message lacks the pull error (kubelet < 1.32 back-off).
pub(crate) fn lacks_the_error(c: &Classification) -> bool {
    c.matched == super::classify::Matched::BackOffWithoutError
}

/// The condition's `reason`: the verdict in CamelCase, as condition reasons are written.
pub(crate) fn condition_reason(v: Verdict) -> &'static str {
    match v {
        Verdict::Pullable => "Pullable",
        Verdict::InvalidReference => "InvalidReference",
        Verdict::NotFound => "NotFound",
        Verdict::PlatformMissing => "PlatformMissing",
        Verdict::Denied => "Denied",
        Verdict::Unauthenticated => "Unauthenticated",
        Verdict::UnusableArtifact => "UnusableArtifact",
        Verdict::Transient => "Transient",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(statuses: Value, extra_meta: Value) -> Value {
        let mut meta = json!({
            "namespace": "team", "name": "train-abc", "uid": "u-1", "resourceVersion": "77",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1", "controller": true}
            ],
        });
        if let (Some(m), Some(e)) = (meta.as_object_mut(), extra_meta.as_object()) {
            m.extend(e.clone());
        }
        json!({
            "metadata": meta,
            "spec": {
                "initContainers": [{"name": "setup", "image": "r.io/setup:v1"}],
                "containers": [{"name": "main", "image": "r.io/app:nope"}],
            },
            "status": statuses,
        })
    }

    fn waiting(name: &str, reason: &str, message: &str) -> Value {
        json!({"name": name, "state": {"waiting": {"reason": reason, "message": message}}})
    }

    const NOT_FOUND: &str = "rpc error: code = NotFound desc = failed to pull and unpack image \"r.io/app:nope\": failed to resolve image: r.io/app:nope: not found";

    #[test]
    fn a_job_pod_waiting_on_a_missing_tag() {
        let p = pod(
            json!({
                "initContainerStatuses": [waiting("setup", "PodInitializing", "")],
                "containerStatuses": [waiting("main", "ErrImagePull", NOT_FOUND)],
            }),
            json!({}),
        );
        let f = finding(&p).unwrap();
        assert_eq!(
            f.pod,
            PodId {
                namespace: "team".into(),
                name: "train-abc".into(),
                uid: "u-1".into()
            }
        );
        assert_eq!(f.resource_version, "77");
        assert_eq!(f.owner, Owner::Job);
        assert_eq!(
            f.owner_object,
            Some(
                json!({"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1", "namespace": "team"})
            )
        );
        let failure = f.failure.unwrap();
        assert_eq!(failure.container, "main");
        assert_eq!(failure.image, "r.io/app:nope");
        assert_eq!(failure.classification.verdict, Some(Verdict::NotFound));
        assert_eq!(
            (f.mark, f.lifecycle, f.scope),
            (Mark::Unmarked, Lifecycle::Live, Scope::Watched)
        );
    }

    #[test]
    fn a_permanent_failure_outranks_a_transient_one() {
        let p = pod(
            json!({
                "initContainerStatuses": [waiting("setup", "ErrImagePull", "failed to do request: Head \"https://r.io/v2/setup/manifests/v1\": dial tcp 10.0.0.1:443: connect: connection refused")],
                "containerStatuses": [waiting("main", "ImagePullBackOff", &format!("Back-off pulling image \"r.io/app:nope\": ErrImagePull: {NOT_FOUND}"))],
            }),
            json!({}),
        );
        let failure = finding(&p).unwrap().failure.unwrap();
        assert_eq!(failure.container, "main");
        assert_eq!(failure.classification.verdict, Some(Verdict::NotFound));
    }

    #[test]
    fn an_old_kubelets_back_off_is_read_from_its_failed_events() {
        let p = pod(
            json!({"containerStatuses": [waiting("main", "ImagePullBackOff", "Back-off pulling image \"r.io/app:nope\"")]}),
            json!({}),
        );
        let failure = finding(&p).unwrap().failure.unwrap();
        assert!(lacks_the_error(&failure.classification));
        assert_eq!(failure.classification.verdict, None);
        // The recorded Events of the missing-tag scenario, oldest first.
        let rec: Value = serde_json::from_str(include_str!(
            "../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/missing-tag.json"
        ))
        .unwrap();
        let image = rec["image"].as_str().unwrap();
        let messages: Vec<String> = rec["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["message"].as_str().unwrap().to_string())
            .collect();
        let c = from_events(image, &messages).unwrap();
        assert_eq!(c.verdict, Some(Verdict::NotFound));
        assert_eq!(
            c.reason,
            Some(super::super::classify::Reason::ImagePullBackOff)
        );
        assert_eq!(from_events("other.io/x:v1", &messages), None);
        assert_eq!(
            from_events(image, &["Error: ErrImagePull".to_string()]),
            None
        );
    }

    #[test]
    fn marker_skip_and_deletion_are_read() {
        let mut p = pod(
            json!({
                "containerStatuses": [waiting("main", "ErrImagePull", NOT_FOUND)],
                "conditions": [{"type": CONDITION_TYPE, "status": "True", "reason": "NotFound"}],
            }),
            json!({"deletionTimestamp": "2026-12-01T12:00:00Z", "annotations": {"pullcheck.io/skip": "true"}}),
        );
        let f = finding(&p).unwrap();
        assert_eq!(
            (f.mark, f.lifecycle, f.scope),
            (Mark::Marked, Lifecycle::Terminating, Scope::Skipped)
        );
        p["metadata"]["ownerReferences"] = json!([]);
        assert_eq!(finding(&p).unwrap().owner, Owner::BarePod);
        p["status"] = json!({"containerStatuses": [waiting("main", "ContainerCreating", "")]});
        assert_eq!(finding(&p).unwrap().failure, None);
        assert_eq!(finding(&json!({"metadata": {"name": "x"}})), None);
    }

    /// An image volume's failed pull is reported on the container that mounts it; the
    /// failure names the volume's reference, not the container's image (issue 22).
    #[test]
    fn an_image_volume_failure_is_attributed_to_the_volume() {
        let message = "rpc error: code = NotFound desc = failed to pull and unpack image \"r.io/model:v9\": failed to resolve image: r.io/model:v9: not found";
        let pod = json!({
            "metadata": {"namespace": "ml", "name": "p", "uid": "u"},
            "spec": {
                "containers": [{"name": "main", "image": "r.io/app:v1",
                    "volumeMounts": [{"name": "weights", "mountPath": "/w"}]}],
                "volumes": [{"name": "weights", "image": {"reference": "r.io/model:v9"}}],
            },
            "status": {"phase": "Pending", "containerStatuses": [waiting("main", "ErrImagePull", message)]},
        });
        let f = finding(&pod).unwrap().failure.unwrap();
        assert_eq!(
            (f.container.as_str(), f.image.as_str(), f.volume.as_deref()),
            ("main", "r.io/model:v9", Some("weights"))
        );
        assert_eq!(f.classification.verdict, Some(Verdict::NotFound));
        assert_eq!(
            crate::watch::text::explain_failure(&f, Verdict::NotFound),
            "container main: image volume weights r.io/model:v9: not_found (ErrImagePull: failed to resolve …: not found)"
        );
        // The container's own image failing: no volume, whatever the pod mounts.
        let own = message.replace("r.io/model:v9", "r.io/app:v1");
        let mut pod = pod;
        pod["status"]["containerStatuses"] = json!([waiting("main", "ErrImagePull", &own)]);
        let f = finding(&pod).unwrap().failure.unwrap();
        assert_eq!(
            (f.image.as_str(), f.volume.as_deref()),
            ("r.io/app:v1", None)
        );
    }
}
