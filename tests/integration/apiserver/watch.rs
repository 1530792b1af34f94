//! `pullcheck watch` on the real kube-apiserver, run as its own process with the args of the
//! chart's `FULLNAME-watch` Deployment (release [`RELEASE`], `watch.enabled=true`,
//! `webhook.enabled=false`) and a token of the chart's watch ServiceAccount, so the chart's
//! ClusterRole is all it gets.
//!
//! **Simulated status.** There is no kubelet, scheduler or controller-manager here. Pods are
//! created directly (owned by a Job or ReplicaSet created for them, or bare) with
//! `spec.nodeName` set to a node that doesn't exist, and the kubelet's stuck state is written
//! with a `pods/status` strategic-merge patch: a container waiting with the reason and
//! message recorded on a real node (tests/data/watch/kubelet-1.35.4-containerd-2.2.9). With
//! no kubelet to confirm, a pod deleted with its grace period gets a `deletionTimestamp` and
//! stays: that is what the tests assert after a delete.
//!
//! Each test has its own namespace, labeled with a label of its own that its watch is given
//! as `--namespace-label` (in place of the chart's default), so the watches of tests running
//! side by side never act on each other's pods.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    dry_run_create, ensure_namespace, free_port, get_json, helm_template, job, kubectl, kubectl_ok,
};
use crate::support::webhook::Webhook;
use crate::support::{self, process};

/// The chart release (and its namespace) whose watch objects the tests use.
const RELEASE: &str = "pcw";
/// `FULLNAME-watch`: the Deployment, ServiceAccount and ClusterRole.
const WATCH: &str = "pcw-pullcheck-watch";
const CONDITION: &str = "pullcheck.io/ImagePullFailed";
const FAKE_NODE: &str = "pullcheck-fake-node";
/// How long anything the watch does may take here.
const ACT_WITHIN: Duration = Duration::from_secs(30);

/// The chart's watch, applied once.
struct Chart {
    /// The Deployment's container args.
    args: Vec<String>,
    rust_log: String,
    /// The ClusterRole's rules.
    rules: Value,
    dir: tempfile::TempDir,
    token_file: PathBuf,
}

static CHART: OnceLock<Chart> = OnceLock::new();

fn chart() -> &'static Chart {
    assert!(
        super::required(),
        "needs a control plane: run scripts/apiserver-e2e.sh"
    );
    CHART.get_or_init(|| {
        let rendered = helm_template(
            RELEASE,
            RELEASE,
            &[
                "--set",
                "webhook.enabled=false",
                "--set",
                "watch.enabled=true",
            ],
        );
        ensure_namespace(RELEASE, &[]);
        kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&rendered));
        let deploy = get_json(&["-n", RELEASE, "deployment", WATCH]);
        let container = &deploy["spec"]["template"]["spec"]["containers"][0];
        let args = strings(&container["args"]);
        let rust_log = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "RUST_LOG")
            .and_then(|e| e["value"].as_str())
            .unwrap()
            .to_string();
        let rules = get_json(&["clusterrole", WATCH])["rules"].clone();
        let dir = support::temp_dir();
        let token_file = token(&dir, WATCH);
        Chart {
            args,
            rust_log,
            rules,
            dir,
            token_file,
        }
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// A token of ServiceAccount `sa` in [`RELEASE`], written to a file in `dir`.
fn token(dir: &tempfile::TempDir, sa: &str) -> PathBuf {
    let t = kubectl_ok(
        &["-n", RELEASE, "create", "token", sa, "--duration", "2h"],
        None,
    );
    let file = dir.path().join(format!("{sa}.token"));
    std::fs::write(&file, t.trim()).unwrap();
    file
}

fn server() -> String {
    std::env::var("PULLCHECK_CP_SERVER").expect("PULLCHECK_CP_SERVER")
}

/// The Deployment's args for a local run: `--listen` on a free loopback port, the chart's
/// `--namespace-label` replaced by `label=true`, then `extra`, then the API server.
fn watch_args(label: &str, extra: &[&str], token_file: &Path, server: &str) -> Vec<String> {
    let c = chart();
    let mut args: Vec<String> = c
        .args
        .iter()
        .map(|a| {
            if a.starts_with("--listen=") {
                format!("--listen=127.0.0.1:{}", free_port())
            } else if a.starts_with("--namespace-label=") {
                format!("--namespace-label={label}=true")
            } else {
                a.clone()
            }
        })
        .collect();
    assert!(
        args.iter().any(|a| a.starts_with("--namespace-label=")),
        "{args:?}"
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend([
        format!("--apiserver={server}"),
        format!("--apiserver-token-file={}", token_file.display()),
        format!(
            "--apiserver-ca-file={}",
            std::env::var("PULLCHECK_CP_CA").unwrap()
        ),
    ]);
    args
}

/// `pullcheck watch` as the chart runs it, for namespaces labeled `label=true`.
fn start_watch(label: &str, extra: &[&str]) -> Webhook {
    let c = chart();
    start_watch_with(label, extra, &c.token_file, &server())
}

fn start_watch_with(label: &str, extra: &[&str], token_file: &Path, server: &str) -> Webhook {
    let args = watch_args(label, extra, token_file, server);
    let w = support::webhook::start_watch(&args, &chart().rust_log);
    wait_for("the watch to be ready", ACT_WITHIN, || {
        (readyz(&w).0 == 200).then_some(())
    });
    w
}

/// `/readyz`: status and body.
fn readyz(w: &Webhook) -> (u16, String) {
    match support::http::request(&w.base, None, "GET", "/readyz", &[], b"") {
        Ok(r) => (r.status, r.text()),
        Err(_) => (0, String::new()),
    }
}

/// The sum of a metric's samples whose line starts with `prefix`.
fn metric(w: &Webhook, prefix: &str) -> u64 {
    let text = support::http::request(&w.base, None, "GET", "/metrics", &[], b"")
        .unwrap()
        .text();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next())
        .map(|v| v.parse::<f64>().unwrap() as u64)
        .sum()
}

fn actions(w: &Webhook, action: &str) -> u64 {
    metric(
        w,
        &format!("pullcheck_watch_actions_total{{action=\"{action}\"}}"),
    )
}

fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A recorded kubelet failure: (image, waiting states in order as (reason, message)).
fn recorded(scenario: &str) -> (String, Vec<(String, String)>) {
    let path = format!(
        "{}/tests/data/watch/kubelet-1.35.4-containerd-2.2.9/{scenario}.json",
        super::repo()
    );
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let waiting = rec["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["reason"].as_str().unwrap().to_string(),
                w["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (rec["image"].as_str().unwrap().to_string(), waiting)
}

pub(super) fn missing_tag() -> (String, String, String) {
    let (image, w) = recorded("missing-tag");
    (image, w[0].0.clone(), w[0].1.clone())
}

/// The condition's (and the Events') text for the recorded missing tag.
pub(super) fn not_found_text(image: &str) -> String {
    format!(
        "container main: image {image}: not_found (ErrImagePull: failed to resolve …: not found)"
    )
}

/// A namespace labeled `label=true` with a `default` ServiceAccount.
pub(super) fn watched_namespace(ns: &str, label: &str) {
    ensure_namespace(ns, &[(label, "true")]);
    super::service_account(ns, "default", &[]);
}

/// Create a Job (no controller-manager: it never gets pods of its own); its controller
/// reference for pods.
fn owning_job(ns: &str, name: &str, image: &str) -> Value {
    let j = job(name, image);
    kubectl_ok(&["-n", ns, "create", "-f", "-"], Some(&j.to_string()));
    let uid = get_json(&["-n", ns, "job", name])["metadata"]["uid"].clone();
    json!({"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid, "controller": true})
}

/// Create a pod bound to the fake node, owned by `owner` (a controller reference) or bare.
pub(super) fn create_pod(
    ns: &str,
    name: &str,
    image: &str,
    owner: Option<&Value>,
    annotations: Value,
) {
    let mut meta = json!({"name": name, "annotations": annotations});
    if let Some(o) = owner {
        meta["ownerReferences"] = json!([o]);
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": FAKE_NODE, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": image}]}});
    kubectl_ok(&["-n", ns, "create", "-f", "-"], Some(&pod.to_string()));
}

/// What the kubelet would write while the pull fails (simulated: a `pods/status` patch, with
/// its own conditions as the kubelet's status patch carries them).
pub(super) fn kubelet_status(ns: &str, pod: &str, image: &str, reason: &str, message: &str) {
    let patch = json!({"status": {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
             "message": "containers with unready status: [main]"},
        ],
        "containerStatuses": [{"name": "main", "image": image, "imageID": "", "ready": false,
            "started": false, "restartCount": 0,
            "state": {"waiting": {"reason": reason, "message": message}}}],
    }});
    kubectl_ok(
        &[
            "-n",
            ns,
            "patch",
            "pod",
            pod,
            "--subresource=status",
            "--type=strategic",
            "-p",
            &patch.to_string(),
        ],
        None,
    );
}

/// A Job pod stuck on the recorded missing tag.
fn stuck_job_pod(ns: &str, job_name: &str, pod: &str) {
    let (image, reason, message) = missing_tag();
    let owner = owning_job(ns, job_name, &image);
    create_pod(ns, pod, &image, Some(&owner), json!({}));
    kubelet_status(ns, pod, &image, &reason, &message);
}

fn get_pod(ns: &str, name: &str) -> Value {
    get_json(&["-n", ns, "pod", name])
}

fn condition(pod: &Value) -> Option<Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == CONDITION)
        .cloned()
}

/// Wait until the pod has a deletionTimestamp; the pod then.
fn wait_deleting(ns: &str, name: &str) -> Value {
    wait_for(&format!("{ns}/{name} to be deleted"), ACT_WITHIN, || {
        let p = get_pod(ns, name);
        p["metadata"]["deletionTimestamp"].is_string().then_some(p)
    })
}

/// Events in `ns` recorded by the watch, as (involvedObject kind, name, reason, message).
fn watch_events(ns: &str) -> Vec<(String, String, String, String)> {
    get_json(&["-n", ns, "events"])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"]["component"] == "pullcheck-watch")
        .map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                s(&e["involvedObject"]["kind"]),
                s(&e["involvedObject"]["name"]),
                s(&e["reason"]),
                s(&e["message"]),
            )
        })
        .collect()
}

/// A Job pod stuck in `ns`, acted on: once it is deleting, everything the watch had seen
/// before it is handled (one watch handles events in order).
fn barrier(ns: &str, name: &str) {
    stuck_job_pod(ns, name, name);
    wait_deleting(ns, name);
}

/// The log line (after the timestamp and level) that contains `needle`.
fn log_line(w: &Webhook, needle: &str) -> Option<String> {
    w.log()
        .lines()
        .find(|l| l.contains(needle))
        .map(|l| l.split_once("  ").map_or(l, |(_, r)| r).trim().to_string())
}

// ---- tests -----------------------------------------------------------------------------

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn watch_marks_a_stuck_job_pod_records_events_and_deletes_it() {
    let label = "pullcheck-e2e/watch-mark";
    let ns = "e2e-watch-mark";
    watched_namespace(ns, label);
    let w = start_watch(label, &[]);
    let (image, _, _) = missing_tag();
    stuck_job_pod(ns, "train", "train-0");
    let pod = wait_deleting(ns, "train-0");
    let cond = condition(&pod).unwrap_or_else(|| panic!("no condition: {pod}\n{}", w.log()));
    let text = not_found_text(&image);
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "NotFound");
    assert_eq!(cond["message"], text.as_str());
    assert!(cond["lastTransitionTime"].is_string(), "{cond}");
    // Deleted with the pod's grace period, not 0: with no kubelet to confirm, it stays.
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30, "{pod}");
    assert_eq!(actions(&w, "deleted"), 1);

    // "The kubelet" writes its status again (ImagePullBackOff, its own conditions): the
    // condition merges by type and is kept as it was.
    let (_, waiting) = recorded("missing-tag");
    kubelet_status(ns, "train-0", &image, &waiting[1].0, &waiting[1].1);
    let again = get_pod(ns, "train-0");
    assert_eq!(condition(&again), Some(cond));
    assert_eq!(again["metadata"]["uid"], pod["metadata"]["uid"]);

    let pod_message = format!(
        "{text}: marked {CONDITION} and deleting the pod, so its Job fails now instead of waiting in ImagePullBackOff"
    );
    let events = wait_for("the pod's and the Job's Events", ACT_WITHIN, || {
        let e = watch_events(ns);
        (e.len() >= 2).then_some(e)
    });
    let mut events = events;
    events.sort();
    assert_eq!(
        events,
        vec![
            (
                "Job".into(),
                "train".into(),
                "PullcheckImagePullFailed".into(),
                format!("pod train-0: {pod_message}")
            ),
            (
                "Pod".into(),
                "train-0".into(),
                "PullcheckImagePullFailed".into(),
                pod_message
            ),
        ]
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn inject_fail_fast_puts_the_condition_rule_first_and_the_apiserver_keeps_it() {
    let _ = chart();
    let ns = "e2e-watch-failfast";
    ensure_namespace(ns, &[]);
    let (image, _, _) = missing_tag();
    let out = process::output(
        process::pullcheck().args([
            "inject",
            "--image",
            support::CHECKER_IMAGE,
            "--fail-fast",
            "-f",
            "-",
        ]),
        Some(job("fail-fast", &image).to_string().as_bytes()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let injected = String::from_utf8(out.stdout).unwrap();
    kubectl_ok(&["-n", ns, "create", "-f", "-"], Some(&injected));
    let stored = get_json(&["-n", ns, "job", "fail-fast"]);
    let rules = stored["spec"]["podFailurePolicy"]["rules"].clone();
    let first = json!({"action": "FailJob",
        "onPodConditions": [{"type": CONDITION, "status": "True"}]});
    assert_eq!(rules[0], first, "{rules}");
    assert!(rules.as_array().unwrap().len() > 1, "{rules}");

    // The same rule last is valid too (order is the user's business; first-match is why
    // pullcheck puts it first).
    let mut last = stored.clone();
    last["metadata"] = json!({"name": "fail-fast-rule-last"});
    last.as_object_mut().unwrap().remove("status");
    last["spec"].as_object_mut().unwrap().remove("selector");
    if let Some(l) = last["spec"]["template"]["metadata"]["labels"].as_object_mut() {
        l.retain(|k, _| {
            !k.contains("controller-uid") && k != "job-name" && !k.ends_with("/job-name")
        });
    }
    let mut reordered: Vec<Value> = rules.as_array().unwrap()[1..].to_vec();
    reordered.push(first.clone());
    last["spec"]["podFailurePolicy"]["rules"] = json!(reordered);
    let dry = dry_run_create(ns, &last);
    assert_eq!(dry["spec"]["podFailurePolicy"]["rules"], json!(reordered));
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_restarted_watch_does_not_act_twice_and_finishes_an_orphaned_mark() {
    let label = "pullcheck-e2e/watch-restart";
    let ns = "e2e-watch-restart";
    watched_namespace(ns, label);
    let first = start_watch(label, &[]);
    stuck_job_pod(ns, "once", "once-0");
    wait_deleting(ns, "once-0");
    wait_for("two Events", ACT_WITHIN, || {
        (watch_events(ns).len() == 2).then_some(())
    });
    let before = get_pod(ns, "once-0");
    assert_eq!(first.terminate().code(), Some(0));

    // While no watch runs: a pod marked by a replica that stopped before its delete (the
    // mark 2 minutes old).
    let (image, reason, message) = missing_tag();
    let owner = owning_job(ns, "orphan", &image);
    create_pod(ns, "orphan-0", &image, Some(&owner), json!({}));
    kubelet_status(ns, "orphan-0", &image, &reason, &message);
    let old = support::time::rfc3339(std::time::SystemTime::now() - Duration::from_secs(120));
    let mark = json!({"status": {"conditions": [{"type": CONDITION, "status": "True",
        "reason": "NotFound", "message": not_found_text(&image), "lastTransitionTime": old}]}});
    kubectl_ok(
        &[
            "-n",
            ns,
            "patch",
            "pod",
            "orphan-0",
            "--subresource=status",
            "--type=strategic",
            "-p",
            &mark.to_string(),
        ],
        None,
    );
    let orphan_mark = condition(&get_pod(ns, "orphan-0")).unwrap();

    let second = start_watch(label, &[]);
    let orphan = wait_deleting(ns, "orphan-0");
    assert_eq!(
        condition(&orphan),
        Some(orphan_mark),
        "the mark was written again"
    );
    barrier(ns, "after-restart");
    let after = get_pod(ns, "once-0");
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "the restarted watch wrote to the pod it had acted on"
    );
    assert_eq!(condition(&after), condition(&before));
    let events = watch_events(ns);
    let on = |name: &str| {
        events
            .iter()
            .filter(|e| e.0 == "Pod" && e.1 == name)
            .count()
    };
    assert_eq!(on("once-0"), 1, "{events:?}");
    assert_eq!(on("orphan-0"), 0, "{events:?}");
    assert_eq!(on("after-restart"), 1, "{events:?}");
    assert_eq!(actions(&second, "deleted"), 2);
    assert_eq!(actions(&second, "conflict"), 0);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn two_watches_mark_and_delete_each_of_twenty_pods_once() {
    let label = "pullcheck-e2e/watch-pair";
    let ns = "e2e-watch-pair";
    watched_namespace(ns, label);
    let a = start_watch(label, &[]);
    let b = start_watch(label, &[]);
    let (image, reason, message) = missing_tag();
    let owner = owning_job(ns, "pair", &image);
    let names: Vec<String> = (0..20).map(|i| format!("pair-{i:02}")).collect();
    for n in &names {
        create_pod(ns, n, &image, Some(&owner), json!({}));
    }
    for n in &names {
        kubelet_status(ns, n, &image, &reason, &message);
    }
    for n in &names {
        wait_deleting(ns, n);
    }
    let deleted = wait_for("20 deletions in the metrics", ACT_WITHIN, || {
        let d = actions(&a, "deleted") + actions(&b, "deleted");
        (d >= 20).then_some(d)
    });
    assert_eq!(deleted, 20);
    let conflicts = actions(&a, "conflict") + actions(&b, "conflict");
    eprintln!(
        "two watches: deleted {} + {}, conflicts {} + {}",
        actions(&a, "deleted"),
        actions(&b, "deleted"),
        actions(&a, "conflict"),
        actions(&b, "conflict")
    );
    assert!(conflicts >= 1, "no conflict seen: both watches never raced");
    let events = wait_for("40 Events", ACT_WITHIN, || {
        let e = watch_events(ns);
        (e.len() >= 40).then_some(e)
    });
    assert_eq!(events.len(), 40, "{events:?}");
    for n in &names {
        let on_pod = events
            .iter()
            .filter(|e| e.0 == "Pod" && &e.1 == n && e.2 == "PullcheckImagePullFailed")
            .count();
        assert_eq!(on_pod, 1, "{n}: {events:?}");
        let c = condition(&get_pod(ns, n)).unwrap();
        assert_eq!(c["reason"], "NotFound");
    }
    let on_job = events
        .iter()
        .filter(|e| e.0 == "Job" && e.1 == "pair")
        .count();
    assert_eq!(on_job, 20);
}

/// A ServiceAccount in [`RELEASE`] bound to the chart's watch rules changed by `edit`.
fn service_account_with(name: &str, edit: impl Fn(&mut Vec<Value>)) -> PathBuf {
    let c = chart();
    let mut rules = c.rules.as_array().unwrap().clone();
    edit(&mut rules);
    super::service_account(RELEASE, name, &[]);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("pcw-{name}")}, "rules": rules});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("pcw-{name}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("pcw-{name}")},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": RELEASE}]});
    kubectl_ok(&["apply", "-f", "-"], Some(&role.to_string()));
    kubectl_ok(&["apply", "-f", "-"], Some(&binding.to_string()));
    token(&c.dir, name)
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn rbac_refusals_give_one_clear_line_and_change_nothing() {
    let label = "pullcheck-e2e/watch-rbac";
    let ns = "e2e-watch-rbac";
    watched_namespace(ns, label);

    // Without pods/status patch: the mark is refused, nothing is deleted.
    let no_status = service_account_with("watch-no-status", |rules| {
        rules.retain(|r| r["resources"] != json!(["pods/status"]))
    });
    let w = start_watch_with(label, &[], &no_status, &server());
    stuck_job_pod(ns, "refused", "refused-0");
    let line = wait_for("the refusal in the log", ACT_WITHIN, || {
        log_line(&w, "cannot mark the pod")
    });
    assert_eq!(
        line,
        format!(
            "WARN cannot mark the pod; the watch's ServiceAccount lacks a permission listed in docs/watch.md pod={ns}/refused-0 error=PATCH /api/v1/namespaces/{ns}/pods/refused-0/status: HTTP 403: pods \"refused-0\" is forbidden: User \"system:serviceaccount:{RELEASE}:watch-no-status\" cannot patch resource \"pods/status\" in API group \"\" in the namespace \"{ns}\""
        )
    );
    assert!(actions(&w, "failed") >= 1);
    assert_eq!(actions(&w, "deleted"), 0);
    let pod = get_pod(ns, "refused-0");
    assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
    assert_eq!(condition(&pod), None);
    assert!(watch_events(ns).is_empty());
    drop(w);

    // Without list: never ready, and says why.
    let no_list = service_account_with("watch-no-list", |rules| {
        for r in rules.iter_mut() {
            if r["resources"] == json!(["pods"]) {
                r["verbs"] = json!(["get", "watch", "delete"]);
            }
        }
    });
    let args = watch_args(label, &[], &no_list, &server());
    let w = support::webhook::start_watch(&args, &chart().rust_log);
    let line = wait_for("the list refusal in the log", ACT_WITHIN, || {
        log_line(&w, "cannot list pods")
    });
    assert_eq!(
        line,
        format!(
            "WARN cannot list pods error=LIST /api/v1/pods: HTTP 403: pods is forbidden: User \"system:serviceaccount:{RELEASE}:watch-no-list\" cannot list resource \"pods\" in API group \"\" at the cluster scope retry_in_s=0.5"
        )
    );
    assert_eq!(readyz(&w), (503, "not ready: no pod list yet\n".into()));
    assert_eq!(
        support::http::request(&w.base, None, "GET", "/healthz", &[], b"")
            .unwrap()
            .status,
        200
    );
}

/// A failed delete after a successful mark is retried ~5 s later, although the mark's own
/// MODIFIED event comes in between (issue 21: that event cleared the retry, so nothing
/// revisited the pod until its next status change, minutes under the kubelet's back-off).
#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_failed_delete_is_retried_though_the_mark_changed_the_pod() {
    let label = "pullcheck-e2e/watch-retry";
    let ns = "e2e-watch-retry";
    watched_namespace(ns, label);
    let no_delete = |rules: &mut Vec<Value>| {
        for r in rules.iter_mut() {
            if r["resources"] == json!(["pods"]) {
                r["verbs"] = json!(["get", "list", "watch"]);
            }
        }
    };
    let token = service_account_with("watch-no-delete", no_delete);
    let w = start_watch_with(label, &[], &token, &server());
    stuck_job_pod(ns, "retry", "retry-0");
    wait_for("the refused delete in the log", ACT_WITHIN, || {
        log_line(&w, "cannot delete the pod")
    });
    let pod = get_pod(ns, "retry-0");
    assert!(condition(&pod).is_some(), "marked: {pod}");
    assert!(pod["metadata"]["deletionTimestamp"].is_null(), "{pod}");
    // Grant delete; nothing touches the pod from here on, so only the watch's own retry
    // can delete it.
    service_account_with("watch-no-delete", |_| {});
    let granted = std::time::Instant::now();
    let pod = wait_for("the retried delete", Duration::from_secs(15), || {
        let p = get_pod(ns, "retry-0");
        p["metadata"]["deletionTimestamp"].is_string().then_some(p)
    });
    assert!(
        granted.elapsed() < Duration::from_secs(15),
        "deleted {:?} after the grant",
        granted.elapsed()
    );
    assert_eq!(pod["metadata"]["deletionGracePeriodSeconds"], 30, "{pod}");
    assert_eq!(actions(&w, "deleted"), 1);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn deployment_and_bare_pods_get_an_event_only() {
    let label = "pullcheck-e2e/watch-owners";
    let ns = "e2e-watch-owners";
    watched_namespace(ns, label);
    let w = start_watch(label, &[]);
    let (image, reason, message) = missing_tag();
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-7d4b9"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "main", "image": image}]}}}});
    kubectl_ok(&["-n", ns, "create", "-f", "-"], Some(&rs.to_string()));
    let uid = get_json(&["-n", ns, "replicaset", "web-7d4b9"])["metadata"]["uid"].clone();
    let owner = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9",
        "uid": uid, "controller": true});
    create_pod(ns, "web-7d4b9-x2k4p", &image, Some(&owner), json!({}));
    create_pod(ns, "bare", &image, None, json!({}));
    kubelet_status(ns, "web-7d4b9-x2k4p", &image, &reason, &message);
    kubelet_status(ns, "bare", &image, &reason, &message);
    barrier(ns, "owners-barrier");
    let text = not_found_text(&image);
    let mut events: Vec<_> = watch_events(ns)
        .into_iter()
        .filter(|e| e.2 == "PullcheckNotActing")
        .collect();
    events.sort();
    assert_eq!(
        events,
        vec![
            (
                "Pod".into(),
                "bare".into(),
                "PullcheckNotActing".into(),
                format!(
                    "{text}: not_found but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done"
                )
            ),
            (
                "Pod".into(),
                "web-7d4b9-x2k4p".into(),
                "PullcheckNotActing".into(),
                format!(
                    "{text}: not_found but the pod's controller is a ReplicaSet (a Deployment's), not a batch/v1 Job: deleting it would only make its controller recreate it; nothing done"
                )
            ),
        ]
    );
    for name in ["bare", "web-7d4b9-x2k4p"] {
        let p = get_pod(ns, name);
        assert_eq!(condition(&p), None, "{name}");
        assert!(p["metadata"]["deletionTimestamp"].is_null(), "{name}");
    }
    assert_eq!(actions(&w, "event_only"), 2);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn dry_run_writes_nothing() {
    let label = "pullcheck-e2e/watch-dry";
    let ns = "e2e-watch-dry";
    watched_namespace(ns, label);
    let w = start_watch(label, &["--dry-run"]);
    stuck_job_pod(ns, "dry", "dry-0");
    let before = get_pod(ns, "dry-0");
    wait_for("the dry-run count", ACT_WITHIN, || {
        (actions(&w, "dry_run") == 1).then_some(())
    });
    let line = log_line(&w, "dry run: would mark and delete the pod").unwrap();
    assert!(line.contains("pod=e2e-watch-dry/dry-0"), "{line}");
    let after = get_pod(ns, "dry-0");
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert_eq!(condition(&after), None);
    assert!(after["metadata"]["deletionTimestamp"].is_null());
    assert!(watch_events(ns).is_empty());
    assert_eq!(actions(&w, "deleted"), 0);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn once_json_reports_what_the_watch_would_do_in_its_namespaces() {
    let c = chart();
    let label = "pullcheck-e2e/watch-once";
    let ns = "e2e-watch-once";
    watched_namespace(ns, label);
    let other = "e2e-watch-once-unlabeled";
    ensure_namespace(other, &[]);
    super::service_account(other, "default", &[]);
    let (image, reason, message) = missing_tag();
    let (down_image, down) = recorded("registry-down");
    let owner = owning_job(ns, "a-job", &image);
    create_pod(ns, "a-job-0", &image, Some(&owner), json!({}));
    kubelet_status(ns, "a-job-0", &image, &reason, &message);
    create_pod(ns, "b-bare", &image, None, json!({}));
    kubelet_status(ns, "b-bare", &image, &reason, &message);
    let owner = owning_job(ns, "c-down", &down_image);
    create_pod(ns, "c-down-0", &down_image, Some(&owner), json!({}));
    kubelet_status(ns, "c-down-0", &down_image, &down[0].0, &down[0].1);
    create_pod(
        ns,
        "d-skipped",
        &image,
        None,
        json!({"pullcheck.io/skip": "true"}),
    );
    kubelet_status(ns, "d-skipped", &image, &reason, &message);
    // Out of scope: not labeled.
    create_pod(other, "elsewhere", &image, None, json!({}));
    kubelet_status(other, "elsewhere", &image, &reason, &message);

    let args = watch_args(label, &["--once", "-o", "json"], &c.token_file, &server());
    let out = process::output(
        process::pullcheck()
            .args(&args)
            .env("RUST_LOG", &c.rust_log),
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = not_found_text(&image);
    let row = |name: &str, img: &str, verdict: &str, action: &str, why: String| {
        json!({"namespace": ns, "name": name, "container": "main", "image": img,
               "reason": "ErrImagePull", "verdict": verdict, "action": action, "why": why,
               "marked": false})
    };
    assert_eq!(
        got,
        json!({"schema_version": 1, "exit_code": 0, "pods": [
            row("a-job-0", &image, "not_found", "delete", format!("{text}: would mark and delete the pod")),
            row("b-bare", &image, "not_found", "event",
                "not_found but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done".into()),
            row("c-down-0", &down_image, "transient", "event",
                "a transient failure and --transient-grace is off; the kubelet keeps retrying".into()),
        ]})
    );
    // The table, aligned as kubectl aligns its own, and --exit-code: 11, the code of the
    // one pod it would delete (the others are only reported).
    let args = watch_args(label, &["--once", "--exit-code"], &c.token_file, &server());
    let out = process::output(
        process::pullcheck()
            .args(&args)
            .env("RUST_LOG", &c.rust_log),
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(11),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    let pod = format!("{ns}/b-bare");
    let width = format!("{ns}/c-down-0").len() + 3;
    assert_eq!(
        lines[0],
        format!(
            "{:<width$}CONTAINER   KUBELET        VERDICT     ACTION   WHY",
            "POD"
        ),
        "{table}"
    );
    assert_eq!(
        lines[2],
        format!(
            "{pod:<width$}main        ErrImagePull   not_found   event    not_found but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done"
        ),
        "{table}"
    );
    assert_eq!(lines.len(), 4, "{table}");
    // --once changes nothing.
    assert!(watch_events(ns).is_empty());
    assert_eq!(condition(&get_pod(ns, "a-job-0")), None);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_pod_in_an_unlabeled_namespace_is_left_alone() {
    let label = "pullcheck-e2e/watch-scope";
    let ns = "e2e-watch-scope";
    watched_namespace(ns, label);
    let outside = "e2e-watch-scope-unlabeled";
    ensure_namespace(outside, &[]);
    super::service_account(outside, "default", &[]);
    let w = start_watch(label, &[]);
    stuck_job_pod(outside, "outside", "outside-0");
    let before = get_pod(outside, "outside-0");
    barrier(ns, "scope-barrier");
    let after = get_pod(outside, "outside-0");
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert!(watch_events(outside).is_empty());
    assert_eq!(actions(&w, "deleted"), 1);
}

/// A second kube-apiserver on the same etcd (the harness's flags, another port), so
/// restarting it disturbs no other test.
struct SecondApiServer {
    args: Vec<String>,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl SecondApiServer {
    fn start(dir: &Path) -> SecondApiServer {
        let cp = std::env::var("PULLCHECK_CP_DIR").expect("PULLCHECK_CP_DIR");
        let pid = std::fs::read_to_string(format!("{cp}/kube-apiserver.pid")).unwrap();
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.trim())).unwrap();
        let mut args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let port = free_port();
        let i = args.iter().position(|a| a == "--secure-port").unwrap();
        args[i + 1] = port.to_string();
        let mut s = SecondApiServer {
            args,
            port,
            child: None,
            log: dir.join("kube-apiserver-2.log"),
        };
        s.run();
        s
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn run(&mut self) {
        let log = std::fs::File::create(&self.log).unwrap();
        let mut cmd = std::process::Command::new(&self.args[0]);
        cmd.args(&self.args[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.child = Some(process::spawn_tied(cmd).unwrap());
        let url = self.url();
        wait_for(
            "the second kube-apiserver",
            Duration::from_secs(120),
            || {
                kubectl(&["--server", &url, "get", "--raw", "/readyz"], None)
                    .ok
                    .then_some(())
            },
        );
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            process::signal(c.id(), libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(20);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for SecondApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn the_watch_keeps_working_through_an_apiserver_restart() {
    let c = chart();
    let label = "pullcheck-e2e/watch-restart-apiserver";
    let ns = "e2e-watch-apiserver-restart";
    watched_namespace(ns, label);
    let mut api = SecondApiServer::start(c.dir.path());
    let w = start_watch_with(label, &[], &c.token_file, &api.url());
    barrier(ns, "before");
    api.stop();
    // The watch notices (its stream ends, the list fails) and loses readiness.
    wait_for("readiness lost", ACT_WITHIN, || {
        (readyz(&w).0 == 503).then_some(())
    });
    api.run();
    wait_for("readiness back", Duration::from_secs(60), || {
        (readyz(&w).0 == 200).then_some(())
    });
    stuck_job_pod(ns, "after", "after-0");
    let pod = wait_deleting(ns, "after-0");
    assert_eq!(condition(&pod).unwrap()["reason"], "NotFound");
    assert_eq!(actions(&w, "deleted"), 2);
    assert!(metric(&w, "pullcheck_watch_relists_total") >= 2);
    assert!(log_line(&w, "cannot list pods").is_some(), "{}", w.log());
}
