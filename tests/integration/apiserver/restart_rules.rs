//! Container restart rules (KEP-5307) against real kube-apiservers: what the API keeps and
//! validates, the webhook's version check and dry-run probe (src/webhook/restart_rules.rs),
//! the chart's probe permission (dry runs only), and a second kube-apiserver v1.35 started
//! with `--feature-gates=ContainerRestartRules=false` (scripts/apiserver-e2e.sh), which drops
//! the fields silently.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{
    ENABLE_LABEL, Out, RELEASE, RELEASE_NS, create, dry_run_create, ensure_namespace, env,
    free_port, get_json, helm_template, job, kubectl, kubectl_ok, present, run, second_webhook,
    service_account,
};
use crate::support::{self, fixture};

/// The pullcheck init container's restart fields under `--transient restart` (KEP-5307).
fn restart_fields() -> (Value, Value) {
    (
        json!("Never"),
        json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [20]}}]),
    )
}

/// `restartPolicy` and `restartPolicyRules` of the first init container at `pointer`.
fn init_restart(obj: &Value, pointer: &str) -> (Value, Value) {
    let c = obj
        .pointer(&format!("{pointer}/spec/initContainers/0"))
        .unwrap_or_else(|| panic!("no init container at {pointer}: {obj}"));
    assert_eq!(c["name"], "pullcheck");
    (c["restartPolicy"].clone(), c["restartPolicyRules"].clone())
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn transient_restart_rules_are_accepted_kept_and_validated_by_the_apiserver() {
    let _env = env().expect("setup");
    let version: Value =
        serde_json::from_str(&kubectl_ok(&["version", "-o", "json"], None)).unwrap();
    let server = version["serverVersion"]["gitVersion"].as_str().unwrap();
    assert!(server.starts_with("v1.35."), "kube-apiserver {server}");
    // Not labeled: the webhook stays out, what is stored is what inject wrote.
    let ns = "e2e-restart-rules";
    ensure_namespace(ns, &[]);
    // No controller-manager here: the bare Pod below needs its ServiceAccount made by hand.
    service_account(ns, "default", &[]);
    for (name, restart_policy) in [
        ("restart-never", "Never"),
        ("restart-onfailure", "OnFailure"),
    ] {
        let mut j = job(name, &present());
        j["spec"]["activeDeadlineSeconds"] = json!(900);
        j["spec"]["template"]["spec"]["restartPolicy"] = json!(restart_policy);
        let out = support::process::output(
            support::process::pullcheck().args([
                "inject",
                "--image",
                support::CHECKER_IMAGE,
                "--fail-fast",
                "--transient",
                "restart",
                "--kubernetes-version",
                server,
                "-f",
                "-",
            ]),
            Some(j.to_string().as_bytes()),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let injected = String::from_utf8(out.stdout).unwrap();
        kubectl_ok(&["-n", ns, "create", "-f", "-"], Some(&injected));
        let stored = get_json(&["-n", ns, "job", name]);
        // The fields survived: a 1.35 apiserver with the gate off would drop them here.
        assert_eq!(
            init_restart(&stored, "/spec/template"),
            restart_fields(),
            "{name}"
        );
        if restart_policy == "Never" {
            let rules = &stored["spec"]["podFailurePolicy"]["rules"];
            // Since the watch's condition rule went first (index 0), the Count rule for
            // the transient exit code is the third: FailJob condition, FailJob exit codes, Count.
            assert_eq!(
                rules[0]["onPodConditions"][0]["type"], "pullcheck.io/ImagePullFailed",
                "{rules}"
            );
            assert_eq!(rules[2]["action"], "Count", "{rules}");
            assert_eq!(rules[2]["onExitCodes"]["values"], json!([20]));
        } else {
            assert!(stored["spec"].get("podFailurePolicy").is_none());
        }
        // The same pod spec as a bare Pod (what the Job controller would create).
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": stored["spec"]["template"]["spec"]});
        let dry = dry_run_create(ns, &pod);
        assert_eq!(init_restart(&dry, ""), restart_fields(), "{name} pod");
    }
    // Rules without restartPolicy: refused, so the API really validates them.
    let mut j = get_json(&["-n", ns, "job", "restart-never"]);
    let spec = j["spec"]["template"]["spec"].clone();
    let mut bad = job("restart-rules-alone", &present());
    bad["spec"]["template"]["spec"] = spec;
    bad["spec"]["template"]["spec"]["initContainers"][0]
        .as_object_mut()
        .unwrap()
        .remove("restartPolicy");
    bad["spec"]["podFailurePolicy"] = j["spec"]["podFailurePolicy"].take();
    let o = kubectl(
        &["-n", ns, "create", "--dry-run=server", "-f", "-"],
        Some(&bad.to_string()),
    );
    assert!(!o.ok, "accepted: {}", o.stdout);
    assert!(
        o.stderr.contains(
            "spec.template.spec.initContainers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"
        ),
        "{}",
        o.stderr
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn the_webhook_asks_the_apiserver_version_and_injects_restart_rules() {
    let env = env().expect("setup");
    let label = "pullcheck-e2e/restart";
    let restart = second_webhook(
        env,
        "pc-restart",
        label,
        "--transient=",
        "--transient=restart",
    );
    let ns = "e2e-restart";
    ensure_namespace(ns, &[(label, "true")]);
    let o = create(ns, &job("restarted", &present()));
    assert!(o.ok, "refused: {}\nlog:\n{}", o.stderr, restart.log());
    let stored = get_json(&["-n", ns, "job", "restarted"]);
    assert_eq!(init_restart(&stored, "/spec/template"), restart_fields());
    // The chart's probe flags reached it, and the dry-run Pod came back with the fields.
    let line = "Kubernetes 1.35, and a dry-run Pod kept restartPolicy and restartPolicyRules: --transient restart writes container restart rules";
    let log = restart.log_containing(line);
    assert!(log.contains(line), "{log}");
}

/// The probe's permission: the chart's ServiceAccount may create Pods in its namespace as a
/// dry run, and nothing else (the ValidatingAdmissionPolicy), and nowhere else (the Role).
#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn the_chart_lets_the_webhook_dry_run_pods_in_its_namespace_only() {
    let env = env().expect("setup");
    let token = std::fs::read_to_string(env.dir.path().join("token")).unwrap();
    let token = token.trim();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "probe-like-"},
        "spec": {"serviceAccountName": RELEASE, "automountServiceAccountToken": false,
                 "containers": [{"name": "c", "image": env.inject_image}]}})
    .to_string();
    let as_webhook = |ns: &str, extra: &[&str]| {
        let mut args = vec![
            "--token", token, "-n", ns, "create", "-o", "name", "-f", "-",
        ];
        args.extend_from_slice(extra);
        kubectl(&args, Some(&pod))
    };
    // A new policy takes effect once the API server's informer has it: retry briefly.
    let deadline = Instant::now() + Duration::from_secs(20);
    let real = loop {
        let o = as_webhook(RELEASE_NS, &[]);
        if !o.ok || Instant::now() > deadline {
            break o;
        }
        // Created for real before the policy was in force: remove it and try again.
        let name = o.stdout.trim().to_string();
        kubectl_ok(&["-n", RELEASE_NS, "delete", &name, "--wait=false"], None);
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(!real.ok, "created for real: {}", real.stdout);
    assert!(
        real.stderr.contains(
            "pullcheck's ServiceAccount may create Pods only as a dry run (the restart-rules probe)"
        ),
        "{}",
        real.stderr
    );
    let dry = as_webhook(RELEASE_NS, &["--dry-run=server"]);
    assert!(dry.ok, "dry run refused: {}", dry.stderr);
    assert!(dry.stdout.starts_with("pod/probe-like-"), "{}", dry.stdout);
    let ns = "e2e-probe-elsewhere";
    ensure_namespace(ns, &[]);
    let elsewhere = as_webhook(ns, &["--dry-run=server"]);
    assert!(
        !elsewhere.ok,
        "dry run allowed in {ns}: {}",
        elsewhere.stdout
    );
    assert!(
        elsewhere.stderr.contains(&format!(
            "User \"system:serviceaccount:{RELEASE_NS}:{RELEASE}\" cannot create resource \"pods\" in API group \"\" in the namespace \"{ns}\""
        )),
        "{}",
        elsewhere.stderr
    );
}

/// The second control plane (kube-apiserver v1.35 with the ContainerRestartRules gate off).
struct GateOff {
    kubeconfig: PathBuf,
    server: String,
    ca: PathBuf,
}

fn gate_off() -> GateOff {
    let dir = std::env::var("PULLCHECK_CP_GATE_OFF_DIR")
        .expect("PULLCHECK_CP_GATE_OFF_DIR: run scripts/apiserver-e2e.sh");
    let dir = PathBuf::from(dir);
    GateOff {
        kubeconfig: dir.join("kubeconfig"),
        server: std::env::var("PULLCHECK_CP_GATE_OFF_SERVER")
            .expect("PULLCHECK_CP_GATE_OFF_SERVER"),
        ca: dir.join("pki/ca.crt"),
    }
}

impl GateOff {
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Out {
        let mut a = vec!["--kubeconfig", self.kubeconfig.to_str().unwrap()];
        a.extend_from_slice(args);
        run("kubectl", &a, stdin)
    }

    fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let o = self.kubectl(args, stdin);
        assert!(
            o.ok,
            "kubectl (gate off) {}: {}{}",
            args.join(" "),
            o.stdout,
            o.stderr
        );
        o.stdout
    }
}

/// On a 1.35 API server with the gate off, the version says "restart" but the dry-run Pod
/// comes back without the fields: the webhook writes count (no restart fields in its
/// patch), warns once, and the Job it mutated is admitted.
#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_1_35_apiserver_with_the_gate_off_gets_count_not_restart_rules() {
    let env = env().expect("setup");
    let off = gate_off();
    // What the probe will see: this server accepts the fields and drops them.
    let v: Value = serde_json::from_str(&off.kubectl_ok(&["version", "-o", "json"], None)).unwrap();
    let server_version = v["serverVersion"]["gitVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(server_version.starts_with("v1.35."), "{server_version}");

    // The chart on the second API server: its ServiceAccount, RBAC, probe Role and policy,
    // and the webhook configurations pointing at a local webhook with the main one's cert.
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let ca = env.dir.path().join("tls/ca.crt");
    let values = env.dir.path().join("values.yaml");
    let rendered = helm_template(
        RELEASE,
        RELEASE_NS,
        &[
            "-f",
            values.to_str().unwrap(),
            "--set",
            &format!("webhook.url={url}"),
            "--set",
            "tls.mode=external",
            "--set-file",
            &format!("tls.caBundle={}", ca.display()),
        ],
    );
    // Pod Security "restricted" enforced where the probe Pod is dry-run: a probe refused by it
    // would be inconclusive, and the version would wrongly decide restart.
    let ns_doc = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NS,
        "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    off.kubectl_ok(&["apply", "-f", "-"], Some(&ns_doc.to_string()));
    off.kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&rendered));
    let token = off.kubectl_ok(
        &[
            "-n",
            RELEASE_NS,
            "create",
            "token",
            RELEASE,
            "--duration",
            "1h",
        ],
        None,
    );
    let token_file = env.dir.path().join("gate-off-token");
    std::fs::write(&token_file, token.trim()).unwrap();

    let args: Vec<String> = env
        .args
        .iter()
        .map(|a| {
            if a.starts_with("--listen=") {
                format!("--listen=127.0.0.1:{port}")
            } else if a.starts_with("--apiserver=") {
                format!("--apiserver={}", off.server)
            } else if a.starts_with("--apiserver-token-file=") {
                format!("--apiserver-token-file={}", token_file.display())
            } else if a.starts_with("--apiserver-ca-file=") {
                format!("--apiserver-ca-file={}", off.ca.display())
            } else {
                a.clone()
            }
        })
        .collect();
    assert!(
        args.iter()
            .any(|a| a == &format!("--probe-namespace={RELEASE_NS}"))
            && args.iter().any(|a| a == "--transient=auto"),
        "{args:?}"
    );
    let webhook = support::webhook::start(&args, &env.rust_log);

    // What the webhook writes, straight from /mutate.
    let review = crate::webhook::review("job-create.json", &fixture().anon.host);
    let r = support::http::request(
        &webhook.base,
        Some(&ca),
        "POST",
        "/mutate",
        &[("Content-Type", "application/json")],
        &serde_json::to_vec(&review).unwrap(),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}\n{}", r.text(), webhook.log());
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    let patch = crate::webhook::patch_of(&answer["response"]).expect("a patch");
    let mut obj = review["request"]["object"].clone();
    json_patch::patch(&mut obj, &patch).unwrap();
    let c = &obj["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(c["name"], "pullcheck");
    assert!(
        c.get("restartPolicy").is_none() && c.get("restartPolicyRules").is_none(),
        "restart fields written on a gate-off server: {c}"
    );
    let warning = "Kubernetes 1.35 dropped restartPolicy and restartPolicyRules from a dry-run Pod (the ContainerRestartRules feature gate is off): --transient auto writes count";
    let log = webhook.log_containing(warning);
    assert!(log.contains(warning), "{log}");

    // Through the real admission chain: a Job is admitted, mutated, stored, and the webhook
    // decided once (one warning in all).
    let ns = "e2e-gate-off";
    let ns_doc = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": ns, "labels": {ENABLE_LABEL: "true"}}});
    off.kubectl_ok(&["apply", "-f", "-"], Some(&ns_doc.to_string()));
    let o = off.kubectl(
        &["-n", ns, "create", "-f", "-"],
        Some(&job("gate-off", &present()).to_string()),
    );
    assert!(o.ok, "refused: {}\nlog:\n{}", o.stderr, webhook.log());
    let stored: Value = serde_json::from_str(
        &off.kubectl_ok(&["-n", ns, "get", "job", "gate-off", "-o", "json"], None),
    )
    .unwrap();
    let init = &stored["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(init["name"], "pullcheck", "{stored}");
    assert!(init.get("restartPolicyRules").is_none(), "{init}");
    assert_eq!(
        webhook.log().matches(warning).count(),
        1,
        "{}",
        webhook.log()
    );
}
