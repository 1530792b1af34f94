//! TLS by cert-manager and by an external CA, and RBAC bound per namespace.

use serde_json::json;

use crate::checks::Checks;
use crate::{NS, fails_with, kinds, one, render};

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn cert_manager() {
    let mut c = Checks::default();
    let docs = render(&["--set", "tls.mode=certManager"]);
    let k = kinds(&docs);
    c.check(
        "certManager: Issuers, Certificates, no Secret",
        k.get("Certificate") == Some(&2)
            && k.get("Issuer") == Some(&2)
            && !k.contains_key("Secret"),
        &k,
    );
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let d = one(&docs, kind);
        c.check(
            &format!("certManager: {kind} inject-ca-from the serving Certificate"),
            d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
                == format!("{NS}/pc-pullcheck-tls").as_str()
                && d["webhooks"][0]["clientConfig"].get("caBundle").is_none(),
            &d["metadata"],
        );
    }
    let serving: Vec<_> = docs
        .iter()
        .filter(|d| d["kind"] == "Certificate" && d["metadata"]["name"] == "pc-pullcheck-tls")
        .collect();
    c.check(
        "certManager: serving Certificate writes the mounted Secret, names the Service",
        serving.len() == 1
            && serving[0]["spec"]["secretName"] == "pc-pullcheck-tls"
            && crate::strings(&serving[0]["spec"]["dnsNames"])
                .contains(&format!("pc-pullcheck.{NS}.svc")),
        &serving,
    );
    let docs = render(&[
        "--set",
        "tls.mode=certManager",
        "--set",
        "tls.certManager.issuerRef.name=corp-ca",
        "--set",
        "tls.certManager.issuerRef.kind=ClusterIssuer",
    ]);
    let k = kinds(&docs);
    c.check(
        "certManager with issuerRef: one Certificate, no Issuer",
        k.get("Certificate") == Some(&1) && !k.contains_key("Issuer"),
        &k,
    );
    c.eq(
        "certManager with issuerRef: used",
        &one(&docs, "Certificate")["spec"]["issuerRef"],
        &json!({"name": "corp-ca", "kind": "ClusterIssuer"}),
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn external_ca() {
    use base64::Engine as _;
    let mut c = Checks::default();
    c.check(
        "external without caBundle fails",
        fails_with(&["--set", "tls.mode=external"], "tls.caBundle is required"),
        "",
    );
    let docs = render(&[
        "--set",
        "tls.mode=external",
        "--set",
        "tls.caBundle=CA-PEM",
        "--set",
        "tls.secretName=my-tls",
    ]);
    let k = kinds(&docs);
    c.check(
        "external: no Secret or Certificate",
        !k.contains_key("Secret") && !k.contains_key("Certificate"),
        &k,
    );
    c.eq(
        "external: caBundle from tls.caBundle",
        &one(&docs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"],
        &json!(base64::engine::general_purpose::STANDARD.encode(b"CA-PEM")),
    );
    c.eq(
        "external: Deployment mounts tls.secretName",
        &one(&docs, "Deployment")["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        &json!("my-tls"),
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn rbac_per_namespace() {
    let mut c = Checks::default();
    let docs = render(&[
        "--set",
        "rbac.scope=namespaces",
        "--set",
        "rbac.namespaces={team-a,team-b}",
    ]);
    let k = kinds(&docs);
    let rbs: Vec<_> = docs.iter().filter(|d| d["kind"] == "RoleBinding").collect();
    c.check(
        "rbac namespaces: RoleBindings instead of a ClusterRoleBinding",
        !k.contains_key("ClusterRoleBinding") && k.get("ClusterRole") == Some(&1) && rbs.len() == 2,
        &k,
    );
    let mut nss: Vec<&str> = rbs
        .iter()
        .filter_map(|r| r["metadata"]["namespace"].as_str())
        .collect();
    nss.sort();
    c.check(
        "rbac namespaces: one RoleBinding per listed namespace, to the ClusterRole",
        nss == ["team-a", "team-b"] && rbs.iter().all(|r| r["roleRef"]["kind"] == "ClusterRole"),
        &rbs,
    );
    c.check(
        "rbac namespaces with an empty list fails",
        fails_with(
            &["--set", "rbac.scope=namespaces"],
            "rbac.namespaces is empty",
        ),
        "",
    );
    c.done();
}
