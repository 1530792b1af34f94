//! [`PluginError`]: why a credential-provider plugin gave nothing, in one line naming the
//! provider, and the redaction that keeps every secret the plugin saw or printed out of it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::config::ProviderSpec;

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
    /// More output than `limit` bytes (the run's stdout cap, `STDOUT_LIMIT` in exec.rs).
    #[error("credential provider {name}: printed more than {limit} bytes; the answer was not used")]
    TooMuchOutput { name: String, limit: u64 },
    /// Non-zero exit.
    #[error("credential provider {name}: failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    Failed {
        name: String,
        status: String,
        /// The line of its stderr that says why (`exec.rs` `failure_line`).
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
    pub(super) fn redacted(self, secrets: &[String]) -> PluginError {
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
pub(super) fn passwords_in(out: &[u8]) -> Vec<String> {
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
pub(super) fn secret_env_values(
    spec: &ProviderSpec,
    base: Option<&[(OsString, OsString)]>,
) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::provider::config::ExecApi;
    use crate::credentials::provider::wire::decode;

    const V1: ExecApi = ExecApi::V1;

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
}
