//! The real `ecr-credential-provider` (k8s.io/cloud-provider-aws, the version pinned in
//! scripts/go-tools.sh), run by hand the way the kubelet runs a credential-provider plugin:
//! a `CredentialProviderRequest` on stdin, a `CredentialProviderResponse` on stdout, errors
//! as exit status 1 with a klog line on stderr. Its AWS calls go to the scripted ECR API
//! (`support/ecr_api.rs`) through `AWS_ENDPOINT_URL_ECR`. No pullcheck code runs here: these
//! tests pin down what the provider itself does, which pullcheck's provider support relies on.
//!
//! `scripts/provider-e2e.sh` builds the provider, exports `PULLCHECK_ECR_PROVIDER` (its path)
//! and runs these with `--ignored`; without the variable they fail loudly.
//! docs/credential-providers.md explains the answers asserted here.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::ecr_api::{
    ACCOUNT, Answer, Call, EcrApi, Expiry, GET_AUTHORIZATION_TOKEN, request_id,
};
use crate::support::process::{Run, output};

const IGNORE: &str = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh";
const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const ACCESS_KEY: &str = "AKIDEXAMPLE";

fn provider() -> PathBuf {
    let path = std::env::var_os("PULLCHECK_ECR_PROVIDER")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("PULLCHECK_ECR_PROVIDER is not set ({IGNORE})"));
    assert!(
        path.is_file(),
        "PULLCHECK_ECR_PROVIDER={} is not a file ({IGNORE})",
        path.display()
    );
    path
}

fn request(api_version: &str, image: &str) -> String {
    serde_json::json!({
        "apiVersion": api_version,
        "kind": "CredentialProviderRequest",
        "image": image,
    })
    .to_string()
}

fn v1_request(image: &str) -> String {
    request("credentialprovider.kubelet.k8s.io/v1", image)
}

/// Which variable points the provider's SDK at the scripted API.
#[derive(Clone, Copy)]
enum EndpointVar {
    /// `AWS_ENDPOINT_URL_ECR`: ECR only.
    Ecr,
    /// `AWS_ENDPOINT_URL`: every AWS service.
    Global,
}

/// Run the provider with `stdin`, an environment of only static credentials, the endpoint,
/// `AWS_REGION=us-east-1` and `AWS_EC2_METADATA_DISABLED=true` (plus `extra`, which may
/// override), and a HOME with no `~/.aws`.
fn run(api: &EcrApi, var: EndpointVar, stdin: &str, extra: &[(&str, &str)]) -> Run {
    let home = tempfile::tempdir().expect("temp HOME");
    let var = match var {
        EndpointVar::Ecr => "AWS_ENDPOINT_URL_ECR",
        EndpointVar::Global => "AWS_ENDPOINT_URL",
    };
    let mut cmd = Command::new(provider());
    cmd.env_clear()
        .env("HOME", home.path())
        .env("AWS_CONFIG_FILE", home.path().join("no-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            home.path().join("no-credentials"),
        )
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env(
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        )
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env(var, api.endpoint());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    output(&mut cmd, Some(stdin.as_bytes())).into()
}

/// The message of the one klog error line (`E<mmdd> <time> <pid> <file:line>] <message>`)
/// the provider writes before it exits 1.
fn klog_error(r: &Run) -> String {
    let lines: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with('E')).collect();
    assert_eq!(lines.len(), 1, "one error line expected:\n{}", r.stderr);
    let (_, message) = lines[0]
        .split_once("] ")
        .unwrap_or_else(|| panic!("not a klog line: {}", lines[0]));
    message.to_string()
}

fn call(region: &str) -> Call {
    Call {
        line: "POST /".into(),
        target: Some(GET_AUTHORIZATION_TOKEN.into()),
        attempt: Some("attempt=1; max=3".into()),
        access_key: Some(ACCESS_KEY.into()),
        region: Some(region.into()),
        service: Some("ecr".into()),
    }
}

/// The calls `api` got are `want`; else the full requests, for the failure message.
fn assert_calls(api: &EcrApi, want: Vec<Call>) {
    assert_eq!(api.calls(), want, "requests: {:#?}", api.requests());
}

fn response(host: &str, cache_duration: Option<&str>, user: &str, password: &str) -> String {
    let duration = cache_duration
        .map(|d| format!(r#""cacheDuration":"{d}","#))
        .unwrap_or_default();
    format!(
        concat!(
            r#"{{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","#,
            r#""cacheKeyType":"Registry",{duration}"auth":{{"{host}":{{"username":"{user}","password":"{password}"}}}}}}"#,
            "\n"
        ),
        duration = duration,
        host = host,
        user = user,
        password = password,
    )
}

// A 12 h token (what ECR issues) plus one second: the provider halves the whole seconds
// left, so this reads 6h0m0s whether or not a second boundary passes between the answer
// and the provider's clock reading.
const TWELVE_HOURS_AND_A_SECOND: Duration = Duration::from_secs(12 * 3600 + 1);

/// A stand-in answering `AWS:<password>`, valid for 12 h (and a second).
fn fresh_token_api(password: &str) -> EcrApi {
    EcrApi::start(Answer::token(
        "AWS",
        password,
        Expiry::In(TWELVE_HOURS_AND_A_SECOND),
    ))
}

/// The v1 request for `<host>/team/app:v1`.
fn image_request(host: &str) -> String {
    v1_request(&format!("{host}/team/app:v1"))
}

/// Exit 0 and exactly `response(key, cache_duration, "AWS", password)` on stdout.
fn assert_answered(r: &Run, key: &str, cache_duration: Option<&str>, password: &str) {
    assert_eq!(r.code, 0, "{key}: {}", r.stderr);
    assert_eq!(
        r.stdout,
        response(key, cache_duration, "AWS", password),
        "{key}: {}",
        r.stderr
    );
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn answers_registry_keyed_auth_for_half_the_token_lifetime() {
    let api = fresh_token_api("ecr-pw-1");
    let r = run(&api, EndpointVar::Ecr, &image_request(HOST), &[]);
    assert_answered(&r, HOST, Some("6h0m0s"), "ecr-pw-1");
    assert_calls(&api, vec![call("us-east-1")]);
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn takes_the_generic_aws_endpoint_url_too() {
    let api = fresh_token_api("ecr-pw-2");
    let r = run(&api, EndpointVar::Global, &image_request(HOST), &[]);
    assert_answered(&r, HOST, Some("6h0m0s"), "ecr-pw-2");
    assert_calls(&api, vec![call("us-east-1")]);
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn access_denied_exits_1_with_the_sdk_error_and_no_retry() {
    let denied = "User: arn:aws:iam::123456789012:user/ci is not authorized to perform: \
                  ecr:GetAuthorizationToken";
    let api = EcrApi::start(Answer::access_denied(denied));
    let r = run(&api, EndpointVar::Ecr, &image_request(HOST), &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert_eq!(
        klog_error(&r),
        format!(
            "Error running credential provider plugin: operation error ECR: \
             GetAuthorizationToken, https response error StatusCode: 400, RequestID: {}, \
             api error AccessDeniedException: {denied}",
            request_id(1)
        )
    );
    assert_calls(&api, vec![call("us-east-1")]);
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn signs_for_the_region_in_the_image_host_else_aws_region() {
    let cases = [
        ("123456789012.dkr.ecr.eu-west-1.amazonaws.com", "eu-west-1"),
        (
            "123456789012.dkr-ecr.ap-southeast-2.on.aws",
            "ap-southeast-2",
        ),
        (
            "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
            "us-gov-west-1",
        ),
        (
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
            "cn-north-1",
        ),
        // not an ECR host: no region from it, so the SDK's own (AWS_REGION)
        ("registry.example.com", "ca-central-1"),
    ];
    for (host, region) in cases {
        let api = fresh_token_api("ecr-pw-3");
        let env = [("AWS_REGION", "ca-central-1")];
        let r = run(&api, EndpointVar::Ecr, &image_request(host), &env);
        assert_answered(&r, host, Some("6h0m0s"), "ecr-pw-3");
        assert_calls(&api, vec![call(region)]);
    }
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn cache_duration_is_0s_without_expiry_and_left_out_when_expired() {
    let api = EcrApi::start(Answer::token("AWS", "ecr-pw-4", Expiry::Absent));
    let r = run(&api, EndpointVar::Ecr, &image_request(HOST), &[]);
    assert_answered(&r, HOST, Some("0s"), "ecr-pw-4");

    let expired = Expiry::Ago(Duration::from_secs(60));
    api.set_answer(Answer::token("AWS", "ecr-pw-5", expired));
    let r = run(&api, EndpointVar::Ecr, &image_request(HOST), &[]);
    assert_answered(&r, HOST, None, "ecr-pw-5");
    assert_calls(&api, vec![call("us-east-1"), call("us-east-1")]);
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn refuses_other_api_versions_before_calling_aws() {
    let api = fresh_token_api("unused");
    for version in [
        "credentialprovider.kubelet.k8s.io/v1beta1",
        "credentialprovider.kubelet.k8s.io/v1alpha1",
    ] {
        let stdin = request(version, &format!("{HOST}/team/app:v1"));
        let r = run(&api, EndpointVar::Ecr, &stdin, &[]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert_eq!(r.stdout, "");
        assert_eq!(
            klog_error(&r),
            format!(
                "Error running credential provider plugin: group version {version} is not supported"
            )
        );
    }
    assert_calls(&api, vec![]);
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn proxy_endpoint_is_not_what_keys_the_answer() {
    // The stand-in's proxyEndpoint names ACCOUNT in the signing region; the provider keys
    // `auth` by the image's host regardless, even for another account's registry.
    let host = "210987654321.dkr.ecr.us-east-1.amazonaws.com";
    assert_ne!(&host[..12], ACCOUNT);
    let api = fresh_token_api("ecr-pw-6");
    let r = run(&api, EndpointVar::Ecr, &image_request(host), &[]);
    assert_answered(&r, host, Some("6h0m0s"), "ecr-pw-6");
    assert_calls(&api, vec![call("us-east-1")]);
}

#[test]
#[ignore = "needs the real ecr-credential-provider: run scripts/provider-e2e.sh"]
fn the_auth_key_is_the_image_host_without_its_port() {
    let api = fresh_token_api("ecr-pw-7");
    let r = run(
        &api,
        EndpointVar::Ecr,
        &image_request(&format!("{HOST}:443")),
        &[],
    );
    assert_answered(&r, HOST, Some("6h0m0s"), "ecr-pw-7");
    assert_calls(&api, vec![call("us-east-1")]);
}
