//! `audit.enabled`: the exporter's ServiceAccount, read-only RBAC (no Secrets unless
//! `audit.secrets.namespaces` names where), Deployment and Service; the ServiceMonitor and
//! PrometheusRule only where the cluster serves `monitoring.coreos.com/v1` (rendered with
//! and without `--api-versions`), the Grafana dashboard when asked.

use serde_json::{Value, json};

use crate::checks::Checks;
use crate::{NS, REPO, counts, kinds, render};

const AUDIT: &str = "pc-pullcheck-audit";
const MONITORING: &str = "monitoring.coreos.com/v1";

/// The documents whose name starts with `pc-pullcheck-audit`, as (kind, name, namespace).
fn audit_objects(docs: &[Value]) -> Vec<(String, String, String)> {
    let mut v: Vec<(String, String, String)> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(AUDIT))
        })
        .map(|d| {
            let s = |p: &str| {
                d.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (s("/kind"), s("/metadata/name"), s("/metadata/namespace"))
        })
        .collect();
    v.sort();
    v
}

fn obj(kind: &str, name: &str, ns: &str) -> (String, String, String) {
    (kind.into(), name.into(), ns.into())
}

fn of<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "{} {kind}/{name}", found.len());
    found[0]
}

/// The base objects of `audit.enabled=true` (ClusterRole and Binding have no namespace).
fn base() -> Vec<(String, String, String)> {
    vec![
        obj("ClusterRole", AUDIT, ""),
        obj("ClusterRoleBinding", AUDIT, ""),
        obj("Deployment", AUDIT, NS),
        obj("Service", AUDIT, NS),
        obj("ServiceAccount", AUDIT, NS),
    ]
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn audit_objects_rbac_and_args_by_default() {
    let mut c = Checks::default();
    c.eq(
        "audit off by default: no audit objects",
        audit_objects(&render(&[])),
        vec![],
    );

    let docs = render(&["--set", "audit.enabled=true"]);
    c.eq(
        "audit: ServiceAccount, ClusterRole(+Binding), Deployment, Service",
        audit_objects(&docs),
        base(),
    );
    c.eq(
        "audit: the webhook's objects stay as they are",
        kinds(&docs),
        counts(&[
            ("Deployment", 2),
            ("Service", 2),
            ("ServiceAccount", 2),
            ("ClusterRole", 2),
            ("ClusterRoleBinding", 2),
            ("Secret", 1),
            ("PodDisruptionBudget", 1),
            ("ValidatingWebhookConfiguration", 1),
            ("MutatingWebhookConfiguration", 1),
        ]),
    );
    c.eq(
        "audit: the ClusterRole lists the audited kinds and nodes, gets serviceaccounts, no secrets",
        &of(&docs, "ClusterRole", AUDIT)["rules"],
        &json!([
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"], "verbs": ["list"]},
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs"], "verbs": ["list"]},
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["list"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]},
        ]),
    );
    c.eq(
        "audit: the binding is to the audit's ServiceAccount",
        &of(&docs, "ClusterRoleBinding", AUDIT)["subjects"],
        &json!([{"kind": "ServiceAccount", "name": AUDIT, "namespace": NS}]),
    );
    let dep = of(&docs, "Deployment", AUDIT);
    let spec = &dep["spec"]["template"]["spec"];
    let ctr = &spec["containers"][0];
    c.eq("audit: one replica", &dep["spec"]["replicas"], &json!(1));
    c.eq(
        "audit: the chart's image",
        &ctr["image"],
        &json!(format!("{REPO}:0.1.0")),
    );
    c.eq(
        "audit: default args",
        &ctr["args"],
        &json!([
            "audit",
            "--serve",
            "--all-namespaces",
            "--listen=0.0.0.0:8080",
            "--interval=10m",
            "--metric-names=pullcheck",
            "--max-series=10000"
        ]),
    );
    c.eq(
        "audit: its ServiceAccount",
        &spec["serviceAccountName"],
        &json!(AUDIT),
    );
    c.eq(
        "audit: probes on /healthz and /readyz",
        (
            &ctr["livenessProbe"]["httpGet"],
            &ctr["readinessProbe"]["httpGet"],
        ),
        (
            &json!({"path": "/healthz", "port": "metrics"}),
            &json!({"path": "/readyz", "port": "metrics"}),
        ),
    );
    c.eq(
        "audit: RUST_LOG",
        &ctr["env"],
        &json!([{"name": "RUST_LOG", "value": "pullcheck=info"}]),
    );
    c.check(
        "audit: restricted securityContext",
        ctr["securityContext"]["readOnlyRootFilesystem"] == true
            && spec["securityContext"]["runAsNonRoot"] == true,
        (&ctr["securityContext"], &spec["securityContext"]),
    );
    c.eq(
        "audit: the Service selects the audit pod on port metrics",
        (&of(&docs, "Service", AUDIT)["spec"]["selector"], &of(&docs, "Service", AUDIT)["spec"]["ports"]),
        (
            &json!({"app.kubernetes.io/name": "pullcheck-audit", "app.kubernetes.io/instance": "pc", "app.kubernetes.io/component": "audit"}),
            &json!([{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]),
        ),
    );
    c.eq(
        "audit: the pod's labels are the Service's selector",
        &dep["spec"]["template"]["metadata"]["labels"],
        &of(&docs, "Service", AUDIT)["spec"]["selector"],
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn audit_secret_access_is_a_role_per_allowlisted_namespace() {
    let mut c = Checks::default();
    let docs = render(&[
        "--set",
        "audit.enabled=true",
        "--set",
        "audit.secrets.namespaces={team-a,team-b}",
        "--set",
        "audit.interval=90s",
        "--set",
        "audit.metricNames=deckhouse",
        "--set",
        "audit.maxSeries=500",
        "--set",
        "registry.allowLoopback=true",
        "--set",
        "registry.caCerts=PEM",
    ]);
    let mut want = base();
    want.extend([
        obj("ConfigMap", "pc-pullcheck-audit-ca", NS),
        obj("Role", "pc-pullcheck-audit-secrets", "team-a"),
        obj("Role", "pc-pullcheck-audit-secrets", "team-b"),
        obj("RoleBinding", "pc-pullcheck-audit-secrets", "team-a"),
        obj("RoleBinding", "pc-pullcheck-audit-secrets", "team-b"),
    ]);
    want.sort();
    c.eq(
        "audit: a Role and RoleBinding in each allowlisted namespace",
        audit_objects(&docs),
        want,
    );
    for d in docs
        .iter()
        .filter(|d| d["metadata"]["name"] == "pc-pullcheck-audit-secrets")
    {
        match d["kind"].as_str() {
            Some("Role") => c.eq(
                "audit: the Role only gets secrets",
                &d["rules"],
                &json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
            ),
            _ => c.eq(
                "audit: the RoleBinding binds the audit's ServiceAccount to that Role",
                (&d["subjects"], &d["roleRef"]),
                (
                    &json!([{"kind": "ServiceAccount", "name": AUDIT, "namespace": NS}]),
                    &json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pc-pullcheck-audit-secrets"}),
                ),
            ),
        }
    }
    let dep = of(&docs, "Deployment", AUDIT);
    let spec = &dep["spec"]["template"]["spec"];
    c.eq(
        "audit: the values reach the args",
        &spec["containers"][0]["args"],
        &json!([
            "audit",
            "--serve",
            "--all-namespaces",
            "--listen=0.0.0.0:8080",
            "--interval=90s",
            "--metric-names=deckhouse",
            "--max-series=500",
            "--allow-loopback-registries",
            "--ca-file=/etc/pullcheck/ca/registry-ca.crt"
        ]),
    );
    c.eq(
        "audit: the CA is mounted from its ConfigMap",
        (&spec["containers"][0]["volumeMounts"], &spec["volumes"]),
        (
            &json!([{"name": "ca", "mountPath": "/etc/pullcheck/ca", "readOnly": true}]),
            &json!([{"name": "ca", "configMap": {"name": "pc-pullcheck-audit-ca"}}]),
        ),
    );
    c.eq(
        "audit: the CA ConfigMap holds the PEM",
        &of(&docs, "ConfigMap", "pc-pullcheck-audit-ca")["data"],
        &json!({"registry-ca.crt": "PEM\n"}),
    );
    c.check(
        "audit: no secrets in the ClusterRole even with an allowlist",
        !of(&docs, "ClusterRole", AUDIT)
            .to_string()
            .contains("secrets"),
        &of(&docs, "ClusterRole", AUDIT)["rules"],
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn audit_monitoring_objects_only_where_the_api_is_served_and_asked_for() {
    let mut c = Checks::default();
    let on = [
        "--set",
        "audit.enabled=true",
        "--set",
        "audit.serviceMonitor.enabled=true",
        "--set",
        "audit.prometheusRule.enabled=true",
    ];
    c.eq(
        "audit: without monitoring.coreos.com/v1 neither is rendered",
        audit_objects(&render(&on)),
        base(),
    );
    let mut with_api = on.to_vec();
    with_api.extend(["--api-versions", MONITORING]);
    let docs = render(&with_api);
    let mut want = base();
    want.extend([
        obj("PrometheusRule", AUDIT, NS),
        obj("ServiceMonitor", AUDIT, NS),
    ]);
    want.sort();
    c.eq(
        "audit: with the API, the ServiceMonitor and the PrometheusRule",
        audit_objects(&docs),
        want,
    );
    c.eq(
        "audit: with the API but not asked for, neither",
        audit_objects(&render(&[
            "--set",
            "audit.enabled=true",
            "--api-versions",
            MONITORING,
        ])),
        base(),
    );
    c.eq(
        "audit: the ServiceMonitor scrapes port metrics keeping the workloads' namespace label",
        &of(&docs, "ServiceMonitor", AUDIT)["spec"]["endpoints"],
        &json!([{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "60s",
            "scrapeTimeout": "10s", "honorLabels": true}]),
    );
    let job = "job=\"pc-pullcheck-audit\"";
    let rules = &of(&docs, "PrometheusRule", AUDIT)["spec"]["groups"][0]["rules"];
    let summary: Vec<(Value, Value, Value)> = rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["alert"].clone(),
                r["expr"].clone(),
                r["labels"]["severity"].clone(),
            )
        })
        .collect();
    c.eq(
        "audit: the three alerts",
        summary,
        vec![
            (
                json!("PullcheckCronJobNextRunWillFail"),
                json!(format!("max by (namespace, name, container, image, verdict) (pullcheck_audit_image_verdict{{{job}, kind=\"CronJob\", verdict!~\"pullable|transient\"}}) == 1")),
                json!("warning"),
            ),
            (
                json!("PullcheckDeploymentImageGone"),
                json!(format!("max by (namespace, name, container, image, verdict) (pullcheck_audit_image_verdict{{{job}, kind=\"Deployment\", verdict=~\"not_found|platform_missing\"}}) == 1")),
                json!("critical"),
            ),
            (
                json!("PullcheckAuditPassFailing"),
                json!(format!("max(increase(pullcheck_audit_passes_total{{{job}, outcome!=\"succeeded\"}}[1h])) > 0 or max(pullcheck_audit_results_age_seconds{{{job}}} > 2 * pullcheck_audit_interval_seconds{{{job}}}) > 0")),
                json!("warning"),
            ),
        ],
    );
    c.eq(
        "audit: image alerts wait audit.prometheusRule.for",
        (&rules[0]["for"], &rules[1]["for"]),
        (&json!("15m"), &json!("15m")),
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn audit_dashboard_is_opt_in_labelled_for_grafanas_sidecar_and_valid_json() {
    let mut c = Checks::default();
    let docs = render(&[
        "--set",
        "audit.enabled=true",
        "--set",
        "audit.dashboard.enabled=true",
    ]);
    let mut want = base();
    want.push(obj("ConfigMap", "pc-pullcheck-audit-dashboard", NS));
    want.sort();
    c.eq("audit: the dashboard ConfigMap", audit_objects(&docs), want);
    let cm = of(&docs, "ConfigMap", "pc-pullcheck-audit-dashboard");
    c.eq(
        "audit: the sidecar's label",
        &cm["metadata"]["labels"]["grafana_dashboard"],
        &json!("1"),
    );
    let dash: Value =
        serde_json::from_str(cm["data"]["pullcheck-audit.json"].as_str().unwrap()).unwrap();
    c.eq(
        "audit: the dashboard's uid and title",
        (&dash["uid"], &dash["title"]),
        (&json!("pullcheck-audit"), &json!("pullcheck audit")),
    );
    let exprs: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["targets"][0]["expr"]
                .as_str()
                .unwrap()
                .split(['{', '('])
                .filter(|s| s.contains("pullcheck_"))
                .map(|s| s.rsplit(' ').next().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    c.eq(
        "audit: one panel per exported family",
        exprs,
        [
            "pullcheck_audit_image_verdict",
            "pullcheck_audit_images",
            "pullcheck_audit_passes_total",
            "pullcheck_audit_last_pass_duration_seconds",
            "pullcheck_audit_results_age_seconds",
            "pullcheck_registry_quota_remaining",
            "pullcheck_audit_image_series_dropped",
        ]
        .map(String::from)
        .to_vec(),
    );
    let elsewhere = render(&[
        "--set",
        "audit.enabled=true",
        "--set",
        "audit.dashboard.enabled=true",
        "--set",
        "audit.dashboard.namespace=monitoring",
    ]);
    c.eq(
        "audit: the dashboard may go to Grafana's namespace",
        &of(&elsewhere, "ConfigMap", "pc-pullcheck-audit-dashboard")["metadata"]["namespace"],
        &json!("monitoring"),
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn audit_values_the_schema_refuses() {
    let mut c = Checks::default();
    for (set, error) in [
        ("audit.metricNames=prometheus", "/audit/metricNames"),
        ("audit.interval=10 minutes", "/audit/interval"),
        ("audit.maxSeries=0", "/audit/maxSeries"),
        (
            "audit.secrets.namespaces={Team_A}",
            "/audit/secrets/namespaces/0",
        ),
    ] {
        c.check(
            &format!("audit: {set} is refused naming it"),
            crate::fails_with(&["--set", "audit.enabled=true", "--set", set], error),
            set,
        );
    }
    c.done();
}
