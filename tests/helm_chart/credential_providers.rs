//! `credentialProviders`: the plugin copy init container, the config ConfigMap and mounts,
//! and the ServiceAccount-token RBAC and admission policy of `tokenRequests`.

use serde_json::{Value, json};

use crate::checks::Checks;
use crate::{NS, deployment_args, kinds, one, render, render_values, strings, values_fail_with};

const PROVIDER_CONFIG: &str = "apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages: [\"*.dkr.ecr.*.amazonaws.com\"]
    defaultCacheDuration: 12h
    apiVersion: credentialprovider.kubelet.k8s.io/v1
";

/// Values with credentialProviders on (plugin image example.com/plugins:v1), with `extra`'s
/// keys set over it.
fn providers(extra: Value) -> Value {
    let mut cp = json!({"enabled": true, "config": PROVIDER_CONFIG,
                        "pluginImage": {"repository": "example.com/plugins", "tag": "v1"}});
    if let (Some(base), Some(extra)) = (cp.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    json!({"credentialProviders": cp})
}

/// What `tokenRequests` is set to in the token tests (a namespace listed twice).
fn tokens() -> Value {
    json!({"enabled": true, "namespaces": ["team-a", "team-b", "team-a"],
           "audiences": ["sts.amazonaws.com", "pullcheck-test-audience"]})
}

/// The first init container of the one Deployment.
fn init_container(docs: &[Value]) -> Value {
    one(docs, "Deployment")["spec"]["template"]["spec"]["initContainers"][0].clone()
}

/// The `metadata.namespace` of each document, sorted.
fn namespaces(docs: &[&Value]) -> Vec<String> {
    let mut n: Vec<String> = docs
        .iter()
        .filter_map(|d| d["metadata"]["namespace"].as_str().map(str::to_string))
        .collect();
    n.sort();
    n
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn plugins_and_config() {
    let mut c = Checks::default();
    let spec = one(&render(&[]), "Deployment")["spec"]["template"]["spec"].clone();
    let args = strings(&spec["containers"][0]["args"]);
    c.check(
        "credential providers off by default: no init container, no provider flags",
        spec.get("initContainers").is_none()
            && !args
                .iter()
                .any(|a| a.contains("credential-provider") || a == "--provider-token-requests"),
        &args,
    );

    let azure = "{\"cloud\": \"AzurePublicCloud\"}\n";
    let docs = render_values(&providers(json!({"files": {"azure.json": azure}})), &[]);
    let k = kinds(&docs);
    let cm: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            d["kind"] == "ConfigMap" && d["metadata"]["name"] == "pc-pullcheck-credential-providers"
        })
        .collect();
    c.check(
        "providers: a ConfigMap holding the config and the extra files",
        cm.len() == 1
            && cm[0]["data"] == json!({"config.yaml": PROVIDER_CONFIG, "azure.json": azure}),
        &cm,
    );
    c.check(
        "providers without token requests: no Role, RoleBinding or policy",
        ![
            "Role",
            "RoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
        .iter()
        .any(|kind| k.contains_key(*kind)),
        &k,
    );
    let dep = one(&docs, "Deployment");
    let spec = &dep["spec"]["template"]["spec"];
    let inits = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    c.check(
        "providers: one copy init container of the plugin image",
        inits.len() == 1
            && inits[0]["name"] == "credential-provider-plugins"
            && inits[0]["image"] == "example.com/plugins:v1"
            && inits[0]["imagePullPolicy"] == "IfNotPresent",
        &inits,
    );
    let init = inits.first().cloned().unwrap_or(Value::Null);
    c.eq(
        "providers: default copy command copies pluginPath's content into the emptyDir",
        &init["command"],
        &json!(["cp", "-a", "/plugins/.", "/credential-providers/bin/"]),
    );
    c.eq(
        "providers: the init container mounts the emptyDir writable",
        &init["volumeMounts"],
        &json!([{"name": "credential-provider-bin", "mountPath": "/credential-providers/bin"}]),
    );
    let isc = &init["securityContext"];
    c.check(
        "providers: the init container is restricted too",
        isc["readOnlyRootFilesystem"] == true
            && isc["allowPrivilegeEscalation"] == false
            && isc["runAsNonRoot"] == true
            && isc["capabilities"] == json!({"drop": ["ALL"]}),
        isc,
    );
    let by_name = |list: &Value, name: &str| {
        list.as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    c.check(
        "providers: bin dir is an emptyDir, config from the ConfigMap",
        by_name(&spec["volumes"], "credential-provider-bin")
            == json!({"name": "credential-provider-bin", "emptyDir": {}})
            && by_name(&spec["volumes"], "credential-providers")["configMap"]["name"]
                == "pc-pullcheck-credential-providers",
        &spec["volumes"],
    );
    let mounts = &spec["containers"][0]["volumeMounts"];
    c.check(
        "providers: the webhook mounts the config and the bin dir read-only",
        by_name(mounts, "credential-providers")
            == json!({"name": "credential-providers", "readOnly": true,
                      "mountPath": "/etc/pullcheck/credential-providers"})
            && by_name(mounts, "credential-provider-bin")
                == json!({"name": "credential-provider-bin", "readOnly": true,
                          "mountPath": "/credential-providers/bin"}),
        mounts,
    );
    let args = strings(&spec["containers"][0]["args"]);
    let has = |a: &str| args.iter().any(|x| x == a);
    c.check(
        "providers: --image-credential-provider-config and -bin-dir passed, no token requests",
        has("--image-credential-provider-config=/etc/pullcheck/credential-providers/config.yaml")
            && has("--image-credential-provider-bin-dir=/credential-providers/bin")
            && !has("--provider-token-requests"),
        &args,
    );
    let checksum = &dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"];
    let changed = format!("{PROVIDER_CONFIG}  # changed\n");
    let other = render_values(&providers(json!({"config": changed})), &[]);
    let other_sum = &one(&other, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"];
    c.check(
        "providers: a config change rolls the pods (checksum/config)",
        checksum.is_string() && other_sum != checksum,
        (checksum, other_sum),
    );

    let digest = format!("sha256:{}", "a".repeat(64));
    let docs = render_values(
        &providers(json!({"pluginPath": "/opt/bin/", "pluginImage": {
            "repository": "example.com/plugins", "digest": digest, "pullPolicy": "Always"}})),
        &[],
    );
    let init = init_container(&docs);
    c.check(
        "providers: pluginPath and a digest-pinned image",
        init["command"] == json!(["cp", "-a", "/opt/bin/.", "/credential-providers/bin/"])
            && init["image"] == format!("example.com/plugins@{digest}").as_str()
            && init["imagePullPolicy"] == "Always",
        &init,
    );
    let copy = json!([
        "/busybox",
        "cp",
        "/plugins/ecr-credential-provider",
        "/credential-providers/bin/"
    ]);
    let docs = render_values(&providers(json!({"copyCommand": copy})), &[]);
    c.eq(
        "providers: copyCommand overrides the copy",
        &init_container(&docs)["command"],
        &copy,
    );
    c.done();
}

#[test]
#[ignore = "needs helm: run scripts/helm-check.sh"]
fn token_requests() {
    let mut c = Checks::default();
    let docs = render_values(&providers(json!({"tokenRequests": tokens()})), &[]);
    let k = kinds(&docs);
    let roles: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Role").collect();
    c.eq(
        "token requests: one Role per listed namespace (duplicates once)",
        namespaces(&roles),
        vec!["team-a".to_string(), "team-b".into()],
    );
    c.check(
        "token requests: the Role creates serviceaccounts/token only",
        roles.iter().all(|r| {
            r["rules"]
                == json!([{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}])
                && r["metadata"]["name"] == "pc-pullcheck-provider-tokens"
        }),
        &roles,
    );
    let rbs: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "RoleBinding").collect();
    c.check(
        "token requests: a RoleBinding per namespace, Role to the webhook's ServiceAccount",
        namespaces(&rbs) == ["team-a", "team-b"] && rbs.iter().all(|r| {
            r["roleRef"]
                == json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                              "name": "pc-pullcheck-provider-tokens"})
                && r["subjects"]
                    == json!([{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": NS}])
        }),
        &rbs,
    );
    c.check(
        "token requests: no ClusterRole grants tokens",
        k.get("ClusterRole") == Some(&1)
            && one(&docs, "ClusterRole")["rules"]
                == json!([
                    {"apiGroups": [""], "resources": ["secrets", "serviceaccounts"], "verbs": ["get"]},
                    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainingruntimes", "clustertrainingruntimes"], "verbs": ["get"]},
                ]),
        &k,
    );
    let vap = &one(&docs, "ValidatingAdmissionPolicy")["spec"];
    c.check(
        "token requests: the policy matches TokenRequest creation, fails closed",
        vap["failurePolicy"] == "Fail"
            && vap["matchConstraints"]["resourceRules"]
                == json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["serviceaccounts/token"]}]),
        vap,
    );
    c.eq(
        "token requests: the policy applies to the webhook's ServiceAccount only",
        &vap["matchConditions"],
        &json!([{"name": "requested-by-pullcheck", "expression":
                 format!("request.userInfo.username == \"system:serviceaccount:{NS}:pc-pullcheck\"")}]),
    );
    c.check(
        "token requests: the policy allows the listed audiences only, and no empty list",
        vap["validations"][0]["expression"]
            == "has(object.spec.audiences) && size(object.spec.audiences) > 0 && \
                object.spec.audiences.all(a, a in [\"sts.amazonaws.com\",\"pullcheck-test-audience\"])"
            && vap["validations"][0]["message"]
                == "pullcheck may request ServiceAccount tokens only for the audiences \
                    in credentialProviders.tokenRequests.audiences (sts.amazonaws.com, pullcheck-test-audience)",
        &vap["validations"],
    );
    c.eq(
        "token requests: the policy caps the token lifetime at the webhook's 600 s",
        &vap["validations"][1]["expression"],
        &json!("has(object.spec.expirationSeconds) && object.spec.expirationSeconds <= 600"),
    );
    c.eq(
        "token requests: the policy is bound with Deny",
        &one(&docs, "ValidatingAdmissionPolicyBinding")["spec"],
        &json!({"policyName": "pc-pullcheck-provider-token-audiences", "validationActions": ["Deny"]}),
    );
    let args = deployment_args(&docs);
    c.check(
        "token requests: --provider-token-requests passed",
        args.iter().any(|a| a == "--provider-token-requests"),
        &args,
    );

    let docs = render_values(
        &providers(json!({"tokenRequests": tokens()})),
        &[
            "--set",
            "serviceAccount.name=pc-custom",
            "--set",
            "rbac.create=false",
        ],
    );
    let k = kinds(&docs);
    c.check(
        "token requests with rbac.create=false: the policy stays, no Role or RoleBinding",
        k.get("ValidatingAdmissionPolicy") == Some(&1)
            && !k.contains_key("Role")
            && !k.contains_key("RoleBinding"),
        &k,
    );
    c.eq(
        "token requests: the policy names serviceAccount.name",
        &one(&docs, "ValidatingAdmissionPolicy")["spec"]["matchConditions"][0]["expression"],
        &json!(format!(
            "request.userInfo.username == \"system:serviceaccount:{NS}:pc-custom\""
        )),
    );

    for (label, tr, err) in [
        (
            "without namespaces",
            json!({"enabled": true, "audiences": ["a"]}),
            "credentialProviders.tokenRequests.namespaces is empty",
        ),
        (
            "without audiences",
            json!({"enabled": true, "namespaces": ["team-a"]}),
            "credentialProviders.tokenRequests.audiences is empty",
        ),
    ] {
        c.check(
            &format!("token requests {label} fails"),
            values_fail_with(&providers(json!({"tokenRequests": tr})), err),
            "",
        );
    }
    c.check(
        "token requests without credentialProviders.enabled fails",
        values_fail_with(
            &json!({"credentialProviders": {"tokenRequests": tokens()}}),
            "credentialProviders.tokenRequests.enabled needs credentialProviders.enabled",
        ),
        "",
    );
    c.check(
        "providers without a config fails",
        values_fail_with(
            &providers(json!({"config": ""})),
            "credentialProviders.config is empty",
        ),
        "",
    );
    c.check(
        "providers without a plugin image fails",
        values_fail_with(
            &providers(json!({"pluginImage": {"repository": ""}})),
            "credentialProviders.pluginImage.repository is empty",
        ),
        "",
    );
    c.check(
        "schema rejects an unknown credentialProviders key",
        values_fail_with(
            &providers(json!({"tokenRequest": {"enabled": true}})),
            "additional properties",
        ),
        "",
    );
    c.done();
}
