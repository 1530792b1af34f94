//! A Kubeflow Trainer v2 TrainJob at its creation: read the runtime it names through the
//! API client, build the pod templates the trainer would build ([`crate::k8s::trainjob`]),
//! and resolve their images exactly as a Job's ([`super::resolve`]), so the same verdict
//! rules, modes and message shape apply.
//!
//! A runtime that can't be read (404, 403, a timeout, no API at all) or built from is never
//! a green result: it becomes one *not verified* entry naming the runtime
//! ([`Unchecked::Runtime`]), and the webhook's fail-open / fail-closed rule decides, as for
//! an image whose registry didn't answer: admitted with the warning
//! `not verified, admitted: runtimeRef: ClusterTrainingRuntime NAME (WHY)` by default,
//! denied with `--fail-closed`. A 404 is treated alike: the trainer's own webhook refuses a
//! TrainJob whose runtime doesn't exist when it is served, and pullcheck doesn't second-guess
//! it when it isn't (the runtime may be created next).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::WebhookState;
use super::answer_by;
use super::resolve::{images_of, resolve_templates};
use crate::k8s::trainjob::{RuntimeRef, build, runtime_ref};
use crate::platform::Platform;
use crate::webhook::platforms::template_platforms;
use crate::webhook::review::{Checked, ImageCheck, SecretAccess, Unchecked};

/// The container name the runtime's entry is shown under (`runtimeRef: …: transient (…)`).
const RUNTIME_ENTRY: &str = "runtimeRef";

/// The one entry for a runtime whose images can't be known: `runtime` is what it is shown
/// as (`ClusterTrainingRuntime NAME`), `why` the sentence after it.
pub(super) fn runtime_not_verified(runtime: &str, why: String) -> ImageCheck {
    ImageCheck {
        container: RUNTIME_ENTRY.to_string(),
        image: runtime.to_string(),
        pointer: "/spec/runtimeRef".to_string(),
        result: Checked::NotVerified(Unchecked::Runtime, why),
        secrets: SecretAccess::Read,
    }
}

/// Resolve the images of the TrainJob `obj` of `namespace` within the budget: the checks of
/// every pulled image of the built templates (in the runtime's replicatedJob order), or the
/// one not-verified entry of [`runtime_not_verified`], and the credential notes.
pub(super) async fn resolve_train_job(
    state: &WebhookState,
    obj: &Value,
    namespace: &str,
    started: Instant,
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let runtime: RuntimeRef = match runtime_ref(obj) {
        Ok(r) => r,
        Err(e) => return (vec![runtime_not_verified("?", e.to_string())], Vec::new()),
    };
    let shown = runtime.to_string();
    let Some(cluster) = &state.cluster else {
        let why = "no Kubernetes API to read it from (--apiserver)".to_string();
        return (vec![runtime_not_verified(&shown, why)], Vec::new());
    };
    let by = answer_by(started, budget);
    let read =
        tokio::time::timeout_at(by.into(), cluster.training_runtime(namespace, &runtime, by));
    let object = match read.await {
        Ok(Ok(Some(o))) => o,
        Ok(Ok(None)) => {
            let why = "not found; the trainer builds nothing for this TrainJob until it exists";
            return (vec![runtime_not_verified(&shown, why.into())], Vec::new());
        }
        Ok(Err(e)) => {
            let why = format!("not readable: {e}");
            return (vec![runtime_not_verified(&shown, why)], Vec::new());
        }
        Err(_) => {
            let why = format!(
                "not read within the webhook's {}s budget",
                budget.as_secs_f64()
            );
            return (vec![runtime_not_verified(&shown, why)], Vec::new());
        }
    };
    let built = match build(obj, &object) {
        Ok(b) => b,
        Err(e) => {
            return (
                vec![runtime_not_verified(&shown, e.to_string())],
                Vec::new(),
            );
        }
    };
    let platforms: Vec<Vec<Platform>> = built
        .iter()
        .map(|b| template_platforms(&b.template, &state.config.cluster_platforms))
        .collect();
    let templates: Vec<(&Value, &str)> = built
        .iter()
        .map(|b| (&b.template, b.pointer.as_str()))
        .collect();
    let (refs, pending) = images_of(&templates);
    resolve_templates(
        state, namespace, &refs, &platforms, pending, started, budget,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::config::Mode;
    use crate::webhook::review::{Policy, validate};

    #[test]
    fn an_unreadable_runtime_follows_the_fail_open_rule() {
        let req = crate::webhook::triage::tests::load("job-create.json");
        let check = runtime_not_verified(
            "ClusterTrainingRuntime torch",
            "not found; the trainer builds nothing for this TrainJob until it exists".into(),
        );
        assert!(check.unverified() && !check.failed());
        let open = validate(
            &req,
            std::slice::from_ref(&check),
            &[],
            Policy {
                mode: Mode::Enforce,
                fail_closed: false,
            },
        );
        assert!(open.allowed);
        assert_eq!(
            open.warnings,
            Some(vec![
                "not verified, admitted: runtimeRef: ClusterTrainingRuntime torch (not found; the trainer builds nothing for this TrainJob until it exists)".to_string()
            ])
        );
        let closed = validate(
            &req,
            &[check],
            &[],
            Policy {
                mode: Mode::Enforce,
                fail_closed: true,
            },
        );
        assert!(!closed.allowed);
        assert_eq!(
            closed.result.message,
            "runtimeRef: ClusterTrainingRuntime torch: transient (not found; the trainer builds nothing for this TrainJob until it exists)"
        );
    }
}
