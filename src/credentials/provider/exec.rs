//! Runs one credential-provider plugin the way the kubelet does (kubernetes
//! `pkg/credentialprovider/plugin/plugin.go` `execPlugin.ExecPlugin`): `<bin-dir>/<name>
//! args…`, the process environment with the provider's `env` appended (so a configured
//! name overrides an inherited one, as Go's `exec` keeps the last), a
//! `CredentialProviderRequest` on stdin, a `CredentialProviderResponse` on stdout.
//!
//! The response is refused unless its `apiVersion` is the configured one, its `kind` is
//! `CredentialProviderResponse` and its `cacheKeyType` is `Image`, `Registry` or `Global`;
//! it is decoded strictly (an unknown field refuses it), as the kubelet's strict codec
//! does.
//!
//! pullcheck adds what the kubelet leaves out: the caller's deadline (the kubelet's is a
//! fixed minute, [`KUBELET_TIMEOUT`]; the webhook passes less, a documented deviation),
//! and caps on what is read from stdout ([`STDOUT_LIMIT`]) and stderr ([`STDERR_LIMIT`]).
//! Errors name the provider and never carry the response text, which may hold a secret.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

use super::config::{ExecApi, ProviderSpec};
use super::duration::parse_go_duration;
use crate::credentials::docker_config::{DockerConfig, DockerConfigEntry};
use crate::credentials::secret::Secret;

/// The kubelet's fixed deadline for one plugin run.
pub(crate) const KUBELET_TIMEOUT: Duration = Duration::from_secs(60);

/// The most bytes of a plugin's stdout pullcheck reads (the kubelet reads all of it).
pub(crate) const STDOUT_LIMIT: u64 = 4 * 1024 * 1024;

/// The most bytes of a plugin's stderr kept for an error message.
pub(crate) const STDERR_LIMIT: u64 = 64 * 1024;

/// What the response says to key its cache entry by (`cacheKeyType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) enum CacheKeyType {
    /// The image (repository) the plugin was asked about.
    Image,
    /// The image's registry: everything before its first `/`.
    Registry,
    /// One entry for every image the provider matches.
    Global,
}

/// A decoded, accepted response.
#[derive(Debug)]
pub(crate) struct Response {
    /// `cacheKeyType`.
    pub cache_key_type: CacheKeyType,
    /// `cacheDuration`: `None` when absent (use the provider's default); zero means "do not
    /// cache".
    pub cache_duration: Option<Duration>,
    /// `auth`: keyring patterns → credentials, matched with the keyring rules.
    pub auth: DockerConfig,
}

/// The request's variable parts.
#[derive(Debug, Default)]
pub(crate) struct Request<'a> {
    /// The image as the kubelet passes it: the repository without tag or digest.
    pub image: &'a str,
    /// Token mode: the ServiceAccount token.
    pub service_account_token: Option<&'a Secret>,
    /// Token mode: the ServiceAccount annotations the provider asked for.
    pub service_account_annotations: Option<&'a BTreeMap<String, String>>,
}

/// Why a plugin gave nothing. One line naming the provider; no response text, no secret.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PluginError {
    /// `<bin-dir>/<name>` is missing or not executable.
    #[error("credential provider {name}: cannot run {}: {problem}", path.display())]
    Spawn {
        name: String,
        path: PathBuf,
        problem: String,
    },
    /// The deadline passed; the process was killed.
    #[error("credential provider {name}: no answer within {:.1} s; the plugin was stopped", timeout.as_secs_f64())]
    Timeout { name: String, timeout: Duration },
    /// More output than [`STDOUT_LIMIT`].
    #[error(
        "credential provider {name}: printed more than {STDOUT_LIMIT} bytes; the answer was not used"
    )]
    TooMuchOutput { name: String },
    /// Non-zero exit.
    #[error("credential provider {name}: failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    Failed {
        name: String,
        status: String,
        /// The line of its stderr that says why ([`failure_line`]).
        stderr: String,
    },
    /// The response's apiVersion is not the configured one.
    #[error(
        "credential provider {name}: answered apiVersion {got:?}, but its config says {want}; the answer was not used"
    )]
    ApiVersion {
        name: String,
        want: &'static str,
        got: String,
    },
    /// The response does not decode or validate.
    #[error("credential provider {name}: {problem}; the answer was not used")]
    BadResponse { name: String, problem: String },
}

impl PluginError {
    /// The same error with every occurrence of `secrets` (4 characters or more) in its
    /// free text replaced by `(redacted)`.
    fn redacted(self, secrets: &[String]) -> PluginError {
        let r = |text: String| redact(text, secrets);
        match self {
            PluginError::Failed {
                name,
                status,
                stderr,
            } => PluginError::Failed {
                name,
                status,
                stderr: r(stderr),
            },
            PluginError::ApiVersion { name, want, got } => PluginError::ApiVersion {
                name,
                want,
                got: r(got),
            },
            PluginError::BadResponse { name, problem } => PluginError::BadResponse {
                name,
                problem: r(problem),
            },
            other => other,
        }
    }
}

/// `e` redacted of the passwords in `out` (what `run` does with a plugin's answer).
pub(crate) fn redacted(e: PluginError, out: &[u8]) -> PluginError {
    e.redacted(&passwords_in(out))
}

fn redact(mut text: String, secrets: &[String]) -> String {
    for s in secrets.iter().filter(|s| s.chars().count() >= 4) {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "(redacted)");
        }
    }
    text
}

/// The `auth.*.password` values of whatever JSON the plugin printed, even one the strict
/// decoder refuses.
fn passwords_in(out: &[u8]) -> Vec<String> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(out) else {
        return Vec::new();
    };
    v.get("auth")
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flat_map(|a| a.values())
        .filter_map(|e| e.get("password").and_then(serde_json::Value::as_str))
        .map(str::to_string)
        .collect()
}

/// Values of the plugin's environment whose names say they are secret (`*SECRET*`,
/// `*TOKEN*`, `*PASSWORD*`, `*KEY*`, `*CREDENTIAL*`): AWS_SECRET_ACCESS_KEY,
/// AWS_SESSION_TOKEN, a configured password.
fn secret_env_values(spec: &ProviderSpec, base: Option<&[(OsString, OsString)]>) -> Vec<String> {
    let secret_name = |n: &str| {
        let n = n.to_ascii_uppercase();
        ["SECRET", "TOKEN", "PASSWORD", "KEY", "CREDENTIAL"]
            .iter()
            .any(|w| n.contains(w))
    };
    let inherited: Vec<(String, String)> = match base {
        Some(env) => env
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect(),
        None => std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect(),
    };
    inherited
        .into_iter()
        .chain(spec.env.iter().cloned())
        .filter(|(k, _)| secret_name(k))
        .map(|(_, v)| v)
        .collect()
}

/// Runs plugins from one bin dir.
#[derive(Clone, Debug)]
pub(crate) struct PluginRunner {
    /// `--image-credential-provider-bin-dir`.
    pub bin_dir: PathBuf,
    /// Replaces the inherited environment when set (tests; the kubelet always inherits).
    pub base_env: Option<Vec<(OsString, OsString)>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest<'a> {
    api_version: &'static str,
    kind: &'static str,
    image: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_account_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_account_annotations: Option<&'a BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireResponse {
    #[allow(dead_code)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    cache_key_type: String,
    cache_duration: Option<String>,
    #[serde(default)]
    auth: BTreeMap<String, WireAuth>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireAuth {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

impl PluginRunner {
    /// The plugin's path: `<bin-dir>/<name>`.
    pub(crate) fn path(&self, spec: &ProviderSpec) -> PathBuf {
        self.bin_dir.join(&spec.name)
    }

    /// Run `spec`'s plugin for `request`, within `timeout`.
    pub(crate) async fn run(
        &self,
        spec: &ProviderSpec,
        request: &Request<'_>,
        timeout: Duration,
    ) -> Result<Response, PluginError> {
        use crate::credentials::child::{self, Group, RunError};
        let name = &spec.name;
        let path = self.path(spec);
        let body = serde_json::to_vec(&WireRequest {
            api_version: spec.api.as_str(),
            kind: "CredentialProviderRequest",
            image: request.image,
            service_account_token: request.service_account_token.map(|t| t.expose()),
            service_account_annotations: request.service_account_annotations,
        })
        .expect("a request always serializes");
        let mut cmd = command(&path, spec, self.base_env.as_deref());
        let spawned = child::spawn(&mut cmd, Group::Own)
            .await
            .map_err(|e| PluginError::Spawn {
                name: name.clone(),
                path: path.clone(),
                problem: match e.kind() {
                    std::io::ErrorKind::PermissionDenied => {
                        format!("{e}; make it executable (chmod +x)")
                    }
                    _ => format!("{e}; put the plugin in --image-credential-provider-bin-dir"),
                },
            })?;
        // A plugin may exit without reading stdin; that is its answer to judge. Stderr past
        // its cap is cut, not an error: only one line of it is shown.
        let ran = child::finish(spawned, Some(&body), STDOUT_LIMIT, STDERR_LIMIT, timeout)
            .await
            .map_err(|e| match e {
                RunError::Timeout => PluginError::Timeout {
                    name: name.clone(),
                    timeout,
                },
                RunError::Io(e) => PluginError::Failed {
                    name: name.clone(),
                    status: e.to_string(),
                    stderr: String::new(),
                },
            })?;
        let (status, err) = (ran.status, ran.stderr);
        // First: a plugin cut off mid-write dies of the broken pipe, which is not its answer.
        let Some(out) = ran.stdout else {
            return Err(PluginError::TooMuchOutput { name: name.clone() });
        };
        // Nothing a plugin prints may carry a secret into a message: the passwords of its own
        // answer, the ServiceAccount token it was given, secret-looking environment values.
        let mut secrets = passwords_in(&out);
        secrets.extend(
            request
                .service_account_token
                .map(|t| t.expose().to_string()),
        );
        secrets.extend(secret_env_values(spec, self.base_env.as_deref()));
        let result = if status.success() {
            decode(name, spec.api, &out)
        } else {
            Err(PluginError::Failed {
                name: name.clone(),
                status: status.to_string(),
                stderr: failure_line(&String::from_utf8_lossy(&err)).unwrap_or_default(),
            })
        };
        result.map_err(|e| e.redacted(&secrets))
    }
}

/// The plugin's command line: its args, the base environment (all of it when given, as the
/// kubelet passes its own), then the spec's `env`.
fn command(path: &Path, spec: &ProviderSpec, base_env: Option<&[(OsString, OsString)]>) -> Command {
    let mut cmd = Command::new(path);
    cmd.args(&spec.args)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(env) = base_env {
        cmd.env_clear().envs(env.iter().cloned());
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// Decode a plugin's stdout. Errors say where and what kind of problem, never the text.
pub(crate) fn decode(name: &str, api: ExecApi, out: &[u8]) -> Result<Response, PluginError> {
    let bad = |problem: String| PluginError::BadResponse {
        name: name.to_owned(),
        problem,
    };
    let position = |e: &serde_json::Error| {
        format!(
            "the answer is not a CredentialProviderResponse ({} at line {} column {})",
            match e.classify() {
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof =>
                    "invalid JSON",
                _ => "unexpected field or value",
            },
            e.line(),
            e.column()
        )
    };
    let meta: TypeMeta = serde_json::from_slice(out).map_err(|e| bad(position(&e)))?;
    if meta.api_version != api.as_str() {
        return Err(PluginError::ApiVersion {
            name: name.to_owned(),
            want: api.as_str(),
            got: meta.api_version.chars().take(80).collect(),
        });
    }
    let wire: WireResponse = serde_json::from_slice(out).map_err(|e| bad(position(&e)))?;
    if wire.kind != "CredentialProviderResponse" {
        return Err(bad(format!(
            "kind {:?} is not CredentialProviderResponse",
            wire.kind.chars().take(80).collect::<String>()
        )));
    }
    let cache_key_type = match wire.cache_key_type.as_str() {
        "Image" => CacheKeyType::Image,
        "Registry" => CacheKeyType::Registry,
        "Global" => CacheKeyType::Global,
        other => {
            return Err(bad(format!(
                "cacheKeyType {:?} is not Image, Registry or Global",
                other.chars().take(40).collect::<String>()
            )));
        }
    };
    let cache_duration = match wire.cache_duration.as_deref() {
        None => None,
        Some(d) => match parse_go_duration(d) {
            Some(s) => Some(Duration::from_secs_f64(s.max(0.0))),
            None => {
                return Err(bad(format!(
                    "cacheDuration {:?} is not a duration such as \"12h\"",
                    d.chars().take(40).collect::<String>()
                )));
            }
        },
    };
    let mut auth = DockerConfig::new();
    for (pattern, a) in wire.auth {
        auth.insert(
            pattern,
            DockerConfigEntry {
                username: a.username,
                password: Secret::new(a.password),
                email: String::new(),
            },
        );
    }
    Ok(Response {
        cache_key_type,
        cache_duration,
        auth,
    })
}

/// The most characters of a failed plugin's reason kept: an AWS SDK error with an IAM ARN
/// runs to about 300.
const REASON_LIMIT: usize = 1000;

/// Why a plugin failed, in one line: the message of the last klog error (`E`) or fatal
/// (`F`) line of its stderr, without klog's header, else its first non-empty line; cut to
/// [`REASON_LIMIT`] characters. The cloud plugins (ecr-credential-provider,
/// auth-provider-gcp, acr-credential-provider) log with klog, and their first line is an
/// info line (`I… Getting creds for private image …`) that says nothing about the failure.
fn failure_line(stderr: &str) -> Option<String> {
    let lines = stderr.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next()?;
    let line = lines
        .rev()
        .find_map(|l| klog_message(l, &['E', 'F']))
        .unwrap_or(first);
    Some(line.chars().take(REASON_LIMIT).collect())
}

/// The message of a klog line (`Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg`) whose
/// severity letter `L` is one of `severities`.
fn klog_message<'a>(line: &'a str, severities: &[char]) -> Option<&'a str> {
    let mut chars = line.chars();
    let severity = chars.next()?;
    let date: String = chars.by_ref().take(4).collect();
    if !severities.contains(&severity)
        || date.len() != 4
        || !date.bytes().all(|b| b.is_ascii_digit())
        || chars.next() != Some(' ')
    {
        return None;
    }
    let (_, message) = line.split_once("] ")?;
    Some(message.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_told_by_the_klog_error_line_else_the_first_line() {
        // What ecr-credential-provider v1.35.3 writes when ECR refuses the call.
        let ecr = "I1201 12:06:15.773139    7016 main.go:167] Getting creds for private image r.io/x\n\
                   E1201 12:06:15.781020    7016 main.go:361] Error running credential provider plugin: operation error ECR: GetAuthorizationToken, api error AccessDeniedException: no\n";
        assert_eq!(
            failure_line(ecr).as_deref(),
            Some(
                "Error running credential provider plugin: operation error ECR: GetAuthorizationToken, api error AccessDeniedException: no"
            )
        );
        let fatal = "W0102 01:02:03.000004 1 a.go:1] careful\nF0102 01:02:03.000005 1 a.go:2] cannot start\n";
        assert_eq!(failure_line(fatal).as_deref(), Some("cannot start"));
        // Not klog: the first non-empty line, as before.
        assert_eq!(
            failure_line("\n  AccessDenied: no  \nmore\n").as_deref(),
            Some("AccessDenied: no")
        );
        // Lines that only look like klog at a glance.
        assert_eq!(
            failure_line("Error: E1201 x] y").as_deref(),
            Some("Error: E1201 x] y")
        );
        assert_eq!(failure_line("E12: x] y").as_deref(), Some("E12: x] y"));
        assert_eq!(failure_line(" \n"), None);
        let long = format!(
            "E1201 00:00:00.000000 1 m.go:1] {}",
            "x".repeat(2 * REASON_LIMIT)
        );
        assert_eq!(failure_line(&long).unwrap().chars().count(), REASON_LIMIT);
    }

    const V1: ExecApi = ExecApi::V1;

    #[test]
    fn decodes_an_ecr_style_answer() {
        let r = decode(
            "ecr",
            V1,
            br#"{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1","cacheKeyType":"Registry","cacheDuration":"6h0m0s","auth":{"123456789012.dkr.ecr.us-east-1.amazonaws.com":{"username":"AWS","password":"pw"}}}"#,
        )
        .unwrap();
        assert_eq!(r.cache_key_type, CacheKeyType::Registry);
        assert_eq!(r.cache_duration, Some(Duration::from_secs(6 * 3600)));
        let e = r
            .auth
            .get("123456789012.dkr.ecr.us-east-1.amazonaws.com")
            .unwrap();
        assert_eq!((e.username.as_str(), e.password.expose()), ("AWS", "pw"));
    }

    #[test]
    fn refusals_name_the_provider_and_never_the_secret() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}"#,
             "credential provider p: answered apiVersion \"credentialprovider.kubelet.k8s.io/v1beta1\", but its config says credentialprovider.kubelet.k8s.io/v1; the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","cacheKeyType":"Image"}"#,
             "credential provider p: kind \"CredentialProviderRequest\" is not CredentialProviderResponse; the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Pod"}"#,
             "credential provider p: cacheKeyType \"Pod\" is not Image, Registry or Global; the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","cacheDuration":"soon"}"#,
             "credential provider p: cacheDuration \"soon\" is not a duration such as \"12h\"; the answer was not used"),
            (b"not json s3cr3t",
             "credential provider p: the answer is not a CredentialProviderResponse (invalid JSON at line 1 column 2); the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"r.io":{"username":"u","password":7}}}"#,
             "credential provider p: the answer is not a CredentialProviderResponse (unexpected field or value at line 1 column 155); the answer was not used"),
            (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"r.io":{"username":"u","password":"s3cr3t","extra":"s3cr3t"}}}"#,
             "credential provider p: the answer is not a CredentialProviderResponse (unexpected field or value at line 1 column 170); the answer was not used"),
        ];
        for (out, want) in cases {
            let got = decode("p", V1, out).unwrap_err().to_string();
            assert_eq!(got, *want);
            assert!(!got.contains("s3cr3t"));
        }
    }

    #[test]
    fn what_a_plugin_prints_is_redacted_of_its_own_secrets() {
        let secrets = passwords_in(
            br#"{"kind":"s3cret-pw-1","auth":{"r.io":{"username":"u","password":"s3cret-pw-1"}}}"#,
        );
        assert_eq!(secrets, ["s3cret-pw-1"]);
        let e = decode(
            "p",
            V1,
            br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"s3cret-pw-1","cacheKeyType":"Image","auth":{"r.io":{"username":"u","password":"s3cret-pw-1"}}}"#,
        )
        .unwrap_err()
        .redacted(&secrets);
        assert_eq!(
            e.to_string(),
            "credential provider p: kind \"(redacted)\" is not CredentialProviderResponse; the answer was not used"
        );
        let spec = ProviderSpec {
            name: "p".into(),
            match_images: vec!["r.io".into()],
            default_cache_duration: Duration::ZERO,
            api: V1,
            args: vec![],
            env: vec![
                ("MY_PASSWORD".into(), "hunter2-pw".into()),
                ("REGION".into(), "us-east-1".into()),
            ],
            token: None,
            file: PathBuf::new(),
        };
        let base = [(
            OsString::from("AWS_SECRET_ACCESS_KEY"),
            OsString::from("wJalrXUtnFEMI"),
        )];
        assert_eq!(
            secret_env_values(&spec, Some(&base)),
            ["wJalrXUtnFEMI", "hunter2-pw"]
        );
        let failed = PluginError::Failed {
            name: "p".into(),
            status: "exit status: 1".into(),
            stderr: "auth failed with wJalrXUtnFEMI in us-east-1".into(),
        }
        .redacted(&secret_env_values(&spec, Some(&base)));
        assert_eq!(
            failed.to_string(),
            "credential provider p: failed (exit status: 1): auth failed with (redacted) in us-east-1"
        );
    }

    #[test]
    fn absent_and_zero_durations_differ() {
        let base = r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderResponse","cacheKeyType":"Global""#;
        let absent = decode("p", ExecApi::V1alpha1, format!("{base}}}").as_bytes()).unwrap();
        assert_eq!(absent.cache_duration, None);
        assert!(absent.auth.is_empty());
        let zero = decode(
            "p",
            ExecApi::V1alpha1,
            format!("{base},\"cacheDuration\":\"0s\"}}").as_bytes(),
        )
        .unwrap();
        assert_eq!(zero.cache_duration, Some(Duration::ZERO));
    }

    #[test]
    fn the_request_is_the_kubelet_shape() {
        let token = Secret::new("tok");
        let mut ann = BTreeMap::new();
        ann.insert("a.io/k".to_string(), "v".to_string());
        let body = serde_json::to_string(&WireRequest {
            api_version: V1.as_str(),
            kind: "CredentialProviderRequest",
            image: "r.io/team/app",
            service_account_token: Some(token.expose()),
            service_account_annotations: Some(&ann),
        })
        .unwrap();
        assert_eq!(
            body,
            r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"r.io/team/app","serviceAccountToken":"tok","serviceAccountAnnotations":{"a.io/k":"v"}}"#
        );
        let plain = serde_json::to_string(&WireRequest {
            api_version: ExecApi::V1alpha1.as_str(),
            kind: "CredentialProviderRequest",
            image: "r.io/x",
            service_account_token: None,
            service_account_annotations: None,
        })
        .unwrap();
        assert_eq!(
            plain,
            r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1alpha1","kind":"CredentialProviderRequest","image":"r.io/x"}"#
        );
    }
}
