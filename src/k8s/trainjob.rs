//! The pod templates a Kubeflow Trainer v2 `TrainJob` gets from its runtime, as the trainer
//! controller (kubeflow/trainer v2.3.0) would build them, for the image check.
//!
//! A TrainJob names a runtime (`spec.runtimeRef`: a `ClusterTrainingRuntime` or a
//! `TrainingRuntime`, `trainer.kubeflow.org/v1alpha1`) whose `spec.template` is a JobSet
//! template. The trainer turns the pair into a JobSet; [`build`] repeats the steps of that
//! build that decide which images are pulled, where and with which credentials:
//!
//! 1. Start from every `spec.template.spec.replicatedJobs[]` of the runtime, in its order,
//!    and take each one's pod template (`template.spec.template`).
//! 2. Apply `spec.runtimePatches[]` in list order (`pkg/runtime/core/trainingruntime.go`,
//!    `mergeRuntimePatches`: a strategic merge patch of the JobSet spec, replicatedJobs
//!    matched by `name`, the runtime's order kept). Of a patch's pod spec
//!    (`PodSpecPatch` in `pkg/apis/trainer/v1alpha1/trainjob_types.go`) only the fields that
//!    decide a pull are applied: `volumes` (merged by name, field by field, so an image volume can be added
//!    or replaced), `imagePullSecrets` (merged by name), `serviceAccountName` (whose pull
//!    secrets apply when the template lists none), `nodeSelector` and `affinity` (the
//!    platforms a pod can land on). A patch can't set a container image: `ContainerPatch`
//!    has no `image` field.
//! 3. Set `spec.trainer.image`, when given, on the container named `node` of every
//!    replicatedJob whose Job template labels carry
//!    `trainer.kubeflow.org/trainjob-ancestor-step: trainer`
//!    (`pkg/runtime/framework/plugins/jobset/builder.go`, `Trainer()`).
//! 4. The dataset and model initializer steps (`dataset-initializer`, `model-initializer`)
//!    keep the runtime's images: `spec.initializer` only sets their environment and secret
//!    references (`builder.go`, `Initializer()`), so their images are checked as written.
//!
//! What can't be seen from the TrainJob and its runtime: images a framework plugin adds
//! while it builds the JobSet. In v2.3.0 that is the Flux plugin's installer init container
//! (`pkg/runtime/framework/plugins/flux/flux.go`, image `constants.FluxInstallerImage`),
//! appended to the `node` pods of a runtime with `mlPolicy.flux`. The JobSet the trainer
//! creates, the watch and the Kueue admission check see those.
//!
//! Pure: no I/O; the objects are plain [`serde_json::Value`]s.

use serde_json::{Map, Value};

/// The API group of the trainer's kinds, and the only `runtimeRef.apiGroup` it serves.
pub const TRAINER_GROUP: &str = "trainer.kubeflow.org";

/// The Job template label naming the TrainJob step a replicatedJob runs
/// (`pkg/constants/constants.go`, `LabelTrainJobAncestor`).
pub const ANCESTOR_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";

/// The container of the trainer step that `spec.trainer.image` replaces (`constants.Node`).
pub const NODE_CONTAINER: &str = "node";

/// Which kind of runtime a TrainJob names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    /// `ClusterTrainingRuntime`, cluster-scoped (the default when `kind` is unset).
    Cluster,
    /// `TrainingRuntime`, in the TrainJob's own namespace.
    Namespaced,
}

impl RuntimeKind {
    /// The kind as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Cluster => "ClusterTrainingRuntime",
            RuntimeKind::Namespaced => "TrainingRuntime",
        }
    }

    /// The resource name in the API path (`clustertrainingruntimes`, `trainingruntimes`).
    pub fn resource(self) -> &'static str {
        match self {
            RuntimeKind::Cluster => "clustertrainingruntimes",
            RuntimeKind::Namespaced => "trainingruntimes",
        }
    }
}

/// A TrainJob's `spec.runtimeRef`, with the CRD's defaults applied (`apiGroup`
/// `trainer.kubeflow.org`, `kind` `ClusterTrainingRuntime`: `RuntimeRef` in
/// `trainjob_types.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRef {
    /// Cluster-wide or in the TrainJob's namespace.
    pub kind: RuntimeKind,
    /// `runtimeRef.name`.
    pub name: String,
}

impl std::fmt::Display for RuntimeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.name)
    }
}

/// A TrainJob or runtime that doesn't have the shape the trainer needs. Each message names
/// the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrainJobError {
    /// `spec.runtimeRef.name` is missing or empty.
    #[error(
        "TrainJob has no spec.runtimeRef.name; name a ClusterTrainingRuntime or TrainingRuntime"
    )]
    NoRuntimeName,
    /// A `runtimeRef` the trainer v2.3.0 doesn't serve (another group or kind).
    #[error(
        "TrainJob spec.runtimeRef names {api_group} {kind}, which the trainer doesn't run; use trainer.kubeflow.org ClusterTrainingRuntime or TrainingRuntime"
    )]
    UnsupportedRuntime {
        /// `runtimeRef.apiGroup` as written.
        api_group: String,
        /// `runtimeRef.kind` as written.
        kind: String,
    },
    /// The runtime object has no `spec.template.spec.replicatedJobs` list.
    #[error("{runtime} has no spec.template.spec.replicatedJobs list")]
    NoReplicatedJobs {
        /// The runtime, `Kind name`.
        runtime: String,
    },
}

/// The step of a TrainJob a replicatedJob runs (the value of [`ANCESTOR_LABEL`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `dataset-initializer`.
    DatasetInitializer,
    /// `model-initializer`.
    ModelInitializer,
    /// `trainer`: the step whose `node` container gets `spec.trainer.image`.
    Trainer,
    /// Any other value (kept as written).
    Other(String),
    /// No such label: the trainer leaves the replicatedJob's images as they are.
    Unlabelled,
}

impl Step {
    fn of(label: Option<&str>) -> Step {
        match label {
            None => Step::Unlabelled,
            Some("dataset-initializer") => Step::DatasetInitializer,
            Some("model-initializer") => Step::ModelInitializer,
            Some("trainer") => Step::Trainer,
            Some(other) => Step::Other(other.to_string()),
        }
    }
}

/// One pod template of the JobSet the trainer would build.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltTemplate {
    /// The replicatedJob's `name`.
    pub replicated_job: String,
    /// Which TrainJob step it runs.
    pub step: Step,
    /// JSON pointer to the pod template in the runtime object
    /// (`/spec/template/spec/replicatedJobs/N/template/spec/template`): where its images
    /// were written, but for `spec.trainer.image` and patched volumes.
    pub pointer: String,
    /// The PodTemplateSpec-shaped value (`metadata` + `spec`) after the patches and the
    /// trainer image.
    pub template: Value,
}

/// The version of the trainer's kinds that v2.3.0 serves.
pub const TRAINER_VERSION: &str = "v1alpha1";

/// True for a Kubeflow Trainer v2 `TrainJob` (`trainer.kubeflow.org`, any version).
pub fn is_train_job(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("TrainJob")
        && obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|a| {
                a.strip_prefix(TRAINER_GROUP)
                    .is_some_and(|v| v.starts_with('/'))
            })
}

/// The runtime a TrainJob names, with the CRD defaults for an unset group or kind.
pub fn runtime_ref(train_job: &Value) -> Result<RuntimeRef, TrainJobError> {
    let r = train_job.pointer("/spec/runtimeRef");
    let field = |k: &str| r.and_then(|r| r.get(k)).and_then(Value::as_str);
    let name = field("name").filter(|n| !n.is_empty());
    let group = field("apiGroup").unwrap_or(TRAINER_GROUP);
    let kind = field("kind").unwrap_or("ClusterTrainingRuntime");
    let kind = match (group, kind) {
        (TRAINER_GROUP, "ClusterTrainingRuntime") => RuntimeKind::Cluster,
        (TRAINER_GROUP, "TrainingRuntime") => RuntimeKind::Namespaced,
        _ => {
            return Err(TrainJobError::UnsupportedRuntime {
                api_group: group.to_string(),
                kind: kind.to_string(),
            });
        }
    };
    let name = name.ok_or(TrainJobError::NoRuntimeName)?;
    Ok(RuntimeRef {
        kind,
        name: name.to_string(),
    })
}

/// The pod templates of the JobSet the trainer would build for `train_job` from `runtime`
/// (the ClusterTrainingRuntime or TrainingRuntime object), in the runtime's replicatedJob
/// order; see the module doc for the steps and what is not seen. A replicatedJob without a
/// pod template yields none. Errors when the runtime has no replicatedJobs list.
pub fn build(train_job: &Value, runtime: &Value) -> Result<Vec<BuiltTemplate>, TrainJobError> {
    let Some(jobs) = runtime
        .pointer("/spec/template/spec/replicatedJobs")
        .and_then(Value::as_array)
    else {
        let kind = runtime
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("runtime");
        let name = runtime
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?");
        return Err(TrainJobError::NoReplicatedJobs {
            runtime: format!("{kind} {name}"),
        });
    };
    let trainer_image = train_job
        .pointer("/spec/trainer/image")
        .and_then(Value::as_str);
    let patches = pod_spec_patches(train_job);
    let mut out = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let Some(pod) = job.pointer("/template/spec/template") else {
            continue;
        };
        let name = job
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let step = Step::of(
            job.pointer("/template/metadata/labels")
                .and_then(|l| l.get(ANCESTOR_LABEL))
                .and_then(Value::as_str),
        );
        let mut template = pod.clone();
        for (target, patch) in &patches {
            if *target == name {
                apply_pod_spec_patch(&mut template, patch);
            }
        }
        if step == Step::Trainer
            && let Some(image) = trainer_image
        {
            set_node_image(&mut template, image);
        }
        out.push(BuiltTemplate {
            replicated_job: name,
            step,
            pointer: format!("/spec/template/spec/replicatedJobs/{i}/template/spec/template"),
            template,
        });
    }
    Ok(out)
}

/// Every `(replicatedJob name, PodSpecPatch)` of `spec.runtimePatches[]`, in patch order
/// then replicatedJob order (`runtimePatches[].trainingRuntimeSpec.template.spec.
/// replicatedJobs[].template.spec.template.spec`).
fn pod_spec_patches(train_job: &Value) -> Vec<(&str, &Map<String, Value>)> {
    let mut out = Vec::new();
    let patches = train_job
        .pointer("/spec/runtimePatches")
        .and_then(Value::as_array);
    for patch in patches.into_iter().flatten() {
        let jobs = patch
            .pointer("/trainingRuntimeSpec/template/spec/replicatedJobs")
            .and_then(Value::as_array);
        for job in jobs.into_iter().flatten() {
            if let (Some(name), Some(spec)) = (
                job.get("name").and_then(Value::as_str),
                job.pointer("/template/spec/template/spec")
                    .and_then(Value::as_object),
            ) {
                out.push((name, spec));
            }
        }
    }
    out
}

/// Apply the pull-relevant fields of one PodSpecPatch to a pod template, with the strategic
/// merge rules of core/v1 `PodSpec`: `volumes` and `imagePullSecrets` merge by `name`
/// (a volume of the same name is merged with the patch's), `nodeSelector`
/// merges key by key, `affinity` merges field by field (its lists are replaced), and
/// `serviceAccountName` is replaced.
fn apply_pod_spec_patch(template: &mut Value, patch: &Map<String, Value>) {
    let Some(t) = template.as_object_mut() else {
        return;
    };
    let spec = t.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    if let Some(sa) = patch.get("serviceAccountName") {
        spec.insert("serviceAccountName".into(), sa.clone());
    }
    for list in ["volumes", "imagePullSecrets"] {
        if let Some(items) = patch.get(list).and_then(Value::as_array) {
            merge_by_name(spec, list, items);
        }
    }
    for field in ["nodeSelector", "affinity"] {
        if let Some(p) = patch.get(field) {
            let slot = spec.entry(field).or_insert(Value::Null);
            deep_merge(slot, p);
        }
    }
}

/// Merge `items` into `spec[list]` by `name`: an item of a name already there is merged
/// into it field by field ([`deep_merge`]; the trainer's patch is plain JSON with no
/// `$retainKeys` directive, so the runtime's other fields, an image volume's `pullPolicy`
/// among them, stay), a new name is appended.
fn merge_by_name(spec: &mut Map<String, Value>, list: &str, items: &[Value]) {
    let slot = spec.entry(list).or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    let Some(existing) = slot.as_array_mut() else {
        return;
    };
    for item in items {
        let name = item.get("name").and_then(Value::as_str);
        match existing
            .iter_mut()
            .find(|e| name.is_some() && e.get("name").and_then(Value::as_str) == name)
        {
            Some(e) => deep_merge(e, item),
            None => existing.push(item.clone()),
        }
    }
}

/// A strategic merge of a map-valued field without list merge keys: maps merge key by key,
/// a `null` in the patch deletes the key, anything else (lists included) replaces.
fn deep_merge(slot: &mut Value, patch: &Value) {
    match (slot.as_object_mut(), patch.as_object()) {
        (Some(s), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    s.remove(k);
                } else {
                    deep_merge(s.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *slot = patch.clone(),
    }
}

/// Set `image` on the container named [`NODE_CONTAINER`] (containers only, as `Trainer()`
/// does; an init container named `node` keeps its image).
fn set_node_image(template: &mut Value, image: &str) {
    let containers = template
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut);
    for c in containers.into_iter().flatten() {
        if c.get("name").and_then(Value::as_str) == Some(NODE_CONTAINER)
            && let Some(c) = c.as_object_mut()
        {
            c.insert("image".into(), Value::String(image.to_string()));
        }
    }
}

#[cfg(test)]
mod tests;
