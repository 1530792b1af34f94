//! `watch.enabled`: the watch's own ServiceAccount, RBAC, Deployment and Service, the
//! values reaching its args, and the webhook's objects left as they are.

use serde_json::{Value, json};

use crate::checks::Checks;
use crate::webhook_defaults::non_empty;
use crate::{NS, REPO, counts, fails_with, kinds, named, render, strings};

/// The kinds of `docs`, sorted.
fn sorted_kinds(docs: &[&Value]) -> Vec<String> {
    let mut k: Vec<String> = docs
        .iter()
        .filter_map(|d| d["kind"].as_str().map(str::to_string))
        .collect();
    k.sort();
    k
}

/// The one document of `kind` among `docs`.
fn of_kind<'a>(docs: &[&'a Value], kind: &str) -> &'a Value {
    let found: Vec<&&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(
        found.len(),
        1,
        "{} watch documents of kind {kind}",
        found.len()
    );
    found[0]
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn watch_objects_by_default() {
    let mut c = Checks::default();
    let off: Vec<String> = render(&[])
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| n.ends_with("-watch"))
        .collect();
    c.eq("watch off by default: no watch objects", off, vec![]);

    let docs = render(&["--set", "watch.enabled=true"]);
    let w = named(&docs, "pc-pullcheck-watch");
    c.eq(
        "watch: ServiceAccount, ClusterRole, ClusterRoleBinding, Deployment, Service",
        sorted_kinds(&w),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "Service",
            "ServiceAccount",
        ]
        .map(String::from)
        .to_vec(),
    );
    c.eq(
        "watch: the webhook's objects stay as they are",
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
    let wdep = of_kind(&w, "Deployment");
    let wspec = &wdep["spec"]["template"]["spec"];
    let wc = &wspec["containers"][0];
    c.eq(
        "watch: one replica by default",
        &wdep["spec"]["replicas"],
        &json!(1),
    );
    c.eq(
        "watch: same image as the webhook",
        &wc["image"],
        &json!(format!("{REPO}:0.1.0")),
    );
    c.eq(
        "watch: default args (listen, rate limit, the webhook's opt-in label)",
        &wc["args"],
        &json!([
            "watch",
            "--listen=0.0.0.0:8080",
            "--max-deletions-per-minute=30",
            "--namespace-label=pullcheck.io/enabled=true"
        ]),
    );
    c.eq(
        "watch: runs as its own ServiceAccount",
        &wspec["serviceAccountName"],
        &json!("pc-pullcheck-watch"),
    );
    c.check(
        "watch: probes over http on /healthz and /readyz",
        wc["livenessProbe"]["httpGet"] == json!({"path": "/healthz", "port": "metrics"})
            && wc["readinessProbe"]["httpGet"] == json!({"path": "/readyz", "port": "metrics"}),
        (&wc["livenessProbe"], &wc["readinessProbe"]),
    );
    c.check(
        "watch: restricted securityContext",
        wc["securityContext"]["readOnlyRootFilesystem"] == true
            && wspec["securityContext"]["runAsNonRoot"] == true,
        (&wc["securityContext"], &wspec["securityContext"]),
    );
    c.check(
        "watch: resources set",
        non_empty(&wc["resources"]["requests"]) && non_empty(&wc["resources"]["limits"]),
        &wc["resources"],
    );
    let webhook_sel = &of_kind(&named(&docs, "pc-pullcheck"), "Service")["spec"]["selector"];
    let wlabels = &wdep["spec"]["template"]["metadata"]["labels"];
    let selected = webhook_sel
        .as_object()
        .is_some_and(|sel| sel.iter().all(|(k, v)| &wlabels[k] == v));
    c.check(
        "watch: its pods are not selected by the webhook's Service and PDB",
        !selected,
        (webhook_sel, wlabels),
    );
    let wsvc = of_kind(&w, "Service");
    c.check(
        "watch: Service selects the watch pods, port metrics",
        wsvc["spec"]["selector"] == wdep["spec"]["selector"]["matchLabels"]
            && wsvc["spec"]["ports"][0]["targetPort"] == "metrics",
        &wsvc["spec"],
    );
    let rules = of_kind(&w, "ClusterRole")["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut got: Vec<(String, Vec<String>)> = rules
        .iter()
        .filter(|r| {
            r["apiGroups"] == json!([""]) && r["resources"].as_array().map(Vec::len) == Some(1)
        })
        .map(|r| {
            let mut verbs = strings(&r["verbs"]);
            verbs.sort();
            (strings(&r["resources"])[0].clone(), verbs)
        })
        .collect();
    got.sort();
    let want: Vec<(String, Vec<String>)> = [
        ("events", &["create", "list", "patch"][..]),
        ("namespaces", &["get"]),
        ("pods", &["delete", "get", "list", "watch"]),
        ("pods/status", &["patch"]),
    ]
    .iter()
    .map(|(r, v)| (r.to_string(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    c.check(
        "watch RBAC: exactly pods get/list/watch/delete, pods/status patch, events create/patch/list, namespaces get",
        got.len() == rules.len() && got == want,
        &rules,
    );
    let crb = of_kind(&w, "ClusterRoleBinding");
    c.check(
        "watch RBAC: bound to the watch's ServiceAccount",
        crb["roleRef"]["name"] == "pc-pullcheck-watch"
            && crb["subjects"]
                == json!([{"kind": "ServiceAccount", "name": "pc-pullcheck-watch", "namespace": NS}]),
        crb,
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn watch_values() {
    let mut c = Checks::default();
    let docs = render(&[
        "--set",
        "watch.enabled=true",
        "--set",
        "watch.dryRun=true",
        "--set",
        "watch.transientGraceSeconds=120",
        "--set",
        "watch.maxDeletionsPerMinute=5",
        "--set",
        "watch.namespaceLabel=",
        "--set",
        "watch.replicas=2",
        "--set",
        "watch.extraArgs={--once}",
        "--set-json",
        r#"registry.hostsToml={"docker.io":"server = \"https://registry-1.docker.io\""}"#,
    ]);
    let wdep = of_kind(&named(&docs, "pc-pullcheck-watch"), "Deployment");
    let wspec = &wdep["spec"]["template"]["spec"];
    c.eq(
        "watch: values reach the args (no label: every namespace)",
        &wspec["containers"][0]["args"],
        &json!([
            "watch",
            "--listen=0.0.0.0:8080",
            "--max-deletions-per-minute=5",
            "--transient-grace=120",
            "--dry-run",
            "--hosts-dir=/etc/pullcheck/certs.d",
            "--once"
        ]),
    );
    c.eq("watch: replicas", &wdep["spec"]["replicas"], &json!(2));
    c.check(
        "watch: registry.hostsToml mounted as the hosts dir",
        wspec["volumes"]
            == json!([{"name": "hosts", "configMap": {"name": "pc-pullcheck-hosts",
                        "items": [{"key": "docker.io", "path": "docker.io/hosts.toml"}]}}])
            && wspec["containers"][0]["volumeMounts"][0]["mountPath"] == "/etc/pullcheck/certs.d",
        (&wspec["volumes"], &wspec["containers"][0]["volumeMounts"]),
    );

    let docs = render(&[
        "--set",
        "webhook.enabled=false",
        "--set",
        "watch.enabled=true",
        "--set-json",
        r#"registry.hostsToml={"r.io":"server = \"https://r.io\""}"#,
    ]);
    c.eq(
        "watch alone (webhook off): the watch objects and the hosts ConfigMap only",
        kinds(&docs),
        counts(&[
            ("ServiceAccount", 1),
            ("ClusterRole", 1),
            ("ClusterRoleBinding", 1),
            ("Deployment", 1),
            ("Service", 1),
            ("ConfigMap", 1),
        ]),
    );
    let docs = render(&[
        "--set",
        "watch.enabled=true",
        "--set",
        "serviceMonitor.enabled=true",
    ]);
    let sms: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ServiceMonitor")
        .collect();
    c.check(
        "watch + serviceMonitor: a second ServiceMonitor on http /metrics",
        sms.len() == 2
            && sms.iter().any(|s| {
                s["metadata"]["name"] == "pc-pullcheck-watch"
                    && s["spec"]["endpoints"][0]["scheme"] == "http"
                    && s["spec"]["endpoints"][0]["port"] == "metrics"
            }),
        &sms,
    );
    let docs = render(&[
        "--set",
        "watch.enabled=true",
        "--set",
        "watch.rbac.create=false",
        "--set",
        "watch.serviceAccount.create=false",
        "--set",
        "watch.serviceAccount.name=mine",
    ]);
    let w: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-watch"))
        })
        .collect();
    c.check(
        "watch with rbac and serviceAccount off: Deployment and Service only, named ServiceAccount",
        sorted_kinds(&w) == ["Deployment", "Service"]
            && of_kind(&w, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
                == "mine",
        sorted_kinds(&w),
    );
    c.check(
        "schema rejects a namespaceLabel without =",
        fails_with(
            &["--set", "watch.namespaceLabel=team"],
            "does not match pattern",
        ),
        "",
    );
    c.check(
        "schema rejects a non-numeric transientGraceSeconds",
        fails_with(
            &["--set", "watch.transientGraceSeconds=soon"],
            "transientGraceSeconds",
        ),
        "",
    );
    c.done();
}
