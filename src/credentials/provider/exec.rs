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

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::config::ProviderSpec;
use super::error::{PluginError, passwords_in, secret_env_values};
use super::wire::{Request, Response, WireRequest, decode};

/// The kubelet's fixed deadline for one plugin run.
pub(crate) const KUBELET_TIMEOUT: Duration = Duration::from_secs(60);

/// The deadline of one plugin run inside a run whose deadline is `budget`: half of it, at
/// most the kubelet's minute. A hanging plugin so leaves the other half for the registry,
/// and the verdict can name the plugin instead of a deadline (a documented deviation: the
/// kubelet always waits its minute).
pub(crate) fn plugin_timeout(budget: Duration) -> Duration {
    (budget / 2).min(KUBELET_TIMEOUT)
}

/// The most bytes of a plugin's stdout pullcheck reads (the kubelet reads all of it).
pub(crate) const STDOUT_LIMIT: u64 = 4 * 1024 * 1024;

/// The most bytes of a plugin's stderr kept for an error message.
pub(crate) const STDERR_LIMIT: u64 = 64 * 1024;

/// Runs plugins from one bin dir.
#[derive(Clone, Debug)]
pub(crate) struct PluginRunner {
    /// `--image-credential-provider-bin-dir`.
    pub bin_dir: PathBuf,
    /// Replaces the inherited environment when set (tests; the kubelet always inherits).
    pub base_env: Option<Vec<(OsString, OsString)>>,
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
            return Err(PluginError::TooMuchOutput {
                name: name.clone(),
                limit: STDOUT_LIMIT,
            });
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
    fn a_plugin_run_gets_half_the_budget_and_never_more_than_the_kubelets_minute() {
        assert_eq!(
            plugin_timeout(Duration::from_secs(8)),
            Duration::from_secs(4)
        );
        assert_eq!(plugin_timeout(Duration::from_secs(300)), KUBELET_TIMEOUT);
    }

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
}
