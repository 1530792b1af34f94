//! The reconciler on the controller runtime, against in-memory fakes under paused time:
//! the runtime's [`FakeCluster`] holds the pods (every write is a new resource version and
//! a watch event, as on the API server), [`FakeApi`] makes the writes on it and records
//! each call with its time. Named fakes on purpose: the real-API tests
//! (`tests/integration/apiserver/watch.rs`, `scripts/apiserver-e2e.sh`) cover the wire;
//! these pin times and call sequences exactly.

use std::collections::VecDeque;

use serde_json::json;
use tokio::time::sleep;

use super::*;
use crate::apiserver::error::Verb;
use crate::runtime::fake::FakeCluster;
use crate::watch::api::PodId;

fn settings() -> Settings {
    Settings {
        dry_run: false,
        transient_grace: None,
        deletions_per_minute: 2,
        namespace_label: None,
        hosts_dir: None,
    }
}

const NOT_FOUND: &str = "rpc error: code = NotFound desc = failed to pull and unpack image \"r.io/app:nope\": failed to resolve image: r.io/app:nope: not found";
const DOWN: &str = "rpc error: code = Unknown desc = failed to pull and unpack image \"r.io/app:nope\": failed to resolve reference \"r.io/app:nope\": failed to do request: Head \"https://r.io/v2/app/manifests/nope\": dial tcp 10.0.0.1:443: connect: connection refused";

/// The wall time the tests start at (whole seconds, as the API writes times).
fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_131_354)
}

/// A Job's Pending pod whose `main` container waits on `message`.
fn job_pod(name: &str, message: &str) -> Value {
    json!({
        "metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}"),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]},
        "spec": {"containers": [{"name": "main", "image": "r.io/app:nope"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "main", "state": {"waiting": {
            "reason": "ErrImagePull", "message": message}}}]},
    })
}

/// `pod` with pullcheck's condition set at `at`.
fn marked(mut pod: Value, at: SystemTime) -> Value {
    pod["status"]["conditions"] = json!([{"type": CONDITION_TYPE, "status": "True",
        "reason": "NotFound", "lastTransitionTime": rfc3339(at)}]);
    pod
}

fn unavailable(verb: Verb) -> ApiError {
    ApiError::Status {
        verb,
        path: "/api/v1/namespaces/ml/pods/p".into(),
        status: 503,
        reason: "ServiceUnavailable".into(),
        message: String::new(),
        retry_after: None,
    }
}

/// A call the reconciler made, as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Mark(String),
    /// An Event: the involved object's kind and name, and the reason.
    Event(String, String, String),
    Delete(String),
}

/// The reconciler's API calls, made on a [`FakeCluster`].
#[derive(Clone)]
struct FakeApi {
    cluster: FakeCluster,
    t0: Instant,
    calls: Arc<Mutex<Vec<(Duration, Call)>>>,
    delete_errors: Arc<Mutex<VecDeque<ApiError>>>,
    /// How long each DELETE takes to answer.
    delete_takes: Duration,
}

impl FakeApi {
    fn new(cluster: &FakeCluster) -> FakeApi {
        FakeApi {
            cluster: cluster.clone(),
            t0: Instant::now(),
            calls: Arc::default(),
            delete_errors: Arc::default(),
            delete_takes: Duration::ZERO,
        }
    }

    fn record(&self, call: Call) {
        lock(&self.calls).push((self.t0.elapsed(), call));
    }

    fn calls(&self) -> Vec<(Duration, Call)> {
        lock(&self.calls).clone()
    }

    fn key(pod: &PodId) -> Key {
        Key {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
        }
    }
}

impl Effects for FakeApi {
    async fn namespace_labels(
        &self,
        _name: &str,
    ) -> Result<Option<serde_json::Map<String, Value>>, ApiError> {
        Ok(Some(serde_json::Map::new()))
    }

    async fn mark(
        &self,
        pod: &PodId,
        resource_version: &str,
        condition: Value,
    ) -> Result<bool, ApiError> {
        self.record(Call::Mark(pod.name.clone()));
        let key = FakeApi::key(pod);
        let Some(current) = self.cluster.get(&key) else {
            return Ok(false);
        };
        if current["metadata"]["resourceVersion"] != resource_version
            || current["metadata"]["uid"] != pod.uid.as_str()
        {
            return Ok(false);
        }
        // The write is a MODIFIED event, as on the API server.
        self.cluster
            .update(&key, |p| p["status"]["conditions"] = json!([condition]));
        Ok(true)
    }

    async fn delete(&self, pod: &PodId) -> Result<bool, ApiError> {
        self.record(Call::Delete(pod.name.clone()));
        sleep(self.delete_takes).await;
        if let Some(e) = lock(&self.delete_errors).pop_front() {
            return Err(e);
        }
        let key = FakeApi::key(pod);
        match self.cluster.get(&key) {
            Some(p) if p["metadata"]["uid"] == pod.uid.as_str() => {
                // A graceful delete: the pod is terminating (a MODIFIED event).
                self.cluster.update(&key, |p| {
                    p["metadata"]["deletionTimestamp"] = json!(rfc3339(wall()))
                });
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn failed_events(&self, _pod: &PodId) -> Result<Vec<String>, ApiError> {
        Ok(Vec::new())
    }

    async fn event(
        &self,
        object: &Value,
        _event_type: crate::k8s::event::EventType,
        reason: &str,
        _message: &str,
    ) -> Result<(), ApiError> {
        let s = |k: &str| object[k].as_str().unwrap_or_default().to_string();
        self.record(Call::Event(s("kind"), s("name"), reason.into()));
        Ok(())
    }
}

/// The watch on `cluster` as `serve` runs it: the runtime, the reconciler over
/// [`FakeApi`], the wall clock at [`wall`] moving with paused time.
struct Running {
    api: FakeApi,
    metrics: Arc<WatchMetrics>,
    task: tokio::task::JoinHandle<()>,
}

fn start(cluster: &FakeCluster, settings: Settings) -> Running {
    start_with(FakeApi::new(cluster), cluster, settings)
}

fn start_with(api: FakeApi, cluster: &FakeCluster, settings: Settings) -> Running {
    let metrics = Arc::new(WatchMetrics::new());
    let reconciler = Arc::new(PodReconciler::new(
        api.clone(),
        settings,
        metrics.clone(),
        Clock::at(wall()),
    ));
    let status = crate::runtime::Status {
        ready: Arc::default(),
        lists: metrics.relists.clone(),
    };
    let task = tokio::spawn(crate::runtime::run(
        cluster.clone(),
        reconciler,
        crate::runtime::Settings {
            kind: "pods",
            concurrency: CONCURRENCY,
        },
        status,
    ));
    Running { api, metrics, task }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn acted(name: &str, at: Duration) -> Vec<(Duration, Call)> {
    vec![
        (at, Call::Mark(name.into())),
        (
            at,
            Call::Event("Pod".into(), name.into(), "PullcheckImagePullFailed".into()),
        ),
        (
            at,
            Call::Event("Job".into(), "j".into(), "PullcheckImagePullFailed".into()),
        ),
        (at, Call::Delete(name.into())),
    ]
}

fn key(name: &str) -> Key {
    Key {
        namespace: "ml".into(),
        name: name.into(),
    }
}

/// Issue 21's lost retry: the watch marks the pod, its DELETE fails, and the MODIFIED
/// event the mark caused reconciles the pod in between. The delete is still retried
/// WRITE_RETRY after the failure, with no other event (before, that event cleared the
/// retry, and nothing came back to the pod until its next status change).
#[tokio::test(start_paused = true)]
async fn a_failed_delete_is_retried_after_its_delay_though_the_mark_modified_the_pod() {
    let cluster = FakeCluster::default();
    cluster.apply(job_pod("p", NOT_FOUND));
    let w = {
        let api_errors = [unavailable(Verb::Delete)];
        let w = start(&cluster, settings());
        lock(&w.api.delete_errors).extend(api_errors);
        w
    };
    sleep(secs(20)).await;
    let mut want = acted("p", Duration::ZERO);
    want.push((WRITE_RETRY, Call::Delete("p".into())));
    assert_eq!(w.api.calls(), want);
    let pod = cluster.get(&key("p")).unwrap();
    assert_eq!(pod["metadata"]["deletionTimestamp"], json!(rfc3339(wall())));
    assert_eq!(
        pod["status"]["conditions"][0]["lastTransitionTime"],
        json!(rfc3339(wall()))
    );
    assert_eq!(w.metrics.actions_of(Action::Failed), 1);
    assert_eq!(w.metrics.actions_of(Action::Deleted), 1);
    w.task.abort();
}

/// A pod another replica marked and never deleted is taken over once its mark is
/// STALE_MARK old, though no event arrives: at 20 s for a mark 10 s old at the start, at
/// once for one 2 minutes old. The mark is not written again.
#[tokio::test(start_paused = true)]
async fn a_stale_mark_is_taken_over_after_30_s_with_no_event() {
    let cluster = FakeCluster::default();
    cluster.apply(marked(job_pod("fresh", NOT_FOUND), wall() - secs(10)));
    cluster.apply(marked(job_pod("old", NOT_FOUND), wall() - secs(120)));
    let w = start(&cluster, settings());
    sleep(secs(19)).await;
    assert_eq!(
        w.api.calls(),
        vec![(Duration::ZERO, Call::Delete("old".into()))]
    );
    sleep(secs(30)).await;
    assert_eq!(
        w.api.calls(),
        vec![
            (Duration::ZERO, Call::Delete("old".into())),
            (secs(20), Call::Delete("fresh".into())),
        ]
    );
    assert_eq!(w.metrics.actions_of(Action::Deleted), 2);
    w.task.abort();
}

/// `--transient-grace 60s`: a transient failure is acted on when the grace since the watch
/// first saw it is over, though the pod does not change meanwhile.
#[tokio::test(start_paused = true)]
async fn a_transient_failure_is_acted_on_when_its_grace_ends() {
    let cluster = FakeCluster::default();
    cluster.apply(job_pod("p", DOWN));
    let w = start(
        &cluster,
        Settings {
            transient_grace: Some(secs(60)),
            ..settings()
        },
    );
    sleep(secs(59)).await;
    assert_eq!(w.api.calls(), vec![]);
    sleep(secs(10)).await;
    assert_eq!(w.api.calls(), acted("p", secs(60)));
    w.task.abort();
}

/// `--max-deletions-per-minute 1`: of two pods failing at once, the second is acted on
/// when the bucket holds a token again, 60 s later (looked at every RATE_RETRY meanwhile).
#[tokio::test(start_paused = true)]
async fn the_rate_limit_holds_the_second_pod_a_minute() {
    let cluster = FakeCluster::default();
    cluster.apply(job_pod("a", NOT_FOUND));
    cluster.apply(job_pod("b", NOT_FOUND));
    let w = start(
        &cluster,
        Settings {
            deletions_per_minute: 1,
            ..settings()
        },
    );
    sleep(secs(90)).await;
    let mut want = acted("a", Duration::ZERO);
    want.extend(acted("b", secs(60)));
    assert_eq!(w.api.calls(), want);
    assert_eq!(w.metrics.actions_of(Action::RateLimited), 60);
    assert_eq!(w.metrics.actions_of(Action::Deleted), 2);
    w.task.abort();
}

/// A pod that stops failing before its grace ends is dropped, and a relist after a 410
/// reconciles what changed meanwhile: the watch never acts on a pod that recovered.
#[tokio::test(start_paused = true)]
async fn a_pod_that_recovers_during_its_grace_is_left_alone_across_a_410() {
    let cluster = FakeCluster::default();
    cluster.apply(job_pod("p", DOWN));
    let w = start(
        &cluster,
        Settings {
            transient_grace: Some(secs(60)),
            ..settings()
        },
    );
    sleep(secs(10)).await;
    // Unseen by the watch (compacted away): the pull succeeded, the container runs.
    cluster.compact();
    cluster.update(&key("p"), |p| {
        p["status"]["containerStatuses"][0]["state"] = json!({"running": {}})
    });
    sleep(secs(120)).await;
    assert_eq!(w.api.calls(), vec![]);
    assert_eq!(w.metrics.relists.get(), 2);
    w.task.abort();
}

#[test]
fn a_marks_age_is_read_from_its_transition_time() {
    let now = wall();
    let pod = marked(json!({}), now - secs(45));
    assert_eq!(mark_age(&pod, now), Some(secs(45)));
    // Ahead of this watch's clock (another node's): 0 old.
    let ahead = marked(json!({}), now + secs(5));
    assert_eq!(mark_age(&ahead, now), Some(Duration::ZERO));
    let undated = json!({"status": {"conditions": [{"type": CONDITION_TYPE, "status": "True", "lastTransitionTime": "soon"}]}});
    assert_eq!(mark_age(&undated, now), None);
}

#[test]
fn a_not_found_through_mirrors_is_only_reported() {
    let hosts = tempfile::tempdir().unwrap();
    let dir = hosts.path().join("r.io");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("hosts.toml"),
        "server = \"https://r.io\"\n[host.\"https://mirror.example\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
    )
    .unwrap();
    let pod = json!({
        "metadata": {"namespace": "n", "name": "p", "uid": "u", "resourceVersion": "1",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]},
        "spec": {"containers": [{"name": "main", "image": "r.io/app:nope"}]},
        "status": {"containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ErrImagePull",
            "message": "rpc error: code = NotFound desc = failed to pull and unpack image \"r.io/app:nope\": failed to resolve image: r.io/app:nope: not found"}}}]},
    });
    let now = SystemTime::now();
    let with_mirrors = Settings {
        hosts_dir: Some(hosts.path().to_path_buf()),
        ..settings()
    };
    let a = assess(finding(&pod).unwrap(), &with_mirrors, now, now).unwrap();
    assert!(a.mirrors);
    assert_eq!(
        a.decision,
        Decision::EventOnly {
            why: Why::BehindMirrors {
                kubelet: Verdict::NotFound
            }
        }
    );
    let plain = assess(finding(&pod).unwrap(), &settings(), now, now).unwrap();
    assert_eq!(
        plain.decision,
        Decision::Act {
            verdict: Verdict::NotFound
        }
    );
}

/// Every recorded kubelet message, on a Job's pod, through `assess`: the decision the
/// watch takes on a real node's words.
#[test]
fn recorded_failures_are_decided_as_the_table_says() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/watch/kubelet-1.35.4-containerd-2.2.9");
    let mut got: Vec<(String, String)> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    for path in names {
        let rec: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let w = &rec["waiting"][0];
        let pod = json!({
            "metadata": {"namespace": "n", "name": "p", "uid": "u", "resourceVersion": "1",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]},
            "spec": {"containers": [{"name": "main", "image": rec["image"]}]},
            "status": {"containerStatuses": [{"name": "main", "state": {"waiting": {"reason": w["reason"], "message": w["message"]}}}]},
        });
        let now = SystemTime::now();
        let a = assess(finding(&pod).unwrap(), &settings(), now, now).unwrap();
        let decision = match a.decision {
            Decision::Act { verdict } => format!("act {}", verdict.as_str()),
            Decision::EventOnly { why } => format!("event {why:?}"),
            Decision::Wait { .. } => "wait".into(),
            Decision::Ignore => "ignore".into(),
        };
        got.push((rec["scenario"].as_str().unwrap().to_string(), decision));
    }
    let want: Vec<(String, String)> = [
        ("auth-missing-tag", "act not_found"),
        ("auth-no-secret", "act unauthenticated"),
        ("auth-wrong-password", "act denied"),
        ("dns", "event TransientGraceOff"),
        ("invalid-name", "act invalid_reference"),
        ("mirror-401-upstream-down", "act unauthenticated"),
        ("mirror-404-upstream-down", "act not_found"),
        ("missing-repository", "act not_found"),
        ("missing-tag", "act not_found"),
        ("never-pull", "event Unknown"),
        ("platform-missing", "act platform_missing"),
        ("registry-down", "event TransientGraceOff"),
        ("status-429", "event TransientGraceOff"),
        ("status-503", "event TransientGraceOff"),
        ("x509", "event TransientGraceOff"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
}

/// Effects run in reconcile tasks, not in the stream reader: while one pod's DELETE takes
/// 10 s, a pod that starts failing 1 s in is acted on at once; and the first pod, changed
/// by its own mark meanwhile, is not acted on twice.
#[tokio::test(start_paused = true)]
async fn a_slow_delete_holds_up_neither_the_stream_nor_other_pods() {
    let cluster = FakeCluster::default();
    cluster.apply(job_pod("a", NOT_FOUND));
    let api = FakeApi {
        delete_takes: secs(10),
        ..FakeApi::new(&cluster)
    };
    let w = start_with(api, &cluster, settings());
    sleep(secs(1)).await;
    cluster.apply(job_pod("b", NOT_FOUND));
    sleep(secs(30)).await;
    let mut want = acted("a", Duration::ZERO);
    want.extend(acted("b", secs(1)));
    assert_eq!(w.api.calls(), want);
    assert_eq!(w.metrics.actions_of(Action::Deleted), 2);
    w.task.abort();
}
