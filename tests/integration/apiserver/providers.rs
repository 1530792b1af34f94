//! Credential-provider plugins in the webhook on the real kube-apiserver, configured by the
//! chart's `credentialProviders` values: the plugin is a scripted one (a shell script,
//! named as such) giving alice's htpasswd credential for the fixture's basic registry, as
//! in `credential_providers.rs`.
//!
//! Each webhook here is a full chart release of its own (ServiceAccount, RBAC, the
//! provider ConfigMap, token-request Roles and ValidatingAdmissionPolicy) applied to the
//! apiserver, run locally with the Deployment's args: the ConfigMap's files are written
//! out, the copy init container's command is run with its paths mapped (the plugin
//! "image" is a local directory), and the webhook authenticates with a token of the
//! release's ServiceAccount, so the chart's RBAC and policy are what it gets.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use super::{
    ENABLE_LABEL, Env, create, created, denied, ensure_namespace, env, free_port, get_json,
    helm_template, job, kubectl, kubectl_ok, run,
};
use crate::support::webhook::Webhook;
use crate::support::{self, ALICE, fixture};

/// A scripted plugin: appends each request (one JSON line) to `$DIR/requests`, then
/// answers alice's credential for `$PATTERN`, cached by registry. With `$NEED_TOKEN` set it
/// fails unless the request carries a `serviceAccountToken`.
const SCRIPTED_PLUGIN: &str = r#"#!/bin/sh
req=$(cat)
printf '%s\n' "$req" >> "$DIR/requests"
if [ -n "$NEED_TOKEN" ]; then
  case "$req" in
    *'"serviceAccountToken":"'*) ;;
    *) echo "scripted plugin: no serviceAccountToken in the request" >&2; exit 1 ;;
  esac
fi
printf '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","auth":{"%s":{"username":"%s","password":"%s"}}}' "$PATTERN" "$USER_NAME" "$PASSWORD"
"#;

const PLUGIN: &str = "scripted-provider";
const AUDIENCE: &str = "pullcheck-test-audience";
const REQUIRED_ANNOTATION: &str = "pullcheck.io/test-role";
const OPTIONAL_ANNOTATION: &str = "pullcheck.io/test-optional";
/// The namespace the token webhook's chart values list in `tokenRequests.namespaces`.
const TOKEN_NS: &str = "e2e-provider-tokens";
/// A namespace it checks but where the chart grants no token requests.
const UNLISTED_NS: &str = "e2e-provider-tokens-unlisted";
const TOKEN_RELEASE: &str = "pullcheck-tokens";

/// A chart release with credential providers, its webhook running locally.
struct ProviderWebhook {
    running: Webhook,
    /// The plugin's `$DIR`: its `requests` file.
    state: tempfile::TempDir,
    /// The release (= its namespace, full name and ServiceAccount name).
    release: String,
}

impl ProviderWebhook {
    /// The requests the plugin received, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.state.path().join("requests"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }

    fn log(&self) -> String {
        self.running.log()
    }

    /// The username the apiserver gives the release's ServiceAccount.
    fn user(&self) -> String {
        format!("system:serviceaccount:{0}:{0}", self.release)
    }
}

/// The CredentialProviderConfig text (the chart value) for the basic registry; with
/// `token`, the provider is token-mode for [`AUDIENCE`] and the plugin insists on a token.
fn provider_config(state: &Path, token: bool) -> String {
    let host = &fixture().basic.host;
    let mut env = vec![
        ("DIR", state.display().to_string()),
        ("PATTERN", host.clone()),
        ("USER_NAME", ALICE.0.to_string()),
        ("PASSWORD", ALICE.1.to_string()),
    ];
    let mut provider = json!({
        "name": PLUGIN,
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "matchImages": [host],
        "defaultCacheDuration": "1h",
    });
    if token {
        env.push(("NEED_TOKEN", "1".into()));
        provider["tokenAttributes"] = json!({
            "serviceAccountTokenAudience": AUDIENCE,
            "cacheType": "ServiceAccount",
            "requireServiceAccount": true,
            "requiredServiceAccountAnnotationKeys": [REQUIRED_ANNOTATION],
            "optionalServiceAccountAnnotationKeys": [OPTIONAL_ANNOTATION],
        });
    }
    provider["env"] = env
        .into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    // JSON is YAML, as the kubelet's loader reads it too.
    serde_json::to_string_pretty(&json!({
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": [provider],
    }))
    .unwrap()
}

/// Render and apply release `release` (namespace of the same name) with
/// `credentialProviders` = `providers` plus the plugin image and config, for namespaces
/// labeled `label=true`; run its copy init container and its webhook locally.
fn provider_webhook(
    env: &Env,
    release: &str,
    label: &str,
    token: bool,
    providers: Value,
) -> ProviderWebhook {
    let state = support::temp_dir();
    let work = state.path().join("pod");
    let port = free_port();
    let url = format!("https://127.0.0.1:{port}");
    let ca = std::fs::read_to_string(env.dir.path().join("tls/ca.crt")).unwrap();
    let mut cp = providers;
    cp["enabled"] = json!(true);
    cp["config"] = json!(provider_config(state.path(), token));
    cp["pluginImage"] = json!({"repository": "plugins.example/scripted-provider", "tag": "v1"});
    let values = json!({
        "webhook": {"url": url, "namespaceSelector": {"matchLabels": {ENABLE_LABEL: null, label: "true"}}},
        "tls": {"mode": "external", "caBundle": ca},
        "inject": {"image": env.inject_image},
        "registry": {"allowLoopback": true,
                     "caCerts": std::fs::read_to_string(&fixture().ca_file).unwrap()},
        "credentialProviders": cp,
    });
    let values_file = state.path().join("values.json");
    std::fs::write(&values_file, values.to_string()).unwrap();
    let rendered = helm_template(release, release, &["-f", values_file.to_str().unwrap()]);
    ensure_namespace(release, &[]);
    kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&rendered));

    // The pod's files: the ConfigMaps as mounted, the bin dir as the init container leaves it.
    let mut mapped: Vec<(&str, PathBuf)> = vec![("/etc/pullcheck/tls", env.dir.path().join("tls"))];
    for (mount, cm) in [
        (
            "/etc/pullcheck/credential-providers",
            "credential-providers",
        ),
        ("/etc/pullcheck/config", "config"),
    ] {
        let dir = work.join(cm);
        std::fs::create_dir_all(&dir).unwrap();
        let got = get_json(&["-n", release, "configmap", &format!("{release}-{cm}")]);
        for (k, v) in got["data"].as_object().unwrap() {
            std::fs::write(dir.join(k), v.as_str().unwrap()).unwrap();
        }
        mapped.push((mount, dir));
    }
    let image_dir = work.join("plugin-image");
    std::fs::create_dir_all(image_dir.join("plugins")).unwrap();
    let plugin = image_dir.join("plugins").join(PLUGIN);
    std::fs::write(&plugin, SCRIPTED_PLUGIN).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    mapped.push(("/credential-providers/bin", bin.clone()));
    mapped.push(("/plugins", image_dir.join("plugins")));
    let map = |a: &str| -> String {
        let mut a = a.to_string();
        for (from, to) in &mapped {
            a = a.replace(from, to.to_str().unwrap());
        }
        a
    };

    let deploy = get_json(&["-n", release, "deployment", release]);
    let pod = &deploy["spec"]["template"]["spec"];
    let init = &pod["initContainers"][0];
    assert_eq!(init["name"], "credential-provider-plugins", "{pod}");
    let command: Vec<String> = init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| map(a.as_str().unwrap()))
        .collect();
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    let copied = run(&command[0], &args, None);
    assert!(copied.ok, "{command:?}: {}", copied.stderr);
    let mode = std::fs::metadata(bin.join(PLUGIN))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the copy kept the plugin executable");

    let container = &pod["containers"][0];
    let mut args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            if a.starts_with("--listen=") {
                format!("--listen=127.0.0.1:{port}")
            } else {
                map(a)
            }
        })
        .collect();
    for a in &args {
        assert!(
            !a.contains("/etc/pullcheck") && !a.contains("=/credential-providers"),
            "unmapped path in {a}"
        );
    }
    assert_eq!(
        args.iter().any(|a| a == "--provider-token-requests"),
        token,
        "{args:?}"
    );
    let sa_token = kubectl_ok(
        &[
            "-n",
            release,
            "create",
            "token",
            release,
            "--duration",
            "2h",
        ],
        None,
    );
    let token_file = state.path().join("token");
    std::fs::write(&token_file, sa_token.trim()).unwrap();
    args.extend([
        format!(
            "--apiserver={}",
            std::env::var("PULLCHECK_CP_SERVER").unwrap()
        ),
        format!("--apiserver-token-file={}", token_file.display()),
        format!(
            "--apiserver-ca-file={}",
            std::env::var("PULLCHECK_CP_CA").unwrap()
        ),
    ]);
    let running = support::webhook::start(&args, &env.rust_log);
    assert_eq!(running.base, url);
    ProviderWebhook {
        running,
        state,
        release: release.to_string(),
    }
}

/// A checked namespace of a provider webhook (labeled `label=true`) with a `default`
/// ServiceAccount and a `trainer` one carrying `annotations`.
fn provider_namespace(ns: &str, label: &str, annotations: &[(&str, &str)]) {
    ensure_namespace(ns, &[(label, "true")]);
    super::service_account(ns, "default", &[]);
    let a: BTreeMap<_, _> = annotations.iter().copied().collect();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "trainer", "namespace": ns, "annotations": a}});
    kubectl_ok(&["apply", "-f", "-"], Some(&sa.to_string()));
}

fn trainer_job(name: &str, image: &str) -> Value {
    let mut j = job(name, image);
    j["spec"]["template"]["spec"]["serviceAccountName"] = json!("trainer");
    j
}

fn basic_present() -> String {
    fixture().images.oci_manifest.reference(&fixture().basic)
}

fn basic_missing() -> String {
    format!("{}/oci/app:no-such-tag", fixture().basic.host)
}

/// The token-mode release, shared by the token tests: `tokenRequests` for [`TOKEN_NS`] and
/// [`AUDIENCE`]; [`TOKEN_NS`] and [`UNLISTED_NS`] both checked.
fn token_webhook() -> &'static ProviderWebhook {
    static TOKENS: OnceLock<ProviderWebhook> = OnceLock::new();
    TOKENS.get_or_init(|| {
        let env = env().expect("setup");
        let label = "pullcheck-e2e/provider-tokens";
        let annotations = [
            (REQUIRED_ANNOTATION, "reader"),
            (OPTIONAL_ANNOTATION, "yes"),
            ("pullcheck.io/not-configured", "never-passed"),
        ];
        provider_namespace(TOKEN_NS, label, &annotations);
        provider_namespace(UNLISTED_NS, label, &annotations);
        provider_webhook(
            env,
            TOKEN_RELEASE,
            label,
            true,
            json!({"tokenRequests": {"enabled": true, "namespaces": [TOKEN_NS], "audiences": [AUDIENCE]}}),
        )
    })
}

/// kubectl's stderr for an admitted object has no warning about `image` (the lint's
/// warnings about the template may be there).
fn assert_verified(stderr: &str, image: &str) {
    assert!(
        !stderr.contains(image) && !stderr.contains("not verified"),
        "{stderr}"
    );
}

/// An admission warning about an image as the webhook sends it: at most 256 characters (the
/// API server's per-warning limit), an ellipsis marking the cut (src/webhook/review.rs
/// `MAX_VERDICT_WARNING_CHARS`).
fn admission_warning(text: &str) -> String {
    if text.chars().count() <= 256 {
        return text.to_string();
    }
    let mut out: String = text.chars().take(255).collect();
    out.push('…');
    out
}

fn b64url(part: &str) -> Value {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .unwrap_or_else(|e| panic!("JWT part {part}: {e}"));
    serde_json::from_slice(&bytes).unwrap()
}

// ---- tests -----------------------------------------------------------------------------

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_providers_credential_verifies_images_at_admission_with_the_charts_values() {
    let env = env().expect("setup");
    let label = "pullcheck-e2e/providers";
    let hook = provider_webhook(env, "pullcheck-providers", label, false, json!({}));
    let ns = "e2e-providers";
    provider_namespace(ns, label, &[]);

    let missing = basic_missing();
    let err = denied(ns, &job("missing", &missing));
    let line = err
        .lines()
        .find(|l| l.contains("denied the request"))
        .unwrap_or_else(|| panic!("{err}\nlog:\n{}", hook.log()));
    assert_eq!(
        line,
        format!(
            "Error from server: error when creating \"STDIN\": admission webhook \"validate.pullcheck.io\" denied the request: main: {missing}: not_found (manifest unknown (GET https://{}/v2/oci/app/manifests/no-such-tag: HTTP 404; MANIFEST_UNKNOWN: manifest unknown))",
            fixture().basic.host
        ),
        "log:\n{}",
        hook.log()
    );

    let present = basic_present();
    let o = create(ns, &job("present", &present));
    assert!(o.ok, "refused: {}\nlog:\n{}", o.stderr, hook.log());
    assert_verified(&o.stderr, &present);

    // cacheKeyType Registry: one run for both images; no token outside token mode.
    let requests = hook.requests();
    assert_eq!(
        requests,
        vec![json!({"apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                    "kind": "CredentialProviderRequest",
                    "image": format!("{}/oci/app", fixture().basic.host)})],
        "log:\n{}",
        hook.log()
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_token_mode_provider_gets_a_token_request_token_of_the_workloads_service_account() {
    let env = env().expect("setup");
    let hook = token_webhook();
    let present = basic_present();
    created(TOKEN_NS, &trainer_job("with-token", &present), env);
    let o = create(TOKEN_NS, &trainer_job("with-token-2", &present));
    assert!(o.ok, "{}\nlog:\n{}", o.stderr, hook.log());
    assert_verified(&o.stderr, &present);

    let requests: Vec<Value> = hook
        .requests()
        .into_iter()
        .filter(|r| r.get("serviceAccountToken").is_some())
        .collect();
    assert!(!requests.is_empty(), "log:\n{}", hook.log());
    let r = &requests[0];
    assert_eq!(r["image"], format!("{}/oci/app", fixture().basic.host));
    // The configured annotations only: the required and the optional one.
    assert_eq!(
        r["serviceAccountAnnotations"],
        json!({REQUIRED_ANNOTATION: "reader", OPTIONAL_ANNOTATION: "yes"})
    );
    let token = r["serviceAccountToken"].as_str().unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "not a JWT");
    let header = b64url(parts[0]);
    assert_eq!(header["alg"], "RS256", "{header}");
    let claims = b64url(parts[1]);
    assert_eq!(claims["aud"], json!([AUDIENCE]), "{claims}");
    let subject = format!("system:serviceaccount:{TOKEN_NS}:trainer");
    assert_eq!(claims["sub"], subject.as_str(), "{claims}");
    let sa = get_json(&["-n", TOKEN_NS, "serviceaccount", "trainer"]);
    let k8s = &claims["kubernetes.io"];
    assert_eq!(k8s["namespace"], TOKEN_NS);
    assert_eq!(k8s["serviceaccount"]["name"], "trainer");
    assert_eq!(k8s["serviceaccount"]["uid"], sa["metadata"]["uid"]);
    // Bound to the ServiceAccount only: there is no pod at admission.
    assert!(k8s.get("pod").is_none(), "{claims}");
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        600,
        "{claims}"
    );
    // The apiserver itself vouches for it: a TokenReview for the audience.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": [AUDIENCE]}});
    let reviewed: Value = serde_json::from_str(&kubectl_ok(
        &["create", "-o", "json", "-f", "-"],
        Some(&review.to_string()),
    ))
    .unwrap();
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(reviewed["status"]["user"]["username"], subject.as_str());
    assert_eq!(reviewed["status"]["audiences"], json!([AUDIENCE]));

    // With the provider's credential a missing tag is definitive.
    let missing = basic_missing();
    let err = denied(TOKEN_NS, &trainer_job("with-token-missing", &missing));
    assert!(
        err.contains(&format!("main: {missing}: not_found (manifest unknown")),
        "{err}"
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_token_request_outside_the_charts_namespaces_is_forbidden_and_the_image_assumed() {
    let _env = env().expect("setup");
    let hook = token_webhook();
    let image = basic_present();
    let o = create(UNLISTED_NS, &trainer_job("no-token", &image));
    assert!(o.ok, "refused: {}\nlog:\n{}", o.stderr, hook.log());
    let why = format!(
        "POST serviceaccounts/trainer/token in namespace {UNLISTED_NS}: 403 Forbidden; grant the webhook create on serviceaccounts/token in {UNLISTED_NS} (chart value credentialProviders.tokenRequests.namespaces)"
    );
    let warning = admission_warning(&format!(
        "{image}: credential provider {PLUGIN}: {why}; not verified"
    ));
    assert!(
        o.stderr.contains(&format!("Warning: {warning}")),
        "{}\nwant Warning: {warning}",
        o.stderr
    );
    let log = hook.log();
    assert!(
        log.lines().any(|l| l
            .contains("no ServiceAccount token for a token-mode credential provider")
            && l.contains(&why)),
        "{log}"
    );
    // Not run for that namespace: the plugin never got a token for it.
    for r in hook.requests() {
        if let Some(t) = r["serviceAccountToken"].as_str() {
            let sub = b64url(t.split('.').nth(1).unwrap())["sub"].clone();
            assert_eq!(sub, format!("system:serviceaccount:{TOKEN_NS}:trainer"));
        }
    }
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn the_charts_policy_refuses_the_webhooks_token_requests_for_other_audiences() {
    let _env = env().expect("setup");
    let hook = token_webhook();
    let user = hook.user();
    let policy = format!("{TOKEN_RELEASE}-provider-token-audiences");
    let as_webhook = |ns: &str, extra: &[&str]| {
        let mut a = vec![
            "--as",
            user.as_str(),
            "-n",
            ns,
            "create",
            "token",
            "trainer",
        ];
        a.extend_from_slice(extra);
        kubectl(&a, None)
    };
    let refusal = |message: &str| {
        format!(
            "error: failed to create token: serviceaccounts \"trainer\" is forbidden: ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: {message}"
        )
    };
    let audiences = refusal(&format!(
        "pullcheck may request ServiceAccount tokens only for the audiences in credentialProviders.tokenRequests.audiences ({AUDIENCE})"
    ));
    // The policy takes effect once the apiserver has loaded it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let o = loop {
        let o = as_webhook(
            TOKEN_NS,
            &["--audience", "other-audience", "--duration", "10m"],
        );
        if !o.ok || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(!o.ok, "a token for another audience was issued");
    assert_eq!(o.stderr.trim(), audiences);
    // One allowed audience with another, and none (the apiserver's own): refused too.
    let o = as_webhook(
        TOKEN_NS,
        &[
            "--audience",
            AUDIENCE,
            "--audience",
            "other-audience",
            "--duration",
            "10m",
        ],
    );
    assert_eq!(o.stderr.trim(), audiences);
    let o = as_webhook(TOKEN_NS, &["--duration", "10m"]);
    assert_eq!(o.stderr.trim(), audiences);
    // Longer than the webhook's 600 s.
    let o = as_webhook(TOKEN_NS, &["--audience", AUDIENCE, "--duration", "1h"]);
    assert_eq!(
        o.stderr.trim(),
        refusal("pullcheck may request ServiceAccount tokens valid for at most 600 seconds")
    );
    // What the webhook asks for is allowed, in the listed namespace only (RBAC).
    let o = as_webhook(TOKEN_NS, &["--audience", AUDIENCE, "--duration", "10m"]);
    assert!(o.ok, "{}", o.stderr);
    let o = as_webhook(UNLISTED_NS, &["--audience", AUDIENCE, "--duration", "10m"]);
    assert_eq!(
        o.stderr.trim(),
        format!(
            "error: failed to create token: serviceaccounts \"trainer\" is forbidden: User \"{user}\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"{UNLISTED_NS}\""
        )
    );
    // Other users are not the policy's business.
    let o = kubectl(
        &[
            "-n",
            TOKEN_NS,
            "create",
            "token",
            "trainer",
            "--audience",
            "other-audience",
        ],
        None,
    );
    assert!(o.ok, "{}", o.stderr);
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn the_plugin_copy_init_container_passes_pod_security_restricted() {
    let _env = env().expect("setup");
    let ns = "e2e-providers-restricted";
    ensure_namespace(
        ns,
        &[
            ("pod-security.kubernetes.io/enforce", "restricted"),
            ("pod-security.kubernetes.io/enforce-version", "latest"),
        ],
    );
    super::service_account(ns, "default", &[]);
    let rendered = helm_template(
        "pc-providers-psa",
        ns,
        &[
            "--show-only",
            "templates/deployment.yaml",
            "--set",
            "credentialProviders.enabled=true",
            "--set",
            "credentialProviders.config=providers: []",
            "--set",
            "credentialProviders.pluginImage.repository=plugins.example/ecr-credential-provider",
            "--set",
            "credentialProviders.pluginImage.tag=v1",
        ],
    );
    let deploy: Value = serde_json::from_str(&kubectl_ok(
        &["create", "--dry-run=client", "-o", "json", "-f", "-"],
        Some(&rendered),
    ))
    .unwrap();
    let mut spec = deploy["spec"]["template"]["spec"].clone();
    assert_eq!(
        spec["initContainers"][0]["name"],
        "credential-provider-plugins"
    );
    spec["serviceAccountName"] = json!("default");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "providers-pod"}, "spec": spec});
    let o = kubectl(
        &["-n", ns, "create", "--dry-run=server", "-f", "-"],
        Some(&pod.to_string()),
    );
    assert!(o.ok, "refused by Pod Security restricted: {}", o.stderr);
    assert!(!o.stderr.contains("Warning"), "{}", o.stderr);
}
