//! The Workloads are captured from a real Kueue v0.19.2 (tests/data/kueue/README.md says
//! how).

use super::*;

fn workload() -> Value {
    serde_json::from_str(include_str!(
        "../../tests/data/kueue/workload-v0.19.2-quota-reserved.json"
    ))
    .unwrap()
}

fn v(image: &str, verdict: Verdict) -> Resolved {
    Resolved {
        line: format!("main: {image}: {} (why)", verdict.as_str()),
        found: Found::Verdict(verdict),
    }
}

#[test]
fn only_our_pending_checks_are_answered_and_only_with_quota() {
    let w = workload();
    let ours = vec!["image-check".to_string()];
    assert_eq!(checks_to_answer(&w, &ours), vec!["image-check".to_string()]);
    assert_eq!(
        checks_to_answer(&w, &["other".to_string()]),
        Vec::<String>::new()
    );
    // Kueue resets a rejected check to Pending when it evicts the workload; without quota
    // it is not ours to answer (it is answered again once quota is reserved anew).
    let after: Value = serde_json::from_str(include_str!(
        "../../tests/data/kueue/workload-v0.19.2-after-rejected.json"
    ))
    .unwrap();
    assert_eq!(after["status"]["admissionChecks"][0]["state"], "Pending");
    assert_eq!(checks_to_answer(&after, &ours), Vec::<String>::new());
    let mut deactivated = w.clone();
    deactivated["spec"]["active"] = json!(false);
    assert_eq!(checks_to_answer(&deactivated, &ours), Vec::<String>::new());
    assert_eq!(retry_count(&w, "image-check"), 0);
    let mut retried = w.clone();
    retried["status"]["admissionChecks"][0]["retryCount"] = json!(3);
    assert_eq!(retry_count(&retried, "image-check"), 3);
}

#[test]
fn the_assigned_flavor_pins_the_platform() {
    assert_eq!(
        pod_set_flavors(&workload(), "main"),
        vec!["arm-nodes".to_string()]
    );
    assert_eq!(pod_set_flavors(&workload(), "other"), Vec::<String>::new());
    let flavor = json!({"spec": {"nodeLabels": {"kubernetes.io/arch": "arm64", "cloud.example/pool": "gpu"}}});
    assert_eq!(
        flavor_platform(&flavor).map(|p| p.to_string()).as_deref(),
        Some("linux/arm64")
    );
    assert_eq!(
        flavor_platform(&json!({"spec": {"nodeLabels": {"pool": "x"}}})),
        None
    );
    assert_eq!(flavor_platform(&json!({"spec": {}})), None);
}

#[test]
fn verdicts_map_to_check_states() {
    use CheckState::*;
    let d = |vs: &[Resolved], retry| decide(vs, retry, UnprovenPolicy::AssumeReady);
    let ok = d(
        &[v("a:1", Verdict::Pullable), v("b:1", Verdict::Pullable)],
        0,
    );
    assert_eq!(
        (ok.state, ok.message.as_str()),
        (Ready, "pullcheck: all 2 images pullable")
    );
    let one = d(&[v("a:1", Verdict::Pullable)], 0);
    assert_eq!(
        (one.state, one.message.as_str()),
        (Ready, "pullcheck: the image is pullable")
    );
    let none = d(&[], 0);
    assert_eq!(
        (none.state, none.message.as_str()),
        (
            Ready,
            "pullcheck: no image is pulled (imagePullPolicy Never)"
        )
    );
    let missing = d(
        &[v("a:1", Verdict::Transient), v("b:1", Verdict::NotFound)],
        0,
    );
    assert_eq!(
        (
            missing.state,
            missing.message.as_str(),
            missing.requeue_after
        ),
        (Rejected, "pullcheck: main: b:1: not_found (why)", None)
    );
    let platform = d(&[v("c:1", Verdict::PlatformMissing)], 0);
    assert_eq!(platform.state, Rejected);
    let down = d(&[v("a:1", Verdict::Transient)], 0);
    assert_eq!(
        (down.state, down.requeue_after),
        (Retry, Some(Duration::from_secs(30)))
    );
    assert_eq!(
        down.message,
        "pullcheck: main: a:1: transient (why); asking again in 30s"
    );
    assert_eq!(
        d(&[v("a:1", Verdict::Transient)], 2).requeue_after,
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        d(&[v("a:1", Verdict::Transient)], 40).requeue_after,
        Some(MAX_REQUEUE)
    );
    // Never Rejected on a guess: the nodes may hold credentials pullcheck lacks.
    let denied = d(&[v("p:1", Verdict::Denied)], 0);
    assert_eq!(denied.state, Ready);
    assert_eq!(
        denied.message,
        "pullcheck: main: p:1: denied (why); not verified, admitted (the nodes may hold credentials pullcheck lacks)"
    );
    let strict = decide(
        &[v("p:1", Verdict::Unauthenticated)],
        0,
        UnprovenPolicy::Reject,
    );
    assert_eq!(
        (strict.state, strict.message.as_str()),
        (Rejected, "pullcheck: main: p:1: unauthenticated (why)")
    );
    assert_eq!(d(&[], 0).state, Ready);
    // No verdict in time is asked again; unreadable pull secrets are not (the same secrets
    // give the same answer) and are never a rejection.
    let slow = Resolved {
        line: "main: a:1: transient (no verdict within 30s)".into(),
        found: Found::NoTime,
    };
    assert_eq!(d(&[slow], 1).requeue_after, Some(Duration::from_secs(60)));
    let secrets = Resolved {
        line: "main: a:1: transient (secret team/pull: data[.dockerconfigjson] is not base64)"
            .into(),
        found: Found::Credentials,
    };
    let unproven = d(&[v("b:1", Verdict::Pullable), secrets.clone()], 0);
    assert_eq!(unproven.state, Ready);
    assert_eq!(
        decide(&[secrets], 0, UnprovenPolicy::Reject).state,
        Rejected
    );
}

#[test]
fn the_apply_body_holds_only_our_entry_and_the_version_read() {
    let answer = Answer {
        state: CheckState::Retry,
        message: "a:1: transient".into(),
        requeue_after: Some(Duration::from_secs(60)),
    };
    assert_eq!(
        admission_check_apply(&workload(), "image-check", &answer, "2026-12-02T01:00:05Z"),
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "job-train-87eec", "namespace": "team-a", "resourceVersion": "263"},
            "status": {"admissionChecks": [{
                "name": "image-check",
                "state": "Retry",
                "message": "a:1: transient",
                "lastTransitionTime": "2026-12-02T01:00:05Z",
                "requeueAfterSeconds": 60,
            }]},
        })
    );
    for s in [
        CheckState::Pending,
        CheckState::Ready,
        CheckState::Retry,
        CheckState::Rejected,
    ] {
        assert_eq!(CheckState::parse(s.as_str()), Some(s));
    }
    assert_eq!(CheckState::parse("Unknown"), None);
}
