//! Find the gaps that keep a broken image from failing a workload fast.
//!
//! Every finding has a stable rule id ([`rule`]), the workload, a JSON pointer and a message
//! of at most 120 characters (the webhook reuses them as admission warnings, whose advised
//! limit that is). Batch defaults are from the batch/v1 API: backoffLimit 6, no deadline,
//! no TTL; a bare Pod's restartPolicy defaults to Always.

use serde::Serialize;
use serde_json::Value;

use super::CONTAINER_NAME;
use super::inject::{is_windows, skipped};
use super::policy::covers_pullcheck_codes;
use super::templates::{
    PodTemplateRef, Slot, Table, is_unpinned, namespace_and_name, pod_templates, template_images,
};
use crate::reference::Reference;

/// Stable rule ids; the text after each is what the rule means.
pub mod rule {
    /// A pod template (or Kubeflow replica) whose restartPolicy is not Never.
    pub const RESTART_POLICY: &str = "restart-policy-not-never";
    /// A Kubeflow replica with restartPolicy ExitCode (code 20 becomes permanent).
    pub const RESTART_POLICY_EXIT_CODE: &str = "restart-policy-exit-code";
    /// A Job without backoffLimit (default 6 retries).
    pub const BACKOFF_LIMIT: &str = "backoff-limit-unset";
    /// A Job without podFailurePolicy.
    pub const POD_FAILURE_POLICY: &str = "pod-failure-policy-missing";
    /// A podFailurePolicy that doesn't send pullcheck's permanent codes to FailJob.
    pub const POD_FAILURE_POLICY_CODES: &str = "pod-failure-policy-without-pullcheck";
    /// No activeDeadlineSeconds on the Job, the pod or the runPolicy.
    pub const ACTIVE_DEADLINE: &str = "active-deadline-unset";
    /// No ttlSecondsAfterFinished: finished Jobs and their pods linger.
    pub const TTL: &str = "ttl-unset";
    /// Kubeflow `runPolicy.backoffLimit` unset.
    pub const RUN_POLICY_BACKOFF_LIMIT: &str = "run-policy-backoff-limit-unset";
    /// Kubeflow `runPolicy.cleanPodPolicy` unset or None.
    pub const CLEAN_POD_POLICY: &str = "run-policy-clean-pod-policy";
    /// An image with imagePullPolicy Never: it must already be on the node.
    pub const IMAGE_PULL_NEVER: &str = "image-pull-never";
    /// A `latest` (or untagged) image with IfNotPresent: a node copy may be all there is.
    pub const IMAGE_LATEST_IF_NOT_PRESENT: &str = "image-latest-if-not-present";
    /// The pullcheck init container's image is not pinned by digest.
    pub const PULLCHECK_UNPINNED: &str = "pullcheck-image-unpinned";
    /// A pod template without the pullcheck init container.
    pub const PULLCHECK_MISSING: &str = "pullcheck-missing";
    /// An object of a kind the table lacks that holds containers or an `image` field: its
    /// images are not looked at (`--kinds` says where they are).
    pub const UNKNOWN_KIND: &str = "unknown-kind-with-images";
    /// A document without apiVersion and kind: nothing the API server would accept.
    pub const NOT_AN_OBJECT: &str = "not-a-kubernetes-object";
    /// A JobSet whose `failurePolicy` restarts every Job when one fails by its
    /// podFailurePolicy (pullcheck's FailJob rule) instead of failing the JobSet.
    pub const JOBSET_RESTARTS: &str = "jobset-restarts-on-pod-failure-policy";
}

/// One gap in one workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable rule id (one of the constants in [`rule`]).
    pub rule: &'static str,
    /// The workload's kind.
    pub kind: String,
    /// `metadata.namespace` ("" when unset).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// 1-based document number; `None` from [`lint_object`], set by stream callers.
    pub document: Option<usize>,
    /// JSON pointer to the field at fault (possibly absent from the object).
    pub path: String,
    /// One line, at most 120 characters.
    pub message: String,
}

struct Ctx<'a> {
    obj: &'a Value,
    out: Vec<Finding>,
}

/// Longest finding message, in characters: the webhook reuses findings as admission
/// warnings.
pub(crate) const MAX_MESSAGE_CHARS: usize = super::MAX_WARNING_CHARS;

impl Ctx<'_> {
    fn push(&mut self, rule: &'static str, path: impl Into<String>, message: impl Into<String>) {
        let (namespace, name) = namespace_and_name(self.obj);
        let kind = self
            .obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // Messages interpolate user values (restartPolicy, image names): cut to the
        // admission-warning limit here, once, rather than trusting every caller.
        let message = super::cut_chars(&message.into(), MAX_MESSAGE_CHARS);
        self.out.push(Finding {
            rule,
            kind,
            namespace,
            name,
            document: None,
            path: path.into(),
            message,
        });
    }

    fn has(&self, pointer: &str) -> bool {
        self.obj.pointer(pointer).is_some_and(|v| !v.is_null())
    }

    fn str(&self, pointer: &str) -> Option<&str> {
        self.obj.pointer(pointer).and_then(Value::as_str)
    }
}

/// The findings for one object (items of a `v1 List` included, their paths under
/// `/items/N`); none for workloads annotated `pullcheck.io/skip: "true"`, Windows pod
/// templates (with their Job: pullcheck can't run there), and unknown kinds without
/// containers or image fields (a ConfigMap, a Service).
pub fn lint_object(obj: &Value, table: &Table) -> Vec<Finding> {
    if super::is_list(obj) {
        return super::objects(obj)
            .into_iter()
            .flat_map(|(at, item)| {
                lint_one(item, table).into_iter().map(move |mut f| {
                    f.path = format!("{at}{}", f.path);
                    f
                })
            })
            .collect();
    }
    lint_one(obj, table)
}

fn lint_one(obj: &Value, table: &Table) -> Vec<Finding> {
    let mut cx = Ctx {
        obj,
        out: Vec::new(),
    };
    // Reported rather than ignored like an unknown kind: `kubectl apply` refuses such a
    // document, so a strict lint that passed it would pass a broken file.
    if let Some(why) = super::not_an_object(obj) {
        cx.push(rule::NOT_AN_OBJECT, "", why);
        return cx.out;
    }
    if skipped(obj) {
        return Vec::new();
    }
    if table.lookup(obj).is_none() {
        // Reported: a strict lint that passed it would pass images nobody looked at.
        if let Some(holds) = super::templates::unknown_kind_holds(obj, table) {
            let kind = super::templates::unknown_kind(obj);
            // --kinds can't name a runtime's templates: no fix to offer there yet.
            let fix = match holds {
                super::templates::Holds::Runtime => "",
                _ => "; add it with --kinds",
            };
            cx.push(
                rule::UNKNOWN_KIND,
                "/kind",
                format!("{kind} {}: its images are not checked{fix}", holds.phrase()),
            );
        }
        return cx.out;
    }
    if let Some(at) = super::templates::uncovered_image_place(obj, table) {
        cx.push(
            rule::UNKNOWN_KIND,
            &at,
            "an image outside the kind's pod template paths: it is not checked; fix the paths with --kinds".to_string(),
        );
    }
    let templates: Vec<PodTemplateRef> = pod_templates(obj, table)
        .into_iter()
        .filter(|t| {
            obj.pointer(&t.pointer)
                .is_some_and(|v| !is_windows(v) && !skipped(v))
        })
        .collect();
    for t in &templates {
        template_findings(&mut cx, t);
    }
    let mut seen: Vec<&str> = Vec::new();
    for t in &templates {
        if let Some(job) = t.job_spec.as_deref().filter(|j| !seen.contains(j)) {
            seen.push(job);
            job_findings(&mut cx, job, &t.pointer);
        }
    }
    if let Some(rp) = templates.iter().find_map(|t| t.run_policy.clone()) {
        run_policy_findings(&mut cx, &rp);
    }
    jobset_findings(&mut cx);
    cx.out
}

/// True for `latest` or an untagged (hence `latest`) image that isn't pinned by digest: the
/// tag containerd pulls ([`Reference::for_pull`]) is `latest`.
fn is_latest(image: &str) -> bool {
    Reference::parse(image).is_ok_and(|r| r.for_pull().tag() == Some("latest"))
}

fn template_findings(cx: &mut Ctx<'_>, t: &PodTemplateRef) {
    let Some(template) = cx.obj.pointer(&t.pointer) else {
        return;
    };
    let uses = template_images(template, &t.pointer);
    let ours = uses
        .iter()
        .find(|u| u.slot == Slot::InitContainer && u.container == CONTAINER_NAME);
    match ours {
        None => cx.push(
            rule::PULLCHECK_MISSING,
            format!("{}/spec/initContainers", t.pointer),
            "no pullcheck init container: run `pullcheck inject` so a missing image fails the pod",
        ),
        Some(u) if is_unpinned(&u.image) => cx.push(
            rule::PULLCHECK_UNPINNED,
            u.pointer.clone(),
            "pullcheck image not pinned by digest: mirror it next to the workload and pin @sha256",
        ),
        Some(_) => {}
    }
    // `inject --transient restart` gives the pullcheck container its own `restartPolicy:
    // Never` (Kubernetes 1.35 container restart rules): a permanent exit then fails the pod
    // whatever the pod's restartPolicy, so OnFailure no longer delays it.
    let ours_never = ours
        .and_then(|u| u.pointer.strip_suffix("/image"))
        .is_some_and(|c| cx.str(&format!("{c}/restartPolicy")) == Some("Never"));
    if t.run_policy.is_none() && !ours_never {
        let path = format!("{}/spec/restartPolicy", t.pointer);
        let default = if t.job_spec.is_some() {
            "unset"
        } else {
            "Always (default)"
        };
        let rp = cx.str(&path).unwrap_or(default).to_string();
        if rp != "Never" {
            let msg = format!(
                "restartPolicy {rp}: a failed init container restarts instead of failing the pod"
            );
            cx.push(rule::RESTART_POLICY, path, msg);
        }
    } else if t.run_policy.is_some() {
        let replica = t.pointer.strip_suffix("/template").unwrap_or(&t.pointer);
        let path = format!("{replica}/restartPolicy");
        if let Some((judged, msg)) = super::policy::replica_restart(cx.str(&path)) {
            let rule = match judged {
                super::policy::ReplicaRestart::ExitCodeFinal => rule::RESTART_POLICY_EXIT_CODE,
                super::policy::ReplicaRestart::Restarts => rule::RESTART_POLICY,
            };
            cx.push(rule, path, msg);
        }
    }
    for u in &uses {
        let image = short(&u.image);
        if !u.is_pulled() {
            let msg = format!(
                "{}: imagePullPolicy Never: image must already be on the node; not checked",
                image
            );
            cx.push(
                rule::IMAGE_PULL_NEVER,
                policy_pointer(&u.pointer, u.slot),
                msg,
            );
            continue;
        }
        match u.pull_policy.as_deref() {
            Some("IfNotPresent") if is_latest(&u.image) => {
                let msg = format!(
                    "{}: latest with IfNotPresent may run a node-only copy; pin a tag or digest",
                    image
                );
                cx.push(
                    rule::IMAGE_LATEST_IF_NOT_PRESENT,
                    policy_pointer(&u.pointer, u.slot),
                    msg,
                );
            }
            _ => {}
        }
    }
}

/// Pointer to the pull-policy field beside an image field.
fn policy_pointer(image_pointer: &str, slot: Slot) -> String {
    match slot {
        Slot::ImageVolume => image_pointer.replace("/image/reference", "/image/pullPolicy"),
        _ => format!("{}PullPolicy", image_pointer),
    }
}

/// An image shortened so messages stay within 120 characters.
fn short(image: &str) -> String {
    if image.chars().count() <= 40 {
        image.to_string()
    } else {
        let tail: String = image
            .chars()
            .rev()
            .take(39)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

/// True for a Job whose first failed pod fails it: `backoffLimit: 0` and a pod template
/// with `restartPolicy: Never` (with OnFailure the container restarts in place first).
fn fails_on_first_pod(cx: &Ctx<'_>, job: &str, template: &str) -> bool {
    cx.obj
        .pointer(&format!("{job}/backoffLimit"))
        .and_then(Value::as_i64)
        == Some(0)
        && cx.str(&format!("{template}/spec/restartPolicy")) == Some("Never")
}

fn job_findings(cx: &mut Ctx<'_>, job: &str, template: &str) {
    if !cx.has(&format!("{job}/backoffLimit")) {
        cx.push(
            rule::BACKOFF_LIMIT,
            format!("{job}/backoffLimit"),
            "backoffLimit unset: the default 6 retries a failed check for minutes",
        );
    }
    match cx
        .obj
        .pointer(&format!("{job}/podFailurePolicy"))
        .filter(|p| !p.is_null())
    {
        // restartPolicy Never with backoffLimit 0: the first failed pod, whatever its exit
        // code, fails the Job, which is all a FailJob rule would add (README's fail-fast).
        None if fails_on_first_pod(cx, job, template) => {}
        None => cx.push(
            rule::POD_FAILURE_POLICY,
            format!("{job}/podFailurePolicy"),
            "no podFailurePolicy: pullcheck's permanent codes 10-15 don't fail the Job at once",
        ),
        Some(p) if !covers_pullcheck_codes(p) => cx.push(
            rule::POD_FAILURE_POLICY_CODES,
            format!("{job}/podFailurePolicy/rules"),
            "podFailurePolicy lacks a FailJob rule for container pullcheck, codes 10-15",
        ),
        Some(_) => {}
    }
    if !cx.has(&format!("{job}/activeDeadlineSeconds"))
        && !cx.has(&format!("{template}/spec/activeDeadlineSeconds"))
    {
        cx.push(
            rule::ACTIVE_DEADLINE,
            format!("{job}/activeDeadlineSeconds"),
            "no activeDeadlineSeconds: nothing bounds a pod stuck pulling an image",
        );
    }
    if !cx.has(&format!("{job}/ttlSecondsAfterFinished"))
        && !cx.has("/spec/ttlSecondsAfterFinished")
    {
        cx.push(
            rule::TTL,
            format!("{job}/ttlSecondsAfterFinished"),
            "no ttlSecondsAfterFinished: finished Jobs and pods linger",
        );
    }
}

/// A JobSet fails fast on a failed check only when a child Job that failed by its
/// podFailurePolicy (reason `PodFailurePolicy`) fails the JobSet. Without `failurePolicy`
/// the first failed Job does. With one, its rules are tried in order and the first whose
/// `onJobFailureReasons` matches (empty: any reason) acts; none matching is `RestartJobSet`
/// (the JobSet CRD's `failurePolicy.rules` description, jobset v0.12.0). Message patterns
/// are not weighed: a rule that only matches other messages is still reported as a match
/// here, so this errs towards silence, never towards a false finding.
fn jobset_findings(cx: &mut Ctx<'_>) {
    let is_jobset = cx.str("/kind") == Some("JobSet")
        && cx
            .str("/apiVersion")
            .is_some_and(|v| v.starts_with("jobset.x-k8s.io/"));
    let Some(policy) = cx.obj.pointer("/spec/failurePolicy").filter(|_| is_jobset) else {
        return;
    };
    let max_restarts = policy
        .get("maxRestarts")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let first = policy
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|r| {
            r.get("onJobFailureReasons")
                .and_then(Value::as_array)
                .is_none_or(|reasons| {
                    reasons.is_empty() || reasons.iter().any(|x| x == "PodFailurePolicy")
                })
        });
    let action = first
        .and_then(|r| r.get("action"))
        .and_then(Value::as_str)
        .unwrap_or("RestartJobSet (no rule)");
    let restarts = match action {
        "FailJobSet" => return,
        "RestartJobSetAndIgnoreMaxRestarts" | "RestartJobAndIgnoreMaxRestarts" => {
            "without limit".to_string()
        }
        _ if max_restarts == 0 => return,
        _ => format!("up to {max_restarts} restarts"),
    };
    cx.push(
        rule::JOBSET_RESTARTS,
        "/spec/failurePolicy/rules",
        format!(
            "PodFailurePolicy Job failures get {action}, {restarts}: add first a FailJobSet rule for them"
        ),
    );
}

fn run_policy_findings(cx: &mut Ctx<'_>, rp: &str) {
    if !cx.has(&format!("{rp}/backoffLimit")) {
        cx.push(
            rule::RUN_POLICY_BACKOFF_LIMIT,
            format!("{rp}/backoffLimit"),
            "runPolicy.backoffLimit unset: failed workers may restart forever; set it (e.g. 0)",
        );
    }
    let clean = cx.str(&format!("{rp}/cleanPodPolicy")).map(str::to_string);
    if clean.as_deref().is_none_or(|c| c == "None") {
        let msg = format!(
            "cleanPodPolicy {}: pods of a failed job keep running and holding resources; use Running",
            clean.as_deref().unwrap_or("unset (None)")
        );
        cx.push(rule::CLEAN_POD_POLICY, format!("{rp}/cleanPodPolicy"), msg);
    }
    if !cx.has(&format!("{rp}/activeDeadlineSeconds")) {
        cx.push(
            rule::ACTIVE_DEADLINE,
            format!("{rp}/activeDeadlineSeconds"),
            "no runPolicy.activeDeadlineSeconds: nothing bounds a stuck job",
        );
    }
    if !cx.has(&format!("{rp}/ttlSecondsAfterFinished")) {
        cx.push(
            rule::TTL,
            format!("{rp}/ttlSecondsAfterFinished"),
            "no runPolicy.ttlSecondsAfterFinished: finished jobs linger",
        );
    }
}

/// Lint a whole YAML stream; findings carry their document number.
pub fn lint_stream(text: &str, table: &Table) -> Result<Vec<Finding>, super::yaml::YamlError> {
    Ok(lint_documents(&super::yaml::parse_documents(text)?, table))
}

/// Lint parsed documents; findings carry their document number.
pub(crate) fn lint_documents(docs: &[super::yaml::Document], table: &Table) -> Vec<Finding> {
    let mut out = Vec::new();
    for d in docs {
        out.extend(lint_object(&d.value, table).into_iter().map(|mut f| {
            f.document = Some(d.number);
            f
        }));
    }
    out
}
