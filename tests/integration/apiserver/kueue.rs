//! The Kueue admission check (`pullcheck webhook --kueue-admission-check`) on the real
//! kube-apiserver, with Kueue v0.19.2's own CRDs (`config/components/crd/bases` of the
//! `sigs.k8s.io/kueue` module, downloaded by scripts/apiserver-e2e.sh, not built) and the
//! chart's RBAC for it (`admissionCheck.enabled=true`), under that ServiceAccount's token.
//!
//! **Simulated Kueue.** No Kueue controller runs here (scripts/kueue/answers.sh runs the
//! real one). The tests write what Kueue writes when it reserves quota: a Workload's
//! `status.admission` (the assigned flavors), `QuotaReserved=True` and the `Pending`
//! entries of `status.admissionChecks`, by server-side apply as field manager
//! `kueue-admission`, as Kueue does; then they read what pullcheck answered.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{ensure_namespace, get_json, helm_template, kubectl, kubectl_ok};
use crate::support::webhook::Webhook;
use crate::support::{self, fixture};

/// The chart release whose admission-check RBAC the controller runs under.
const RELEASE: &str = "pck";
/// Its ServiceAccount (`FULLNAME`).
const SA: &str = "pck-pullcheck";
const NS: &str = "e2e-kueue";
const OURS: &str = "e2e-image-check";
const OTHER: &str = "e2e-other-check";
const WITHIN: Duration = Duration::from_secs(30);

/// Every answering process of these tests answers every Workload with one of our checks:
/// the tests run one at a time so each counts only its own process's answers.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kueue's CRDs, applied once (the audit's tests read Workloads too).
pub(super) fn crds() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let dir = std::env::var("PULLCHECK_KUEUE_CRDS")
            .expect("PULLCHECK_KUEUE_CRDS (scripts/apiserver-e2e.sh sets it)");
        super::apply_crds(
            &[&dir],
            &[
                "workloads.kueue.x-k8s.io",
                "admissionchecks.kueue.x-k8s.io",
                "resourceflavors.kueue.x-k8s.io",
            ],
        );
    });
}

/// The chart's admission-check RBAC and ServiceAccount for [`RELEASE`]; a token of it.
fn token(dir: &tempfile::TempDir) -> PathBuf {
    let rendered = helm_template(
        RELEASE,
        RELEASE,
        &[
            "--show-only",
            "templates/serviceaccount.yaml",
            "--show-only",
            "templates/rbac.yaml",
            "--set",
            "admissionCheck.enabled=true",
        ],
    );
    ensure_namespace(RELEASE, &[]);
    kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&rendered));
    let t = kubectl_ok(
        &["-n", RELEASE, "create", "token", SA, "--duration", "2h"],
        None,
    );
    let file = dir.path().join(format!("{SA}.token"));
    std::fs::write(&file, t.trim()).unwrap();
    file
}

/// `pullcheck webhook` with the main test webhook's arguments, on its own port, as
/// [`SA`] (`token_file`), with `--kueue-admission-check`.
fn start(token_file: &std::path::Path) -> Webhook {
    start_with(token_file, &[])
}

/// [`start`] with `extra` arguments.
fn start_with(token_file: &std::path::Path, extra: &[&str]) -> Webhook {
    let env = super::env().unwrap();
    let mut args: Vec<String> = env
        .args
        .iter()
        .map(|a| {
            if a.starts_with("--listen=") {
                format!("--listen=127.0.0.1:{}", super::free_port())
            } else if a.starts_with("--apiserver-token-file=") {
                format!("--apiserver-token-file={}", token_file.display())
            } else {
                a.clone()
            }
        })
        .collect();
    args.push("--kueue-admission-check".into());
    args.extend(extra.iter().map(|a| a.to_string()));
    support::webhook::start(&args, &env.rust_log)
}

fn admission_check(name: &str, controller: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
           "metadata": {"name": name}, "spec": {"controllerName": controller}})
}

fn flavor(name: &str, arch: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
           "metadata": {"name": name},
           "spec": {"nodeLabels": {"kubernetes.io/arch": arch, "kubernetes.io/os": "linux"}}})
}

fn workload(name: &str, image: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
           "metadata": {"name": name, "namespace": NS},
           "spec": {"queueName": "team", "podSets": [{"name": "main", "count": 1,
               "template": {"spec": {"restartPolicy": "Never",
                   "containers": [{"name": "trainer", "image": image,
                       "resources": {"requests": {"cpu": "1"}}}]}}}]}})
}

/// What Kueue writes when it reserves quota on `flavor` (`quota`: `QuotaReserved` True or
/// False), with our check and another controller's both `Pending`.
fn reserve(name: &str, flavor: &str, quota: bool) {
    let now = "2026-12-02T07:00:00Z";
    let pending = |check: &str| json!({"name": check, "state": "Pending", "message": "", "lastTransitionTime": now});
    let status = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
    "metadata": {"name": name, "namespace": NS},
    "status": {
        "admission": {"clusterQueue": "gpu", "podSetAssignments": [{"name": "main",
            "count": 1, "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": "1"}}]},
        "conditions": [{"type": "QuotaReserved", "status": if quota { "True" } else { "False" },
            "reason": if quota { "QuotaReserved" } else { "Pending" },
            "message": "simulated", "lastTransitionTime": now}],
        "admissionChecks": [pending(OURS), pending(OTHER)],
    }});
    kubectl_ok(
        &[
            "apply",
            "--server-side",
            "--subresource=status",
            "--field-manager=kueue-admission",
            "--force-conflicts",
            "-f",
            "-",
        ],
        Some(&status.to_string()),
    );
}

/// The entry of `check` in the Workload's `status.admissionChecks`.
fn entry(name: &str, check: &str) -> Value {
    get_json(&["-n", NS, "workloads.kueue.x-k8s.io", name])["status"]["admissionChecks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == check)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Wait until the entry of our check leaves `Pending`; `(state, message)`.
fn answered(name: &str) -> (String, String) {
    let t = Instant::now();
    loop {
        let e = entry(name, OURS);
        if e["state"] != "Pending" && !e.is_null() {
            return (
                e["state"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            );
        }
        assert!(t.elapsed() < WITHIN, "{name}: still {e}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn create(obj: &Value) {
    kubectl_ok(
        &["apply", "--server-side", "-f", "-"],
        Some(&obj.to_string()),
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn workloads_are_answered_for_their_flavors_platform_and_other_checks_are_left_alone() {
    let _one = serial();
    crds();
    let dir = support::temp_dir();
    let token_file = token(&dir);
    ensure_namespace(NS, &[]);
    super::service_account(NS, "default", &[]);
    create(&admission_check(OURS, "pullcheck.io/image-check"));
    create(&admission_check(OTHER, "example.com/other"));
    create(&flavor("e2e-amd", "amd64"));
    create(&flavor("e2e-arm", "arm64"));
    let w = start(&token_file);

    // Our AdmissionCheck is made Active at its generation; the other is not touched.
    let t = Instant::now();
    let active = loop {
        let c = get_json(&["admissioncheck.kueue.x-k8s.io", OURS]);
        if let Some(a) = c["status"]["conditions"].as_array().and_then(|a| a.first()) {
            break a.clone();
        }
        assert!(t.elapsed() < WITHIN, "no Active condition: {}", w.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (
            &active["type"],
            &active["status"],
            &active["reason"],
            &active["observedGeneration"]
        ),
        (
            &json!("Active"),
            &json!("True"),
            &json!("Active"),
            &json!(1)
        )
    );
    assert_eq!(
        get_json(&["admissioncheck.kueue.x-k8s.io", OTHER])["status"],
        Value::Null
    );

    let f = fixture();
    let missing = format!("{}/oci/app:no-such-tag", f.token.host);
    let multi = f.images.multi_index.reference(&f.token);
    let arm_only = f.images.arm_only.reference(&f.token);
    let cases = [
        ("w-missing", missing.clone(), "e2e-amd", true),
        ("w-present", multi.clone(), "e2e-arm", true),
        ("w-platform", arm_only.clone(), "e2e-amd", true),
        ("w-no-quota", missing.clone(), "e2e-amd", false),
    ];
    for (name, image, fl, quota) in &cases {
        create(&workload(name, image));
        reserve(name, fl, *quota);
    }
    let (state, message) = answered("w-missing");
    assert_eq!(state, "Rejected", "{}", w.log());
    assert!(
        message.starts_with(&format!("pullcheck: trainer: {missing}: not_found (")),
        "{message}"
    );
    // The same line as an Event of ours on the Workload, written under the chart's RBAC
    // (it has no job owner here: one Event).
    let t = Instant::now();
    let events = loop {
        let e = get_json(&[
            "events",
            "-n",
            NS,
            "--field-selector",
            "involvedObject.name=w-missing,reason=PullcheckImageCheckRejected",
        ]);
        let items = e["items"].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            break items;
        }
        assert!(t.elapsed() < WITHIN, "no Event on w-missing: {}", w.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (
            &events[0]["type"],
            &events[0]["involvedObject"]["kind"],
            &events[0]["reportingComponent"],
            &events[0]["message"]
        ),
        (
            &json!("Warning"),
            &json!("Workload"),
            &json!("pullcheck.io/image-check"),
            &json!(message)
        )
    );
    assert_eq!(
        answered("w-present"),
        (
            "Ready".to_string(),
            "pullcheck: the image is pullable".to_string()
        )
    );
    let (state, message) = answered("w-platform");
    assert_eq!(state, "Rejected");
    assert!(
        message.starts_with(&format!(
            "pullcheck: trainer: {arm_only}: platform_missing ("
        )),
        "{message}"
    );
    // The other controller's entry is as Kueue wrote it, and the owner of ours is us.
    assert_eq!(
        entry("w-missing", OTHER),
        json!({"name": OTHER, "state": "Pending", "message": "",
               "lastTransitionTime": "2026-12-02T07:00:00Z"})
    );
    let managers: Vec<String> = get_json(&[
        "-n",
        NS,
        "workloads.kueue.x-k8s.io",
        "w-missing",
        "--show-managed-fields",
    ])["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["subresource"] == "status")
        .map(|m| m["manager"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        managers,
        vec![
            "kueue-admission".to_string(),
            "pullcheck-image-check".to_string()
        ]
    );
    // No quota: not ours to answer yet.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(entry("w-no-quota", OURS)["state"], "Pending");

    // Kueue resets the check to Pending after an eviction and reserves quota again: it is
    // answered again (here from the verdict cache, within milliseconds: the log counts
    // the answers, the entry may already be Rejected again when read).
    let answers = |w: &Webhook| {
        w.log()
            .lines()
            .filter(|l| {
                l.contains("workload=e2e-kueue/w-missing") && l.contains("state=\"Rejected\"")
            })
            .count()
    };
    assert_eq!(answers(&w), 1, "{}", w.log());
    reserve("w-missing", "e2e-amd", true);
    assert_eq!(answered("w-missing").0, "Rejected");
    let t = Instant::now();
    while answers(&w) < 2 {
        assert!(t.elapsed() < WITHIN, "not answered again: {}", w.log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn without_the_charts_kueue_rbac_the_refusal_is_one_clear_line() {
    let _one = serial();
    crds();
    let dir = support::temp_dir();
    // The ServiceAccount without the admission-check ClusterRole: the chart's RBAC of the
    // first test is bound to the same name, so this uses a second release's account.
    let rendered = helm_template(
        "pck-norbac",
        "pck-norbac",
        &["--show-only", "templates/serviceaccount.yaml"],
    );
    ensure_namespace("pck-norbac", &[]);
    kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&rendered));
    let t = kubectl_ok(
        &[
            "-n",
            "pck-norbac",
            "create",
            "token",
            "pck-norbac-pullcheck",
            "--duration",
            "2h",
        ],
        None,
    );
    let file = dir.path().join("norbac.token");
    std::fs::write(&file, t.trim()).unwrap();
    let w = start(&file);
    let t0 = Instant::now();
    let line = loop {
        if let Some(l) = w
            .log()
            .lines()
            .find(|l| l.contains("cannot list workloads"))
        {
            break l.to_string();
        }
        assert!(t0.elapsed() < WITHIN, "no refusal logged: {}", w.log());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        line.contains(
            "LIST /apis/kueue.x-k8s.io/v1beta2/workloads: HTTP 403: workloads.kueue.x-k8s.io is forbidden: User \"system:serviceaccount:pck-norbac:pck-norbac-pullcheck\" cannot list resource \"workloads\" in API group \"kueue.x-k8s.io\" at the cluster scope"
        ),
        "{line}"
    );
    let _ = kubectl(&["delete", "namespace", "pck-norbac", "--wait=false"], None);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn two_replicas_with_the_charts_lease_answer_one_at_a_time() {
    let _one = serial();
    crds();
    let dir = support::temp_dir();
    let token_file = token(&dir);
    // The chart's lease name: its Role grants get/patch of that Lease only.
    let lease = format!("--kueue-lease={RELEASE}/{SA}-kueue-admission-check");
    let leading = |w: &Webhook| w.log().contains("lease acquired: leading");
    let a = start_with(&token_file, &[&lease]);
    let t = Instant::now();
    while !leading(&a) {
        assert!(t.elapsed() < WITHIN, "a never leads: {}", a.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    let b = start_with(&token_file, &[&lease]);
    std::thread::sleep(Duration::from_secs(5));
    assert!(!leading(&b), "both lead: {}", b.log());
    let holder = |_: ()| {
        get_json(&[
            "-n",
            RELEASE,
            "lease",
            &format!("{SA}-kueue-admission-check"),
        ])["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let first = holder(());
    // a stops (SIGTERM, no hand-over): b takes the Lease once a's 15 s have passed.
    a.terminate();
    let t = Instant::now();
    while !leading(&b) {
        assert!(
            t.elapsed() < Duration::from_secs(25),
            "b never took over: {}",
            b.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let took = t.elapsed();
    assert!(took >= Duration::from_secs(5), "took over after {took:?}");
    assert_ne!(holder(()), first);
    let lease_obj = get_json(&[
        "-n",
        RELEASE,
        "lease",
        &format!("{SA}-kueue-admission-check"),
    ]);
    assert_eq!(lease_obj["spec"]["leaseTransitions"], 1);
    assert_eq!(lease_obj["spec"]["leaseDurationSeconds"], 15);
}
