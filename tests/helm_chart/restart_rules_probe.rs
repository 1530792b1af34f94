//! The restart-rules probe (`webhook --probe-namespace`): its Role, RoleBinding and the
//! admission policy that keeps its pod creates dry-run, and when the chart leaves it out.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::checks::Checks;
use crate::{NS, WITH_PROBE, deployment_args, fails_with, render_with};

const PROBE: &str = "pc-pullcheck-restart-rules-probe";

/// Kind → the probe's object of that kind.
fn probe_parts(docs: &[Value]) -> BTreeMap<String, Value> {
    docs.iter()
        .filter(|d| d["metadata"]["name"] == PROBE)
        .map(|d| (d["kind"].as_str().unwrap_or("").to_string(), d.clone()))
        .collect()
}

/// The kinds of the probe's objects, sorted.
fn part_kinds(docs: &[Value]) -> Vec<String> {
    probe_parts(docs).into_keys().collect()
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn probe_objects() {
    let mut c = Checks::default();
    let docs = render_with(&[], WITH_PROBE);
    let p = probe_parts(&docs);
    c.eq(
        "probe: Role, RoleBinding, policy and binding by default",
        part_kinds(&docs),
        [
            "Role",
            "RoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
        .map(String::from)
        .to_vec(),
    );
    let null = Value::Null;
    let part = |k: &str| p.get(k).unwrap_or(&null);
    c.check(
        "probe: the Role creates pods in the release namespace only",
        part("Role")["metadata"]["namespace"] == NS
            && part("Role")["rules"]
                == json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]),
        part("Role"),
    );
    let rb = part("RoleBinding");
    c.check(
        "probe: the RoleBinding names the webhook's ServiceAccount",
        rb["metadata"]["namespace"] == NS
            && rb["subjects"]
                == json!([{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": NS}])
            && rb["roleRef"]
                == json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROBE}),
        rb,
    );
    let vap = &part("ValidatingAdmissionPolicy")["spec"];
    c.check(
        "probe: the policy denies the webhook's non-dry-run pod creates, failing closed",
        vap["failurePolicy"] == "Fail"
            && vap["matchConstraints"]["resourceRules"]
                == json!([{"apiGroups": [""], "apiVersions": ["v1"],
                           "operations": ["CREATE"], "resources": ["pods"]}])
            && vap["matchConditions"]
                == json!([{"name": "created-by-pullcheck", "expression":
                    format!("request.userInfo.username == \"system:serviceaccount:{NS}:pc-pullcheck\"")}])
            && vap["validations"][0]["expression"] == "has(request.dryRun) && request.dryRun",
        vap,
    );
    c.eq(
        "probe: the policy is bound with Deny",
        &part("ValidatingAdmissionPolicyBinding")["spec"],
        &json!({"policyName": PROBE, "validationActions": ["Deny"]}),
    );
    let args = deployment_args(&docs);
    c.check(
        "probe: --probe-namespace and --probe-service-account passed",
        args.contains(&format!("--probe-namespace={NS}"))
            && args
                .iter()
                .any(|a| a == "--probe-service-account=pc-pullcheck"),
        &args,
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn probe_only_where_it_applies() {
    let mut c = Checks::default();
    let without: [(&str, &[&str]); 5] = [
        ("transient Count", &["--set", "inject.transient=Count"]),
        ("transient Ignore", &["--set", "inject.transient=Ignore"]),
        (
            "restartRulesProbe=false",
            &["--set", "inject.restartRulesProbe=false"],
        ),
        (
            "Kubernetes 1.29 (no ValidatingAdmissionPolicy v1)",
            &["--kube-version", "1.29.4"],
        ),
        (
            "Kubernetes 1.34 (never probed there)",
            &["--kube-version", "1.34.2"],
        ),
    ];
    for (label, extra) in without {
        let docs = render_with(extra, WITH_PROBE);
        let args = deployment_args(&docs);
        c.check(
            &format!("probe: none with {label}"),
            probe_parts(&docs).is_empty() && !args.iter().any(|a| a.starts_with("--probe-")),
            (part_kinds(&docs), &args),
        );
    }
    let docs = render_with(&["--set", "inject.transient=Restart"], WITH_PROBE);
    c.eq(
        "probe: with transient Restart too",
        probe_parts(&docs).len(),
        4,
    );
    let docs = render_with(&["--kube-version", "1.35.0-gke.100"], WITH_PROBE);
    c.eq(
        "probe: on a managed 1.35 (a pre-release suffix)",
        probe_parts(&docs).len(),
        4,
    );
    let docs = render_with(&["--set", "rbac.create=false"], WITH_PROBE);
    c.check(
        "probe with rbac.create=false: the policy and the flags stay, no Role or RoleBinding",
        part_kinds(&docs)
            == [
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding",
            ]
            && deployment_args(&docs).contains(&format!("--probe-namespace={NS}")),
        part_kinds(&docs),
    );
    c.check(
        "schema rejects a non-boolean restartRulesProbe",
        fails_with(
            &["--set", "inject.restartRulesProbe=maybe"],
            "restartRulesProbe",
        ),
        "",
    );
    c.done();
}
