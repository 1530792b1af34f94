//! Before any I/O: decode the body the API server sent and decide whether its object is
//! checked at all. Pods, objects a controller owns, opted-out workloads, unknown kinds and
//! updates of templates that can't change are let through untouched (rejecting what a
//! controller creates makes it loop on FailedCreate).

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::Value;

use crate::k8s::inject::skipped;
use crate::k8s::templates::{Table, pod_templates};
use crate::k8s::trainjob::is_train_job;

/// Which endpoint is answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Webhook {
    /// `/validate`.
    Validate,
    /// `/mutate`.
    Mutate,
}

impl Webhook {
    /// `validate` or `mutate` (metrics label).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Webhook::Validate => "validate",
            Webhook::Mutate => "mutate",
        }
    }
}

/// Why an object is let through without looking at its images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The review carries no object (DELETE, CONNECT).
    NoObject,
    /// An operation other than CREATE or UPDATE.
    Operation,
    /// A kind without pod templates in the table.
    UnknownKind,
    /// A Pod: never rejected, never mutated here.
    Pod,
    /// An object with a controller ownerReference (`Kind/name` of the owner).
    ControllerOwned(String),
    /// `pullcheck.io/skip: "true"`.
    Annotation,
    /// An UPDATE of a kind whose pod template is immutable (only CronJob's can change).
    ImmutableTemplate,
    /// An UPDATE that leaves every pod template as it was.
    TemplatesUnchanged,
    /// A Kubeflow Trainer TrainJob on the mutating webhook, or on UPDATE: it is only
    /// checked at CREATE and never mutated (the trainer builds the JobSet from it).
    TrainJob,
}

impl Skip {
    /// Short reason (logs, metrics label).
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Skip::NoObject => "no_object",
            Skip::Operation => "operation",
            Skip::UnknownKind => "unknown_kind",
            Skip::Pod => "pod",
            Skip::ControllerOwned(_) => "controller_owned",
            Skip::Annotation => "skip_annotation",
            Skip::ImmutableTemplate => "immutable_template",
            Skip::TemplatesUnchanged => "templates_unchanged",
            Skip::TrainJob => "trainjob",
        }
    }
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Triage {
    /// Allow untouched.
    Skip(Skip),
    /// Look at the images.
    Check,
}

fn api_and_kind(obj: &Value) -> (&str, &str) {
    let s = |k| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    (s("apiVersion"), s("kind"))
}

/// True for core v1 Pods.
pub(crate) fn is_pod(obj: &Value) -> bool {
    api_and_kind(obj) == ("v1", "Pod")
}

/// True for batch CronJobs: the one built-in workload whose pod template may change after
/// creation (a Job's template is immutable; JobSet and Kubeflow jobs are treated alike).
pub(crate) fn template_is_mutable(obj: &Value) -> bool {
    let (api, kind) = api_and_kind(obj);
    kind == "CronJob" && api.starts_with("batch/")
}

/// `Kind/name` of the controller owner, if any.
pub(crate) fn controller_owner(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            let s = |k| r.get(k).and_then(Value::as_str).unwrap_or("?");
            format!("{}/{}", s("kind"), s("name"))
        })
}

/// Decide whether a request is checked. `object` and `old` are the review's objects as
/// JSON (with `apiVersion` and `kind`).
pub(crate) fn triage(
    operation: &Operation,
    object: Option<&Value>,
    old: Option<&Value>,
    table: &Table,
    webhook: Webhook,
) -> Triage {
    let Some(obj) = object else {
        return Triage::Skip(Skip::NoObject);
    };
    if !matches!(operation, Operation::Create | Operation::Update) {
        return Triage::Skip(Skip::Operation);
    }
    if is_pod(obj) {
        return Triage::Skip(Skip::Pod);
    }
    let train_job = is_train_job(obj);
    if table.lookup(obj).is_none() && !train_job {
        return Triage::Skip(Skip::UnknownKind);
    }
    if let Some(owner) = controller_owner(obj) {
        return Triage::Skip(Skip::ControllerOwned(owner));
    }
    if skipped(obj) {
        return Triage::Skip(Skip::Annotation);
    }
    // Checked at CREATE only: its runtimeRef, trainer and initializer are immutable
    // (`self == oldSelf` in kubeflow/trainer v2.3.0 `pkg/apis/trainer/v1alpha1/
    // trainjob_types.go`), and runtimePatches change only while it is suspended.
    if train_job && (webhook == Webhook::Mutate || matches!(operation, Operation::Update)) {
        return Triage::Skip(Skip::TrainJob);
    }
    if matches!(operation, Operation::Update) {
        if !template_is_mutable(obj) {
            return Triage::Skip(Skip::ImmutableTemplate);
        }
        // Re-validating an unchanged template would block unrelated edits (suspending a
        // CronJob whose image has since gone); injection is idempotent, so mutate goes on.
        if webhook == Webhook::Validate
            && let Some(old) = old
            && templates_of(obj, table) == templates_of(old, table)
        {
            return Triage::Skip(Skip::TemplatesUnchanged);
        }
    }
    Triage::Check
}

fn templates_of<'a>(obj: &'a Value, table: &Table) -> Vec<Option<&'a Value>> {
    pod_templates(obj, table)
        .iter()
        .map(|t| obj.pointer(&t.pointer))
        .collect()
}

/// A body that gets no decision, only an `AdmissionResponse::invalid` answer.
#[derive(Debug, thiserror::Error)]
pub enum Undecodable {
    /// Not an AdmissionReview at all (answered with HTTP 400).
    #[error("cannot decode the AdmissionReview: {0}")]
    Body(serde_json::Error),
    /// An AdmissionReview without a request (answered with HTTP 200, as kube-core's example
    /// does).
    #[error(transparent)]
    NoRequest(#[from] kube::core::admission::ConvertAdmissionReviewError),
}

impl Undecodable {
    /// The answer: `AdmissionResponse::invalid` with this error's message.
    pub fn response(&self) -> AdmissionResponse {
        AdmissionResponse::invalid(self.to_string())
    }
}

/// A decoded review: the request, its objects as JSON, and whether it is checked.
pub struct Decoded {
    /// The request (uid, kind, operation, namespace…).
    pub req: AdmissionRequest<DynamicObject>,
    /// `request.object` as JSON, with `apiVersion` and `kind` filled in.
    pub object: Option<Value>,
    /// `request.oldObject` as JSON, likewise.
    pub old: Option<Value>,
    /// What [`triage`] said about it.
    pub triage: Triage,
}

impl Decoded {
    /// The namespace the object lives in: the request's, else the object's, else `default`.
    pub fn namespace(&self) -> String {
        self.req
            .namespace
            .clone()
            .or_else(|| {
                self.object
                    .as_ref()?
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "default".into())
    }
}

/// Decode the body the API server sent and triage it: everything the webhook decides before
/// any I/O.
pub fn decode(body: &[u8], table: &Table, webhook: Webhook) -> Result<Decoded, Undecodable> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(Undecodable::Body)?;
    let req: AdmissionRequest<DynamicObject> = review.try_into()?;
    let object = req.object.as_ref().map(|o| object_json(o, &req.kind));
    let old = req.old_object.as_ref().map(|o| object_json(o, &req.kind));
    let triage = triage(
        &req.operation,
        object.as_ref(),
        old.as_ref(),
        table,
        webhook,
    );
    Ok(Decoded {
        req,
        object,
        old,
        triage,
    })
}

/// The object of a review as JSON, with `apiVersion` and `kind` filled from the request
/// when the object omits them.
pub(crate) fn object_json(obj: &DynamicObject, req_kind: &kube::core::GroupVersionKind) -> Value {
    let mut v = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Some(m) = v.as_object_mut() {
        if !m.contains_key("apiVersion") {
            let api = if req_kind.group.is_empty() {
                req_kind.version.clone()
            } else {
                format!("{}/{}", req_kind.group, req_kind.version)
            };
            m.insert("apiVersion".into(), Value::String(api));
        }
        if !m.contains_key("kind") {
            m.insert("kind".into(), Value::String(req_kind.kind.clone()));
        }
    }
    v
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A captured review from tests/data/admission.
    pub(in crate::webhook) fn load(name: &str) -> AdmissionRequest<DynamicObject> {
        let path = format!("{}/tests/data/admission/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let review: AdmissionReview<DynamicObject> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        review.try_into().expect("a request")
    }

    fn objects(req: &AdmissionRequest<DynamicObject>) -> (Option<Value>, Option<Value>) {
        (
            req.object.as_ref().map(|o| object_json(o, &req.kind)),
            req.old_object.as_ref().map(|o| object_json(o, &req.kind)),
        )
    }

    fn triage_of(name: &str, webhook: Webhook) -> Triage {
        let req = load(name);
        let (obj, old) = objects(&req);
        triage(
            &req.operation,
            obj.as_ref(),
            old.as_ref(),
            &Table::builtin(),
            webhook,
        )
    }

    #[test]
    fn triage_table_over_captured_reviews() {
        use Webhook::*;
        let cases: &[(&str, Webhook, Triage)] = &[
            ("job-create.json", Validate, Triage::Check),
            ("job-create.json", Mutate, Triage::Check),
            ("job-create-missing-tag.json", Validate, Triage::Check),
            ("pod-create.json", Validate, Triage::Skip(Skip::Pod)),
            ("pod-create.json", Mutate, Triage::Skip(Skip::Pod)),
            (
                "job-owned-by-cronjob.json",
                Validate,
                Triage::Skip(Skip::ControllerOwned("CronJob/nightly-report".into())),
            ),
            (
                "job-skip-annotation.json",
                Validate,
                Triage::Skip(Skip::Annotation),
            ),
            ("cronjob-update.json", Validate, Triage::Check),
            ("cronjob-update.json", Mutate, Triage::Check),
            (
                "cronjob-update-suspend.json",
                Validate,
                Triage::Skip(Skip::TemplatesUnchanged),
            ),
            ("cronjob-update-suspend.json", Mutate, Triage::Check),
            (
                "job-update.json",
                Validate,
                Triage::Skip(Skip::ImmutableTemplate),
            ),
            (
                "configmap-create.json",
                Validate,
                Triage::Skip(Skip::UnknownKind),
            ),
            ("job-delete.json", Validate, Triage::Skip(Skip::NoObject)),
            ("pytorchjob-create.json", Validate, Triage::Check),
            ("jobset-create.json", Validate, Triage::Check),
            ("trainjob-create.json", Validate, Triage::Check),
            ("trainjob-create.json", Mutate, Triage::Skip(Skip::TrainJob)),
        ];
        for (file, webhook, want) in cases {
            assert_eq!(&triage_of(file, *webhook), want, "{file} {webhook:?}");
        }
    }

    #[test]
    fn opt_out_annotation_is_the_inject_one() {
        // The chart's matchConditions name the same annotation.
        assert_eq!(crate::k8s::inject::SKIP_ANNOTATION, "pullcheck.io/skip");
    }
}
