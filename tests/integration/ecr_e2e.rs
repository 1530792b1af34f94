//! `pullcheck check` and `explain` end to end with the real `ecr-credential-provider`: the
//! kubelet's provider config names it for `*.dkr.ecr.*.amazonaws.com`, pullcheck runs it,
//! it asks the scripted ECR API (`support/ecr_api.rs`) for a token, and that token opens a
//! real registry (distribution 2.8, htpasswd) served under the ECR host name itself.
//!
//! The registries listen on 443 of the names `scripts/netns-test.sh` maps, since the
//! provider keys its answer by the image's host without the port: an image with a port
//! would get a credential keyed for another host. So these run in the script's network
//! namespace, with the provider that `scripts/provider-e2e.sh` builds (it exports
//! `PULLCHECK_ECR_PROVIDER` and calls `scripts/netns-test.sh ecr_e2e::`). Every test is
//! `#[ignore]`d for a plain `cargo test`, and fails loudly outside that script.
//!
//! One registry per name for the whole test process (a port can be bound once); each test
//! has its own scripted ECR API and provider config, so the API's call counts are its own.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::ecr_api::{Answer, EcrApi, Expiry, request_id};
use crate::support::named::{self, Bind};
use crate::support::process::{Run, check, run};
use crate::support::{ALICE, Mode, Registry, fixture, temp_dir};

/// The first account's registry: what most tests pull from.
const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
/// A second account's registry, for counting the provider's cache keys.
const OTHER_HOST: &str = "210987654321.dkr.ecr.us-east-1.amazonaws.com";
/// The static test keys the provider signs with (AWS's documentation example).
const ACCESS_KEY: &str = "AKIDEXAMPLE";
const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
/// The plugin's name: the kubelet runs `<bin-dir>/<name>`.
const PROVIDER: &str = "ecr-credential-provider";
/// The kubelet's pattern for private ECR (the EKS AMI's config).
const MATCH: &str = "*.dkr.ecr.*.amazonaws.com";

fn provider_binary() -> PathBuf {
    let path = std::env::var_os("PULLCHECK_ECR_PROVIDER")
        .map(PathBuf::from)
        .expect("PULLCHECK_ECR_PROVIDER is not set: run scripts/provider-e2e.sh");
    assert!(path.is_file(), "PULLCHECK_ECR_PROVIDER={}", path.display());
    path
}

/// The htpasswd registry on `name`:443, started once per test process.
fn registry(name: &'static str) -> &'static Registry {
    static FIRST: OnceLock<Registry> = OnceLock::new();
    static SECOND: OnceLock<Registry> = OnceLock::new();
    let cell = match name {
        HOST => &FIRST,
        OTHER_HOST => &SECOND,
        _ => panic!("no registry for {name}"),
    };
    cell.get_or_init(|| {
        let reg = named::start_registry(Mode::Basic, Bind::named(name).port(443), None);
        assert_eq!(reg.host, format!("{name}:443"));
        reg
    })
}

/// `NAME/repo:tag` of a seeded image on the registry of `name`: no port, as on ECR.
fn image_on(name: &'static str, repo: &str, tag: &str) -> String {
    registry(name);
    format!("{name}/{repo}:{tag}")
}

/// A scripted ECR API handing out alice's htpasswd credential as the token, valid 12 h.
fn api_for_alice() -> EcrApi {
    EcrApi::start(Answer::token(
        ALICE.0,
        ALICE.1,
        Expiry::In(Duration::from_secs(12 * 3600)),
    ))
}

/// A node's provider config (kubelet.config.k8s.io/v1) naming the real plugin, with the
/// plugin's environment in its `env` list as on a node, and a bin dir holding it.
struct Node {
    _dir: tempfile::TempDir,
    config: PathBuf,
    bin: PathBuf,
}

fn node(api: &EcrApi) -> Node {
    named::require_netns();
    let dir = temp_dir();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    symlink(provider_binary(), bin.join(PROVIDER)).unwrap();
    let missing = dir.path().join("no-aws-files");
    let env = [
        ("AWS_ENDPOINT_URL_ECR", api.endpoint().to_string()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        // Nothing from a developer's ~/.aws reaches the plugin.
        ("AWS_CONFIG_FILE", missing.display().to_string()),
        ("AWS_SHARED_CREDENTIALS_FILE", missing.display().to_string()),
    ];
    let env_yaml: String = env
        .iter()
        .map(|(k, v)| format!("      - name: {k}\n        value: \"{v}\"\n"))
        .collect();
    let config = dir.path().join("credential-providers.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: {PROVIDER}\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n    matchImages:\n      - \"{MATCH}\"\n    defaultCacheDuration: 12h\n    env:\n{env_yaml}"
        ),
    )
    .unwrap();
    Node {
        _dir: dir,
        config,
        bin,
    }
}

impl Node {
    fn flags(&self) -> Vec<String> {
        vec![
            "--image-credential-provider-config".into(),
            self.config.display().to_string(),
            "--image-credential-provider-bin-dir".into(),
            self.bin.display().to_string(),
            "--no-docker-config".into(),
        ]
    }

    /// `pullcheck check --output json --ca-file <test CA> <flags> <args…>`.
    fn check(&self, args: &[&str]) -> Run {
        let flags = self.flags();
        let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        let r = check(&all);
        assert_no_secret(&r);
        r
    }
}

/// Neither the token's password nor the AWS secret key shows in any output.
#[track_caller]
fn assert_no_secret(r: &Run) {
    for secret in [ALICE.1, SECRET_KEY] {
        assert!(
            !r.stdout.contains(secret) && !r.stderr.contains(secret),
            "a secret in the output:\nstdout:\n{}\nstderr:\n{}",
            r.stdout,
            r.stderr
        );
    }
}

fn credential(host: &str) -> String {
    format!("credential provider {PROVIDER} key {host}")
}

/// The GetAuthorizationToken calls the API got.
fn calls(api: &EcrApi) -> usize {
    api.calls().len()
}

#[test]
#[ignore = "needs the network namespace and the real provider: run scripts/provider-e2e.sh"]
fn a_present_tag_is_pullable_with_the_providers_credential_and_its_digest() {
    let api = api_for_alice();
    let n = node(&api);
    let img = &fixture().images.oci_manifest;
    let r = n.check(&[&image_on(HOST, img.repo, "v1")]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["digest"], img.digest.as_str());
    assert_eq!(o["credential"], credential(HOST));
    assert_eq!(o["assumed"], serde_json::Value::Null);
    assert_eq!(calls(&api), 1, "{:#?}", api.requests());
    let call = &api.calls()[0];
    assert_eq!(call.access_key.as_deref(), Some(ACCESS_KEY));
    assert_eq!(call.region.as_deref(), Some("us-east-1"));
}

#[test]
#[ignore = "needs the network namespace and the real provider: run scripts/provider-e2e.sh"]
fn a_missing_tag_is_not_found_with_the_providers_credential() {
    let api = api_for_alice();
    let n = node(&api);
    let r = n.check(&[&image_on(HOST, "oci/app", "no-such-tag")]);
    r.assert_code(11);
    let o = r.image(0);
    assert_eq!(o["verdict"], "not_found");
    assert_eq!(o["credential"], credential(HOST));
    assert_eq!(o["assumed"], serde_json::Value::Null);
}

#[test]
#[ignore = "needs the network namespace and the real provider: run scripts/provider-e2e.sh"]
fn an_index_without_the_platform_is_platform_missing() {
    let api = api_for_alice();
    let n = node(&api);
    let img = &fixture().images.arm_only;
    let r = n.check(&["--platform", "linux/amd64", &image_on(HOST, img.repo, "v1")]);
    r.assert_code(12);
    let o = r.image(0);
    assert_eq!(o["verdict"], "platform_missing");
    assert_eq!(o["credential"], credential(HOST));
}

#[test]
#[ignore = "needs the network namespace and the real provider: run scripts/provider-e2e.sh"]
fn a_wrong_password_from_ecr_is_denied() {
    let api = EcrApi::start(Answer::token(
        ALICE.0,
        "not-alices-password",
        Expiry::In(Duration::from_secs(12 * 3600)),
    ));
    let n = node(&api);
    let r = n.check(&[&image_on(HOST, "oci/app", "v1")]);
    r.assert_code(13);
    let o = r.image(0);
    assert_eq!(o["verdict"], "denied");
    assert_eq!(o["assumed"], serde_json::Value::Null);
    assert!(!r.stdout.contains("not-alices-password"), "{}", r.stdout);
    assert!(!r.stderr.contains("not-alices-password"), "{}", r.stderr);
}

#[test]
#[ignore = "needs the network namespace and the real provider: run scripts/provider-e2e.sh"]
fn two_images_of_one_registry_make_one_call_and_two_registries_two() {
    let api = api_for_alice();
    let n = node(&api);
    let f = fixture();
    let one = image_on(HOST, f.images.oci_manifest.repo, "v1");
    let two = image_on(HOST, f.images.docker_schema2.repo, "v1");
    let r = n.check(&["--platform", "any", &one, &two]);
    r.assert_code(0);
    assert_eq!(r.image(0)["credential"], credential(HOST));
    assert_eq!(r.image(1)["credential"], credential(HOST));
    // cacheKeyType Registry: the second image is served from the first answer.
    assert_eq!(calls(&api), 1, "{:#?}", api.requests());

    let api = api_for_alice();
    let n = node(&api);
    let other = image_on(OTHER_HOST, f.images.oci_manifest.repo, "v1");
    let r = n.check(&["--platform", "any", &one, &other, &two]);
    r.assert_code(0);
    assert_eq!(r.image(0)["credential"], credential(HOST));
    assert_eq!(r.image(1)["credential"], credential(OTHER_HOST));
    assert_eq!(r.image(1)["digest"], f.images.oci_manifest.digest.as_str());
    assert_eq!(r.image(2)["credential"], credential(HOST));
    assert_eq!(calls(&api), 2, "{:#?}", api.requests());
}

#[test]
#[ignore = "needs the network namespace and the real provider: run scripts/provider-e2e.sh"]
fn access_denied_from_ecr_is_assumed_pullable_with_the_providers_error() {
    let denied = "User: arn:aws:iam::123456789012:user/ci is not authorized to perform: \
                  ecr:GetAuthorizationToken";
    let api = EcrApi::start(Answer::access_denied(denied));
    let n = node(&api);
    let r = n.check(&[&image_on(HOST, "oci/app", "v1")]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["assumed"], true);
    assert_eq!(o["credential"], serde_json::Value::Null);
    assert_eq!(
        o["detail"],
        "assumed pullable: a credential provider the kubelet uses gave pullcheck nothing"
    );
    let warning = o["warnings"][0].as_str().unwrap();
    let want = format!(
        "credential provider {PROVIDER}: \
         failed (exit status: 1): Error running credential provider plugin: operation error \
         ECR: GetAuthorizationToken, https response error StatusCode: 400, RequestID: {}, \
         api error AccessDeniedException: {denied}; not verified (missing or private:",
        request_id(1)
    );
    assert!(warning.starts_with(&want), "{warning}\nwant:\n{want}");
    assert_eq!(calls(&api), 1, "{:#?}", api.requests());
}

#[test]
#[ignore = "needs the network namespace and the real provider: run scripts/provider-e2e.sh"]
fn explain_names_the_provider_and_its_registry_cache_key() {
    let api = api_for_alice();
    let n = node(&api);
    let image = image_on(HOST, "oci/app", "v1");
    let flags = n.flags();
    let mut args = vec!["explain", "--output", "json"];
    args.extend(flags.iter().map(String::as_str));
    args.push(&image);
    let r = run(&args, &[]);
    r.assert_code(0);
    assert_no_secret(&r);
    let j = r.json();
    assert_eq!(j["credentials"], serde_json::json!([credential(HOST)]));
    assert_eq!(
        j["credential_providers"],
        serde_json::json!([format!(
            "credential provider {PROVIDER} (matchImages {MATCH}): answered, cache key Registry {HOST}"
        )])
    );
    assert_eq!(calls(&api), 1, "{:#?}", api.requests());
}
