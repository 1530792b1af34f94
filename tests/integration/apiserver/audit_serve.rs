//! `pullcheck audit --serve` (the exporter) on the real kube-apiserver, as the chart runs it:
//! the chart is rendered with `audit.enabled=true`, a secrets allowlist of one namespace and
//! the deckhouse names, and applied; the exporter runs locally with the stored
//! Deployment's args (the CA path mapped to the stored ConfigMap's PEM, `--listen` on a
//! free loopback port) and a token of the chart's ServiceAccount, so the chart's RBAC is
//! all it has. Two namespaces hold the same workloads (an image present, one missing, a
//! private one with its pull secret): in the allowlisted one the private image is checked
//! with its secret (pullable), in the other anonymously, marked `anonymous_assumed`.
//!
//! The chart's args say `--all-namespaces`, and other tests share the control plane, so the
//! per-image series are asserted exactly for these two namespaces.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{ensure_namespace, free_port, get_json, helm_template, kubectl_ok, service_account};
use crate::support::webhook::Webhook;
use crate::support::{self, fixture};

/// The release and its namespace.
const RELEASE: &str = "pca";
/// `FULLNAME-audit`: the Deployment, ServiceAccount, ClusterRole.
const AUDIT: &str = "pca-pullcheck-audit";
/// Pull secrets readable here (`audit.secrets.namespaces`).
const OPEN: &str = "audit-serve-open";
/// Pull secrets not readable here.
const CLOSED: &str = "audit-serve-closed";
/// How long the first pass may take here.
const WITHIN: Duration = Duration::from_secs(120);

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// The images, by what the audit must find.
struct Images {
    present: String,
    missing: String,
    private: String,
}

fn images() -> Images {
    let f = fixture();
    Images {
        present: f.images.oci_manifest.reference(&f.anon),
        missing: format!("{}/oci/app:gone", f.anon.host),
        private: f.images.private.reference(&f.token),
    }
}

/// The same three workloads in `ns`.
fn workloads(ns: &str, i: &Images) {
    ensure_namespace(ns, &[]);
    service_account(ns, "default", &[]);
    super::pull_secret(ns, "regcred");
    let spec = |image: &str| json!({"restartPolicy": "Never", "containers": [{"name": "main", "image": image}]});
    let objects = [
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": spec(&i.missing)}}}}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": i.present}]}}}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug"},
            "spec": {"restartPolicy": "Never", "imagePullSecrets": [{"name": "regcred"}],
                "containers": [{"name": "main", "image": i.private}]}}),
    ];
    for o in objects {
        kubectl_ok(&["-n", ns, "apply", "-f", "-"], Some(&o.to_string()));
    }
}

/// The chart's audit objects applied; the exporter's args for a local run (without the API
/// server flags) and its RUST_LOG.
fn chart(dir: &tempfile::TempDir) -> (Vec<String>, String) {
    let f = fixture();
    let values = dir.path().join("values.yaml");
    std::fs::write(
        &values,
        serde_json::to_vec(&json!({
            "webhook": {"enabled": false},
            "audit": {"enabled": true, "metricNames": "deckhouse", "secrets": {"namespaces": [OPEN]}},
            "registry": {"allowLoopback": true, "insecure": [f.anon.host],
                "caCerts": std::fs::read_to_string(&f.ca_file).unwrap()},
        }))
        .unwrap(),
    )
    .unwrap();
    let rendered = helm_template(RELEASE, RELEASE, &["-f", values.to_str().unwrap()]);
    ensure_namespace(RELEASE, &[]);
    // The allowlisted namespace must exist before its Role is applied.
    ensure_namespace(OPEN, &[]);
    kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&rendered));
    let deploy = get_json(&["-n", RELEASE, "deployment", AUDIT]);
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    let ca = get_json(&["-n", RELEASE, "configmap", &format!("{AUDIT}-ca")]);
    let ca_file = dir.path().join("registry-ca.crt");
    std::fs::write(&ca_file, ca["data"]["registry-ca.crt"].as_str().unwrap()).unwrap();
    let args = strings(&container["args"])
        .into_iter()
        .map(|a| {
            if a.starts_with("--listen=") {
                format!("--listen=127.0.0.1:{}", free_port())
            } else {
                a.replace(
                    "/etc/pullcheck/ca/registry-ca.crt",
                    ca_file.to_str().unwrap(),
                )
            }
        })
        .collect::<Vec<_>>();
    assert!(
        !args.iter().any(|a| a.contains("/etc/pullcheck")),
        "{args:?}"
    );
    let rust_log = container["env"][0]["value"].as_str().unwrap().to_string();
    (args, rust_log)
}

/// A token of the chart's ServiceAccount, in a file.
fn token(dir: &tempfile::TempDir) -> String {
    let t = kubectl_ok(
        &["-n", RELEASE, "create", "token", AUDIT, "--duration", "1h"],
        None,
    );
    let file = dir.path().join("audit.token");
    std::fs::write(&file, t.trim()).unwrap();
    file.display().to_string()
}

fn get(w: &Webhook, path: &str) -> (u16, String) {
    match support::http::request(&w.base, None, "GET", path, &[], b"") {
        Ok(r) => (r.status, r.text()),
        Err(_) => (0, String::new()),
    }
}

/// `/metrics` once `/readyz` says the first pass ended.
fn scrape_after_first_pass(w: &Webhook) -> String {
    let deadline = Instant::now() + WITHIN;
    while get(w, "/readyz").0 != 200 {
        assert!(
            Instant::now() < deadline,
            "the first pass did not end; stderr:\n{}",
            w.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, text) = get(w, "/metrics");
    assert_eq!(status, 200, "{text}");
    text
}

/// The sample lines of `text` starting with `prefix` whose `namespace` label is one of
/// `namespaces`, sorted.
fn series(text: &str, prefix: &str, namespaces: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with(prefix))
        .filter(|l| {
            namespaces
                .iter()
                .any(|ns| l.contains(&format!("{{namespace=\"{ns}\",")))
        })
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// The one sample line named exactly `name` (with its labels, if any).
fn sample<'a>(text: &'a str, name: &str) -> &'a str {
    let found: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name} ")))
        .collect();
    assert_eq!(found.len(), 1, "{name} in\n{text}");
    found[0]
}

#[test]
#[ignore = "needs a control plane: scripts/apiserver-e2e.sh"]
fn the_charts_exporter_serves_each_images_verdict_and_reads_secrets_only_where_allowed() {
    assert!(
        super::required(),
        "needs a control plane: run scripts/apiserver-e2e.sh"
    );
    let i = images();
    let dir = support::temp_dir();
    let (mut args, rust_log) = chart(&dir);
    for ns in [OPEN, CLOSED] {
        workloads(ns, &i);
    }
    let token = token(&dir);
    args.extend([
        format!(
            "--apiserver={}",
            std::env::var("PULLCHECK_CP_SERVER").unwrap()
        ),
        format!("--apiserver-token-file={token}"),
        format!(
            "--apiserver-ca-file={}",
            std::env::var("PULLCHECK_CP_CA").unwrap()
        ),
    ]);
    let w = support::webhook::start_audit(&args, &rust_log);
    assert_eq!(
        get(&w, "/healthz"),
        (200, "ok\n".to_string()),
        "{}",
        w.log()
    );
    let text = scrape_after_first_pass(&w);

    let verdict = |ns: &str, kind: &str, name: &str, c: &str, image: &str, v: &str, cred: &str| {
        format!(
            "pullcheck_audit_image_verdict{{namespace=\"{ns}\",kind=\"{kind}\",name=\"{name}\",container=\"{c}\",image=\"{image}\",verdict=\"{v}\",credentials=\"{cred}\"}} 1"
        )
    };
    let mut want = Vec::new();
    for (ns, private_verdict, cred) in [
        (OPEN, "pullable", "pod"),
        (CLOSED, "unauthenticated", "anonymous_assumed"),
    ] {
        want.push(verdict(
            ns,
            "CronJob",
            "nightly",
            "main",
            &i.missing,
            "not_found",
            "pod",
        ));
        want.push(verdict(
            ns,
            "Deployment",
            "web",
            "web",
            &i.present,
            "pullable",
            "pod",
        ));
        want.push(verdict(
            ns,
            "Pod",
            "debug",
            "main",
            &i.private,
            private_verdict,
            cred,
        ));
    }
    want.sort();
    assert_eq!(
        series(&text, "pullcheck_audit_image_verdict{", &[OPEN, CLOSED]),
        want,
        "stderr:\n{}",
        w.log()
    );

    // The peer's names: seven gauges per container, 1 for its mode.
    let mut peer = Vec::new();
    for (ns, private_mode) in [(OPEN, "available"), (CLOSED, "authentication_failure")] {
        let rows = [
            ("main", i.missing.as_str(), "cronjob", "nightly", "absent"),
            ("web", i.present.as_str(), "deployment", "web", "available"),
            ("main", i.private.as_str(), "pod", "debug", private_mode),
        ];
        for mode in [
            "available",
            "absent",
            "bad_image_format",
            "registry_unavailable",
            "authentication_failure",
            "authorization_failure",
            "unknown_error",
        ] {
            for (c, image, kind, name, m) in rows {
                peer.push(format!(
                    "k8s_image_availability_exporter_{mode}{{namespace=\"{ns}\",container=\"{c}\",image=\"{image}\",kind=\"{kind}\",name=\"{name}\"}} {}",
                    u8::from(m == mode)
                ));
            }
        }
    }
    peer.sort();
    assert_eq!(
        series(&text, "k8s_image_availability_exporter_", &[OPEN, CLOSED]),
        peer
    );

    // One pass so far (the interval is the chart's 10 minutes), and it succeeded.
    for (name, value) in [
        ("pullcheck_audit_passes_total{outcome=\"succeeded\"}", "1"),
        ("pullcheck_audit_passes_total{outcome=\"failed\"}", "0"),
        ("pullcheck_audit_passes_total{outcome=\"timed_out\"}", "0"),
        (
            "k8s_image_availability_exporter_completed_rechecks_total",
            "1",
        ),
        ("pullcheck_audit_interval_seconds", "600.0"),
        ("pullcheck_audit_image_series_dropped", "0"),
    ] {
        assert_eq!(sample(&text, name), format!("{name} {value}"), "{text}");
    }
    let age: f64 = sample(&text, "pullcheck_audit_results_age_seconds")
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((0.0..120.0).contains(&age), "age {age}");
    // The token registry states no quota: no quota series.
    assert!(
        !text.contains("pullcheck_registry_quota_remaining{"),
        "{text}"
    );
    assert_eq!(w.terminate().code(), Some(0));
}

#[test]
#[ignore = "needs a control plane: scripts/apiserver-e2e.sh"]
fn a_pass_the_api_server_does_not_answer_is_counted_failed_and_the_exporter_is_ready() {
    assert!(
        super::required(),
        "needs a control plane: run scripts/apiserver-e2e.sh"
    );
    let dir = support::temp_dir();
    let (mut args, rust_log) = chart(&dir);
    let token = token(&dir);
    // A loopback port nobody listens on: every list is refused at once.
    args.extend([
        format!("--apiserver=https://127.0.0.1:{}", free_port()),
        format!("--apiserver-token-file={token}"),
        format!(
            "--apiserver-ca-file={}",
            std::env::var("PULLCHECK_CP_CA").unwrap()
        ),
    ]);
    let w = support::webhook::start_audit(&args, &rust_log);
    let text = scrape_after_first_pass(&w);
    for (name, value) in [
        ("pullcheck_audit_passes_total{outcome=\"succeeded\"}", "0"),
        ("pullcheck_audit_passes_total{outcome=\"failed\"}", "1"),
        ("pullcheck_audit_results_age_seconds", "-1.0"),
        ("pullcheck_audit_workloads", "0"),
    ] {
        assert_eq!(sample(&text, name), format!("{name} {value}"), "{text}");
    }
    assert!(!text.contains("pullcheck_audit_image_verdict{"), "{text}");
    let log = w.log_containing("audit pass failed");
    assert!(log.contains("listing nodes"), "{log}");
    assert_eq!(w.terminate().code(), Some(0));
}
