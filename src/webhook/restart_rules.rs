//! Which `--transient` action the webhook writes: whether this API server keeps container
//! restart rules (KEP-5307), from its version and, where configured, a server-side dry run.
//!
//! The version alone can't tell. A 1.35 API server with the `ContainerRestartRules` gate
//! turned off accepts an init container's `restartPolicy: Never` and `restartPolicyRules`
//! and silently drops both (measured on kube-apiserver v1.35.4 started with
//! `--feature-gates=ContainerRestartRules=false`: the dry-run answer carries neither field;
//! the dropping is `dropContainerRestartRules` in kubernetes `pkg/api/pod/util.go`). A dropped
//! rule is not dangerous (the pod then fails on exit 20 and the podFailurePolicy `Count`
//! rule retries it, which is `count`), but the webhook would be promising what the cluster
//! won't do. So where the version allows restart rules and `--probe-namespace` is set, the
//! webhook creates, with `dryRun=All` (nothing is stored, nothing runs), a Pod whose init
//! container is the one it injects, and reads back what the server would have stored.
//!
//! The probe needs `create` on pods in that namespace. The chart grants it there only, and
//! a ValidatingAdmissionPolicy denies the webhook's ServiceAccount any pod create that is
//! not a dry run (charts/pullcheck/templates/restart-rules-probe.yaml).

use std::time::Instant;

use serde_json::{Value, json};

use super::cluster::Cluster;
use crate::k8s::container::{Handed, InjectOptions, init_container};
use crate::k8s::{CONTAINER_NAME, TransientAction};
use crate::k8s::{KubernetesVersion, RestartAsk, restart_rules_allowed};

/// Where the dry-run probe Pod is created (`--probe-namespace`, `--probe-service-account`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    /// The namespace (the webhook's own, in the chart).
    pub namespace: String,
    /// The probe Pod's ServiceAccount: the ServiceAccount admission plugin refuses a Pod
    /// whose ServiceAccount doesn't exist, even in a dry run.
    pub service_account: String,
}

/// What the dry run says about the restart fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProbeAnswer {
    /// The server would store both fields as sent.
    Kept,
    /// The server accepted the Pod without them (the feature gate is off).
    Dropped,
    /// The server refused the Pod as invalid (HTTP 422), with its message: an API server
    /// that doesn't know the fields' values (1.33 and older).
    Refused(String),
    /// No answer about the fields: no permission, the namespace or ServiceAccount missing,
    /// another admission webhook refusing the Pod, or the fields changed by a mutating
    /// webhook. The version decides.
    Inconclusive(String),
}

/// The probe Pod: the init container `/mutate` writes with `--transient restart` (no images
/// to check), a main container from the same image, `pullcheck.io/skip` so no pullcheck
/// webhook or watch acts on it, and no ServiceAccount token.
pub(crate) fn probe_pod(opts: &InjectOptions, service_account: &str) -> Value {
    let opts = InjectOptions {
        transient: TransientAction::Restart,
        ..opts.clone()
    };
    let init = init_container(&[], &[], Handed::default(), &opts);
    let mut main = init.clone();
    if let Some(m) = main.as_object_mut() {
        m.shift_remove("restartPolicy");
        m.shift_remove("restartPolicyRules");
        m.insert("name".into(), json!("probe"));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "pullcheck-restart-rules-probe-",
            "labels": {"app.kubernetes.io/name": "pullcheck", "pullcheck.io/probe": "restart-rules"},
            "annotations": {crate::k8s::inject::SKIP_ANNOTATION: "true"},
        },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": service_account,
            "automountServiceAccountToken": false,
            "initContainers": [init],
            "containers": [main],
        },
    })
}

/// An answer that says "later" ([`crate::apiserver::is_retryable_status`]): the API server
/// overloaded or restarting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the dry-run probe Pod got HTTP {status}: {message}")]
pub(crate) struct Later {
    /// The HTTP status (408, 429, 5xx).
    pub status: u16,
    /// `Status.message`, or "no message".
    pub message: String,
}

/// Why the restart rules are unknown for now: the next review asks again.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    /// The version or the dry run could not be asked (transport, deadline, status).
    #[error(transparent)]
    Api(#[from] crate::apiserver::ApiError),
    /// The dry run's answer said "later".
    #[error(transparent)]
    Later(#[from] Later),
}

/// Reads the dry run's answer: `status` and the body (a Pod on 2xx, a `Status` otherwise).
/// `sent` is the probe Pod. `Err` for an answer that says "later"
/// ([`crate::apiserver::is_retryable_status`]: the API server overloaded or restarting), so that the next review asks again instead of keeping
/// it.
pub(crate) fn read_answer(sent: &Value, status: u16, body: &Value) -> Result<ProbeAnswer, Later> {
    let message = || {
        body.get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .to_string()
    };
    match status {
        200 | 201 => {}
        422 => return Ok(ProbeAnswer::Refused(message())),
        s if crate::apiserver::is_retryable_status(s) => {
            return Err(Later {
                status,
                message: message(),
            });
        }
        403 => {
            return Ok(ProbeAnswer::Inconclusive(format!(
                "HTTP 403: {}; grant the webhook create on pods in --probe-namespace (dry runs only: the chart's Role and ValidatingAdmissionPolicy), or leave --probe-namespace out to go by the version alone",
                message()
            )));
        }
        _ => {
            return Ok(ProbeAnswer::Inconclusive(format!(
                "HTTP {status}: {}; check --probe-namespace and --probe-service-account",
                message()
            )));
        }
    }
    let init_of = |pod: &Value| {
        pod.pointer("/spec/initContainers")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|c| c["name"] == CONTAINER_NAME))
            .cloned()
    };
    let (Some(want), Some(got)) = (init_of(sent), init_of(body)) else {
        return Ok(ProbeAnswer::Inconclusive(
            "the answer has no pullcheck init container (a mutating webhook removed it?)".into(),
        ));
    };
    let fields = |c: &Value| {
        (
            c.get("restartPolicy").cloned(),
            c.get("restartPolicyRules").cloned(),
        )
    };
    Ok(match fields(&got) {
        (None, None) => ProbeAnswer::Dropped,
        f if f == fields(&want) => ProbeAnswer::Kept,
        (policy, rules) => ProbeAnswer::Inconclusive(format!(
            "the answer changed them to restartPolicy {} and restartPolicyRules {}",
            policy.unwrap_or(Value::Null),
            rules.unwrap_or(Value::Null)
        )),
    })
}

/// How loud a resolution is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loudness {
    /// Expected: logged at info.
    Info,
    /// The operator may want to act (an explicit `restart` not honoured, a failed probe).
    Warn,
}

/// The action written, and the one log line saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolution {
    pub action: TransientAction,
    pub loudness: Loudness,
    pub message: String,
}

/// The decision when restart was asked for (`ask`: how): the API server's `version`
/// (`None`: unknown) by the one rule, [`restart_rules_allowed`], then the probe's `answer`
/// (`None`: no probe configured). Restart only where the version allows it and the probe,
/// if there is one, saw the fields kept: a probe that shows nothing (no permission, another
/// webhook refusing the Pod) is not taken for support.
pub(crate) fn decide(
    ask: RestartAsk,
    version: Option<KubernetesVersion>,
    answer: Option<&ProbeAnswer>,
) -> Resolution {
    let flag = ask.flag();
    let count = |loudness, why: String| counted(ask, loudness, &why);
    let restart = |loudness, why: String| Resolution {
        action: TransientAction::Restart,
        loudness,
        message: format!("{why}: --transient {flag} writes container restart rules"),
    };
    let expected = expected(ask);
    if let Err(why) = restart_rules_allowed(ask, version) {
        return count(expected, why);
    }
    let v = match version {
        Some(v) => format!("Kubernetes {v}"),
        None => {
            "an unknown Kubernetes version, taken as 1.35 or later since restart was asked by name"
                .to_string()
        }
    };
    match answer {
        None => restart(
            if version.is_some() {
                Loudness::Info
            } else {
                Loudness::Warn
            },
            format!(
                "{v} (no --probe-namespace: a server with the ContainerRestartRules gate off would drop them unseen)"
            ),
        ),
        Some(ProbeAnswer::Kept) => restart(
            Loudness::Info,
            format!("{v}, and a dry-run Pod kept restartPolicy and restartPolicyRules"),
        ),
        Some(ProbeAnswer::Dropped) => count(
            Loudness::Warn,
            format!(
                "{v} dropped restartPolicy and restartPolicyRules from a dry-run Pod (the ContainerRestartRules feature gate is off)"
            ),
        ),
        Some(ProbeAnswer::Refused(m)) => count(
            Loudness::Warn,
            format!("{v} refused a dry-run Pod with container restart rules ({m})"),
        ),
        Some(ProbeAnswer::Inconclusive(m)) => count(
            Loudness::Warn,
            format!(
                "{v}, but the dry-run probe Pod showed nothing about container restart rules ({m})"
            ),
        ),
    }
}

/// How loud a fall back to count is when nothing went wrong (below 1.35, no API server):
/// expected under auto; restart asked by name deserves a warning.
fn expected(ask: RestartAsk) -> Loudness {
    match ask {
        RestartAsk::Auto => Loudness::Info,
        RestartAsk::ByName => Loudness::Warn,
    }
}

/// Count, because of `why`.
fn counted(ask: RestartAsk, loudness: Loudness, why: &str) -> Resolution {
    Resolution {
        action: TransientAction::Count,
        loudness,
        message: format!("{why}: --transient {} writes count", ask.flag()),
    }
}

/// The action for this review. Anything but restart is returned as asked. Restart asks the
/// API server's version and then runs the probe (when `probe` is set); an error (the API
/// unreachable, the deadline, a 429 or 5xx answer) is returned, so the caller falls back
/// and asks again later
/// and asks again on the next one.
pub(crate) async fn resolve(
    cluster: Option<&Cluster>,
    opts: &InjectOptions,
    ask: RestartAsk,
    probe: Option<&ProbeTarget>,
    deadline: Instant,
) -> Result<Resolution, ProbeError> {
    let Some(cluster) = cluster else {
        let r = decide(ask, None, None);
        return Ok(Resolution {
            message: format!("no Kubernetes API to ask for its version: {}", r.message),
            ..r
        });
    };
    let version = cluster.version(deadline).await?;
    let answer = match (probe, version) {
        (Some(p), _) if restart_rules_allowed(ask, version).is_ok() => {
            let pod = probe_pod(opts, &p.service_account);
            let (status, body) = cluster
                .dry_run_create(&p.namespace, "pods", &pod, deadline)
                .await?;
            Some(read_answer(&pod, status, &body)?)
        }
        _ => None,
    };
    Ok(decide(ask, version, answer.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> InjectOptions {
        InjectOptions {
            image: "registry.example/pullcheck:1".into(),
            ..InjectOptions::default()
        }
    }

    fn v(s: &str) -> Option<KubernetesVersion> {
        KubernetesVersion::parse(s)
    }

    /// The init container of the probe carries exactly the fields inject writes.
    #[test]
    fn the_probe_pod_carries_the_injected_restart_fields() {
        let pod = probe_pod(&opts(), "pullcheck");
        let init = &pod["spec"]["initContainers"][0];
        assert_eq!(init["name"], "pullcheck");
        assert_eq!(init["restartPolicy"], "Never");
        assert_eq!(
            init["restartPolicyRules"],
            json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [20]}}])
        );
        let main = &pod["spec"]["containers"][0];
        assert_eq!(main["name"], "probe");
        assert!(main.get("restartPolicy").is_none() && main.get("restartPolicyRules").is_none());
        assert_eq!(main["image"], "registry.example/pullcheck:1");
        assert_eq!(pod["spec"]["serviceAccountName"], "pullcheck");
        assert_eq!(pod["metadata"]["annotations"]["pullcheck.io/skip"], "true");
    }

    /// Answers captured from kube-apiserver v1.35.4 (gate on, gate off), trimmed to the
    /// parts read.
    #[test]
    fn answers_read_as_kept_dropped_refused_inconclusive_or_later() {
        let sent = probe_pod(&opts(), "pullcheck");
        assert_eq!(read_answer(&sent, 201, &sent), Ok(ProbeAnswer::Kept));

        let mut dropped = sent.clone();
        let init = dropped["spec"]["initContainers"][0]
            .as_object_mut()
            .unwrap();
        init.shift_remove("restartPolicy");
        init.shift_remove("restartPolicyRules");
        assert_eq!(read_answer(&sent, 201, &dropped), Ok(ProbeAnswer::Dropped));

        let msg = "Pod \"x\" is invalid: spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"";
        let invalid = json!({"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422, "message": msg});
        assert_eq!(
            read_answer(&sent, 422, &invalid),
            Ok(ProbeAnswer::Refused(msg.into()))
        );

        let msg = "pods is forbidden: User \"system:serviceaccount:pullcheck:pullcheck\" cannot create resource \"pods\" in API group \"\" in the namespace \"pullcheck\"";
        let forbidden = json!({"kind": "Status", "code": 403, "message": msg});
        assert_eq!(
            read_answer(&sent, 403, &forbidden),
            Ok(ProbeAnswer::Inconclusive(format!(
                "HTTP 403: {msg}; grant the webhook create on pods in --probe-namespace (dry runs only: the chart's Role and ValidatingAdmissionPolicy), or leave --probe-namespace out to go by the version alone"
            )))
        );
        let missing =
            json!({"kind": "Status", "code": 404, "message": "namespaces \"nope\" not found"});
        assert_eq!(
            read_answer(&sent, 404, &missing),
            Ok(ProbeAnswer::Inconclusive(
                "HTTP 404: namespaces \"nope\" not found; check --probe-namespace and --probe-service-account".into()
            ))
        );
        // "Later" answers are errors: not kept, asked again at the next review.
        for status in [408, 429, 500, 503] {
            let busy = json!({"kind": "Status", "code": status, "message": "try again"});
            assert_eq!(
                read_answer(&sent, status, &busy),
                Err(Later {
                    status,
                    message: "try again".into()
                })
            );
        }

        let mut half = sent.clone();
        half["spec"]["initContainers"][0]
            .as_object_mut()
            .unwrap()
            .shift_remove("restartPolicyRules");
        assert_eq!(
            read_answer(&sent, 201, &half),
            Ok(ProbeAnswer::Inconclusive(
                "the answer changed them to restartPolicy \"Never\" and restartPolicyRules null"
                    .into()
            ))
        );

        let mut gone = sent.clone();
        gone["spec"]["initContainers"] = json!([]);
        assert_eq!(
            read_answer(&sent, 201, &gone),
            Ok(ProbeAnswer::Inconclusive(
                "the answer has no pullcheck init container (a mutating webhook removed it?)"
                    .into()
            ))
        );
    }

    #[test]
    fn restart_only_where_version_and_probe_agree() {
        use Loudness::*;
        use RestartAsk::*;
        use TransientAction::*;
        let cases = [
            (Auto, v("1.35.4"), Some(ProbeAnswer::Kept), Restart, Info),
            (Auto, v("1.35.4"), None, Restart, Info),
            (Auto, v("1.35.4"), Some(ProbeAnswer::Dropped), Count, Warn),
            (ByName, v("1.35.4"), Some(ProbeAnswer::Dropped), Count, Warn),
            (
                Auto,
                v("1.36.0"),
                Some(ProbeAnswer::Refused("x".into())),
                Count,
                Warn,
            ),
            (
                Auto,
                v("1.35.4"),
                Some(ProbeAnswer::Inconclusive("x".into())),
                Count,
                Warn,
            ),
            (Auto, v("1.34.2"), None, Count, Info),
            (ByName, v("1.34.2"), None, Count, Warn),
            (Auto, None, None, Count, Info),
            // The one rule (k8s::restart_rules_allowed), as inject has it: restart asked by
            // name with the version unknown is taken at its word, warned; a probe still
            // decides.
            (ByName, None, None, Restart, Warn),
            (ByName, None, Some(ProbeAnswer::Dropped), Count, Warn),
        ];
        for (ask, version, answer, action, loudness) in cases {
            let r = decide(ask, version, answer.as_ref());
            assert_eq!(
                (r.action, r.loudness),
                (action, loudness),
                "{ask:?} {version:?} {answer:?}: {}",
                r.message
            );
        }
        assert_eq!(
            decide(Auto, v("1.35.4"), Some(&ProbeAnswer::Dropped)).message,
            "Kubernetes 1.35 dropped restartPolicy and restartPolicyRules from a dry-run Pod (the ContainerRestartRules feature gate is off): --transient auto writes count"
        );
        assert_eq!(
            decide(ByName, v("1.33.1"), None).message,
            "Kubernetes 1.33 has no container restart rules (beta and on by default from 1.35): --transient restart writes count"
        );
    }
}
