//! The optional parts (pre-pull DaemonSet, ServiceMonitor), the webhook switched off, URL
//! mode, the policy options reaching the args, registry/kinds values, and the schema.

use serde_json::{Value, json};

use crate::checks::Checks;
use crate::{
    NS, b64_text, counts, deployment_args, fails_with, kinds, one, openssl, render, render_values,
    strings,
};

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn pre_pull_and_service_monitor() {
    let mut c = Checks::default();
    let docs = render(&[
        "--set",
        "prePull.enabled=true",
        "--set",
        "inject.image=mirror.example/pullcheck:0.1.0",
    ]);
    let ds: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "DaemonSet").collect();
    c.eq("prePull: one DaemonSet", ds.len(), 1);
    if let Some(d) = ds.first() {
        let s = &d["spec"]["template"]["spec"];
        c.check(
            "prePull: init container runs the inject image's --version",
            s["initContainers"][0]["image"] == "mirror.example/pullcheck:0.1.0"
                && s["initContainers"][0]["args"] == json!(["--version"]),
            &s["initContainers"],
        );
        c.check(
            "prePull: pause container holds the pod",
            s["containers"][0]["image"]
                .as_str()
                .is_some_and(|i| i.starts_with("registry.k8s.io/pause:")),
            &s["containers"][0]["image"],
        );
        c.check(
            "prePull: tolerates every taint",
            s["tolerations"]
                .as_array()
                .is_some_and(|t| t.contains(&json!({"operator": "Exists"}))),
            &s["tolerations"],
        );
        c.check(
            "prePull: restricted securityContext",
            s["containers"][0]["securityContext"]["readOnlyRootFilesystem"] == true
                && s["securityContext"]["runAsNonRoot"] == true,
            (
                &s["containers"][0]["securityContext"],
                &s["securityContext"],
            ),
        );
    }
    let docs = render(&["--set", "serviceMonitor.enabled=true"]);
    let sm: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ServiceMonitor")
        .collect();
    c.check(
        "serviceMonitor: one ServiceMonitor on https /metrics",
        sm.len() == 1
            && sm[0]["spec"]["endpoints"][0]["scheme"] == "https"
            && sm[0]["spec"]["endpoints"][0]["path"] == "/metrics",
        &sm,
    );
    c.check(
        "serviceMonitor off by default",
        !kinds(&render(&[])).contains_key("ServiceMonitor"),
        "",
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn webhook_switched_off() {
    let mut c = Checks::default();
    let docs = render(&["--set", "webhook.enabled=false"]);
    c.check(
        "webhook disabled: renders nothing",
        docs.is_empty(),
        kinds(&docs),
    );
    let docs = render(&[
        "--set",
        "webhook.enabled=false",
        "--set",
        "prePull.enabled=true",
    ]);
    c.eq(
        "webhook disabled + prePull: only the DaemonSet",
        kinds(&docs),
        counts(&[("DaemonSet", 1)]),
    );
    let k = kinds(&render(&["--set", "webhook.validating.enabled=false"]));
    c.check(
        "validating off: only the mutating configuration",
        !k.contains_key("ValidatingWebhookConfiguration")
            && k.get("MutatingWebhookConfiguration") == Some(&1),
        &k,
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn url_mode_and_policy_options() {
    let mut c = Checks::default();
    let docs = render(&["--set", "webhook.url=https://127.0.0.1:9443"]);
    for (kind, path) in [
        ("ValidatingWebhookConfiguration", "/validate"),
        ("MutatingWebhookConfiguration", "/mutate"),
    ] {
        let cc = &one(&docs, kind)["webhooks"][0]["clientConfig"];
        c.check(
            &format!("url mode: {kind} by URL"),
            cc["url"] == format!("https://127.0.0.1:9443{path}").as_str()
                && cc.get("service").is_none(),
            cc,
        );
    }
    let crt = b64_text(&one(&docs, "Secret")["data"]["tls.crt"]);
    let (_, san) = openssl(&["x509", "-noout", "-ext", "subjectAltName"], &crt);
    c.check(
        "url mode: the generated certificate covers the URL's IP",
        san.contains("IP Address:127.0.0.1"),
        &san,
    );

    let docs = render(&[
        "--set",
        "webhook.mode=warn",
        "--set",
        "webhook.failClosed=true",
        "--set",
        "webhook.failurePolicy=Fail",
        "--set",
        "webhook.timeoutSeconds=5",
        "--set",
        "inject.pinDigests=true",
        "--set",
        "inject.failFast=true",
        "--set",
        "clusterPlatforms={linux/amd64}",
        "--set",
        "nodeCredentials={none}",
        "--set",
        "registry.deny={*.internal}",
        "--set",
        "webhook.excludeNamespaces={ops}",
    ]);
    let args = deployment_args(&docs);
    c.check(
        "options reach the args",
        [
            "--mode=warn",
            "--fail-closed",
            "--budget=3",
            "--pin-digests",
            "--fail-fast",
            "--cluster-platform=linux/amd64",
            "--node-credentials=none",
            "--deny-registry=*.internal",
        ]
        .iter()
        .all(|a| args.iter().any(|x| x == a))
            && !args.iter().any(|x| x == "--cluster-platform=linux/arm64"),
        &args,
    );
    let w = &one(&docs, "ValidatingWebhookConfiguration")["webhooks"][0];
    c.check(
        "failurePolicy Fail and timeoutSeconds 5",
        w["failurePolicy"] == "Fail" && w["timeoutSeconds"] == 5,
        (&w["failurePolicy"], &w["timeoutSeconds"]),
    );
    let mut notin = w["namespaceSelector"]["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["operator"] == "NotIn")
        .map(|e| strings(&e["values"]))
        .unwrap_or_default();
    notin.sort();
    notin.dedup();
    c.eq(
        "excludeNamespaces adds to the always-excluded ones",
        notin,
        vec!["kube-system".to_string(), "ops".into(), NS.into()],
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn registry_and_kinds_values() {
    let mut c = Checks::default();
    let values = json!({
        "registry": {
            "caCerts": "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n",
            "hostsToml": {"registry.example.com:5000": "server = \"https://registry.example.com:5000\"\n"},
        },
        "webhook": {"extraKinds": [{
            "apiVersion": "ray.io/v1", "kind": "RayJob", "resource": "rayjobs",
            "podTemplatePaths": ["spec.rayClusterSpec.headGroupSpec.template"],
        }]},
    });
    let docs = render_values(&values, &[]);
    let cms: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "ConfigMap").collect();
    let mut names: Vec<&str> = cms
        .iter()
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    names.sort();
    c.eq(
        "hostsToml and config ConfigMaps",
        names.clone(),
        vec!["pc-pullcheck-config", "pc-pullcheck-hosts"],
    );
    if let Some(config) = cms
        .iter()
        .find(|d| d["metadata"]["name"] == "pc-pullcheck-config")
    {
        let text = config["data"]["kinds.yaml"].as_str().unwrap_or("");
        let kinds_yaml = pullcheck::k8s::yaml::parse_documents(text)
            .ok()
            .and_then(|d| d.into_iter().next())
            .map(|d| d.value);
        c.eq(
            "kinds.yaml has the table row without the rule-only fields",
            kinds_yaml,
            Some(json!([{"apiVersion": "ray.io/v1", "kind": "RayJob",
                         "podTemplatePaths": ["spec.rayClusterSpec.headGroupSpec.template"]}])),
        );
    }
    let spec = &one(&docs, "Deployment")["spec"]["template"]["spec"];
    let hosts = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "hosts")
        .map(|v| v["configMap"]["items"].clone());
    c.eq(
        "hosts.toml mounted as certs.d/<host>/hosts.toml",
        hosts,
        Some(json!([{"key": "registry.example.com_5000",
                     "path": "registry.example.com:5000/hosts.toml"}])),
    );
    let args = strings(&spec["containers"][0]["args"]);
    c.check(
        "--hosts-dir, --ca-file and --kinds passed",
        [
            "--hosts-dir=/etc/pullcheck/certs.d",
            "--ca-file=/etc/pullcheck/config/registry-ca.crt",
            "--kinds=/etc/pullcheck/config/kinds.yaml",
        ]
        .iter()
        .all(|a| args.iter().any(|x| x == a)),
        &args,
    );
    let rules = &one(&docs, "ValidatingWebhookConfiguration")["webhooks"][0]["rules"];
    c.check(
        "extraKinds add a rule",
        rules.as_array().is_some_and(|r| {
            r.contains(&json!({"apiGroups": ["ray.io"], "apiVersions": ["v1"],
                               "resources": ["rayjobs"], "operations": ["CREATE"],
                               "scope": "Namespaced"}))
        }),
        rules,
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn schema_and_transient_mode() {
    let mut c = Checks::default();
    c.check(
        "schema rejects an unknown mode",
        fails_with(&["--set", "webhook.mode=block"], "must be one of"),
        "",
    );
    let args = deployment_args(&render(&["--set", "inject.transient=Restart"]));
    c.check(
        "inject.transient=Restart passes --transient=restart",
        args.iter().any(|a| a == "--transient=restart"),
        &args,
    );
    c.check(
        "schema rejects an unknown meteredGet",
        fails_with(
            &["--set", "registry.meteredGet=sometimes"],
            "must be one of",
        ),
        "",
    );
    c.check(
        "schema rejects an unknown value",
        fails_with(&["--set", "webhok.mode=warn"], "additional properties"),
        "",
    );
    c.check(
        "schema rejects a webhook URL with a path",
        fails_with(
            &["--set", "webhook.url=https://x/validate"],
            "does not match pattern",
        ),
        "",
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn node_runtime_reaches_the_webhook_and_the_init_container() {
    let mut c = Checks::default();
    let runtime_args = |docs: &[Value]| -> Vec<String> {
        deployment_args(docs)
            .into_iter()
            .filter(|a| a.contains("--node-runtime"))
            .collect()
    };
    c.eq(
        "default containerd-2: no flag",
        runtime_args(&render(&[])),
        Vec::<String>::new(),
    );
    c.eq(
        "cri-o: the webhook's flag and the injected check's",
        runtime_args(&render(&["--set", "nodeRuntime=cri-o"])),
        vec![
            "--node-runtime=cri-o".to_string(),
            "--inject-check-arg=--node-runtime=cri-o".to_string(),
        ],
    );
    c.check(
        "a misspelled runtime is refused by the schema",
        fails_with(
            &["--set", "nodeRuntime=crio"],
            "value must be one of 'containerd-2', 'containerd-1.7', 'cri-o'",
        ),
        "nodeRuntime=crio",
    );
    c.done();
}
