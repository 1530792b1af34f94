//! `pullcheck audit` on the real kube-apiserver: workloads of every built-in kind in one
//! namespace, images present, missing and platform-missing on the harness's registries,
//! Node objects of two architectures created through the API (no kubelet registers any
//! here), and the objects the audit must leave out: a Job its CronJob made, a finished
//! Job, a ReplicaSet its Deployment owns, a Pod its ReplicaSet owns.
//!
//! Run twice: as the harness's admin through `$KUBECONFIG` (every Secret readable, the
//! Nodes' platforms), then as a ServiceAccount whose Role lists the workloads but may not
//! read Secrets or list Nodes (the private image checked anonymously and marked; the
//! default platforms, said on stderr). The JSON documents are asserted whole.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{ensure_namespace, get_json, kubectl_ok, service_account};
use crate::support::{self, fixture, process};

const NS: &str = "audit-e2e";
/// The nightly CronJob's schedule and zone: midnight of February 29th in Kathmandu
/// (UTC+05:45), a time that stays the next one until it comes ([`NIGHTLY_NEXT`]).
const NIGHTLY: (&str, &str) = ("0 0 29 2 *", "Asia/Kathmandu");
/// 2028-02-29 00:00 +05:45, in UTC.
const NIGHTLY_NEXT: &str = "2028-02-28T18:15:00Z";
const NODES: [(&str, &str); 2] = [
    ("pullcheck-audit-amd64", "amd64"),
    ("pullcheck-audit-arm64", "arm64"),
];

fn create(obj: &Value) {
    kubectl_ok(&["-n", NS, "apply", "-f", "-"], Some(&obj.to_string()));
}

fn spec(image: &str) -> Value {
    json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": image}]})
}

fn labels(app: &str) -> Value {
    json!({"matchLabels": {"app": app}})
}

fn template(app: &str, pod: Value) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": pod})
}

fn always(image: &str) -> Value {
    json!({"containers": [{"name": "main", "image": image}]})
}

/// `{"apiVersion", "kind", "name", "uid", "controller": true}` of a stored object.
fn owner(api_version: &str, kind: &str, name: &str) -> Value {
    let uid = get_json(&["-n", NS, &kind.to_lowercase(), name])["metadata"]["uid"].clone();
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true})
}

/// The images, by what the audit must find.
struct Images {
    missing: String,
    present: String,
    multi: String,
    arm_only: String,
    private: String,
    gone: String,
}

fn images() -> Images {
    let f = fixture();
    Images {
        missing: format!("{}/oci/app:gone", f.anon.host),
        present: f.images.oci_manifest.reference(&f.anon),
        multi: f.images.multi_index.reference(&f.anon),
        arm_only: f.images.arm_only.reference(&f.anon),
        private: f.images.private.reference(&f.token),
        gone: format!("{}/docker/app:v9", f.anon.host),
    }
}

/// The objects, once per test process.
fn objects(i: &Images) {
    ensure_namespace(NS, &[]);
    service_account(NS, "default", &[]);
    for (name, arch) in NODES {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
            "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": arch}}});
        kubectl_ok(&["apply", "-f", "-"], Some(&node.to_string()));
    }
    // The private image's pull secret, as alice on the token registry.
    super::pull_secret(NS, "regcred");
    create(
        &json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": NIGHTLY.0, "timeZone": NIGHTLY.1,
            "jobTemplate": {"spec": {"template": {"spec": spec(&i.missing)}}}}}),
    );
    create(
        &json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "paused"},
        "spec": {"schedule": "@hourly", "suspend": true,
            "jobTemplate": {"spec": {"template": {"spec": spec(&i.present)}}}}}),
    );
    let cron = owner("batch/v1", "CronJob", "nightly");
    create(&json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "nightly-manual", "ownerReferences": [cron]},
        "spec": {"template": {"spec": spec(&i.missing)}}}));
    create(
        &json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "queued"},
        "spec": {"suspend": true, "template": {"spec": spec(&i.present)}}}),
    );
    create(
        &json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "done"},
        "spec": {"template": {"spec": spec(&i.missing)}}}),
    );
    // No controller-manager here: the Job's end is written as its controller writes it.
    let now = "2026-01-01T00:00:00Z";
    let status = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": now, "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}]}});
    kubectl_ok(
        &[
            "-n",
            NS,
            "patch",
            "job",
            "done",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
        None,
    );
    // amd64 only, on an arm64-only index: platform missing.
    let mut arm = always(&i.arm_only);
    arm["nodeSelector"] = json!({"kubernetes.io/arch": "amd64"});
    create(
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": labels("web"), "template": template("web", arm)}}),
    );
    let web = owner("apps/v1", "Deployment", "web");
    create(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "ownerReferences": [web]},
        "spec": {"selector": labels("web"), "template": template("web", always(&i.arm_only))}}));
    create(
        &json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"selector": labels("db"), "serviceName": "db", "template": template("db", always(&i.multi))}}),
    );
    create(
        &json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": labels("agent"), "template": template("agent", always(&i.gone))}}),
    );
    create(
        &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "orphan"},
        "spec": {"selector": labels("orphan"), "template": template("orphan", always(&i.present))}}),
    );
    let orphan = owner("apps/v1", "ReplicaSet", "orphan");
    create(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "orphan-x", "labels": {"app": "orphan"}, "ownerReferences": [orphan]},
        "spec": always(&i.present)}));
    // Kueue's Workloads: one Kueue made for the Job `queued` (its copy: skipped), one of no
    // job the audit reads (audited).
    let queued = owner("batch/v1", "Job", "queued");
    let podset =
        |image: &str| json!({"name": "main", "count": 1, "template": {"spec": spec(image)}});
    create(
        &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-queued-1", "ownerReferences": [queued]},
        "spec": {"queueName": "team", "podSets": [podset(&i.present)]}}),
    );
    create(
        &json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "raw"},
        "spec": {"queueName": "team", "podSets": [podset(&i.gone)]}}),
    );
    let mut private = spec(&i.private);
    private["imagePullSecrets"] = json!([{"name": "regcred"}]);
    create(
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug"}, "spec": private}),
    );
}

/// A ServiceAccount whose Role lists every workload kind in [`NS`] and reads its
/// ServiceAccounts, but not its Secrets; a token of it.
fn restricted_token(dir: &tempfile::TempDir) -> PathBuf {
    service_account(NS, "auditor", &[]);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "auditor", "namespace": NS},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "serviceaccounts"], "verbs": ["get", "list"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"], "verbs": ["list"]},
            {"apiGroups": ["kubeflow.org", "jobset.x-k8s.io", "kueue.x-k8s.io"], "resources": ["*"], "verbs": ["list"]}]});
    kubectl_ok(&["apply", "-f", "-"], Some(&role.to_string()));
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "auditor", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "auditor"},
        "subjects": [{"kind": "ServiceAccount", "name": "auditor", "namespace": NS}]});
    kubectl_ok(&["apply", "-f", "-"], Some(&binding.to_string()));
    let t = kubectl_ok(
        &["-n", NS, "create", "token", "auditor", "--duration", "1h"],
        None,
    );
    let file = dir.path().join("auditor.token");
    std::fs::write(&file, t.trim()).unwrap();
    file
}

/// `pullcheck audit -n NS -o json` with the registries' settings and `args`.
fn audit(args: &[&str], env: &[(&str, &str)]) -> process::Run {
    audit_as("json", args, env)
}

/// `pullcheck audit -n NS -o OUTPUT` with the registries' settings and `args`.
fn audit_as(output: &str, args: &[&str], env: &[(&str, &str)]) -> process::Run {
    let f = fixture();
    let ca = f.ca_file.display().to_string();
    let mut all = vec![
        "audit",
        "-n",
        NS,
        "-o",
        output,
        "--insecure-registry",
        &f.anon.host,
        "--ca-file",
        &ca,
    ];
    all.extend_from_slice(args);
    process::run(&all, env)
}

fn image(container: &str, image: &str, verdict: &str, code: u8, reason: &str) -> Value {
    json!({"container": container, "image": image, "verdict": verdict, "exit_code": code, "reason": reason})
}

fn workload(kind: &str, name: &str, images: Vec<Value>) -> Value {
    json!({"namespace": NS, "kind": kind, "name": name, "images": images})
}

/// The kinds of the built-in table whose CRDs the harness doesn't install
/// ([`super::install_crds`] installs PyTorchJob and JobSet).
fn unserved() -> Value {
    json!([
        "jaxjobs.kubeflow.org",
        "mpijobs.kubeflow.org",
        "paddlejobs.kubeflow.org",
        "tfjobs.kubeflow.org",
        "xgboostjobs.kubeflow.org"
    ])
}

fn skipped() -> Value {
    json!([
        {"namespace": NS, "kind": "Job", "name": "done", "reason": "finished", "condition": "Complete"},
        {"namespace": NS, "kind": "Job", "name": "nightly-manual", "reason": "owned", "owner_kind": "CronJob", "owner_name": "nightly"},
        {"namespace": NS, "kind": "Pod", "name": "orphan-x", "reason": "owned", "owner_kind": "ReplicaSet", "owner_name": "orphan"},
        {"namespace": NS, "kind": "ReplicaSet", "name": "web-1", "reason": "owned", "owner_kind": "Deployment", "owner_name": "web"},
        {"namespace": NS, "kind": "Workload", "name": "job-queued-1", "reason": "owned", "owner_kind": "Job", "owner_name": "queued"},
    ])
}

/// The workloads, `debug` (the private image) as `private` says.
fn workloads(i: &Images, private: Value) -> Value {
    let f = fixture();
    // The engine's words for the registry's answers (what `check` says of these images).
    let not_found = |repo: &str, tag: &str| {
        format!(
            "manifest unknown (GET http://{}/v2/{repo}/manifests/{tag}: HTTP 404; MANIFEST_UNKNOWN: manifest unknown)",
            f.anon.host
        )
    };
    let mut nightly = workload(
        "CronJob",
        "nightly",
        vec![image(
            "main",
            &i.missing,
            "not_found",
            11,
            &not_found("oci/app", "gone"),
        )],
    );
    nightly["next_run"] = json!(NIGHTLY_NEXT);
    let mut paused = workload(
        "CronJob",
        "paused",
        vec![image("main", &i.present, "pullable", 0, "manifest found")],
    );
    paused["next_run"] = json!("suspended");
    json!([
        nightly,
        paused,
        workload(
            "DaemonSet",
            "agent",
            vec![image(
                "main",
                &i.gone,
                "not_found",
                11,
                &not_found("docker/app", "v9")
            )]
        ),
        workload(
            "Deployment",
            "web",
            vec![image(
                "main",
                &i.arm_only,
                "platform_missing",
                12,
                "index has no entry for linux/amd64 (available: linux/arm64)"
            )]
        ),
        workload(
            "Job",
            "queued",
            vec![image("main", &i.present, "pullable", 0, "manifest found")]
        ),
        workload("Pod", "debug", vec![private]),
        workload(
            "ReplicaSet",
            "orphan",
            vec![image("main", &i.present, "pullable", 0, "manifest found")]
        ),
        workload(
            "StatefulSet",
            "db",
            vec![image("main", &i.multi, "pullable", 0, "manifest found")]
        ),
        workload(
            "Workload",
            "raw",
            vec![image(
                "main",
                &i.gone,
                "not_found",
                11,
                &not_found("docker/app", "v9")
            )]
        ),
    ])
}

/// The table `pullcheck audit` prints for a document without marked rows: NAMESPACE,
/// KIND/NAME, CONTAINER, IMAGE, NEXT RUN (`-` but for CronJobs), VERDICT, REASON (`-` for a
/// pullable image), then the unserved kinds and the summary.
fn table(doc: &Value) -> String {
    let mut rows = vec![
        [
            "NAMESPACE",
            "KIND/NAME",
            "CONTAINER",
            "IMAGE",
            "NEXT RUN",
            "VERDICT",
            "REASON",
        ]
        .map(String::from),
    ];
    let (mut images, mut failing) = (0, 0);
    for w in doc["workloads"].as_array().unwrap() {
        for i in w["images"].as_array().unwrap() {
            let s = |v: &Value| v.as_str().unwrap().to_string();
            let pullable = i["verdict"] == "pullable";
            images += 1;
            failing += usize::from(!pullable);
            rows.push([
                s(&w["namespace"]),
                format!("{}/{}", s(&w["kind"]), s(&w["name"])),
                s(&i["container"]),
                s(&i["image"]),
                w.get("next_run").map_or("-".to_string(), s),
                s(&i["verdict"]),
                if pullable {
                    "-".into()
                } else {
                    s(&i["reason"])
                },
            ]);
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap())
        .collect();
    let mut out = String::new();
    for r in &rows {
        for c in 0..6 {
            out.push_str(&format!("{:<w$}   ", r[c], w = widths[c]));
        }
        out.push_str(&r[6]);
        out.push('\n');
    }
    let unserved: Vec<&str> = doc["unserved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    out.push_str(&format!(
        "not served by this API server, skipped: {}\n",
        unserved.join(", ")
    ));
    out.push_str(&format!(
        "audited {} workloads, {images} images: {} pullable, {failing} not; {} skipped (exit {})\n",
        doc["workloads"].as_array().unwrap().len(),
        images - failing,
        doc["skipped"].as_array().unwrap().len(),
        doc["exit_code"]
    ));
    out
}

#[test]
#[ignore = "needs a control plane: scripts/apiserver-e2e.sh"]
fn audit_names_the_workloads_whose_next_pod_would_fail_and_skips_copies_and_finished_jobs() {
    assert!(
        super::required(),
        "needs a control plane: run scripts/apiserver-e2e.sh"
    );
    let i = images();
    super::install_crds();
    super::kueue::crds();
    objects(&i);
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG (scripts/apiserver-e2e.sh)");
    let admin = audit(&[], &[("KUBECONFIG", &kubeconfig)]);
    admin.assert_code(11);
    let private = image("main", &i.private, "pullable", 0, "manifest found");
    assert_eq!(
        admin.json(),
        json!({"schema_version": 1, "exit_code": 11,
            "platforms": ["linux/amd64", "linux/arm64"], "platform_source": "nodes",
            "workloads": workloads(&i, private), "skipped": skipped(),
            "unserved": unserved(), "forbidden": []}),
        "stderr:\n{}",
        admin.stderr
    );
    assert!(
        admin
            .stderr
            .contains("pullcheck: platforms from 2 Node objects: linux/amd64, linux/arm64\n"),
        "{}",
        admin.stderr
    );

    // The same as a table: every cell padded to its column's widest, three spaces apart.
    let text = audit_as("text", &[], &[("KUBECONFIG", &kubeconfig)]);
    text.assert_code(11);
    assert_eq!(
        text.stdout,
        table(&admin.json()),
        "stderr:\n{}",
        text.stderr
    );

    // -o yaml: the same document.
    let yaml = audit_as("yaml", &[], &[("KUBECONFIG", &kubeconfig)]);
    yaml.assert_code(11);
    let doc: Value = serde_saphyr::from_str(&yaml.stdout).unwrap();
    assert_eq!(doc, admin.json(), "stderr:\n{}", yaml.stderr);

    // Under a Role that may not read Secrets nor list Nodes.
    let dir = support::temp_dir();
    let token = restricted_token(&dir);
    let server = std::env::var("PULLCHECK_CP_SERVER").unwrap();
    let cp_ca = std::env::var("PULLCHECK_CP_CA").unwrap();
    let token = token.display().to_string();
    let restricted = audit(
        &[
            "--apiserver",
            &server,
            "--apiserver-token-file",
            &token,
            "--apiserver-ca-file",
            &cp_ca,
        ],
        &[],
    );
    restricted.assert_code(11);
    let mut private = image(
        "main",
        &i.private,
        "unauthenticated",
        14,
        &format!(
            "missing or private: the registry wants credentials and none matched (GET https://{}/v2/private/app/manifests/v1: HTTP 401; UNAUTHORIZED: authentication required)",
            fixture().token.host
        ),
    );
    private["credentials"] = json!("anonymous (secrets not readable)");
    assert_eq!(
        restricted.json(),
        json!({"schema_version": 1, "exit_code": 11,
            "platforms": ["linux/amd64", "linux/arm64"], "platform_source": "default_nodes_forbidden",
            "workloads": workloads(&i, private), "skipped": skipped(),
            "unserved": unserved(), "forbidden": []}),
        "stderr:\n{}",
        restricted.stderr
    );
    let said: Vec<&str> = restricted.stderr.lines().collect();
    assert_eq!(
        said,
        [
            "pullcheck: nodes may not be listed (403): checking the default cluster platforms linux/amd64, linux/arm64",
            &format!(
                "pullcheck: pull secrets may not be read (403) in namespace {NS}: their workloads' images were checked anonymously, marked *"
            ),
        ],
    );

    // The same Role with -A: every list is cluster-wide, which a Role can't grant. Nothing
    // was read, so the exit code is 2, never a green 0, and stderr says what to do.
    let all = process::run(
        &[
            "audit",
            "-A",
            "-o",
            "json",
            "--apiserver",
            &server,
            "--apiserver-token-file",
            &token,
            "--apiserver-ca-file",
            &cp_ca,
        ],
        &[],
    );
    all.assert_code(2);
    let refused: Vec<(&str, &str)> = vec![
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("", "pods"),
        ("kubeflow.org", "pytorchjobs"),
        ("kubeflow.org", "tfjobs"),
        ("kubeflow.org", "mpijobs"),
        ("kubeflow.org", "xgboostjobs"),
        ("kubeflow.org", "paddlejobs"),
        ("kubeflow.org", "jaxjobs"),
        ("jobset.x-k8s.io", "jobsets"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("apps", "replicasets"),
        ("kueue.x-k8s.io", "workloads"),
    ];
    let forbidden: Vec<Value> = refused
        .iter()
        .map(|(g, r)| json!({"group": g, "resource": r, "namespace": null}))
        .collect();
    assert_eq!(
        all.json(),
        json!({"schema_version": 1, "exit_code": 2,
            "platforms": ["linux/amd64", "linux/arm64"], "platform_source": "default_nodes_forbidden",
            "workloads": [], "skipped": [], "unserved": [], "forbidden": forbidden}),
        "stderr:\n{}",
        all.stderr
    );
    let mut said = vec![
        "pullcheck: nodes may not be listed (403): checking the default cluster platforms linux/amd64, linux/arm64".to_string(),
    ];
    for (g, r) in &refused {
        let resource = if g.is_empty() {
            r.to_string()
        } else {
            format!("{r}.{g}")
        };
        let core = if g.is_empty() { " (core)" } else { "" };
        said.push(format!(
            "pullcheck: {resource} may not be listed cluster-wide (403): not audited; RBAC needs verb \"list\" on resource \"{r}\" in API group \"{g}\"{core}"
        ));
    }
    said.push("pullcheck: -A lists every namespace at once, which only a ClusterRole (bound by a ClusterRoleBinding) grants; a namespaced Role doesn't: audit one namespace with -n NAMESPACE".into());
    assert_eq!(all.stderr.lines().collect::<Vec<_>>(), said);
}
