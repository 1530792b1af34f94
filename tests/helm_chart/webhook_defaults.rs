//! `helm lint --strict` over the option sets, the required image, and the default render:
//! the webhook configurations, the generated TLS, the Deployment and its RBAC.

use serde_json::{Value, json};

use crate::checks::Checks;
use crate::{
    CHART, NS, REPO, WITH_PROBE, b64_text, counts, helm, kinds, one, openssl, render, render_with,
    strings, template,
};

/// The CEL the chart's matchCondition uses to let controller-owned objects through.
const CEL_OWNED: &str = "!has(object.metadata.ownerReferences) || \
    !object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)";

/// The render error without `image.repository`.
const NEED_IMAGE: &str = "image.repository is required: pullcheck publishes no image; \
    build and push yours with scripts/publish-image.sh";

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn lint_strict_passes_for_every_option_set() {
    let sets: &[(&str, &[&str])] = &[
        ("defaults", &[]),
        ("certManager", &["--set", "tls.mode=certManager"]),
        (
            "external",
            &["--set", "tls.mode=external", "--set", "tls.caBundle=PEM"],
        ),
        (
            "rbac namespaces",
            &[
                "--set",
                "rbac.scope=namespaces",
                "--set",
                "rbac.namespaces={team-a,team-b}",
            ],
        ),
        (
            "prePull + serviceMonitor",
            &[
                "--set",
                "prePull.enabled=true",
                "--set",
                "serviceMonitor.enabled=true",
            ],
        ),
        (
            "watch",
            &[
                "--set",
                "watch.enabled=true",
                "--set",
                "serviceMonitor.enabled=true",
            ],
        ),
        (
            "watch alone",
            &[
                "--set",
                "webhook.enabled=false",
                "--set",
                "watch.enabled=true",
            ],
        ),
        ("webhook disabled", &["--set", "webhook.enabled=false"]),
        ("url mode", &["--set", "webhook.url=https://127.0.0.1:8443"]),
        (
            "credential providers with token requests",
            &[
                "--set",
                "credentialProviders.enabled=true",
                "--set",
                "credentialProviders.config=providers: []",
                "--set",
                "credentialProviders.pluginImage.repository=example.com/plugins",
                "--set",
                "credentialProviders.pluginImage.tag=v1",
                "--set",
                "credentialProviders.tokenRequests.enabled=true",
                "--set",
                "credentialProviders.tokenRequests.namespaces={team-a}",
                "--set",
                "credentialProviders.tokenRequests.audiences={sts.amazonaws.com}",
            ],
        ),
    ];
    let image = format!("image.repository={REPO}");
    let mut c = Checks::default();
    for (name, extra) in sets {
        let mut args = vec![
            "lint",
            "--strict",
            CHART,
            "--namespace",
            NS,
            "--set",
            &image,
        ];
        args.extend(*extra);
        let r = helm(&args);
        c.check(
            &format!("helm lint --strict ({name})"),
            r.ok,
            r.stdout + &r.stderr,
        );
    }
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn image_is_required_and_built_for_the_chart_platforms() {
    let mut c = Checks::default();
    let r = helm(&["template", "pc", CHART, "--namespace", NS]);
    c.check(
        "without image.repository the chart fails to render, naming scripts/publish-image.sh",
        !r.ok && r.stderr.contains(NEED_IMAGE) && r.stdout.is_empty(),
        &r.stderr,
    );
    let r = helm(&["lint", "--strict", CHART, "--namespace", NS]);
    // helm lint renders leniently: a missing `required` value is an [INFO] line, not a failure.
    let text = r.stdout + &r.stderr;
    c.check(
        "... and helm lint names it too ([INFO]: lint doesn't fail on required values)",
        text.contains(&format!("[INFO] Missing required value: {NEED_IMAGE}")),
        &text,
    );
    let inject = format!(
        "inject.image=mirror.example/pullcheck@sha256:{}",
        "b".repeat(64)
    );
    let cases: [(&str, Vec<&str>); 2] = [
        (
            "watch alone",
            vec![
                "--set",
                "webhook.enabled=false",
                "--set",
                "watch.enabled=true",
            ],
        ),
        (
            "inject.image set, webhook image not",
            vec!["--set", &inject],
        ),
    ];
    for (label, extra) in &cases {
        let r = template(
            extra,
            crate::Opts {
                probe: false,
                image: false,
            },
        );
        c.check(
            &format!("without image.repository ({label}) it fails too"),
            !r.ok && r.stderr.contains(NEED_IMAGE),
            &r.stderr,
        );
    }
    let digest = format!("sha256:{}", "c".repeat(64));
    let pinned = render(&["--set", &format!("image.digest={digest}")]);
    let pc = &one(&pinned, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    c.check(
        "image.digest pins the webhook and the injected image",
        pc["image"] == format!("{REPO}@{digest}").as_str()
            && strings(&pc["args"]).contains(&format!("--inject-image={REPO}@{digest}")),
        pc,
    );
    // scripts/publish-image.sh's `platforms=(...)` are what the image holds; the chart's
    // default clusterPlatforms must be the same list, or pullcheck calls its own image
    // pullable for a node it can't run on (or fails healthy Jobs for a platform the image
    // lacks).
    let script = std::fs::read_to_string("scripts/publish-image.sh").expect("publish-image.sh");
    let mut published: Vec<String> = script
        .lines()
        .find_map(|l| l.strip_prefix("platforms=("))
        .and_then(|rest| rest.split_once(')'))
        .map(|(list, _)| {
            list.split_whitespace()
                .map(|p| format!("linux/{p}"))
                .collect()
        })
        .unwrap_or_default();
    published.sort();
    let values = std::fs::read_to_string(format!("{CHART}/values.yaml")).expect("values.yaml");
    let values = pullcheck::k8s::yaml::parse_documents(&values).expect("values.yaml parses");
    let mut chart_platforms = strings(&values[0].value["clusterPlatforms"]);
    chart_platforms.sort();
    c.check(
        &format!("clusterPlatforms {chart_platforms:?} = the image's platforms {published:?}"),
        !published.is_empty() && chart_platforms == published,
        (&chart_platforms, &published),
    );
    c.done();
}

/// The checks both webhook configurations share, for one webhook entry.
fn webhook_entry(c: &mut Checks, label: &str, w: &Value) {
    c.eq(
        &format!("{label}: failurePolicy Ignore"),
        &w["failurePolicy"],
        &json!("Ignore"),
    );
    c.eq(
        &format!("{label}: timeoutSeconds 10"),
        &w["timeoutSeconds"],
        &json!(10),
    );
    c.eq(
        &format!("{label}: sideEffects None"),
        &w["sideEffects"],
        &json!("None"),
    );
    c.eq(
        &format!("{label}: admissionReviewVersions [v1]"),
        &w["admissionReviewVersions"],
        &json!(["v1"]),
    );
    let sel = &w["namespaceSelector"];
    c.eq(
        &format!("{label}: opt-in label"),
        &sel["matchLabels"],
        &json!({"pullcheck.io/enabled": "true"}),
    );
    let notin: Vec<&Value> = sel["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["key"] == "kubernetes.io/metadata.name" && e["operator"] == "NotIn")
        .collect();
    c.check(
        &format!("{label}: excludes its namespace and kube-system"),
        notin.len() == 1 && {
            let v = strings(&notin[0]["values"]);
            v.iter().any(|n| n == NS) && v.iter().any(|n| n == "kube-system")
        },
        &notin,
    );
    let owned = w["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == "not-controller-owned");
    c.eq(
        &format!("{label}: matchCondition skips controller-owned objects"),
        owned.map(|m| &m["expression"]),
        Some(&json!(CEL_OWNED)),
    );
    let rules: Vec<&Value> = w["rules"].as_array().into_iter().flatten().collect();
    let rule = |group: &str, resource: &str| {
        rules
            .iter()
            .find(|r| r["apiGroups"] == json!([group]) && r["resources"] == json!([resource]))
            .copied()
    };
    c.eq(
        &format!("{label}: jobs on CREATE"),
        rule("batch", "jobs").map(|r| &r["operations"]),
        Some(&json!(["CREATE"])),
    );
    c.eq(
        &format!("{label}: cronjobs on CREATE and UPDATE"),
        rule("batch", "cronjobs").map(|r| &r["operations"]),
        Some(&json!(["CREATE", "UPDATE"])),
    );
    let kf: Vec<&&Value> = rules
        .iter()
        .filter(|r| r["apiGroups"] == json!(["kubeflow.org"]))
        .collect();
    let mut kf_resources = kf
        .first()
        .map(|r| strings(&r["resources"]))
        .unwrap_or_default();
    kf_resources.sort();
    c.check(
        &format!("{label}: kubeflow job kinds"),
        kf.len() == 1
            && kf_resources
                == [
                    "jaxjobs",
                    "mpijobs",
                    "paddlejobs",
                    "pytorchjobs",
                    "tfjobs",
                    "xgboostjobs",
                ],
        &kf,
    );
    c.check(
        &format!("{label}: jobsets"),
        rule("jobset.x-k8s.io", "jobsets").is_some(),
        &rules,
    );
    // TrainJobs: validated at CREATE (v1alpha1 only, the version the runtime build follows),
    // never sent to the mutating webhook.
    let trainjobs = if label == "validating" {
        Some(
            json!({"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["v1alpha1"],
            "resources": ["trainjobs"], "operations": ["CREATE"], "scope": "Namespaced"}),
        )
    } else {
        None
    };
    c.eq(
        &format!("{label}: trainjobs"),
        rule("trainer.kubeflow.org", "trainjobs").cloned(),
        trainjobs,
    );
    c.check(
        &format!("{label}: no pods rule"),
        !rules
            .iter()
            .any(|r| strings(&r["resources"]).iter().any(|s| s == "pods")),
        &rules,
    );
    let svc = &w["clientConfig"]["service"];
    let path = if label == "validating" {
        "/validate"
    } else {
        "/mutate"
    };
    c.check(
        &format!("{label}: routed to the Service"),
        svc["name"] == "pc-pullcheck" && svc["namespace"] == NS && svc["path"] == path,
        svc,
    );
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn default_render() {
    let mut c = Checks::default();
    let docs = render_with(&[], WITH_PROBE);
    c.eq(
        "default kinds and counts",
        kinds(&docs),
        counts(&[
            ("Deployment", 1),
            ("Service", 1),
            ("ServiceAccount", 1),
            ("ClusterRole", 1),
            ("ClusterRoleBinding", 1),
            ("Secret", 1),
            ("PodDisruptionBudget", 1),
            ("ValidatingWebhookConfiguration", 1),
            ("MutatingWebhookConfiguration", 1),
            ("Role", 1),
            ("RoleBinding", 1),
            ("ValidatingAdmissionPolicy", 1),
            ("ValidatingAdmissionPolicyBinding", 1),
        ]),
    );
    let vwc = one(&docs, "ValidatingWebhookConfiguration")["webhooks"].clone();
    let mwc = one(&docs, "MutatingWebhookConfiguration")["webhooks"].clone();
    c.eq(
        "one validating and one mutating webhook",
        (vwc.as_array().map(Vec::len), mwc.as_array().map(Vec::len)),
        (Some(1), Some(1)),
    );
    webhook_entry(&mut c, "validating", &vwc[0]);
    webhook_entry(&mut c, "mutating", &mwc[0]);
    c.eq(
        "mutating: reinvocationPolicy IfNeeded",
        &mwc[0]["reinvocationPolicy"],
        &json!("IfNeeded"),
    );

    let secret = one(&docs, "Secret");
    let ca_b64 = &secret["data"]["ca.crt"];
    let mut data_keys: Vec<&String> = secret["data"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    data_keys.sort();
    c.check(
        "generated Secret is kubernetes.io/tls with ca.crt, tls.crt, tls.key",
        secret["type"] == "kubernetes.io/tls" && data_keys == ["ca.crt", "tls.crt", "tls.key"],
        (&secret["type"], &data_keys),
    );
    c.check(
        "caBundle of both configurations is the Secret's CA",
        &vwc[0]["clientConfig"]["caBundle"] == ca_b64
            && &mwc[0]["clientConfig"]["caBundle"] == ca_b64,
        ca_b64,
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_path = dir.path().join("ca.crt");
    std::fs::write(&ca_path, b64_text(ca_b64)).expect("write ca.crt");
    let crt = b64_text(&secret["data"]["tls.crt"]);
    let ca_arg = ca_path.to_str().expect("utf-8 temp path");
    let (ok, out) = openssl(
        &["verify", "-CAfile", ca_arg, "-purpose", "sslserver"],
        &crt,
    );
    c.check("serving certificate verifies against the CA", ok, &out);
    let (_, san) = openssl(&["x509", "-noout", "-ext", "subjectAltName"], &crt);
    c.check(
        "serving certificate names the Service",
        san.contains(&format!("DNS:pc-pullcheck.{NS}.svc")),
        &san,
    );
    let again = render(&[]);
    c.check(
        "helm template can't look up: each run generates a new CA (documented)",
        &one(&again, "Secret")["data"]["ca.crt"] != ca_b64,
        ca_b64,
    );

    let dep = one(&docs, "Deployment");
    let spec = &dep["spec"]["template"]["spec"];
    let ctr = &spec["containers"][0];
    c.eq("2 replicas", &dep["spec"]["replicas"], &json!(2));
    let (psc, csc) = (&spec["securityContext"], &ctr["securityContext"]);
    c.check(
        "pod securityContext restricted",
        psc["runAsNonRoot"] == true
            && psc["runAsUser"] == 65532
            && psc["seccompProfile"] == json!({"type": "RuntimeDefault"}),
        psc,
    );
    c.check(
        "container securityContext restricted",
        csc["readOnlyRootFilesystem"] == true
            && csc["allowPrivilegeEscalation"] == false
            && csc["capabilities"] == json!({"drop": ["ALL"]})
            && csc["runAsNonRoot"] == true,
        csc,
    );
    c.check(
        "resources set",
        non_empty(&ctr["resources"]["requests"]) && non_empty(&ctr["resources"]["limits"]),
        &ctr["resources"],
    );
    let (lp, rp) = (
        &ctr["livenessProbe"]["httpGet"],
        &ctr["readinessProbe"]["httpGet"],
    );
    c.check(
        "probes over https on /healthz and /readyz",
        *lp == json!({"path": "/healthz", "port": "https", "scheme": "HTTPS"})
            && *rp == json!({"path": "/readyz", "port": "https", "scheme": "HTTPS"}),
        (lp, rp),
    );
    let tsc: Vec<&Value> = spec["topologySpreadConstraints"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let mut keys: Vec<&str> = tsc
        .iter()
        .filter_map(|t| t["topologyKey"].as_str())
        .collect();
    keys.sort();
    keys.dedup();
    c.check(
        "topology spread over hostname and zone with the pod selector",
        keys == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
            && tsc.iter().all(|t| {
                t["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
            }),
        &tsc,
    );
    let args = strings(&ctr["args"]);
    let has = |a: &str| args.iter().any(|x| x == a);
    c.check(
        "args: webhook subcommand, enforce, budget 8, both platforms",
        args.first().map(String::as_str) == Some("webhook")
            && has("--mode=enforce")
            && has("--budget=8")
            && has("--cluster-platform=linux/amd64")
            && has("--cluster-platform=linux/arm64")
            && !has("--fail-closed")
            && !has("--allow-loopback-registries"),
        &args,
    );
    c.check(
        "args: Docker Hub quota-aware platform check by default (affordable, margin 10)",
        has("--metered-get=affordable") && has("--metered-quota-margin=10"),
        &args,
    );
    c.eq(
        "image tag defaults to appVersion",
        &ctr["image"],
        &json!(format!("{REPO}:0.1.0")),
    );
    c.eq(
        "tls volume from the Secret",
        &spec["volumes"][0]["secret"]["secretName"],
        &json!("pc-pullcheck-tls"),
    );
    let pdb = one(&docs, "PodDisruptionBudget");
    c.check(
        "PDB minAvailable 1 on the pods",
        pdb["spec"]["minAvailable"] == 1 && pdb["spec"]["selector"] == dep["spec"]["selector"],
        &pdb["spec"],
    );
    c.eq(
        "ClusterRole reads secrets, serviceaccounts and Kubeflow Trainer runtimes only",
        &one(&docs, "ClusterRole")["rules"],
        &json!([
            {"apiGroups": [""], "resources": ["secrets", "serviceaccounts"], "verbs": ["get"]},
            {"apiGroups": ["trainer.kubeflow.org"],
             "resources": ["trainingruntimes", "clustertrainingruntimes"], "verbs": ["get"]},
        ]),
    );
    c.eq(
        "ClusterRoleBinding to the chart's ServiceAccount",
        &one(&docs, "ClusterRoleBinding")["subjects"],
        &json!([{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": NS}]),
    );
    c.done();
}

/// A non-empty mapping or list (Python's truthiness of a requests/limits block).
pub fn non_empty(v: &Value) -> bool {
    match v {
        Value::Object(o) => !o.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}
