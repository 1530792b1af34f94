//! The reconcilers against a fake API and a table of verdicts, on the Workload captured
//! from a real Kueue v0.19.2 (tests/data/kueue/README.md).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use super::*;
use crate::k8s::templates::template_images;
use crate::kueue::Found;
use crate::verdict::Verdict;

fn workload() -> Value {
    serde_json::from_str(include_str!(
        "../../tests/data/kueue/workload-v0.19.2-quota-reserved.json"
    ))
    .unwrap()
}

fn key(w: &Value) -> Key {
    Key::of(w).unwrap()
}

fn ours(name: &str) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "AdmissionCheck",
           "metadata": {"name": name, "generation": 3},
           "spec": {"controllerName": CONTROLLER_NAME}})
}

/// Every call made, and the answers to give.
#[derive(Default)]
struct FakeApi {
    checks: HashMap<String, Value>,
    flavors: HashMap<String, Value>,
    /// What the next applies answer (popped from the front; `Done` when empty).
    answers: Mutex<Vec<Result<Applied, ApiError>>>,
    calls: Mutex<Vec<String>>,
    applied: Mutex<Vec<Value>>,
}

impl FakeApi {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn applied(&self) -> Vec<Value> {
        self.applied.lock().unwrap().clone()
    }

    fn next(&self, body: &Value) -> Result<Applied, ApiError> {
        self.applied.lock().unwrap().push(body.clone());
        let mut a = self.answers.lock().unwrap();
        if a.is_empty() {
            Ok(Applied::Done)
        } else {
            a.remove(0)
        }
    }
}

impl KueueApi for FakeApi {
    async fn served(&self) -> Result<bool, ApiError> {
        let mut calls = self.calls.lock().unwrap();
        calls.push("discovery".into());
        // Served from the third ask on.
        Ok(calls.iter().filter(|c| *c == "discovery").count() >= 3)
    }

    async fn admission_check(&self, name: &str) -> Result<Option<Value>, ApiError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("get admissioncheck {name}"));
        Ok(self.checks.get(name).cloned())
    }

    async fn resource_flavor(&self, name: &str) -> Result<Option<Value>, ApiError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("get resourceflavor {name}"));
        Ok(self.flavors.get(name).cloned())
    }

    async fn apply_workload_status(
        &self,
        namespace: &str,
        name: &str,
        body: &Value,
    ) -> Result<Applied, ApiError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("apply workload {namespace}/{name}"));
        self.next(body)
    }

    async fn apply_check_status(&self, name: &str, body: &Value) -> Result<Applied, ApiError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("apply admissioncheck {name}"));
        self.next(body)
    }

    async fn event(&self, body: &Value) -> Result<(), ApiError> {
        let o = &body["involvedObject"];
        self.calls.lock().unwrap().push(format!(
            "event {} {} {}/{} {}",
            body["type"].as_str().unwrap_or_default(),
            body["reason"].as_str().unwrap_or_default(),
            o["kind"].as_str().unwrap_or_default(),
            o["name"].as_str().unwrap_or_default(),
            body["message"].as_str().unwrap_or_default(),
        ));
        Ok(())
    }
}

/// Verdicts by image; records the platforms each template was resolved for.
#[derive(Default)]
struct Table {
    verdicts: HashMap<String, Found>,
    asked: Mutex<Vec<(String, Vec<String>)>>,
}

impl Images for Arc<Table> {
    async fn resolve(
        &self,
        _namespace: &str,
        templates: &[(&Value, &str)],
        platforms: &[Vec<Platform>],
    ) -> Vec<Resolved> {
        let mut out = Vec::new();
        for (i, (t, pointer)) in templates.iter().enumerate() {
            for u in template_images(t, pointer)
                .into_iter()
                .filter(|u| u.is_pulled())
            {
                self.asked.lock().unwrap().push((
                    u.image.clone(),
                    platforms[i].iter().map(|p| p.to_string()).collect(),
                ));
                let found = self
                    .verdicts
                    .get(&u.image)
                    .copied()
                    .unwrap_or(Found::Verdict(Verdict::Pullable));
                let word = match found {
                    Found::Verdict(v) => v.as_str(),
                    Found::NoTime | Found::Credentials => "transient",
                };
                out.push(Resolved {
                    line: format!("{}: {}: {word} (why)", u.container, u.image),
                    found,
                });
            }
        }
        out
    }

    fn default_platforms(&self, _template: &Value) -> Vec<Platform> {
        vec![Platform::parse("linux/amd64").unwrap()]
    }
}

fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1796176606)
}

fn setup(
    verdicts: &[(&str, Found)],
) -> (
    Arc<FakeApi>,
    Arc<Table>,
    WorkloadReconciler<FakeApi, Arc<Table>>,
) {
    let mut api = FakeApi::default();
    api.checks.insert("image-check".into(), ours("image-check"));
    api.flavors.insert(
        "arm-nodes".into(),
        json!({"spec": {"nodeLabels": {"kubernetes.io/arch": "arm64"}}}),
    );
    over(api, verdicts)
}

/// A reconciler over `api`, resolving images to `verdicts` (pullable when not listed).
fn over(
    api: FakeApi,
    verdicts: &[(&str, Found)],
) -> (
    Arc<FakeApi>,
    Arc<Table>,
    WorkloadReconciler<FakeApi, Arc<Table>>,
) {
    let api = Arc::new(api);
    let table = Arc::new(Table {
        verdicts: verdicts.iter().map(|(i, f)| (i.to_string(), *f)).collect(),
        ..Table::default()
    });
    let r = WorkloadReconciler::new(
        api.clone(),
        table.clone(),
        UnprovenPolicy::AssumeReady,
        Clock::at(wall()),
        Arc::new(Metrics::new()),
    );
    (api, table, r)
}

/// `pullcheck_admission_check_answers_total{state}` as rendered.
fn answers(r: &WorkloadReconciler<FakeApi, Arc<Table>>, state: &str) -> u64 {
    let needle = format!("pullcheck_admission_check_answers_total{{state=\"{state}\"}} ");
    r.metrics
        .render(0)
        .lines()
        .find_map(|l| l.strip_prefix(&needle).map(|n| n.parse().unwrap()))
        .unwrap_or(0)
}

#[tokio::test]
async fn a_missing_image_is_rejected_for_the_flavors_platform_with_its_line() {
    let (api, table, r) = setup(&[(
        "registry.example/models/llm:7b",
        Found::Verdict(Verdict::NotFound),
    )]);
    let w = workload();
    assert_eq!(
        r.reconcile(&key(&w), Some(Arc::new(w.clone()))).await,
        Requeue::Never
    );
    assert_eq!(
        api.calls(),
        vec![
            "get admissioncheck image-check",
            "get resourceflavor arm-nodes",
            "apply workload team-a/job-train-87eec",
            // Then the reason where people look: on the Workload and on its Job.
            "event Warning PullcheckImageCheckRejected Workload/job-train-87eec pullcheck: model: registry.example/models/llm:7b: not_found (why)",
            "event Warning PullcheckImageCheckRejected Job/train pullcheck: model: registry.example/models/llm:7b: not_found (why)",
        ]
    );
    // The pod set landed on the arm64 flavor: every image is resolved for linux/arm64,
    // the injected init container and the image volume included.
    let asked = table.asked.lock().unwrap().clone();
    let arm = vec!["linux/arm64".to_string()];
    assert_eq!(
        asked,
        vec![
            ("ghcr.io/pullcheck/pullcheck:0.9".to_string(), arm.clone()),
            ("registry.example/ml/trainer:v3".to_string(), arm.clone()),
            ("registry.example/models/llm:7b".to_string(), arm),
        ]
    );
    assert_eq!(
        api.applied(),
        vec![json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-train-87eec", "namespace": "team-a", "resourceVersion": "263"},
            "status": {"admissionChecks": [{
                "name": "image-check", "state": "Rejected",
                "message": "pullcheck: model: registry.example/models/llm:7b: not_found (why)",
                "lastTransitionTime": "2026-12-02T01:56:46Z",
            }]},
        })]
    );
    // Counted, and timed from the captured QuotaReserved (2026-12-02T01:56:16Z) to the
    // test clock (2026-12-02T01:56:46Z, earlier: no negative time, 0).
    assert_eq!(answers(&r, "Rejected"), 1);
    assert!(
        r.metrics
            .render(0)
            .contains("pullcheck_admission_check_answer_seconds_sum 30.0"),
        "{}",
        r.metrics.render(0)
    );
    // Answered again (Kueue resets the entry after an eviction): the check's controller
    // and the flavor's platform are not asked again within their TTL.
    assert_eq!(
        r.reconcile(&key(&w), Some(Arc::new(w.clone()))).await,
        Requeue::Never
    );
    assert_eq!(
        api.calls()[5..],
        [
            "apply workload team-a/job-train-87eec",
            "event Warning PullcheckImageCheckRejected Workload/job-train-87eec pullcheck: model: registry.example/models/llm:7b: not_found (why)",
            "event Warning PullcheckImageCheckRejected Job/train pullcheck: model: registry.example/models/llm:7b: not_found (why)",
        ]
    );
}

#[tokio::test]
async fn present_images_are_ready_and_a_slow_registry_is_asked_again() {
    let (api, _, r) = setup(&[]);
    let w = workload();
    r.reconcile(&key(&w), Some(Arc::new(w.clone()))).await;
    assert_eq!(
        api.applied()[0]["status"]["admissionChecks"][0]["state"],
        "Ready"
    );
    assert_eq!(
        api.applied()[0]["status"]["admissionChecks"][0]["message"],
        "pullcheck: all 3 images pullable"
    );
    // Ready writes no Event of ours: Kueue's Admitted says it.
    assert!(!api.calls().iter().any(|c| c.starts_with("event ")));
    let (api, _, r) = setup(&[("registry.example/ml/trainer:v3", Found::NoTime)]);
    let mut retried = w.clone();
    retried["status"]["admissionChecks"][0]["retryCount"] = json!(2);
    r.reconcile(&key(&w), Some(Arc::new(retried))).await;
    let entry = &api.applied()[0]["status"]["admissionChecks"][0];
    assert_eq!(entry["state"], "Retry");
    assert_eq!(entry["requeueAfterSeconds"], 120);
    assert_eq!(answers(&r, "Retry"), 1);
    // A Retry is said on both objects too, as Normal: Kueue requeues it by itself.
    let events: Vec<String> = api
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("event "))
        .map(|c| c.split(' ').take(4).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        events,
        vec![
            "event Normal PullcheckImageCheckRetry Workload/job-train-87eec",
            "event Normal PullcheckImageCheckRetry Job/train",
        ]
    );
}

#[tokio::test]
async fn checks_of_other_controllers_and_workloads_without_quota_are_left_alone() {
    let (api, _, r) = setup(&[]);
    let mut w = workload();
    w["status"]["admissionChecks"][0]["name"] = json!("provisioning");
    assert_eq!(
        r.reconcile(&key(&w), Some(Arc::new(w.clone()))).await,
        Requeue::Never
    );
    assert_eq!(api.calls(), vec!["get admissioncheck provisioning"]);
    let mut w = workload();
    w["status"]["conditions"][1]["status"] = json!("False");
    r.reconcile(&key(&w), Some(Arc::new(w))).await;
    assert_eq!(api.applied(), Vec::<Value>::new());
    // Gone: nothing to do.
    assert_eq!(r.reconcile(&key(&workload()), None).await, Requeue::Never);
}

#[tokio::test]
async fn an_inactive_check_of_ours_is_not_answered_and_a_deleted_flavor_falls_back() {
    // Ours but naming spec.parameters: Active=False, so its Workloads are not answered.
    let mut api = FakeApi::default();
    let mut check = ours("image-check");
    check["spec"]["parameters"] = json!({"apiGroup": "x", "kind": "Y", "name": "strict"});
    api.checks.insert("image-check".into(), check);
    let (api, _, r) = over(api, &[]);
    let w = workload();
    assert_eq!(
        r.reconcile(&key(&w), Some(Arc::new(w))).await,
        Requeue::Never
    );
    assert_eq!(api.calls(), vec!["get admissioncheck image-check"]);
    assert_eq!(api.applied(), Vec::<Value>::new());

    // The assigned flavor is gone: the template's own platforms, and an answer.
    let mut api = FakeApi::default();
    api.checks.insert("image-check".into(), ours("image-check"));
    let (api, table, r) = over(api, &[]);
    let w = workload();
    r.reconcile(&key(&w), Some(Arc::new(w))).await;
    assert_eq!(
        api.calls(),
        vec![
            "get admissioncheck image-check",
            "get resourceflavor arm-nodes",
            "apply workload team-a/job-train-87eec",
        ]
    );
    let asked = table.asked.lock().unwrap().clone();
    assert!(!asked.is_empty());
    for (image, platforms) in asked {
        assert_eq!(platforms, vec!["linux/amd64".to_string()], "{image}");
    }
}

#[tokio::test]
async fn a_conflict_or_an_api_error_is_tried_again() {
    let (api, _, r) = setup(&[]);
    api.answers.lock().unwrap().push(Ok(Applied::Conflict));
    let w = workload();
    assert_eq!(
        r.reconcile(&key(&w), Some(Arc::new(w.clone()))).await,
        Requeue::After(Duration::from_secs(2))
    );
    api.answers.lock().unwrap().push(Err(ApiError::NoTimeLeft {
        verb: crate::apiserver::error::Verb::Patch,
        path: "/apis".into(),
    }));
    assert_eq!(
        r.reconcile(&key(&w), Some(Arc::new(w.clone()))).await,
        Requeue::After(Duration::from_secs(5))
    );
    assert_eq!(answers(&r, "Ready"), 0);
}

#[tokio::test]
async fn our_admission_checks_are_kept_active_with_their_generation() {
    let api = Arc::new(FakeApi::default());
    let r = CheckReconciler::new(api.clone(), Clock::at(wall()));
    let check = ours("image-check");
    let k = key(&check);
    assert_eq!(
        r.reconcile(&k, Some(Arc::new(check.clone()))).await,
        Requeue::Never
    );
    let body = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "image-check"},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active",
            "message": "pullcheck checks the images of every pod set before admission",
            "observedGeneration": 3, "lastTransitionTime": "2026-12-02T01:56:46Z"}]}});
    assert_eq!(api.applied(), vec![body.clone()]);
    // Already active at this generation: no write.
    let mut active = check.clone();
    active["status"] = body["status"].clone();
    r.reconcile(&k, Some(Arc::new(active.clone()))).await;
    assert_eq!(api.applied().len(), 1);
    // A new generation is observed anew.
    active["metadata"]["generation"] = json!(4);
    r.reconcile(&k, Some(Arc::new(active))).await;
    assert_eq!(
        api.applied()[1]["status"]["conditions"][0]["observedGeneration"],
        4
    );
    // A parameters reference: not active, with the reason and the fix.
    let mut params = check.clone();
    params["spec"]["parameters"] =
        json!({"apiGroup": "pullcheck.io", "kind": "ImageCheckParameters", "name": "strict"});
    r.reconcile(&k, Some(Arc::new(params))).await;
    let c = &api.applied()[2]["status"]["conditions"][0];
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("ParametersNotSupported"))
    );
    assert_eq!(
        c["message"],
        "pullcheck.io/image-check reads no parameters object (spec.parameters names strict); remove spec.parameters: the check's settings are the pullcheck webhook's flags"
    );
    // Another controller's check: never written.
    let mut other = check;
    other["spec"]["controllerName"] = json!("kueue.x-k8s.io/provisioning-request");
    r.reconcile(&k, Some(Arc::new(other))).await;
    assert_eq!(api.applied().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn the_controller_waits_for_kueues_api_asking_every_30_s() {
    let api = FakeApi::default();
    let started = tokio::time::Instant::now();
    assert_eq!(wait_until_served(&api).await, 3);
    assert_eq!(started.elapsed(), 2 * SERVED_EVERY);
    assert_eq!(api.calls(), vec!["discovery"; 3]);
}
