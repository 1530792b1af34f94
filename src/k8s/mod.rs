//! Kubernetes manifests in; images, injected manifests and lint findings out.
//!
//! - [`yaml`]: multi-document YAML I/O that keeps key order and unknown fields;
//! - [`templates`]: the kind → pod-template table (data, extensible with `--kinds`) and the
//!   image extraction shared by `inject`, `lint`, `scan` and the webhook;
//! - [`container`]: what the `pullcheck` init container is (image, resources, arguments,
//!   mounts) and the volumes it reads;
//! - [`inject`]: adds the `pullcheck` init container (and, with fail-fast, [`policy`]'s
//!   podFailurePolicy rules);
//! - [`remove`]: takes out everything `inject` owns (`inject --remove`);
//! - [`lint`]: the gaps that keep a broken image from failing a workload fast;
//! - [`trainjob`]: the pod templates a Kubeflow Trainer v2 TrainJob gets from its runtime.
//!
//! The names `inject`, `policy` and `lint` share (the container name, the transient action,
//! warnings, the message limit) are defined here, so none of them imports another for them.
//! Nothing here touches the network; objects are plain [`serde_json::Value`]s.

pub(crate) mod annotation_budget;
pub(crate) mod container;
pub(crate) mod event;
pub(crate) mod index_bodies;
pub mod inject;
pub mod lint;
pub(crate) mod policy;
pub mod registry_config;
pub mod remove;
pub mod templates;
pub mod trainjob;
pub mod yaml;

/// The pod condition `pullcheck watch` sets on a pod the kubelet can't pull an image for,
/// before deleting it; the podFailurePolicy rule [`policy::pullcheck_rules`] puts first
/// matches it (`onPodConditions`), so such a pod fails its Job at once.
pub(crate) const IMAGE_PULL_FAILED_CONDITION: &str = "pullcheck.io/ImagePullFailed";

/// The advised limit for one admission warning, in characters (kube-core
/// `AdmissionResponse::warnings`). Lint findings stay within it too: the webhook returns them
/// as warnings.
pub(crate) const MAX_WARNING_CHARS: usize = 120;

/// `text` cut to `max` characters, the last one `…` when anything was cut.
pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Why a document is not a Kubernetes object, or `None` when it is one: a mapping with a
/// non-empty string `apiVersion` and `kind`, which is all the API server asks of any object.
pub(crate) fn not_an_object(v: &serde_json::Value) -> Option<&'static str> {
    let field = |name: &str| {
        v.get(name)
            .and_then(serde_json::Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    if !v.is_object() {
        return Some("not a Kubernetes object: not a mapping with apiVersion and kind");
    }
    match (field("apiVersion"), field("kind")) {
        (true, true) => None,
        (false, false) => Some("not a Kubernetes object: no apiVersion and no kind"),
        (false, true) => Some("not a Kubernetes object: no apiVersion"),
        (true, false) => Some("not a Kubernetes object: no kind"),
    }
}

/// True for a `v1 List`, what `kubectl get … -o yaml` prints for several objects: a wrapper
/// whose `items` are the objects. Every command reads it through this test and
/// [`objects`] (kubectl's resource builder flattens it the same way, `FlattenListVisitor`
/// in `k8s.io/cli-runtime/pkg/resource/visitor.go`).
pub(crate) fn is_list(v: &serde_json::Value) -> bool {
    v.get("apiVersion").and_then(serde_json::Value::as_str) == Some("v1")
        && v.get("kind").and_then(serde_json::Value::as_str) == Some("List")
}

/// Turn a typed list as the API returns it (`batch/v1 JobList`, `v1 PodList`: items without
/// `apiVersion` and `kind`) into the `v1 List` every command reads, each item given the
/// list's group/version and the kind without `List` (as kubectl's printers fill them in).
/// Anything else is left as it is.
pub(crate) fn normalise_typed_list(doc: &mut serde_json::Value) {
    let (Some(api), Some(kind)) = (
        doc.get("apiVersion").and_then(serde_json::Value::as_str),
        doc.get("kind").and_then(serde_json::Value::as_str),
    ) else {
        return;
    };
    let Some(item_kind) = kind.strip_suffix("List").filter(|k| !k.is_empty()) else {
        return;
    };
    if !doc.get("items").is_some_and(serde_json::Value::is_array) {
        return;
    }
    let (api, item_kind) = (api.to_string(), item_kind.to_string());
    for item in doc["items"].as_array_mut().into_iter().flatten() {
        if let Some(m) = item.as_object_mut() {
            m.entry("apiVersion").or_insert_with(|| api.clone().into());
            m.entry("kind").or_insert_with(|| item_kind.clone().into());
        }
    }
    doc["apiVersion"] = "v1".into();
    doc["kind"] = "List".into();
}

/// The objects one document stands for, each with its JSON pointer in the document: the
/// document itself (`""`), or the items of a [`is_list`] List (`/items/0`, …; Lists inside
/// Lists flattened), in order.
pub(crate) fn objects(doc: &serde_json::Value) -> Vec<(String, &serde_json::Value)> {
    if !is_list(doc) {
        return vec![(String::new(), doc)];
    }
    let items = doc.get("items").and_then(serde_json::Value::as_array);
    items
        .into_iter()
        .flatten()
        .enumerate()
        .flat_map(|(i, item)| {
            objects(item)
                .into_iter()
                .map(move |(p, o)| (format!("/items/{i}{p}"), o))
        })
        .collect()
}

/// [`objects`] for a change in place: `f` runs on each object one document stands for (the
/// document itself, or each item of a `v1 List`, Lists inside Lists flattened), and the
/// warnings it returns get the item's pointer in front of their path.
pub(crate) fn each_object_mut(
    doc: &mut serde_json::Value,
    f: &mut impl FnMut(&mut serde_json::Value) -> Vec<Warning>,
) -> Vec<Warning> {
    if !is_list(doc) {
        return f(doc);
    }
    let mut out = Vec::new();
    for (i, item) in doc
        .get_mut("items")
        .and_then(serde_json::Value::as_array_mut)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for w in each_object_mut(item, f) {
            out.push(Warning {
                path: format!("/items/{i}{}", w.path),
                message: w.message,
            });
        }
    }
    out
}

/// The init container's name; podFailurePolicy rules refer to it (`onExitCodes.containerName`).
pub const CONTAINER_NAME: &str = "pullcheck";

/// What a podFailurePolicy does with the transient exit code (20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransientAction {
    /// Count the failure toward backoffLimit (a new pod retries the pull check).
    #[default]
    Count,
    /// Don't count it: retries are unbounded unless activeDeadlineSeconds is set.
    Ignore,
    /// Retry in the same pod: the init container gets `restartPolicy: Never` and a
    /// container restart rule for the transient code (KEP-5307, Kubernetes 1.35), so the
    /// kubelet restarts it under its back-off; the podFailurePolicy rule stays `Count`, for
    /// kubelets that ignore the rule and fail the pod instead.
    Restart,
}

/// How container restart rules were asked for: the two `--transient` values that may
/// write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RestartAsk {
    /// `--transient auto`, the default: restart only where the cluster is known to have
    /// them; a fall back to count is expected, said at info.
    Auto,
    /// `--transient restart`, by name: a fall back to count deserves a warning.
    ByName,
}

impl RestartAsk {
    /// The flag's value as given.
    pub(crate) fn flag(self) -> &'static str {
        match self {
            RestartAsk::Auto => "auto",
            RestartAsk::ByName => "restart",
        }
    }
}

/// Whether container restart rules may be written for a cluster of `version` (`None`:
/// unknown), asked `ask`: `Ok(())`, or `Err(why)` and count is written instead. The one
/// rule for `inject` and the webhook: a known version decides
/// ([`KubernetesVersion::has_container_restart_rules`]); an unknown one is count under
/// auto, and taken as 1.35 or later when restart is asked by name (the podFailurePolicy
/// rule for code 20 stays Count, so a kubelet without them still fails the pod).
pub(crate) fn restart_rules_allowed(
    ask: RestartAsk,
    version: Option<KubernetesVersion>,
) -> Result<(), String> {
    match (version, ask) {
        (Some(v), _) if v.has_container_restart_rules() => Ok(()),
        (Some(v), _) => Err(format!(
            "Kubernetes {v} has no container restart rules (beta and on by default from 1.35)"
        )),
        (None, RestartAsk::ByName) => Ok(()),
        (None, RestartAsk::Auto) => Err("the Kubernetes version is unknown".into()),
    }
}

/// A Kubernetes minor release, as `--kubernetes-version` or the API server's `/version`
/// states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct KubernetesVersion {
    pub major: u32,
    pub minor: u32,
}

impl KubernetesVersion {
    /// Reads `1.35`, `v1.35.4` or `v1.35.4-gke.100` (only major and minor count).
    pub(crate) fn parse(text: &str) -> Option<KubernetesVersion> {
        let text = text.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts = text.split(['.', '-', '+']);
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(KubernetesVersion { major, minor })
    }

    /// True from 1.35, where the `ContainerRestartRules` gate is beta and on by default
    /// (kubernetes `pkg/features/kube_features.go`); 1.34 has it alpha, off by default, and
    /// an older API server rejects `restartPolicy: Never` on an init container
    /// (`validateInitContainerRestartPolicy` in `pkg/apis/core/validation/validation.go`).
    pub(crate) fn has_container_restart_rules(self) -> bool {
        self >= KubernetesVersion {
            major: 1,
            minor: 35,
        }
    }
}

impl std::fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Something the user should know about a document that was (or was not) changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// JSON pointer to what the warning is about (`""` for the whole object).
    pub path: String,
    /// One line, at most 120 characters.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_stands_for_its_items_nested_lists_flattened() {
        let job = serde_json::json!({"apiVersion": "batch/v1", "kind": "Job"});
        let inner = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [job]});
        let doc = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [job, inner]});
        let got: Vec<(String, &serde_json::Value)> = objects(&doc);
        assert_eq!(
            got,
            vec![
                ("/items/0".to_string(), &job),
                ("/items/1/items/0".to_string(), &job)
            ]
        );
        assert_eq!(objects(&job), vec![(String::new(), &job)]);
        // Only core v1's List is a wrapper; a CRD kind named List is an object.
        let other =
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "List", "items": [job]});
        assert_eq!(objects(&other), vec![(String::new(), &other)]);
    }

    #[test]
    fn unknown_kinds_with_containers_or_image_fields() {
        let table = templates::Table::builtin();
        let holds = |v: serde_json::Value| {
            templates::unknown_kind_holds(&v, &table).map(templates::Holds::phrase)
        };
        assert_eq!(
            holds(
                serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}})
            ),
            Some("holds containers")
        );
        assert_eq!(
            holds(
                serde_json::json!({"apiVersion": "example.com/v1", "kind": "Trainer",
                "spec": {"trainer": {"image": "x"}}})
            ),
            Some("has an image field")
        );
        // A TrainJob's pods come from its runtime: never a clean 0, image field or not.
        for spec in [
            serde_json::json!({"runtimeRef": {"name": "torch"}, "trainer": {"image": "x"}}),
            serde_json::json!({"runtimeRef": {"name": "torch"}}),
        ] {
            let tj = serde_json::json!({"apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob", "spec": spec});
            assert_eq!(
                holds(tj.clone()),
                Some("gets its pods from a training runtime")
            );
            assert_eq!(
                templates::unknown_workload(&tj, &table).as_deref(),
                Some(
                    "unknown kind trainer.kubeflow.org/v1alpha1 TrainJob gets its pods from a training runtime (torch), which pullcheck doesn't read yet"
                )
            );
        }
        // Opaque data, annotations, non-string image values and known kinds are not it.
        for v in [
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"image": "x"}}),
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"image": "x"}}),
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "W",
                "metadata": {"annotations": {"image": "x"}}}),
            serde_json::json!({"apiVersion": "example.com/v1", "kind": "W",
                "spec": {"image": {"repository": "x"}}}),
            serde_json::json!({"apiVersion": "batch/v1", "kind": "Job",
                "spec": {"template": {"spec": {"containers": []}}}}),
        ] {
            assert_eq!(holds(v.clone()), None, "{v}");
        }
    }

    #[test]
    fn kubernetes_versions() {
        let v = |t| KubernetesVersion::parse(t);
        assert_eq!(
            v("1.35"),
            Some(KubernetesVersion {
                major: 1,
                minor: 35
            })
        );
        assert_eq!(v("v1.35.4"), v("1.35"));
        assert_eq!(
            v("v1.34.2-gke.1000"),
            Some(KubernetesVersion {
                major: 1,
                minor: 34
            })
        );
        assert_eq!(v("1"), None);
        assert_eq!(v("one.two"), None);
        assert!(v("1.35").unwrap().has_container_restart_rules());
        assert!(v("1.36").unwrap().has_container_restart_rules());
        assert!(!v("1.34").unwrap().has_container_restart_rules());
    }

    #[test]
    fn restart_rules_by_version_and_by_how_they_were_asked() {
        use RestartAsk::*;
        let v = KubernetesVersion::parse;
        assert_eq!(restart_rules_allowed(Auto, v("1.35")), Ok(()));
        assert_eq!(restart_rules_allowed(ByName, v("v1.36.0")), Ok(()));
        let old = Err(
            "Kubernetes 1.33 has no container restart rules (beta and on by default from 1.35)"
                .to_string(),
        );
        assert_eq!(restart_rules_allowed(Auto, v("1.33")), old);
        assert_eq!(restart_rules_allowed(ByName, v("1.33")), old);
        // Unknown: auto doesn't guess; restart by name is taken at its word.
        assert_eq!(
            restart_rules_allowed(Auto, None),
            Err("the Kubernetes version is unknown".to_string())
        );
        assert_eq!(restart_rules_allowed(ByName, None), Ok(()));
    }
}
