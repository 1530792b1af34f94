//! Where pod templates live in each workload kind, and which images a pod template uses.
//!
//! The kind → path table is data ([`BUILTIN`]) that a user config file (`--kinds FILE`)
//! extends: a YAML list of entries such as
//!
//! ```yaml
//! - apiVersion: ray.io/v1          # group/version, or just the group for every version
//!   kind: RayJob
//!   podTemplatePaths: [spec.rayClusterSpec.headGroupSpec.template,
//!                      "spec.rayClusterSpec.workerGroupSpecs[*].template"]
//!   jobSpecPath: null              # where a batch podFailurePolicy goes (optional)
//!   runPolicyPath: null            # a Kubeflow-style runPolicy (optional)
//! ```
//!
//! Paths are dot-separated (`spec.jobTemplate.spec.template`) or JSON pointers
//! (`/spec/jobTemplate/spec/template`); `*` (or `[*]`) matches every key of a map or every
//! element of a list; the empty path is the object itself (a Pod). User entries replace a
//! built-in with the same apiVersion and kind.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One row of the table: how to find the pod templates of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KindEntry {
    /// `group/version` (`batch/v1`, `v1` for core) or a bare group matching every version.
    pub api_version: String,
    /// The object's `kind`, case-sensitive.
    pub kind: String,
    /// Paths to PodTemplateSpec-shaped values (`metadata` + `spec`).
    pub pod_template_paths: Vec<String>,
    /// Path to the batch JobSpec owning the templates (podFailurePolicy, backoffLimit…).
    #[serde(default)]
    pub job_spec_path: Option<String>,
    /// Path to a Kubeflow `runPolicy` (backoffLimit, cleanPodPolicy…), for operators that
    /// create pods themselves.
    #[serde(default)]
    pub run_policy_path: Option<String>,
}

/// A built-in row, as static data (the same fields as [`KindEntry`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BuiltinRow {
    /// See [`KindEntry::api_version`].
    pub api_version: &'static str,
    /// See [`KindEntry::kind`].
    pub kind: &'static str,
    /// See [`KindEntry::pod_template_paths`].
    pub pod_template_paths: &'static [&'static str],
    /// See [`KindEntry::job_spec_path`].
    pub job_spec_path: Option<&'static str>,
    /// See [`KindEntry::run_policy_path`].
    pub run_policy_path: Option<&'static str>,
}

const fn row(
    api_version: &'static str,
    kind: &'static str,
    pod_template_paths: &'static [&'static str],
    job_spec_path: Option<&'static str>,
    run_policy_path: Option<&'static str>,
) -> BuiltinRow {
    BuiltinRow {
        api_version,
        kind,
        pod_template_paths,
        job_spec_path,
        run_policy_path,
    }
}

/// The built-in table: row(apiVersion, kind, pod template paths, job spec path, run policy path).
///
/// Kubeflow replica-spec field names are from the training-operator v1 CRDs
/// (`pytorchReplicaSpecs`, `tfReplicaSpecs`, `mpiReplicaSpecs`, `xgbReplicaSpecs`,
/// `paddleReplicaSpecs`, `jaxReplicaSpecs`) and mpi-operator v2beta1; JobSet's from
/// jobset.x-k8s.io v1alpha2 (matched by group, every version).
pub(crate) const BUILTIN: &[BuiltinRow] = &[
    row("batch/v1", "Job", &["spec.template"], Some("spec"), None),
    row(
        "batch/v1",
        "CronJob",
        &["spec.jobTemplate.spec.template"],
        Some("spec.jobTemplate.spec"),
        None,
    ),
    row("v1", "Pod", &[""], None, None),
    row(
        "kubeflow.org/v1",
        "PyTorchJob",
        &["spec.pytorchReplicaSpecs.*.template"],
        None,
        Some("spec.runPolicy"),
    ),
    row(
        "kubeflow.org/v1",
        "TFJob",
        &["spec.tfReplicaSpecs.*.template"],
        None,
        Some("spec.runPolicy"),
    ),
    row(
        "kubeflow.org/v1",
        "MPIJob",
        &["spec.mpiReplicaSpecs.*.template"],
        None,
        Some("spec.runPolicy"),
    ),
    row(
        "kubeflow.org/v1",
        "XGBoostJob",
        &["spec.xgbReplicaSpecs.*.template"],
        None,
        Some("spec.runPolicy"),
    ),
    row(
        "kubeflow.org/v1",
        "PaddleJob",
        &["spec.paddleReplicaSpecs.*.template"],
        None,
        Some("spec.runPolicy"),
    ),
    row(
        "kubeflow.org/v1",
        "JAXJob",
        &["spec.jaxReplicaSpecs.*.template"],
        None,
        Some("spec.runPolicy"),
    ),
    row(
        "kubeflow.org/v2beta1",
        "MPIJob",
        &["spec.mpiReplicaSpecs.*.template"],
        None,
        Some("spec.runPolicy"),
    ),
    row(
        "jobset.x-k8s.io",
        "JobSet",
        &["spec.replicatedJobs[*].template.spec.template"],
        Some("spec.replicatedJobs[*].template.spec"),
        None,
    ),
];

/// The largest `--kinds` file read.
const MAX_KINDS_FILE_BYTES: u64 = 1024 * 1024;

/// A `--kinds` file that can't be read or doesn't have the expected shape.
#[derive(Debug, thiserror::Error)]
pub enum TemplatesError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The path as given.
        path: String,
        /// The I/O failure, or "not a regular file".
        source: crate::files::FileError,
    },
    /// The file is not a YAML list of entries.
    #[error("{path}: {message}; expected a YAML list of {{apiVersion, kind, podTemplatePaths}}")]
    Shape {
        /// The path as given.
        path: String,
        /// What was wrong.
        message: String,
    },
}

/// The kind → pod-template table in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Rows; later rows win over earlier ones with the same apiVersion and kind.
    pub entries: Vec<KindEntry>,
}

impl Default for Table {
    fn default() -> Self {
        Self::builtin()
    }
}

/// Kinds whose images `scan` (and later the audit) checks but `inject` never changes: their
/// pods are pulled like a Job's, but restart forever (`restartPolicy: Always`), so an init
/// container that fails them only adds a crash loop.
pub(crate) const WORKLOADS: &[BuiltinRow] = &[
    row("apps/v1", "Deployment", &["spec.template"], None, None),
    row("apps/v1", "StatefulSet", &["spec.template"], None, None),
    row("apps/v1", "DaemonSet", &["spec.template"], None, None),
    row("apps/v1", "ReplicaSet", &["spec.template"], None, None),
];

impl Table {
    /// The built-in rows ([`BUILTIN`]).
    pub fn builtin() -> Self {
        Self::from_rows(BUILTIN)
    }

    /// This table plus the long-running [`WORKLOADS`] it has no row for (a `--kinds` row for
    /// the same kind wins): what `scan` reads.
    pub fn with_workloads(mut self) -> Self {
        for w in Self::from_rows(WORKLOADS).entries {
            if !self
                .entries
                .iter()
                .any(|e| e.api_version == w.api_version && e.kind == w.kind)
            {
                self.entries.push(w);
            }
        }
        self
    }

    fn from_rows(rows: &[BuiltinRow]) -> Self {
        let entries = rows
            .iter()
            .map(|r| KindEntry {
                api_version: r.api_version.to_string(),
                kind: r.kind.to_string(),
                pod_template_paths: r
                    .pod_template_paths
                    .iter()
                    .map(|p| (*p).to_string())
                    .collect(),
                job_spec_path: r.job_spec_path.map(str::to_string),
                run_policy_path: r.run_policy_path.map(str::to_string),
            })
            .collect();
        Self { entries }
    }

    /// Add rows (replacing built-ins with the same apiVersion and kind).
    pub(crate) fn extend(&mut self, rows: Vec<KindEntry>) {
        for row in rows {
            self.entries
                .retain(|e| !(e.api_version == row.api_version && e.kind == row.kind));
            self.entries.push(row);
        }
    }

    /// The built-ins extended by the YAML text of a `--kinds` file (`path` is for messages).
    pub fn with_config(path: &str, text: &str) -> Result<Self, TemplatesError> {
        let shape = |message: String| TemplatesError::Shape {
            path: path.to_string(),
            message,
        };
        let docs = super::yaml::parse_documents(text).map_err(|e| shape(e.to_string()))?;
        let mut table = Self::builtin();
        for doc in docs {
            let rows: Vec<KindEntry> = serde_json::from_value(doc.value)
                .map_err(|e| shape(format!("document {}: {e}", doc.number)))?;
            table.extend(rows);
        }
        Ok(table)
    }

    /// Read a `--kinds` file and extend the built-ins with it.
    pub(crate) fn load(path: &str) -> Result<Self, TemplatesError> {
        let text = crate::files::read_capped_text(std::path::Path::new(path), MAX_KINDS_FILE_BYTES)
            .map_err(|source| TemplatesError::Read {
                path: path.to_string(),
                source,
            })?;
        Self::with_config(path, &text)
    }

    /// The row for an object, by its `apiVersion` and `kind` (last matching row wins; an
    /// exact `group/version` row wins over a bare-group row).
    pub(crate) fn lookup(&self, obj: &Value) -> Option<&KindEntry> {
        let api = obj.get("apiVersion")?.as_str()?;
        let kind = obj.get("kind")?.as_str()?;
        let group = api.rsplit_once('/').map_or("", |(g, _)| g);
        let rows = || self.entries.iter().rev().filter(|e| e.kind == kind);
        rows().find(|e| e.api_version == api).or_else(|| {
            rows().find(|e| {
                !e.api_version.contains('/') && !group.is_empty() && e.api_version == group
            })
        })
    }
}

/// One segment of a table path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Any,
}

fn parse_path(path: &str) -> Vec<Seg> {
    let tokens: Vec<String> = if let Some(p) = path.strip_prefix('/') {
        p.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect()
    } else {
        path.replace("[*]", ".*")
            .split('.')
            .map(str::to_string)
            .collect()
    };
    tokens
        .into_iter()
        .filter(|t| !t.is_empty())
        .map(|t| if t == "*" { Seg::Any } else { Seg::Key(t) })
        .collect()
}

/// A JSON pointer (RFC 6901) from tokens.
pub(crate) fn pointer(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// Every concrete token path in `obj` matching a table path, in document order.
fn resolve(obj: &Value, path: &str) -> Vec<Vec<String>> {
    fn with(tokens: &[String], t: String) -> Vec<String> {
        let mut p = tokens.to_vec();
        p.push(t);
        p
    }
    let mut found: Vec<(Vec<String>, &Value)> = vec![(Vec::new(), obj)];
    for seg in parse_path(path) {
        let mut next = Vec::new();
        for (tokens, v) in found {
            match (&seg, v) {
                (Seg::Key(k), Value::Object(m)) => {
                    if let Some(c) = m.get(k) {
                        next.push((with(&tokens, k.clone()), c));
                    }
                }
                (Seg::Key(k), Value::Array(a)) => {
                    if let Some(c) = k.parse::<usize>().ok().and_then(|i| a.get(i)) {
                        next.push((with(&tokens, k.clone()), c));
                    }
                }
                (Seg::Any, Value::Object(m)) => {
                    next.extend(m.iter().map(|(k, c)| (with(&tokens, k.clone()), c)))
                }
                (Seg::Any, Value::Array(a)) => next.extend(
                    a.iter()
                        .enumerate()
                        .map(|(i, c)| (with(&tokens, i.to_string()), c)),
                ),
                _ => {}
            }
        }
        found = next;
    }
    found
        .into_iter()
        .filter(|(_, v)| v.is_object())
        .map(|(t, _)| t)
        .collect()
}

/// A pod template found in an object, with the policy objects that govern it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTemplateRef {
    /// JSON pointer to the PodTemplateSpec-shaped value (`""` for a Pod itself).
    pub pointer: String,
    /// JSON pointer to the batch JobSpec that owns it, when the kind has one.
    pub job_spec: Option<String>,
    /// JSON pointer to the Kubeflow `runPolicy` (it may be absent from the object).
    pub run_policy: Option<String>,
}

/// What makes an object of an unknown kind a workload whose images would go unchecked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// A `containers` list somewhere (a Deployment, a RayJob).
    Containers,
    /// A string field named `image` somewhere, and no containers list.
    ImageField,
    /// A Kubeflow Trainer v2 TrainJob: its pods come from the JobSet template of the runtime
    /// it names (`spec.runtimeRef`; kubeflow/trainer v2.3.0 `pkg/apis/trainer/v1alpha1/
    /// trainjob_types.go`), which is not in the TrainJob, so even one without an image field
    /// of its own must not read as a clean "0 images".
    Runtime,
}

impl Holds {
    /// The phrase messages use after `unknown kind API KIND`.
    pub(crate) fn phrase(self) -> &'static str {
        match self {
            Holds::Containers => "holds containers",
            Holds::ImageField => "has an image field",
            Holds::Runtime => "gets its pods from a training runtime",
        }
    }
}

/// Every place (a JSON pointer) of `obj` that holds a `containers` list or a string `image`
/// field, in document order, looking everywhere but `metadata` (annotations are free text)
/// and not below such a place; none for a ConfigMap or Secret, whose data is opaque (a key
/// named `image` there is not a container image).
fn image_places(obj: &Value) -> Vec<(String, Holds)> {
    fn walk(v: &Value, at: &str, out: &mut Vec<(String, Holds)>) {
        match v {
            Value::Object(m) => {
                for (k, c) in m {
                    let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                    if k == "containers" && c.is_array() {
                        out.push((here, Holds::Containers));
                    } else if k == "image" && c.is_string() {
                        out.push((here, Holds::ImageField));
                    } else {
                        walk(c, &here, out);
                    }
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    walk(c, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let api = obj.get("apiVersion").and_then(Value::as_str);
    let kind = obj.get("kind").and_then(Value::as_str);
    let mut places = Vec::new();
    if api == Some("v1") && matches!(kind, Some("ConfigMap" | "Secret")) {
        return places;
    }
    for (k, v) in obj.as_object().into_iter().flatten() {
        if k != "metadata" {
            walk(v, &format!("/{k}"), &mut places);
        }
    }
    places
}

/// What `obj` holds ([`image_places`]): containers when any place is a list of them, else
/// an image field; `None` for a ConfigMap, a Service, a Secret's payload.
fn holds_images(obj: &Value) -> Option<Holds> {
    let places = image_places(obj);
    if places.iter().any(|(_, h)| *h == Holds::Containers) {
        return Some(Holds::Containers);
    }
    places.first().map(|(_, h)| *h)
}

/// For an object of a kind `table` lacks that holds containers or an `image` field, or is a
/// TrainJob: what it holds ([`Holds::phrase`] puts it in words). Such an object's images
/// would otherwise go unchecked in silence; one with neither (a ConfigMap, a Service) is
/// `None`.
pub(crate) fn unknown_kind_holds(obj: &Value, table: &Table) -> Option<Holds> {
    if table.lookup(obj).is_some() {
        return None;
    }
    if super::trainjob::is_train_job(obj) {
        return Some(Holds::Runtime);
    }
    holds_images(obj)
}

/// For an object of a kind the table knows: the first place (a JSON pointer) holding a
/// `containers` list or a string `image` field that none of its pod template paths covers,
/// so its images would go unchecked (a `--kinds` row with a typo in a path, or one that
/// names some of a RayJob's groups but not all). `None` when every such place is inside a
/// resolved pod template, and for unknown kinds ([`unknown_kind_holds`] covers those).
pub(crate) fn uncovered_image_place(obj: &Value, table: &Table) -> Option<String> {
    table.lookup(obj)?;
    let covered: Vec<String> = pod_templates(obj, table)
        .into_iter()
        .map(|t| t.pointer)
        .collect();
    let inside = |at: &str| {
        covered
            .iter()
            .any(|t| t.is_empty() || at == t || at.starts_with(&format!("{t}/")))
    };
    image_places(obj)
        .into_iter()
        .map(|(at, _)| at)
        .find(|at| !inside(at))
}

/// `unknown kind API KIND`, the start of every message about such an object.
pub(crate) fn unknown_kind(obj: &Value) -> String {
    let api = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("?");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("?");
    format!("unknown kind {api} {kind}")
}

/// The sentence `scan` and `inject` say about an object [`unknown_kind_holds`] finds
/// (callers add what they did about it).
pub(crate) fn unknown_workload(obj: &Value, table: &Table) -> Option<String> {
    if let Some(at) = uncovered_image_place(obj, table) {
        let api = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("?");
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("?");
        return Some(format!(
            "{api} {kind} holds an image at {at}, outside its pod template paths, which pullcheck doesn't know where to find"
        ));
    }
    let holds = unknown_kind_holds(obj, table)?;
    let how = match holds {
        Holds::Containers => "pullcheck doesn't know where to find".to_string(),
        Holds::ImageField => "pullcheck doesn't know how to read".to_string(),
        Holds::Runtime => format!(
            "({}), which pullcheck doesn't read yet",
            obj.pointer("/spec/runtimeRef/name")
                .and_then(Value::as_str)
                .unwrap_or("?")
        ),
    };
    Some(format!("{} {} {how}", unknown_kind(obj), holds.phrase()))
}

/// The pod templates of `obj` per `table`, in document order; empty for unknown kinds.
pub fn pod_templates(obj: &Value, table: &Table) -> Vec<PodTemplateRef> {
    let Some(entry) = table.lookup(obj) else {
        return Vec::new();
    };
    let jobs: Vec<Vec<String>> = entry
        .job_spec_path
        .as_deref()
        .map(|p| resolve(obj, p))
        .unwrap_or_default();
    let run_policy = entry.run_policy_path.as_deref().map(|p| {
        pointer(
            &parse_path(p)
                .into_iter()
                .filter_map(|s| match s {
                    Seg::Key(k) => Some(k),
                    Seg::Any => None,
                })
                .collect::<Vec<_>>(),
        )
    });
    let mut out = Vec::new();
    for path in &entry.pod_template_paths {
        for tokens in resolve(obj, path) {
            let job_spec = jobs
                .iter()
                .filter(|j| tokens.starts_with(j))
                .max_by_key(|j| j.len());
            out.push(PodTemplateRef {
                pointer: pointer(&tokens),
                job_spec: job_spec.map(|j| pointer(j)),
                run_policy: run_policy.clone(),
            });
        }
    }
    out
}

/// Where an image appears in a pod spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    /// `spec.initContainers[*].image` (native sidecars included).
    InitContainer,
    /// `spec.containers[*].image`.
    Container,
    /// `spec.volumes[*].image.reference` (image volumes).
    ImageVolume,
}

/// One image used by a pod template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageUse {
    /// Container name, or the volume name for an image volume.
    pub container: String,
    /// The image exactly as written.
    pub image: String,
    /// `imagePullPolicy` (or the image volume's `pullPolicy`) as written; `None` if unset.
    pub pull_policy: Option<String>,
    /// Which list it came from.
    pub slot: Slot,
    /// JSON pointer to the pod template it belongs to.
    pub template: String,
    /// JSON pointer to the image field itself.
    pub pointer: String,
}

impl ImageUse {
    /// True when the kubelet would pull this image, so pullcheck checks it: `scan`, `inject`,
    /// the webhook and `lint` (which reports the others) all ask this one question.
    ///
    /// The kubelet never pulls an image whose pull policy is `Never` (kubelet
    /// `pkg/kubelet/images/image_manager.go`, `EnsureImageExists` and `shouldPullImage`: with
    /// `Never` a missing image is `ErrImageNeverPull`, never a pull). Image volumes carry the
    /// same `pullPolicy` field with the same meaning, so the rule is one for every slot.
    pub(crate) fn is_pulled(&self) -> bool {
        self.pull_policy.as_deref() != Some("Never")
    }
}

/// True when `image` is a valid reference without a digest: one that a tag could move under,
/// and that a digest pin would change. An image that does not parse is not called unpinned:
/// its verdict is `invalid_reference`, which says more.
pub(crate) fn is_unpinned(image: &str) -> bool {
    crate::reference::Reference::parse(image).is_ok_and(|r| r.digest().is_none())
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The images of one pod template (`template` is the PodTemplateSpec-shaped value and
/// `at` its pointer): init containers, containers, then image volumes, in list order.
/// Entries without an image string are skipped.
pub(crate) fn template_images(template: &Value, at: &str) -> Vec<ImageUse> {
    let mut out = Vec::new();
    let Some(spec) = template.get("spec") else {
        return out;
    };
    for (list, slot) in [
        ("initContainers", Slot::InitContainer),
        ("containers", Slot::Container),
    ] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(image) = str_at(c, "image") {
                out.push(ImageUse {
                    container: str_at(c, "name").unwrap_or_default().to_string(),
                    image: image.to_string(),
                    pull_policy: str_at(c, "imagePullPolicy").map(str::to_string),
                    slot,
                    template: at.to_string(),
                    pointer: format!("{at}/spec/{list}/{i}/image"),
                });
            }
        }
    }
    for (i, v) in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(img) = v.get("image")
            && let Some(reference) = str_at(img, "reference")
        {
            out.push(ImageUse {
                container: str_at(v, "name").unwrap_or_default().to_string(),
                image: reference.to_string(),
                pull_policy: str_at(img, "pullPolicy").map(str::to_string),
                slot: Slot::ImageVolume,
                template: at.to_string(),
                pointer: format!("{at}/spec/volumes/{i}/image/reference"),
            });
        }
    }
    out
}

/// Every image of every pod template of `obj`, in document order (not deduplicated).
pub fn images(obj: &Value, table: &Table) -> Vec<ImageUse> {
    pod_templates(obj, table)
        .iter()
        .filter_map(|t| {
            obj.pointer(&t.pointer)
                .map(|v| template_images(v, &t.pointer))
        })
        .flatten()
        .collect()
}

/// The names in a pod template's `spec.imagePullSecrets`, in order, without duplicates.
pub(crate) fn pull_secret_names(template: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let list = template
        .pointer("/spec/imagePullSecrets")
        .and_then(Value::as_array);
    for name in list.into_iter().flatten().filter_map(|s| str_at(s, "name")) {
        if !name.is_empty() && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// `metadata.namespace` and `metadata.name` of an object (empty when absent).
pub(crate) fn namespace_and_name(obj: &Value) -> (String, String) {
    let m = obj.get("metadata");
    let get = |k| m.and_then(|m| str_at(m, k)).unwrap_or_default().to_string();
    (get("namespace"), get("name"))
}
