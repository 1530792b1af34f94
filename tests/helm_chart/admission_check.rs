//! `admissionCheck.enabled`: the Kueue admission check's flags on the webhook's Deployment
//! and its ClusterRole, bound to the webhook's ServiceAccount; nothing of it by default.

use serde_json::json;

use crate::checks::Checks;
use crate::{deployment_args, named, render};

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn admission_check_flags_and_rbac() {
    let mut c = Checks::default();
    let off = render(&[]);
    c.eq(
        "off by default: no kueue flag",
        deployment_args(&off)
            .iter()
            .filter(|a| a.starts_with("--kueue"))
            .count(),
        0,
    );
    c.eq(
        "off by default: no kueue ClusterRole",
        named(&off, "pc-pullcheck-kueue-admission-check").len(),
        0,
    );
    let on = render(&["--set", "admissionCheck.enabled=true"]);
    let args = deployment_args(&on);
    c.eq(
        "on: --kueue-admission-check and its lease, no --kueue-reject-unproven",
        args.iter()
            .filter(|a| a.starts_with("--kueue"))
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            "--kueue-admission-check".to_string(),
            "--kueue-lease=pullcheck-system/pc-pullcheck-kueue-admission-check".to_string(),
        ],
    );
    let rbac = named(&on, "pc-pullcheck-kueue-admission-check");
    let role = rbac.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    let lease_role = rbac.iter().find(|d| d["kind"] == "Role").unwrap();
    c.eq(
        "the lease Role: create, and get/patch of its own Lease only",
        (lease_role["metadata"]["namespace"].clone(), lease_role["rules"].clone()),
        (
            json!("pullcheck-system"),
            json!([
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "resourceNames": ["pc-pullcheck-kueue-admission-check"], "verbs": ["get", "patch"]},
            ]),
        ),
    );
    c.eq(
        "the lease RoleBinding binds the webhook's ServiceAccount",
        rbac.iter()
            .find(|d| d["kind"] == "RoleBinding")
            .map(|b| b["subjects"].clone()),
        Some(json!([{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": "pullcheck-system"}])),
    );
    c.eq(
        "the ClusterRole's rules, exactly",
        role["rules"].clone(),
        json!([
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"],
             "verbs": ["list", "watch"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["admissionchecks"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status", "admissionchecks/status"],
             "verbs": ["patch"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        ]),
    );
    let binding = rbac
        .iter()
        .find(|d| d["kind"] == "ClusterRoleBinding")
        .unwrap();
    c.eq(
        "bound to the webhook's ServiceAccount",
        binding["subjects"].clone(),
        json!([{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": "pullcheck-system"}]),
    );
    let strict = render(&[
        "--set",
        "admissionCheck.enabled=true",
        "--set",
        "admissionCheck.rejectUnproven=true",
    ]);
    c.eq(
        "rejectUnproven: --kueue-reject-unproven after --kueue-admission-check",
        deployment_args(&strict)
            .iter()
            .filter(|a| a.starts_with("--kueue"))
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            "--kueue-admission-check".to_string(),
            "--kueue-lease=pullcheck-system/pc-pullcheck-kueue-admission-check".to_string(),
            "--kueue-reject-unproven".to_string(),
        ],
    );
    c.check(
        "admissionCheck without the webhook fails the render",
        crate::fails_with(
            &["--set", "admissionCheck.enabled=true", "--set", "webhook.enabled=false"],
            "admissionCheck.enabled needs webhook.enabled: the Kueue admission check runs in the webhook's Deployment",
        ),
        "",
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn the_stalled_check_alert() {
    let mut c = Checks::default();
    let rules = |docs: &[serde_json::Value]| -> Vec<serde_json::Value> {
        docs.iter()
            .filter(|d| d["kind"] == "PrometheusRule")
            .cloned()
            .collect()
    };
    c.eq(
        "no PrometheusRule by default, nor with the check alone",
        (
            rules(&render(&[])).len(),
            rules(&render(&["--set", "admissionCheck.enabled=true"])).len(),
        ),
        (0, 0),
    );
    let on = render(&[
        "--set",
        "admissionCheck.enabled=true",
        "--set",
        "admissionCheck.alert.enabled=true",
        "--set",
        "admissionCheck.alert.labels.release=prom",
    ]);
    let r = rules(&on);
    c.eq("one PrometheusRule", r.len(), 1);
    let rule = &r[0]["spec"]["groups"][0]["rules"][0];
    c.eq(
        "the rule: the oldest Pending check in this release's namespace, over 300 s for 5m",
        (
            rule["alert"].clone(),
            rule["expr"].clone(),
            rule["for"].clone(),
            rule["labels"].clone(),
            r[0]["metadata"]["labels"]["release"].clone(),
        ),
        (
            json!("PullcheckAdmissionCheckStalled"),
            json!("max(pullcheck_admission_check_oldest_pending_seconds{namespace=\"pullcheck-system\"}) > 300"),
            json!("5m"),
            json!({"severity": "critical"}),
            json!("prom"),
        ),
    );
    c.check(
        "the description keeps Prometheus' own template",
        rule["annotations"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("for {{ $value }} s")),
        &rule["annotations"],
    );
    c.done();
}
