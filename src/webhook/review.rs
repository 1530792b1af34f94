//! The admission answers, as pure functions from (request, verdicts, policy): no I/O, no
//! clock.
//!
//! - [`validate`]: the verdicts → allow, deny (one line per failing image:
//!   `<container>: <reference>: <verdict> (<detail>)`, first in `status.message`, then the
//!   lint findings) or allow with warnings (warn mode, fail-open, lint findings), within the
//!   warning budget below;
//! - [`mutate`]: optional digest pins, then the same injection as `pullcheck inject`, sent as
//!   the JSON patch between the object as received and as rewritten.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use serde_json::Value;

use super::config::Mode;
use crate::engine::Outcome;
use crate::k8s::inject::{InjectOptions, inject_object};
use crate::k8s::lint::lint_object;
use crate::k8s::templates::{Table, is_unpinned};
use crate::verdict::Verdict;

pub(crate) use crate::k8s::MAX_WARNING_CHARS;

/// At most this many warnings are returned; the API server truncates long lists anyway.
pub(crate) const MAX_WARNINGS: usize = 30;

/// Longest warning about one image's verdict (failing in warn mode, not verified, assumed
/// pullable), in characters: the API server cuts every warning to 256 runes once a request's warnings pass
/// 4096 (kube-apiserver `staging/src/k8s.io/apiserver/pkg/endpoints/filters/warning.go`,
/// `truncateItemRunes`), so this much always arrives whole, the reason included. Other
/// warnings (lint findings, notes) keep to the API's advised [`MAX_WARNING_CHARS`].
pub(crate) const MAX_VERDICT_WARNING_CHARS: usize = 256;

/// The characters of warnings one answer returns, at most. The API server keeps 4096 runes
/// of warnings per request (`truncateAtTotalRunes`, same file) for every admission webhook
/// together; Kueue's and JobSet's webhooks share that budget with pullcheck's two, so each
/// pullcheck answer stays within a quarter of it. Past the budget one last warning says how
/// many were left out.
pub(crate) const MAX_WARNINGS_TOTAL_CHARS: usize = 1024;

/// Room kept in the budget for the warning that says how many were left out.
const LEFT_OUT_RESERVE: usize = 100;

/// The lint findings of a checked object, as the validating answer's extra warnings.
pub fn lint_notes(obj: &Value, table: &Table) -> Vec<String> {
    lint_object(obj, table)
        .into_iter()
        .map(|f| f.message)
        .collect()
}

/// The result of resolving one image.
#[derive(Debug, Clone)]
pub(crate) enum Checked {
    /// The engine's verdict (a transient one counts as not verified).
    Done(Box<Outcome>),
    /// No verdict: why not, and the sentence that says so.
    NotVerified(Unchecked, String),
}

/// Why an image got no verdict. The Kueue admission check answers them differently: no
/// time is worth asking again (Retry); unreadable credentials are not (the same secrets
/// give the same answer), so the image is not proven unpullable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unchecked {
    /// The budget ran out (pull secrets or the registry too slow).
    NoTime,
    /// A pull secret could not be read or decoded, and the image was not pullable with
    /// the others.
    Credentials,
    /// A TrainJob's training runtime could not be read (404, 403, timeout) or built from,
    /// so none of its images is known; the entry names the runtime instead of an image.
    Runtime,
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
    pub(crate) result: Checked,
    /// Whether every pull secret the template names could be read.
    pub(crate) secrets: SecretAccess,
}

/// Whether the pull secrets of an image's template could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretAccess {
    /// All of them were read, or none was needed (or the check never got that far).
    Read,
    /// The API refused (403) one or more, and the image was checked without them
    /// ([`crate::webhook::config::RefusedSecrets::CheckWithout`]).
    Refused,
}

impl ImageCheck {
    /// True when the image is known not to be pullable (deny in enforce mode).
    pub(crate) fn failed(&self) -> bool {
        matches!(&self.result, Checked::Done(o) if !matches!(o.verdict, Verdict::Pullable | Verdict::Transient))
    }

    /// True when there is no definite verdict (fail-open / fail-closed applies).
    pub(crate) fn unverified(&self) -> bool {
        match &self.result {
            Checked::Done(o) => o.verdict == Verdict::Transient,
            Checked::NotVerified(..) => true,
        }
    }

    /// `<container>: <reference>: <verdict> (<detail>)`.
    pub(crate) fn line(&self) -> String {
        let (verdict, detail) = match &self.result {
            Checked::Done(o) => (o.verdict.as_str(), o.detail.as_str()),
            Checked::NotVerified(_, why) => (Verdict::Transient.as_str(), why.as_str()),
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
pub(crate) fn fit(text: &str) -> String {
    fit_to(text, MAX_WARNING_CHARS)
}

fn fit_to(text: &str, max: usize) -> String {
    crate::k8s::cut_chars(&text.replace(['\n', '\r'], " "), max)
}

fn push_unique(out: &mut Vec<String>, line: String) {
    if !out.contains(&line) {
        out.push(line);
    }
}

/// One warning of an answer, by how long it may be.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Warning {
    /// About one image's verdict (failing in warn mode, assumed pullable, a fallback
    /// platform): up to [`MAX_VERDICT_WARNING_CHARS`].
    Image(String),
    /// `<container>: <image> (<why>)` of an image not verified (fail-open), as long.
    Unverified(String),
    /// Anything else (lint findings, notes): up to [`MAX_WARNING_CHARS`].
    Note(String),
}

impl Warning {
    fn fitted(&self) -> String {
        match self {
            Warning::Image(t) => fit_to(t, MAX_VERDICT_WARNING_CHARS),
            Warning::Unverified(t) => fit_to(
                &format!("not verified, admitted: {t}"),
                MAX_VERDICT_WARNING_CHARS,
            ),
            Warning::Note(t) => fit(t),
        }
    }

    /// The line under a denial: nothing there is admitted.
    fn under_denial(&self) -> String {
        match self {
            Warning::Unverified(t) => {
                fit_to(&format!("not verified: {t}"), MAX_VERDICT_WARNING_CHARS)
            }
            other => other.fitted(),
        }
    }
}

/// The warnings as sent: each fitted, duplicates dropped, in order until
/// [`MAX_WARNINGS`] or [`MAX_WARNINGS_TOTAL_CHARS`] is reached, then one warning counting
/// the rest.
fn budgeted(warnings: &[Warning]) -> Vec<String> {
    let mut fitted: Vec<String> = Vec::new();
    for w in warnings {
        push_unique(&mut fitted, w.fitted());
    }
    let mut out = Vec::new();
    let mut used = 0;
    for (i, w) in fitted.iter().enumerate() {
        let n = w.chars().count();
        let last = i + 1 == fitted.len();
        let room = if last {
            MAX_WARNINGS_TOTAL_CHARS
        } else {
            MAX_WARNINGS_TOTAL_CHARS - LEFT_OUT_RESERVE
        };
        if used + n > room || out.len() + 1 == MAX_WARNINGS && !last {
            out.push(format!(
                "pullcheck: {} more warnings left out, to leave other webhooks room; \
pullcheck lint and check show them",
                fitted.len() - i
            ));
            return out;
        }
        used += n;
        out.push(w.clone());
    }
    out
}

fn finish_warnings(mut resp: AdmissionResponse, warnings: &[Warning]) -> AdmissionResponse {
    let sent = budgeted(warnings);
    resp.warnings = (!sent.is_empty()).then_some(sent);
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
    let mut warnings: Vec<Warning> = Vec::new();
    for c in checks {
        if c.failed() {
            match policy.mode {
                Mode::Enforce => push_unique(&mut deny, c.line()),
                Mode::Warn => warnings.push(Warning::Image(c.line())),
            }
        } else if c.unverified() {
            if policy.fail_closed && policy.mode == Mode::Enforce {
                push_unique(&mut deny, c.line());
            } else {
                let why = match &c.result {
                    Checked::Done(o) => o.detail.clone(),
                    Checked::NotVerified(_, w) => w.clone(),
                };
                warnings.push(Warning::Unverified(format!(
                    "{}: {} ({why})",
                    c.container, c.image
                )));
            }
        } else if let Checked::Done(o) = &c.result {
            for w in &o.warnings {
                warnings.push(Warning::Image(format!("{}: {w}", c.image)));
            }
        }
    }
    warnings.extend(notes.iter().cloned().map(Warning::Note));
    let resp = AdmissionResponse::from(req);
    if deny.is_empty() {
        return finish_warnings(resp, &warnings);
    }
    // kubectl prints warnings before the error: sent as warnings, the findings would bury
    // the reason for the denial. They follow it in the message instead, each on its line.
    let mut message = deny.join("\n");
    let mut also: Vec<String> = Vec::new();
    for w in &warnings {
        push_unique(&mut also, w.under_denial());
    }
    also.truncate(MAX_WARNINGS);
    if !also.is_empty() {
        message.push_str("\nalso (not why it was denied):");
        for a in &also {
            message.push_str("\n- ");
            message.push_str(a);
        }
    }
    resp.deny(message)
}

/// Digest pins for the pullable images written without a digest: (pointer, `image@digest`).
/// The digest is the one the tag resolved to (an index stays an index, never a platform
/// child), so every node still picks its own platform.
pub(crate) fn pins(checks: &[ImageCheck]) -> Vec<(String, String)> {
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
    let warnings: Vec<Warning> = inject_object(&mut after, opts, table)
        .into_iter()
        .map(|w| Warning::Note(w.message))
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
                    &[Warning::Note(format!(
                        "pullcheck could not encode its patch: {e}"
                    ))],
                );
            }
        }
    };
    finish_warnings(resp, &warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::triage::object_json;
    use crate::webhook::triage::tests::load;

    fn objects(req: &AdmissionRequest<DynamicObject>) -> (Option<Value>, Option<Value>) {
        (
            req.object.as_ref().map(|o| object_json(o, &req.kind)),
            req.old_object.as_ref().map(|o| object_json(o, &req.kind)),
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
            secrets: SecretAccess::Read,
        }
    }

    const ENFORCE: Policy = Policy {
        mode: Mode::Enforce,
        fail_closed: false,
    };

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
        assert_eq!(resp.warnings, None);
    }

    /// kubectl prints warnings before the error, so a denial carries none: the verdict comes
    /// first in `status.message`, the lint findings and notes after it.
    #[test]
    fn a_denial_puts_the_verdict_first_and_the_findings_after_it() {
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
                "side",
                "r.example/side:v1",
                Checked::NotVerified(Unchecked::NoTime, "no verdict within the 8s budget".into()),
            ),
        ];
        let notes = [
            "lint: backoffLimit unset".to_string(),
            "lint: no podFailurePolicy".to_string(),
        ];
        let resp = validate(&req, &checks, &notes, ENFORCE);
        assert!(!resp.allowed);
        assert_eq!(resp.warnings, None);
        assert_eq!(
            resp.result.message,
            "main: r.example/app:v404: not_found (manifest unknown (x))\n\
             also (not why it was denied):\n\
             - not verified: side: r.example/side:v1 (no verdict within the 8s budget)\n\
             - lint: backoffLimit unset\n\
             - lint: no podFailurePolicy"
        );
    }

    /// Every warning arrives whole: a verdict within the API server's 256-rune item limit,
    /// a note within 120, and the answer within 1 KiB, the rest counted in one last warning.
    #[test]
    fn warnings_keep_to_the_api_servers_budget() {
        let req = load("job-create-missing-tag.json");
        let reason = format!("manifest unknown ({})", "y".repeat(200));
        let checks = vec![check(
            "main",
            "r.example/app:v404",
            Checked::Done(Box::new(outcome(
                "r.example/app:v404",
                Verdict::NotFound,
                &reason,
                None,
            ))),
        )];
        let notes: Vec<String> = (0..20)
            .map(|i| format!("lint {i:02}: {}", "n".repeat(100)))
            .collect();
        let policy = Policy {
            mode: Mode::Warn,
            fail_closed: false,
        };
        let w = validate(&req, &checks, &notes, policy).warnings.unwrap();
        assert_eq!(w[0].chars().count(), MAX_VERDICT_WARNING_CHARS);
        assert!(w[0].starts_with("main: r.example/app:v404: not_found (manifest unknown (yyy"));
        // 256 + 6 notes of 109 = 910; a seventh would pass 1024 - 100.
        assert_eq!(w.len(), 8, "{w:#?}");
        assert_eq!(w[6], format!("lint 05: {}", "n".repeat(100)));
        assert_eq!(
            w[7],
            "pullcheck: 14 more warnings left out, to leave other webhooks room; pullcheck lint \
and check show them"
        );
        let total: usize = w.iter().map(|x| x.chars().count()).sum();
        assert!(total <= MAX_WARNINGS_TOTAL_CHARS, "{total}");
        // Within the budget, nothing is left out.
        let few = validate(&req, &checks, &notes[..2], policy)
            .warnings
            .unwrap();
        assert_eq!(few.len(), 3);
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
        assert_eq!(w[0].chars().count(), MAX_VERDICT_WARNING_CHARS);
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
                Checked::NotVerified(Unchecked::NoTime, "no verdict within the 8s budget".into()),
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
}
