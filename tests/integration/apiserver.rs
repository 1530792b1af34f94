//! The Helm chart and `pullcheck webhook` against a real kube-apiserver (etcd +
//! kube-apiserver on loopback, no controller-manager, scheduler or kubelet).
//!
//! `scripts/apiserver-e2e.sh` starts the control plane (`scripts/control-plane.sh`), puts
//! `kubectl` and `helm` on PATH, exports `KUBECONFIG` and `PULLCHECK_CP_*`, sets
//! `PULLCHECK_APISERVER_E2E=1` and runs `cargo test --test integration apiserver::`.
//! Every test here is `#[ignore]`d for a plain `cargo test` (which has no control plane);
//! the script runs them with `--ignored`, and without the variable they fail loudly.
//!
//! Setup, once per test process:
//! 1. `helm template` the chart with `webhook.url=https://127.0.0.1:PORT` (no Service
//!    routing here), chart-generated TLS whose certificate covers 127.0.0.1, the inject
//!    image on the fixture registry, loopback registries allowed and the test CA as
//!    `registry.caCerts`; `kubectl apply` all of it (so every chart object passes the
//!    apiserver's validation too).
//! 2. Run `pullcheck webhook` locally with the container args of the stored Deployment
//!    (paths under /etc/pullcheck mapped to files taken from the stored Secret and
//!    ConfigMap) plus `--apiserver` with a token of the chart's ServiceAccount: the chart's
//!    RBAC is what lets it read pull secrets.
//! 3. Install the PyTorchJob and JobSet CRDs from tests/data/crds (`trainjob` installs the
//!    Kubeflow Trainer ones it needs itself).
//!
//! Each test works in its own namespace labeled `pullcheck.io/enabled=true`.
//! `providers` runs more chart releases, with `credentialProviders` values, the same way.
//! `watch` applies the chart's watch objects (`watch.enabled=true`) and runs `pullcheck watch`
//! under the watch ServiceAccount's token, on pods whose kubelet status it writes itself.

mod audit;
mod audit_serve;
mod handover;
mod kubeconfig;
mod kueue;
mod providers;
mod restart_rules;
mod trainjob;
mod watch;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::webhook::Webhook;
use crate::support::{self, ALICE, fixture};

const ENABLE_LABEL: &str = "pullcheck.io/enabled";
const RELEASE: &str = "pullcheck";
const RELEASE_NS: &str = "pullcheck-system";

/// Output of one command.
struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// The running setup shared by every test.
struct Env {
    /// `https://127.0.0.1:PORT` of the local webhook.
    webhook: String,
    running: Webhook,
    dir: tempfile::TempDir,
    /// The init container image the chart configures (on the fixture registry).
    inject_image: String,
    /// The webhook's arguments (the Deployment's, paths mapped), for more instances.
    args: Vec<String>,
    rust_log: String,
}

impl Env {
    fn log(&self) -> String {
        self.running.log()
    }
}

static ENV: OnceLock<Result<Env, String>> = OnceLock::new();

fn repo() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

fn required() -> bool {
    std::env::var_os("PULLCHECK_APISERVER_E2E").is_some_and(|v| v == "1")
}

/// The shared setup; panics outside scripts/apiserver-e2e.sh.
fn env() -> Option<&'static Env> {
    assert!(
        required(),
        "needs a control plane: run scripts/apiserver-e2e.sh"
    );
    match ENV.get_or_init(|| {
        std::panic::catch_unwind(setup).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into())
        })
    }) {
        Ok(e) => Some(e),
        Err(msg) => panic!("apiserver setup failed: {msg}"),
    }
}

fn run(program: &str, args: &[&str], stdin: Option<&str>) -> Out {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e} (is it on PATH? run scripts/apiserver-e2e.sh)"));
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let text = text.to_string();
        std::thread::spawn(move || {
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let out = child.wait_with_output().unwrap();
    Out {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn kubectl(args: &[&str], stdin: Option<&str>) -> Out {
    run("kubectl", args, stdin)
}

/// kubectl that must succeed; returns stdout.
fn kubectl_ok(args: &[&str], stdin: Option<&str>) -> String {
    let o = kubectl(args, stdin);
    assert!(o.ok, "kubectl {}: {}{}", args.join(" "), o.stdout, o.stderr);
    o.stdout
}

/// `obj` created in `ns` with a server-side dry run (which must succeed): what the API server
/// would store.
fn dry_run_create(ns: &str, obj: &Value) -> Value {
    let args = [
        "-n",
        ns,
        "create",
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        "-",
    ];
    serde_json::from_str(&kubectl_ok(&args, Some(&obj.to_string()))).unwrap()
}

fn get_json(args: &[&str]) -> Value {
    let mut a = vec!["get", "-o", "json"];
    a.extend_from_slice(args);
    serde_json::from_str(&kubectl_ok(&a, None)).unwrap()
}

/// `helm template` of the chart (release RELEASE unless `--name` style args override).
/// The chart has no default image (`image.repository` is required); no pod of the chart
/// runs on a node here, so a name that is never pulled does (`args` may override it).
fn helm_template(release: &str, namespace: &str, args: &[&str]) -> String {
    let chart = format!("{}/charts/pullcheck", repo());
    let mut a = vec![
        "template",
        release,
        chart.as_str(),
        "--namespace",
        namespace,
        "--set",
        "image.repository=registry.example.com/mirror/pullcheck",
    ];
    a.extend_from_slice(args);
    let o = run("helm", &a, None);
    assert!(o.ok, "helm {}: {}", a.join(" "), o.stderr);
    o.stdout
}

fn free_port() -> u16 {
    crate::support::ports::free_port().expect("a free loopback port")
}

fn b64d(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().expect("base64 string"))
        .expect("base64")
}

fn setup() -> Env {
    let f = fixture();
    let dir = support::temp_dir();
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let inject_image = f.images.multi_index.reference(&f.token);
    let ca_pem = std::fs::read_to_string(&f.ca_file).unwrap();
    let values = dir.path().join("values.yaml");
    // JSON is YAML: no quoting worries for the PEM text.
    std::fs::write(
        &values,
        serde_json::to_vec_pretty(&json!({
            "webhook": {"url": url},
            "inject": {"image": inject_image},
            "registry": {"allowLoopback": true, "caCerts": ca_pem},
        }))
        .unwrap(),
    )
    .unwrap();
    let rendered = helm_template(RELEASE, RELEASE_NS, &["-f", values.to_str().unwrap()]);

    ensure_namespace(RELEASE_NS, &[]);
    kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&rendered));

    // Certificate and key from the stored Secret; the CA the configurations trust.
    let secret = get_json(&["-n", RELEASE_NS, "secret", &format!("{RELEASE}-tls")]);
    let tls = dir.path().join("tls");
    std::fs::create_dir_all(&tls).unwrap();
    for key in ["tls.crt", "tls.key", "ca.crt"] {
        std::fs::write(tls.join(key), b64d(&secret["data"][key])).unwrap();
    }
    let vwc = get_json(&["validatingwebhookconfiguration", RELEASE]);
    assert_eq!(
        vwc["webhooks"][0]["clientConfig"]["caBundle"], secret["data"]["ca.crt"],
        "caBundle differs from the Secret's ca.crt"
    );
    let config = get_json(&["-n", RELEASE_NS, "configmap", &format!("{RELEASE}-config")]);
    let config_dir = dir.path().join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    for (k, v) in config["data"].as_object().unwrap() {
        std::fs::write(config_dir.join(k), v.as_str().unwrap()).unwrap();
    }

    // A token of the chart's ServiceAccount: the chart's RBAC must be enough.
    let token = kubectl_ok(
        &[
            "-n",
            RELEASE_NS,
            "create",
            "token",
            RELEASE,
            "--duration",
            "2h",
        ],
        None,
    );
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, token.trim()).unwrap();

    // The Deployment's args, with in-pod paths mapped to the files above.
    let deploy = get_json(&["-n", RELEASE_NS, "deployment", RELEASE]);
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    let mut args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    for a in &mut args {
        if a.starts_with("--listen=") {
            *a = format!("--listen=127.0.0.1:{port}");
        }
        *a = a
            .replace("/etc/pullcheck/tls", tls.to_str().unwrap())
            .replace("/etc/pullcheck/config", config_dir.to_str().unwrap());
        assert!(!a.contains("/etc/pullcheck"), "unmapped path in {a}");
    }
    let server = std::env::var("PULLCHECK_CP_SERVER").expect("PULLCHECK_CP_SERVER");
    let cp_ca = std::env::var("PULLCHECK_CP_CA").expect("PULLCHECK_CP_CA");
    args.extend([
        format!("--apiserver={server}"),
        format!("--apiserver-token-file={}", token_file.display()),
        format!("--apiserver-ca-file={cp_ca}"),
    ]);
    let rust_log = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "RUST_LOG")
        .and_then(|e| e["value"].as_str())
        .unwrap_or("pullcheck=info")
        .to_string();
    let running = support::webhook::start(&args, &rust_log);
    assert_eq!(running.base, url);

    install_crds();
    Env {
        webhook: running.base.clone(),
        running,
        dir,
        inject_image,
        args,
        rust_log,
    }
}

fn install_crds() {
    let dir = format!("{}/tests/data/crds", repo());
    apply_crds(
        &[
            &format!("{dir}/kubeflow.org_pytorchjobs.yaml"),
            &format!("{dir}/jobset.x-k8s.io_jobsets.yaml"),
        ],
        &["pytorchjobs.kubeflow.org", "jobsets.jobset.x-k8s.io"],
    );
}

/// Apply CRD files (or directories) and wait until `names` are Established and served.
fn apply_crds(files: &[&str], names: &[&str]) {
    for file in files {
        // Server-side: the CRDs are too big for the last-applied annotation.
        kubectl_ok(&["apply", "--server-side", "-f", file], None);
    }
    // `kubectl wait` fails at once ("<nil> is of the type <nil>") on a CRD the API server
    // has not given a status yet, instead of waiting: ask again until it waits.
    let crds: Vec<String> = names.iter().map(|n| format!("crd/{n}")).collect();
    let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    args.extend(crds.iter().map(String::as_str));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = kubectl(&args, None);
        if o.ok {
            break;
        }
        assert!(
            Instant::now() < deadline && o.stderr.contains("accessor error"),
            "CRDs not Established: {}",
            o.stderr
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Discovery catches up a little after Established.
    // `get plural.group` names each resource unambiguously.
    let resources = names.join(",");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = kubectl(&["get", &resources, "-A"], None);
        if o.ok {
            break;
        }
        assert!(Instant::now() < deadline, "CRDs not served: {}", o.stderr);
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn ensure_namespace(name: &str, labels: &[(&str, &str)]) {
    let mut l = serde_json::Map::new();
    for (k, v) in labels {
        l.insert(k.to_string(), json!(v));
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": l}});
    kubectl_ok(&["apply", "-f", "-"], Some(&ns.to_string()));
}

/// A namespace the webhook checks, with a `default` ServiceAccount (no controller-manager
/// creates one here).
fn checked_namespace(name: &str) -> String {
    ensure_namespace(name, &[(ENABLE_LABEL, "true")]);
    service_account(name, "default", &[]);
    name.to_string()
}

fn service_account(ns: &str, name: &str, pull_secrets: &[&str]) {
    let secrets: Vec<Value> = pull_secrets.iter().map(|s| json!({"name": s})).collect();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns}, "imagePullSecrets": secrets});
    kubectl_ok(&["apply", "-f", "-"], Some(&sa.to_string()));
}

/// A kubernetes.io/dockerconfigjson Secret for the token registry, as alice.
fn pull_secret(ns: &str, name: &str) {
    let host = &fixture().token.host;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", ALICE.0, ALICE.1));
    let config =
        json!({"auths": {host.as_str(): {"username": ALICE.0, "password": ALICE.1, "auth": auth}}});
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": ns},
        "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config.to_string())}});
    kubectl_ok(&["apply", "-f", "-"], Some(&secret.to_string()));
}

/// `kubectl create` an object (JSON) in `ns`.
fn create(ns: &str, obj: &Value) -> Out {
    kubectl(&["-n", ns, "create", "-f", "-"], Some(&obj.to_string()))
}

fn created(ns: &str, obj: &Value, env: &Env) -> String {
    let o = create(ns, obj);
    assert!(
        o.ok,
        "create {} in {ns} was refused: {}\nwebhook log:\n{}",
        obj["metadata"]["name"],
        o.stderr,
        env.log()
    );
    o.stderr
}

/// Assert the apiserver refused `obj` through pullcheck's validating webhook; returns
/// kubectl's error text.
fn denied(ns: &str, obj: &Value) -> String {
    let o = create(ns, obj);
    assert!(
        !o.ok,
        "{} was admitted: {}\nwebhook log:\n{}",
        obj["metadata"]["name"],
        o.stdout,
        env().map(Env::log).unwrap_or_default()
    );
    assert!(
        o.stderr
            .contains("admission webhook \"validate.pullcheck.io\" denied the request"),
        "{}",
        o.stderr
    );
    let kind = obj["kind"].as_str().unwrap().to_lowercase();
    let name = obj["metadata"]["name"].as_str().unwrap();
    let g = kubectl(&["-n", ns, "get", &kind, name], None);
    assert!(
        !g.ok && g.stderr.contains("NotFound"),
        "{kind}/{name} stored: {}",
        g.stdout
    );
    o.stderr
}

fn pod_spec(image: &str) -> Value {
    json!({"restartPolicy": "Never",
           "containers": [{"name": "main", "image": image, "command": ["true"]}]})
}

fn job(name: &str, image: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"backoffLimit": 0, "template": {"spec": pod_spec(image)}}})
}

fn cronjob(name: &str, image: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
           "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"backoffLimit": 0,
               "template": {"spec": pod_spec(image)}}}}})
}

fn pytorchjob(name: &str, image: &str) -> Value {
    let replica = |n: u32| {
        json!({"replicas": n, "restartPolicy": "Never",
        "template": {"spec": {"containers": [{"name": "pytorch", "image": image}]}}})
    };
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
           "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}}})
}

fn jobset(name: &str, image: &str) -> Value {
    let rj = |n: &str| {
        json!({"name": n, "replicas": 1, "template": {"spec": {"backoffLimit": 0,
        "template": {"spec": pod_spec(image)}}}})
    };
    json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
           "spec": {"replicatedJobs": [rj("leader"), rj("workers")]}})
}

/// The init containers of a stored object's pod template at `pointer`.
fn init_names(obj: &Value, pointer: &str) -> Vec<String> {
    obj.pointer(&format!("{pointer}/spec/initContainers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| c["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Assert the stored object's template at `pointer` starts with the injected container.
fn assert_injected(obj: &Value, pointer: &str, env: &Env, image: &str) {
    let names = init_names(obj, pointer);
    assert_eq!(names, vec!["pullcheck"], "{pointer} of {obj}");
    let init = obj
        .pointer(&format!("{pointer}/spec/initContainers/0"))
        .unwrap();
    assert_eq!(init["image"], env.inject_image.as_str());
    let args: Vec<&str> = init["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args.first(), Some(&"check"), "{args:?}");
    assert!(args.contains(&image), "{image} not in {args:?}");
}

fn present() -> String {
    fixture().images.oci_manifest.reference(&fixture().token)
}

fn missing() -> String {
    format!("{}/oci/app:no-such-tag", fixture().token.host)
}

/// A second webhook with the main one's arguments and certificate, the one starting with
/// `flag` replaced by `with`; its configurations come from the chart (release `release`) in
/// tls.mode=external with that CA as tls.caBundle, for namespaces labeled `label=true`.
fn second_webhook(env: &Env, release: &str, label: &str, flag: &str, with: &str) -> Webhook {
    second_webhook_extra(env, release, label, flag, with, &[])
}

/// [`second_webhook`] with `extra` arguments appended.
fn second_webhook_extra(
    env: &Env,
    release: &str,
    label: &str,
    flag: &str,
    with: &str,
    extra: &[String],
) -> Webhook {
    let port = free_port();
    let mut args: Vec<String> = env
        .args
        .iter()
        .map(|a| {
            if a.starts_with("--listen=") {
                format!("--listen=127.0.0.1:{port}")
            } else if a.starts_with(flag) {
                with.to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    assert!(args.iter().any(|a| a == with), "no {flag} in {args:?}");
    args.extend_from_slice(extra);
    let webhook = support::webhook::start(&args, &env.rust_log);
    let ca = env.dir.path().join("tls/ca.crt");
    let rendered = helm_template(
        release,
        release,
        &[
            "--show-only",
            "templates/webhooks.yaml",
            "--set",
            &format!("webhook.url={}", webhook.base),
            "--set",
            "tls.mode=external",
            "--set-file",
            &format!("tls.caBundle={}", ca.display()),
            "--set",
            "webhook.namespaceSelector.matchLabels.pullcheck\\.io/enabled=null",
            "--set-json",
            &format!("webhook.namespaceSelector.matchLabels={{\"{label}\":\"true\"}}"),
        ],
    );
    kubectl_ok(&["apply", "-f", "-"], Some(&rendered));
    webhook
}

// ---- tests -----------------------------------------------------------------------------

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn job_with_a_missing_tag_is_rejected_naming_image_and_verdict() {
    let _env = env().expect("setup");
    let ns = checked_namespace("e2e-job-missing");
    let image = missing();
    let err = denied(&ns, &job("missing", &image));
    assert!(
        err.contains(&format!("main: {image}: not_found (manifest unknown")),
        "{err}"
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn job_with_present_images_is_admitted_mutated_and_stored() {
    let env = env().expect("setup");
    let ns = checked_namespace("e2e-job-present");
    let image = present();
    created(&ns, &job("present", &image), env);
    let stored = get_json(&["-n", &ns, "job", "present"]);
    assert_injected(&stored, "/spec/template", env, &image);
    // The stored object is what the apiserver validated after mutation; it passes its
    // validation again as it stands.
    let mut again = stored.clone();
    again["metadata"] = json!({"name": "present-again"});
    again.as_object_mut().unwrap().remove("status");
    again["spec"].as_object_mut().unwrap().remove("selector");
    let labels = again["spec"]["template"]["metadata"]["labels"].as_object_mut();
    if let Some(l) = labels {
        l.retain(|k, _| {
            !k.contains("controller-uid") && k != "job-name" && !k.ends_with("/job-name")
        });
    }
    // Mutation is idempotent: the re-created object still has one init container.
    let v = dry_run_create(&ns, &again);
    assert_injected(&v, "/spec/template", env, &image);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn cronjob_is_checked_on_create_and_update() {
    let env = env().expect("setup");
    let ns = checked_namespace("e2e-cronjob");
    let image = present();
    let err = denied(&ns, &cronjob("nightly-missing", &missing()));
    assert!(err.contains(": not_found ("), "{err}");
    created(&ns, &cronjob("nightly", &image), env);
    let stored = get_json(&["-n", &ns, "cronjob", "nightly"]);
    assert_injected(&stored, "/spec/jobTemplate/spec/template", env, &image);
    // UPDATE: the template of a CronJob is mutable, so it is checked again.
    let patch = json!([{"op": "replace",
        "path": "/spec/jobTemplate/spec/template/spec/containers/0/image", "value": missing()}]);
    let o = kubectl(
        &[
            "-n",
            &ns,
            "patch",
            "cronjob",
            "nightly",
            "--type=json",
            "-p",
            &patch.to_string(),
        ],
        None,
    );
    assert!(!o.ok, "update to a missing tag was admitted");
    assert!(
        o.stderr.contains("denied the request") && o.stderr.contains(&missing()),
        "{}",
        o.stderr
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn pytorchjob_is_rejected_or_admitted_and_mutated_in_every_replica() {
    let env = env().expect("setup");
    let ns = checked_namespace("e2e-pytorchjob");
    let err = denied(&ns, &pytorchjob("missing", &missing()));
    assert!(
        err.contains("pytorch: ") && err.contains(": not_found ("),
        "{err}"
    );
    let image = present();
    created(&ns, &pytorchjob("train", &image), env);
    let stored = get_json(&["-n", &ns, "pytorchjob", "train"]);
    for role in ["Master", "Worker"] {
        assert_injected(
            &stored,
            &format!("/spec/pytorchReplicaSpecs/{role}/template"),
            env,
            &image,
        );
    }
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn jobset_is_rejected_or_admitted_and_mutated_in_every_replicated_job() {
    let env = env().expect("setup");
    let ns = checked_namespace("e2e-jobset");
    let err = denied(&ns, &jobset("missing", &missing()));
    assert!(err.contains(": not_found ("), "{err}");
    let image = present();
    created(&ns, &jobset("set", &image), env);
    let stored = get_json(&["-n", &ns, "jobset", "set"]);
    for i in 0..2 {
        assert_injected(
            &stored,
            &format!("/spec/replicatedJobs/{i}/template/spec/template"),
            env,
            &image,
        );
    }
}

/// docs/webhook.md "Uninstall" on real `kubectl get -o json` output: the documented kubectl +
/// jq line (its kinds, in one namespace instead of -A) lists the CronJob, JobSet and
/// PyTorchJob the webhook mutated and nothing else; once the webhook no longer applies to
/// the namespace, `kubectl get -o yaml | pullcheck inject --remove -f - | kubectl replace -f -`
/// takes pullcheck out of the stored CronJob, and the listing no longer shows it.
#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn uninstall_listing_and_inject_remove_on_stored_objects() {
    let env = env().expect("setup");
    let ns = checked_namespace("e2e-uninstall");
    let image = present();
    created(&ns, &cronjob("nightly", &image), env);
    created(&ns, &jobset("set", &image), env);
    created(&ns, &pytorchjob("train", &image), env);
    let docs = std::fs::read_to_string(format!("{}/docs/webhook.md", repo())).unwrap();
    let lines: Vec<&str> = docs.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("| jq -r '"))
        .expect("the jq line in docs/webhook.md");
    let get: Vec<&str> = lines[at - 1]
        .trim()
        .trim_end_matches('\\')
        .split_whitespace()
        .collect();
    assert_eq!(&get[..2], ["kubectl", "get"], "{get:?}");
    assert_eq!(&get[3..], ["-A", "-o", "json"], "{get:?}");
    let filter = lines[at]
        .trim_start()
        .strip_prefix("| jq -r '")
        .and_then(|f| f.strip_suffix('\''))
        .unwrap();
    let list = || {
        let json = kubectl_ok(&["get", get[2], "-n", &ns, "-o", "json"], None);
        let o = run("jq", &["-r", filter], Some(&json));
        assert!(o.ok, "jq: {}", o.stderr);
        o.stdout
    };
    let inject = env.inject_image.as_str();
    assert_eq!(
        list(),
        format!(
            "CronJob\t{ns}/nightly\t{inject}\nJobSet\t{ns}/set\t{inject}\nPyTorchJob\t{ns}/train\t{inject}\n"
        )
    );
    // The webhook mutates CronJob UPDATEs: out of its reach first, as after an uninstall.
    kubectl_ok(
        &["label", "namespace", &ns, &format!("{ENABLE_LABEL}-")],
        None,
    );
    let stored = kubectl_ok(
        &["-n", &ns, "get", "cronjob", "nightly", "-o", "yaml"],
        None,
    );
    let out = support::process::output(
        support::process::pullcheck().args(["inject", "--remove", "-f", "-"]),
        Some(stored.as_bytes()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "a CronJob is mutable"
    );
    kubectl_ok(
        &["-n", &ns, "replace", "-f", "-"],
        Some(&String::from_utf8(out.stdout).unwrap()),
    );
    let cj = get_json(&["-n", &ns, "cronjob", "nightly"]);
    let t = &cj["spec"]["jobTemplate"]["spec"]["template"];
    assert!(
        init_names(&cj, "/spec/jobTemplate/spec/template").is_empty(),
        "{t}"
    );
    assert!(t["spec"].get("volumes").is_none(), "{t}");
    assert_eq!(
        list(),
        format!("JobSet\t{ns}/set\t{inject}\nPyTorchJob\t{ns}/train\t{inject}\n")
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn private_images_resolve_with_namespace_and_service_account_pull_secrets_only() {
    let env = env().expect("setup");
    let image = fixture().images.private.reference(&fixture().token);

    // 1. The template's own imagePullSecrets.
    let a = checked_namespace("e2e-private-secret");
    pull_secret(&a, "regcred");
    let mut j = job("with-secret", &image);
    j["spec"]["template"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    created(&a, &j, env);

    // 2. Right after: a namespace without the secret is refused (no cache leak).
    let b = checked_namespace("e2e-private-none");
    let mut j = job("without-secret", &image);
    j["spec"]["template"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    let err = denied(&b, &j);
    assert!(
        err.contains(&format!("main: {image}: unauthenticated (")),
        "{err}"
    );

    // 3. A ServiceAccount's imagePullSecrets (the template names none of its own).
    let c = checked_namespace("e2e-private-sa");
    pull_secret(&c, "sa-regcred");
    service_account(&c, "builder", &["sa-regcred"]);
    let mut j = job("via-sa", &image);
    j["spec"]["template"]["spec"]["serviceAccountName"] = json!("builder");
    created(&c, &j, env);
    // ... and the namespace's default ServiceAccount.
    service_account(&c, "default", &["sa-regcred"]);
    created(&c, &job("via-default-sa", &image), env);
    // A template with its own (unusable) list doesn't get the ServiceAccount's.
    let mut j = job("own-list-wins", &image);
    j["spec"]["template"]["spec"]["serviceAccountName"] = json!("builder");
    j["spec"]["template"]["spec"]["imagePullSecrets"] = json!([{"name": "does-not-exist"}]);
    let err = denied(&c, &j);
    assert!(err.contains(": unauthenticated ("), "{err}");
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn webhook_down_with_failure_policy_ignore_admits_and_fail_rejects() {
    let _env = env().expect("setup");
    let dead = format!("https://127.0.0.1:{}", free_port());
    for (release, policy) in [("pc-down-ignore", "Ignore"), ("pc-down-fail", "Fail")] {
        let label = format!("pullcheck-e2e/{release}");
        let rendered = helm_template(
            release,
            release,
            &[
                "--show-only",
                "templates/webhooks.yaml",
                "--set",
                &format!("webhook.url={dead}"),
                "--set",
                &format!("webhook.failurePolicy={policy}"),
                "--set",
                "webhook.timeoutSeconds=3",
                // Replace the default opt-in label (null deletes a key) with this test's.
                "--set",
                "webhook.namespaceSelector.matchLabels.pullcheck\\.io/enabled=null",
                "--set-json",
                &format!("webhook.namespaceSelector.matchLabels={{\"{label}\":\"true\"}}"),
            ],
        );
        kubectl_ok(&["apply", "-f", "-"], Some(&rendered));
        let ns = format!("e2e-{release}");
        ensure_namespace(&ns, &[(label.as_str(), "true")]);
        let o = create(&ns, &job("while-down", &missing()));
        if policy == "Ignore" {
            assert!(o.ok, "failurePolicy Ignore refused: {}", o.stderr);
        } else {
            assert!(!o.ok, "failurePolicy Fail admitted");
            assert!(o.stderr.contains("failed calling webhook"), "{}", o.stderr);
        }
    }
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn pods_controller_owned_and_opted_out_objects_are_never_rejected() {
    let env = env().expect("setup");
    let ns = checked_namespace("e2e-never-rejected");
    let bad = missing();

    // The chart's rules don't send Pods at all.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"},
                     "spec": pod_spec(&bad)});
    created(&ns, &pod, env);

    // Even a configuration that does send Pods to pullcheck gets them admitted.
    let label = "pullcheck-e2e/pods";
    let ca = std::fs::read(env.dir.path().join("tls/ca.crt")).unwrap();
    let vwc = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "pullcheck-e2e-pods"},
        "webhooks": [{"name": "pods.pullcheck.io", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
            "clientConfig": {"url": format!("{}/validate", env.webhook),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)},
            "namespaceSelector": {"matchLabels": {label: "true"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                       "operations": ["CREATE"]}]}]});
    kubectl_ok(&["apply", "-f", "-"], Some(&vwc.to_string()));
    let pods_ns = "e2e-pods-sent";
    ensure_namespace(pods_ns, &[(label, "true"), (ENABLE_LABEL, "true")]);
    service_account(pods_ns, "default", &[]);
    let before = env.log().matches("kind=Pod").count();
    created(pods_ns, &pod, env);
    // It did reach pullcheck (and was skipped there).
    let deadline = Instant::now() + Duration::from_secs(5);
    while env.log().matches("kind=Pod").count() == before {
        assert!(
            Instant::now() < deadline,
            "the Pod review never reached pullcheck"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A Job owned by a controller (as a CronJob's are): skipped by matchConditions.
    let mut owned = job("owned", &bad);
    owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "CronJob",
        "name": "nightly", "uid": "6f1f2a4e-0000-4000-8000-000000000001", "controller": true}]);
    created(&ns, &owned, env);
    let stored = get_json(&["-n", &ns, "job", "owned"]);
    assert!(
        init_names(&stored, "/spec/template").is_empty(),
        "owned Job was mutated"
    );

    // The opt-out annotation.
    let mut skipped = job("skipped", &bad);
    skipped["metadata"]["annotations"] = json!({"pullcheck.io/skip": "true"});
    created(&ns, &skipped, env);
    let stored = get_json(&["-n", &ns, "job", "skipped"]);
    assert!(
        init_names(&stored, "/spec/template").is_empty(),
        "opted-out Job was mutated"
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn an_image_on_a_metadata_address_is_refused_without_contacting_it() {
    let env = env().expect("setup");
    let ns = checked_namespace("e2e-ssrf");
    let image = "169.254.169.254/latest/meta-data:v1";
    let metric = |name: &str| -> u64 {
        let text = support::http::request(
            &env.webhook,
            Some(&env.dir.path().join("tls/ca.crt")),
            "GET",
            "/metrics",
            &[],
            b"",
        )
        .unwrap()
        .text();
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .map_or(0, |v| v.parse().unwrap())
    };
    let denied_lookups = "pullcheck_registry_lookups_total{outcome=\"denied\"}";
    let lookups_before = metric(denied_lookups);
    let err = denied(&ns, &job("metadata", image));
    assert!(
        err.contains(&format!(
            "main: {image}: denied (blocked by pullcheck's address guard: 169.254.169.254 is 169.254.169.254, a cloud metadata address"
        )),
        "{err}"
    );
    // The guard refuses it in the one place every request passes, before anything is
    // sent (src/registry/guard.rs `admit_registry`, unit-tested there and by the hostile
    // suite): one lookup ends "denied" (no other test here produces one), and the log
    // never names the address.
    assert_eq!(metric(denied_lookups), lookups_before + 1);
    let log = env.log();
    assert!(!log.lines().any(|l| l.contains("169.254.169.254")), "{log}");
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn every_example_passes_server_side_dry_run() {
    let _env = env().expect("setup");
    let dir = format!("{}/examples", repo());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    // Examples name their namespaces; these are not labeled, so the webhook stays out.
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for line in text.lines() {
            if let Some(ns) = line.trim().strip_prefix("namespace: ") {
                ensure_namespace(ns.trim(), &[]);
            }
        }
    }
    let mut failed = Vec::new();
    for f in &files {
        let o = kubectl(
            &["apply", "--dry-run=server", "-f", f.to_str().unwrap()],
            None,
        );
        if !o.ok {
            failed.push(format!("{}: {}", f.display(), o.stderr));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    eprintln!("{} examples passed server-side dry-run", files.len());
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn warn_mode_admits_with_warnings_through_external_tls() {
    let env = env().expect("setup");
    let label = "pullcheck-e2e/warn";
    let warn = second_webhook(env, "pc-warn", label, "--mode=", "--mode=warn");
    let ns = "e2e-warn";
    ensure_namespace(ns, &[(label, "true")]);
    let image = missing();
    let o = create(ns, &job("warned", &image));
    assert!(
        o.ok,
        "warn mode refused: {}\nlog:\n{}",
        o.stderr,
        warn.log()
    );
    assert!(
        o.stderr
            .contains(&format!("Warning: main: {image}: not_found (")),
        "{}",
        o.stderr
    );
    let stored = get_json(&["-n", ns, "job", "warned"]);
    assert_eq!(init_names(&stored, "/spec/template"), vec!["pullcheck"]);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn chart_pods_pass_pod_security_restricted() {
    let _env = env().expect("setup");
    let ns = "e2e-restricted";
    ensure_namespace(
        ns,
        &[
            ("pod-security.kubernetes.io/enforce", "restricted"),
            ("pod-security.kubernetes.io/enforce-version", "latest"),
        ],
    );
    service_account(ns, "default", &[]);
    let rendered = helm_template(
        "pc-psa",
        ns,
        &[
            "--set",
            "prePull.enabled=true",
            "--set",
            "audit.enabled=true",
        ],
    );
    let list: Value = serde_json::from_str(&kubectl_ok(
        &["apply", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&rendered),
    ))
    .unwrap();
    let mut checked = 0;
    for item in list["items"].as_array().unwrap() {
        let kind = item["kind"].as_str().unwrap();
        if kind != "Deployment" && kind != "DaemonSet" {
            continue;
        }
        let mut spec = item["spec"]["template"]["spec"].clone();
        // The ServiceAccount exists only in the dry run.
        spec["serviceAccountName"] = json!("default");
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{}-pod", kind.to_lowercase())}, "spec": spec});
        let o = kubectl(
            &["-n", ns, "create", "--dry-run=server", "-f", "-"],
            Some(&pod.to_string()),
        );
        assert!(
            o.ok,
            "{kind} pod refused by Pod Security restricted: {}",
            o.stderr
        );
        assert!(!o.stderr.contains("Warning"), "{}", o.stderr);
        checked += 1;
    }
    // The webhook's and the audit's Deployments, the pre-pull DaemonSet.
    assert_eq!(checked, 3);
}

/// The mutating webhook with `--fail-fast` on a real API server: it sees the Job after
/// defaulting (podReplacementPolicy TerminatingOrFailed), which a podFailurePolicy doesn't
/// allow, so the mutation must make it Failed or the Job is refused.
#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn the_webhook_with_fail_fast_gives_the_job_a_valid_pod_failure_policy() {
    let env = env().expect("setup");
    let label = "pullcheck-e2e/fail-fast";
    let wh = second_webhook(env, "pc-fail-fast", label, "--transient=", "--fail-fast");
    let ns = "e2e-fail-fast";
    ensure_namespace(ns, &[(label, "true")]);
    let o = create(ns, &job("fail-fast", &present()));
    assert!(o.ok, "refused: {}\nlog:\n{}", o.stderr, wh.log());
    let stored = get_json(&["-n", ns, "job", "fail-fast"]);
    assert_eq!(stored["spec"]["podReplacementPolicy"], "Failed", "{stored}");
    let rules = &stored["spec"]["podFailurePolicy"]["rules"];
    assert_eq!(
        rules[0]["onPodConditions"][0]["type"], "pullcheck.io/ImagePullFailed",
        "{rules}"
    );
    assert_eq!(rules[1]["action"], "FailJob", "{rules}");
    assert_eq!(
        rules[1]["onExitCodes"]["containerName"], "pullcheck",
        "{rules}"
    );
}
