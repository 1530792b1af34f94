//! The whole admission decision, as pure functions: no I/O, no clock.
//!
//! - [`triage`]: is this object checked at all? Pods, objects a controller owns, opted-out
//!   workloads, unknown kinds and updates of templates that can't change are let through
//!   untouched (rejecting what a controller creates makes it loop on FailedCreate);
//! - [`validate`]: the verdicts → allow, deny (one line per failing image:
//!   `<container>: <reference>: <verdict> (<detail>)`) or allow with warnings (warn mode,
//!   fail-open, lint findings), every warning at most [`MAX_WARNING_CHARS`] characters;
//! - [`mutate`]: optional digest pins, then the same injection as `pullcheck inject`, sent as
//!   the JSON patch between the object as received and as rewritten.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::Value;

use super::config::Mode;
use crate::engine::Outcome;
use crate::k8s::inject::{InjectOptions, SKIP_ANNOTATION, inject_object, skipped};
use crate::k8s::lint::lint_object;
use crate::k8s::templates::{Table, is_unpinned, pod_templates};
use crate::verdict::Verdict;

pub use crate::k8s::MAX_WARNING_CHARS;

/// At most this many warnings are returned; the API server truncates long lists anyway.
pub const MAX_WARNINGS: usize = 30;

/// Which endpoint is answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    /// `/validate`.
    Validate,
    /// `/mutate`.
    Mutate,
}

impl Webhook {
    /// `validate` or `mutate` (metrics label).
    pub fn as_str(self) -> &'static str {
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
}

impl Skip {
    /// Short reason (logs, metrics label).
    pub fn as_str(&self) -> &'static str {
        match self {
            Skip::NoObject => "no_object",
            Skip::Operation => "operation",
            Skip::UnknownKind => "unknown_kind",
            Skip::Pod => "pod",
            Skip::ControllerOwned(_) => "controller_owned",
            Skip::Annotation => "skip_annotation",
            Skip::ImmutableTemplate => "immutable_template",
            Skip::TemplatesUnchanged => "templates_unchanged",
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
pub fn is_pod(obj: &Value) -> bool {
    api_and_kind(obj) == ("v1", "Pod")
}

/// True for batch CronJobs: the one built-in workload whose pod template may change after
/// creation (a Job's template is immutable; JobSet and Kubeflow jobs are treated alike).
pub fn template_is_mutable(obj: &Value) -> bool {
    let (api, kind) = api_and_kind(obj);
    kind == "CronJob" && api.starts_with("batch/")
}

/// `Kind/name` of the controller owner, if any.
pub fn controller_owner(obj: &Value) -> Option<String> {
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
pub fn triage(
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
    if table.lookup(obj).is_none() {
        return Triage::Skip(Skip::UnknownKind);
    }
    if let Some(owner) = controller_owner(obj) {
        return Triage::Skip(Skip::ControllerOwned(owner));
    }
    if skipped(obj) {
        return Triage::Skip(Skip::Annotation);
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

/// The lint findings of a checked object, as the validating answer's extra warnings.
pub fn lint_notes(obj: &Value, table: &Table) -> Vec<String> {
    lint_object(obj, table)
        .into_iter()
        .map(|f| f.message)
        .collect()
}

fn templates_of<'a>(obj: &'a Value, table: &Table) -> Vec<Option<&'a Value>> {
    pod_templates(obj, table)
        .iter()
        .map(|t| obj.pointer(&t.pointer))
        .collect()
}

/// The result of resolving one image.
#[derive(Debug, Clone)]
pub enum Checked {
    /// The engine's verdict (a transient one counts as not verified).
    Done(Box<Outcome>),
    /// No verdict in time, or the credentials could not be read: why.
    NotVerified(String),
}

/// One image use in the object, with its result.
#[derive(Debug, Clone)]
pub struct ImageCheck {
    /// Container (or image volume) name.
    pub container: String,
    /// The image as written.
    pub image: String,
    /// JSON pointer to the image field.
    pub pointer: String,
    /// What resolving it gave.
    pub result: Checked,
}

impl ImageCheck {
    /// True when the image is known not to be pullable (deny in enforce mode).
    pub fn failed(&self) -> bool {
        matches!(&self.result, Checked::Done(o) if !matches!(o.verdict, Verdict::Pullable | Verdict::Transient))
    }

    /// True when there is no definite verdict (fail-open / fail-closed applies).
    pub fn unverified(&self) -> bool {
        match &self.result {
            Checked::Done(o) => o.verdict == Verdict::Transient,
            Checked::NotVerified(_) => true,
        }
    }

    /// `<container>: <reference>: <verdict> (<detail>)`.
    pub fn line(&self) -> String {
        let (verdict, detail) = match &self.result {
            Checked::Done(o) => (o.verdict.as_str(), o.detail.as_str()),
            Checked::NotVerified(why) => (Verdict::Transient.as_str(), why.as_str()),
        };
        format!("{}: {}: {verdict} ({detail})", self.container, self.image)
    }
}

/// How the validating webhook decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Enforce (deny) or warn.
    pub mode: Mode,
    /// Deny when an image was not verified (default: admit and warn).
    pub fail_closed: bool,
}

/// Cut a warning to [`MAX_WARNING_CHARS`] characters (an ellipsis marks the cut).
pub fn fit(text: &str) -> String {
    crate::k8s::cut_chars(&text.replace(['\n', '\r'], " "), MAX_WARNING_CHARS)
}

fn push_unique(out: &mut Vec<String>, line: String) {
    if !out.contains(&line) {
        out.push(line);
    }
}

fn finish_warnings(mut resp: AdmissionResponse, warnings: Vec<String>) -> AdmissionResponse {
    let mut fitted: Vec<String> = Vec::new();
    for w in warnings {
        push_unique(&mut fitted, fit(&w));
    }
    fitted.truncate(MAX_WARNINGS);
    resp.warnings = (!fitted.is_empty()).then_some(fitted);
    resp
}

/// The validating answer. `notes` are extra warnings (lint findings, unreadable pull
/// secrets), already one line each.
pub fn validate(
    req: &AdmissionRequest<DynamicObject>,
    checks: &[ImageCheck],
    notes: &[String],
    policy: Policy,
) -> AdmissionResponse {
    let mut deny: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for c in checks {
        if c.failed() {
            match policy.mode {
                Mode::Enforce => push_unique(&mut deny, c.line()),
                Mode::Warn => push_unique(&mut warnings, c.line()),
            }
        } else if c.unverified() {
            if policy.fail_closed && policy.mode == Mode::Enforce {
                push_unique(&mut deny, c.line());
            } else {
                let why = match &c.result {
                    Checked::Done(o) => o.detail.clone(),
                    Checked::NotVerified(w) => w.clone(),
                };
                push_unique(
                    &mut warnings,
                    format!(
                        "not verified, admitted: {}: {} ({why})",
                        c.container, c.image
                    ),
                );
            }
        } else if let Checked::Done(o) = &c.result {
            for w in &o.warnings {
                push_unique(&mut warnings, format!("{}: {w}", c.image));
            }
        }
    }
    warnings.extend(notes.iter().cloned());
    let resp = AdmissionResponse::from(req);
    let resp = if deny.is_empty() {
        resp
    } else {
        resp.deny(deny.join("\n"))
    };
    finish_warnings(resp, warnings)
}

/// Digest pins for the pullable images written without a digest: (pointer, `image@digest`).
/// The digest is the one the tag resolved to (an index stays an index, never a platform
/// child), so every node still picks its own platform.
pub fn pins(checks: &[ImageCheck]) -> Vec<(String, String)> {
    checks
        .iter()
        .filter_map(|c| match &c.result {
            Checked::Done(o) if o.verdict == Verdict::Pullable && is_unpinned(&c.image) => o
                .digest
                .as_ref()
                .map(|d| (c.pointer.clone(), format!("{}@{d}", c.image))),
            _ => None,
        })
        .collect()
}

/// The mutating answer: apply `pins`, inject the init container, and send the difference
/// as a JSON patch (none when nothing changed, as on a second pass).
pub fn mutate(
    req: &AdmissionRequest<DynamicObject>,
    before: &Value,
    pins: &[(String, String)],
    opts: &InjectOptions,
    table: &Table,
) -> AdmissionResponse {
    let mut after = before.clone();
    for (pointer, image) in pins {
        if let Some(slot) = after.pointer_mut(pointer) {
            *slot = Value::String(image.clone());
        }
    }
    let warnings: Vec<String> = inject_object(&mut after, opts, table)
        .into_iter()
        .map(|w| w.message)
        .collect();
    let patch = json_patch::diff(before, &after);
    let resp = AdmissionResponse::from(req);
    let resp = if patch.0.is_empty() {
        resp
    } else {
        match resp.clone().with_patch(patch) {
            Ok(r) => r,
            Err(e) => {
                return finish_warnings(
                    resp,
                    vec![format!("pullcheck could not encode its patch: {e}")],
                );
            }
        }
    };
    finish_warnings(resp, warnings)
}

/// The object of a review as JSON, with `apiVersion` and `kind` filled from the request
/// when the object omits them.
pub fn object_json(obj: &DynamicObject, req_kind: &kube::core::GroupVersionKind) -> Value {
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

/// Documented for the chart's `matchConditions`: the annotation that opts a workload out.
pub const OPT_OUT_ANNOTATION: &str = SKIP_ANNOTATION;

#[cfg(test)]
mod tests {
    use super::*;

    fn load(name: &str) -> AdmissionRequest<DynamicObject> {
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

    fn outcome(image: &str, verdict: Verdict, detail: &str, digest: Option<&str>) -> Outcome {
        let mut o = Outcome::new(image, verdict, detail.into());
        o.digest = digest.map(str::to_string);
        o
    }

    fn check(container: &str, image: &str, result: Checked) -> ImageCheck {
        ImageCheck {
            container: container.into(),
            image: image.into(),
            pointer: "/spec/template/spec/containers/0/image".into(),
            result,
        }
    }

    const ENFORCE: Policy = Policy {
        mode: Mode::Enforce,
        fail_closed: false,
    };

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
        ];
        for (file, webhook, want) in cases {
            assert_eq!(&triage_of(file, *webhook), want, "{file} {webhook:?}");
        }
    }

    #[test]
    fn captured_reviews_keep_uid_and_type_meta() {
        let req = load("job-create.json");
        let resp = validate(&req, &[], &[], ENFORCE);
        let review = serde_json::to_value(resp.into_review()).unwrap();
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(
            review["response"]["uid"],
            "6f0c3c1e-2d8a-4a43-9a55-0c2b1f6d7e01"
        );
        assert_eq!(review["response"]["allowed"], true);
        assert!(review["response"].get("warnings").is_none());
    }

    #[test]
    fn deny_has_one_line_per_failing_image() {
        let req = load("job-create-missing-tag.json");
        let checks = vec![
            check(
                "main",
                "r.example/app:v404",
                Checked::Done(Box::new(outcome(
                    "r.example/app:v404",
                    Verdict::NotFound,
                    "manifest unknown (x)",
                    None,
                ))),
            ),
            check(
                "sidecar",
                "r.example/side:v1",
                Checked::Done(Box::new(outcome(
                    "r.example/side:v1",
                    Verdict::Pullable,
                    "manifest found",
                    Some("sha256:aa"),
                ))),
            ),
            check(
                "init",
                "Bad_Ref",
                Checked::Done(Box::new(outcome(
                    "Bad_Ref",
                    Verdict::InvalidReference,
                    "invalid reference format",
                    None,
                ))),
            ),
            // The same image in a second template is one line, not two.
            check(
                "main",
                "r.example/app:v404",
                Checked::Done(Box::new(outcome(
                    "r.example/app:v404",
                    Verdict::NotFound,
                    "manifest unknown (x)",
                    None,
                ))),
            ),
        ];
        let resp = validate(&req, &checks, &[], ENFORCE);
        assert!(!resp.allowed);
        assert_eq!(
            resp.result.message,
            "main: r.example/app:v404: not_found (manifest unknown (x))\n\
             init: Bad_Ref: invalid_reference (invalid reference format)"
        );
        assert_eq!(resp.uid, req.uid);
    }

    #[test]
    fn warn_mode_admits_with_short_warnings() {
        let req = load("job-create-missing-tag.json");
        let long = "x".repeat(300);
        let checks = vec![check(
            "main",
            "r.example/app:v404",
            Checked::Done(Box::new(outcome(
                "r.example/app:v404",
                Verdict::NotFound,
                &long,
                None,
            ))),
        )];
        let policy = Policy {
            mode: Mode::Warn,
            fail_closed: true,
        };
        let resp = validate(&req, &checks, &["lint: backoffLimit unset".into()], policy);
        assert!(resp.allowed);
        let w = resp.warnings.unwrap();
        assert_eq!(w.len(), 2);
        assert!(
            w[0].starts_with("main: r.example/app:v404: not_found (xxx"),
            "{}",
            w[0]
        );
        assert_eq!(w[0].chars().count(), MAX_WARNING_CHARS);
        assert!(w[0].ends_with('…'));
        assert_eq!(w[1], "lint: backoffLimit unset");
    }

    #[test]
    fn unverified_images_fail_open_or_closed() {
        let req = load("job-create.json");
        let checks = vec![
            check(
                "main",
                "r.example/app:v1",
                Checked::NotVerified("no verdict within the 8s budget".into()),
            ),
            check(
                "side",
                "r.example/side:v1",
                Checked::Done(Box::new(outcome(
                    "r.example/side:v1",
                    Verdict::Transient,
                    "GET …: timed out",
                    None,
                ))),
            ),
        ];
        let open = validate(&req, &checks, &[], ENFORCE);
        assert!(open.allowed);
        assert_eq!(
            open.warnings.unwrap(),
            vec![
                "not verified, admitted: main: r.example/app:v1 (no verdict within the 8s budget)",
                "not verified, admitted: side: r.example/side:v1 (GET …: timed out)",
            ]
        );
        let closed = validate(
            &req,
            &checks,
            &[],
            Policy {
                mode: Mode::Enforce,
                fail_closed: true,
            },
        );
        assert!(!closed.allowed);
        assert_eq!(
            closed.result.message,
            "main: r.example/app:v1: transient (no verdict within the 8s budget)\n\
             side: r.example/side:v1: transient (GET …: timed out)"
        );
    }

    #[test]
    fn pins_use_the_resolved_digest_and_skip_digests_and_failures() {
        let checks = vec![
            check(
                "a",
                "r.example/app:v1",
                Checked::Done(Box::new(outcome(
                    "r.example/app:v1",
                    Verdict::Pullable,
                    "ok",
                    Some("sha256:11"),
                ))),
            ),
            check(
                "b",
                "r.example/app@sha256:22",
                Checked::Done(Box::new(outcome(
                    "r.example/app@sha256:22",
                    Verdict::Pullable,
                    "ok",
                    Some("sha256:22"),
                ))),
            ),
            check(
                "c",
                "r.example/gone:v1",
                Checked::Done(Box::new(outcome(
                    "r.example/gone:v1",
                    Verdict::NotFound,
                    "x",
                    None,
                ))),
            ),
        ];
        assert_eq!(
            pins(&checks),
            vec![(
                "/spec/template/spec/containers/0/image".to_string(),
                "r.example/app:v1@sha256:11".to_string()
            )]
        );
    }

    #[test]
    fn mutate_patch_applies_and_is_idempotent() {
        let req = load("job-create.json");
        let (obj, _) = objects(&req);
        let obj = obj.unwrap();
        let opts = InjectOptions {
            image: "r.example/pullcheck:v1@sha256:00".into(),
            ..Default::default()
        };
        let table = Table::builtin();
        let pin = vec![(
            "/spec/template/spec/containers/0/image".to_string(),
            "registry.pullcheck.test:5000/oci/app:v1@sha256:11".to_string(),
        )];
        let resp = mutate(&req, &obj, &pin, &opts, &table);
        assert!(resp.allowed);
        let patch: json_patch::Patch =
            serde_json::from_slice(resp.patch.as_ref().unwrap()).unwrap();
        let mut patched = obj.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        let inits = patched["spec"]["template"]["spec"]["initContainers"]
            .as_array()
            .unwrap();
        assert_eq!(inits[0]["name"], "pullcheck");
        assert_eq!(inits[0]["image"], "r.example/pullcheck:v1@sha256:00");
        assert_eq!(
            patched["spec"]["template"]["spec"]["containers"][0]["image"],
            "registry.pullcheck.test:5000/oci/app:v1@sha256:11"
        );
        let args: Vec<&str> = inits[0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            args.contains(&"registry.pullcheck.test:5000/oci/app:v1@sha256:11"),
            "{args:?}"
        );
        // A second pass over the patched object changes nothing.
        let again = mutate(&req, &patched, &[], &opts, &table);
        assert!(again.patch.is_none());
        let review = serde_json::to_value(resp.into_review()).unwrap();
        assert_eq!(review["response"]["patchType"], "JSONPatch");
    }

    #[test]
    fn fit_keeps_short_text_and_cuts_long_text() {
        assert_eq!(fit("short"), "short");
        assert_eq!(fit("a\nb"), "a b");
        let cut = fit(&"é".repeat(200));
        assert_eq!(cut.chars().count(), 120);
    }

    #[test]
    fn opt_out_annotation_is_the_inject_one() {
        assert_eq!(OPT_OUT_ANNOTATION, "pullcheck.io/skip");
    }
}
