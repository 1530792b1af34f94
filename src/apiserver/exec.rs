//! A kubeconfig user's exec credential plugin (`aws eks get-token`, `gke-gcloud-auth-plugin`,
//! `kubelogin`): [`ExecPlugin`], run the way client-go runs it
//! (`k8s.io/client-go/plugin/pkg/client/auth/exec/exec.go`, `Authenticator`):
//!
//! - The process environment, then the entry's `env` (a name set there wins), then
//!   `KUBERNETES_EXEC_INFO`: an `ExecCredential` of the configured `apiVersion` whose
//!   `spec.interactive` says whether the plugin may talk to the user, and with
//!   `provideClusterInfo: true`, `spec.cluster` (the server, the CA as base64 data, and the
//!   cluster's `client.authentication.k8s.io/exec` extension as `config`).
//! - `interactiveMode`: `Never` gives it no stdin; `IfAvailable` gives it ours when ours is
//!   a terminal; `Always` refuses to run without a terminal.
//! - Its stdout is an `ExecCredential` of the same `apiVersion`; `status.token` is used
//!   until `status.expirationTimestamp` (RFC 3339; none: until the server refuses it), and a
//!   401 makes the next request run the plugin again.
//!
//! pullcheck adds bounds: the run is killed after [`PLUGIN_TIMEOUT`] ([`INTERACTIVE_TIMEOUT`]
//! when a person may be typing), stdout is capped at [`STDOUT_LIMIT`], and only one run
//! happens at a time (concurrent requests wait for it and share its token). Stderr goes to
//! ours when the plugin is interactive; otherwise its last line is cut into the error. The
//! token is never logged or put in a message.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use tokio::process::Command;

use crate::credentials::Secret;

/// How long a non-interactive plugin run may take (client-go has no bound).
pub(crate) const PLUGIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an interactive run may take: a person logging in through a browser or typing
/// a one-time code needs minutes, not seconds.
pub(crate) const INTERACTIVE_TIMEOUT: Duration = Duration::from_secs(300);
/// The most bytes of a plugin's stdout read (an ExecCredential with a client certificate
/// is a few KiB).
pub(crate) const STDOUT_LIMIT: u64 = 1024 * 1024;
/// The most bytes of a non-interactive plugin's stderr read for its error.
const STDERR_LIMIT: u64 = 64 * 1024;
/// The most characters of the plugin's stderr kept in an error.
const REASON_CHARS: usize = 500;

/// The `apiVersion` of the ExecCredential exchange (v1alpha1 was removed in Kubernetes
/// v1.24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExecApiVersion {
    /// `client.authentication.k8s.io/v1`.
    V1,
    /// `client.authentication.k8s.io/v1beta1`.
    V1beta1,
}

impl ExecApiVersion {
    /// From a kubeconfig's `exec.apiVersion`.
    pub(crate) fn parse(s: &str) -> Option<ExecApiVersion> {
        match s {
            "client.authentication.k8s.io/v1" => Some(ExecApiVersion::V1),
            "client.authentication.k8s.io/v1beta1" => Some(ExecApiVersion::V1beta1),
            _ => None,
        }
    }

    /// The string on the wire.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ExecApiVersion::V1 => "client.authentication.k8s.io/v1",
            ExecApiVersion::V1beta1 => "client.authentication.k8s.io/v1beta1",
        }
    }
}

/// `exec.interactiveMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InteractiveMode {
    /// Never give the plugin our stdin.
    Never,
    /// Give it our stdin when that is a terminal.
    IfAvailable,
    /// The plugin needs a terminal; without one it is not run.
    Always,
}

/// Why an exec plugin gave no token. One line naming the command; never the token.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ExecError {
    /// The command can't be started.
    #[error("exec plugin {command} ({origin}): cannot run it: {problem}{}", hint.as_deref().map(|h| format!("; {h}")).unwrap_or_default())]
    Spawn {
        /// The command.
        command: String,
        /// The kubeconfig file and user.
        origin: String,
        /// The OS error.
        problem: String,
        /// The entry's `installHint`, first line.
        hint: Option<String>,
    },
    /// `interactiveMode: Always` and stdin is not a terminal.
    #[error(
        "exec plugin {command} ({origin}): its interactiveMode is Always but standard input is not a terminal; run it in a terminal once, or use a plugin setting that needs no prompt"
    )]
    NeedsTerminal {
        /// The command.
        command: String,
        /// The kubeconfig file and user.
        origin: String,
    },
    /// No answer within the bound; the process (and its process group) was killed.
    #[error("exec plugin {command} ({origin}): no answer within {seconds} s; it was stopped")]
    Timeout {
        /// The command.
        command: String,
        /// The kubeconfig file and user.
        origin: String,
        /// The bound.
        seconds: u64,
    },
    /// Non-zero exit.
    #[error("exec plugin {command} ({origin}): failed ({status}){}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    Failed {
        /// The command.
        command: String,
        /// The kubeconfig file and user.
        origin: String,
        /// The exit status.
        status: String,
        /// The last line of its stderr (non-interactive runs), cut.
        stderr: String,
    },
    /// The answer is not a usable ExecCredential.
    #[error("exec plugin {command} ({origin}): {problem}")]
    BadAnswer {
        /// The command.
        command: String,
        /// The kubeconfig file and user.
        origin: String,
        /// What is wrong (never the answer's text).
        problem: String,
    },
}

/// A usable token and when it stops being one.
#[derive(Clone)]
struct Cached {
    token: Secret,
    /// `status.expirationTimestamp`; `None`: until refused.
    expires: Option<jiff::Timestamp>,
}

/// One kubeconfig user's exec plugin, with its cached token.
pub struct ExecPlugin {
    origin: String,
    command: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    api_version: ExecApiVersion,
    interactive: InteractiveMode,
    install_hint: Option<String>,
    /// `spec.cluster`, when the entry sets `provideClusterInfo`.
    cluster: Option<serde_json::Value>,
    cache: Mutex<Option<Cached>>,
    /// Held through a run: one run at a time.
    run_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for ExecPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecPlugin")
            .field("origin", &self.origin)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    status: Option<AnswerStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnswerStatus {
    #[serde(default)]
    token: String,
    #[serde(default)]
    expiration_timestamp: Option<String>,
    #[serde(default)]
    client_certificate_data: String,
    #[serde(default)]
    client_key_data: String,
}

impl ExecPlugin {
    /// A plugin as a kubeconfig user entry describes it (`origin`: `kubeconfig FILE, user
    /// NAME`, for messages; `command` already resolved against the file when it is a path).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        origin: String,
        command: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        api_version: ExecApiVersion,
        interactive: InteractiveMode,
        install_hint: Option<String>,
        cluster: Option<serde_json::Value>,
    ) -> ExecPlugin {
        ExecPlugin {
            origin,
            command,
            args,
            env,
            api_version,
            interactive,
            install_hint,
            cluster,
            cache: Mutex::new(None),
            run_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The command as messages name it.
    pub(crate) fn command(&self) -> String {
        self.command.display().to_string()
    }

    /// The kubeconfig file and user it comes from (`kubeconfig FILE, user NAME`).
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// `KUBERNETES_EXEC_INFO`: what the plugin is told about this run.
    pub(crate) fn exec_info(&self, interactive: bool) -> String {
        let mut spec = serde_json::json!({ "interactive": interactive });
        if let Some(c) = &self.cluster {
            spec["cluster"] = c.clone();
        }
        serde_json::json!({
            "apiVersion": self.api_version.as_str(),
            "kind": "ExecCredential",
            "spec": spec,
        })
        .to_string()
    }

    fn cached(&self) -> Option<Secret> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .as_ref()
            .filter(|c| c.expires.is_none_or(|t| jiff::Timestamp::now() < t))
            .map(|c| c.token.clone())
    }

    /// The token: the cached one while it has not expired, else a fresh run's.
    pub(crate) async fn token(&self) -> Result<Secret, ExecError> {
        if let Some(t) = self.cached() {
            return Ok(t);
        }
        let _one_at_a_time = self.run_lock.lock().await;
        // Another request may have run it while this one waited.
        if let Some(t) = self.cached() {
            return Ok(t);
        }
        let fresh = self.run().await?;
        let token = fresh.token.clone();
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some(fresh);
        Ok(token)
    }

    /// The server refused the token: the next request runs the plugin again.
    pub(crate) fn forget(&self) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    async fn run(&self) -> Result<Cached, ExecError> {
        let command = self.command();
        // SAFETY: isatty only inspects the descriptor.
        let tty = unsafe { libc::isatty(0) } == 1;
        let interactive = match self.interactive {
            InteractiveMode::Never => false,
            InteractiveMode::IfAvailable => tty,
            InteractiveMode::Always if tty => true,
            InteractiveMode::Always => {
                return Err(ExecError::NeedsTerminal {
                    command,
                    origin: self.origin.clone(),
                });
            }
        };
        use crate::credentials::child::{self, Group, RunError};
        let mut cmd = Command::new(&self.command);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("KUBERNETES_EXEC_INFO", self.exec_info(interactive));
        // Interactive: the plugin may prompt on our terminal, so it keeps our process group
        // (a background group can't read it); otherwise a group of its own, killed whole.
        let group = if interactive {
            cmd.stdin(Stdio::inherit()).stderr(Stdio::inherit());
            Group::Inherit
        } else {
            cmd.stdin(Stdio::null()).stderr(Stdio::piped());
            Group::Own
        };
        let spawned = child::spawn(&mut cmd, group).await.map_err(|e| {
            let missing = e.kind() == std::io::ErrorKind::NotFound;
            ExecError::Spawn {
                command: command.clone(),
                origin: self.origin.clone(),
                problem: if missing && self.command.components().count() == 1 {
                    format!("{e}: not found on PATH")
                } else {
                    e.to_string()
                },
                hint: self
                    .install_hint
                    .as_deref()
                    .and_then(|h| h.lines().map(str::trim).find(|l| !l.is_empty()))
                    .map(str::to_string),
            }
        })?;
        let limit = if interactive {
            INTERACTIVE_TIMEOUT
        } else {
            PLUGIN_TIMEOUT
        };
        let failed = |status: String, stderr: String| ExecError::Failed {
            command: command.clone(),
            origin: self.origin.clone(),
            status,
            stderr,
        };
        let ran = match child::finish(spawned, None, STDOUT_LIMIT, STDERR_LIMIT, limit).await {
            Ok(r) => r,
            Err(RunError::Timeout) => {
                return Err(ExecError::Timeout {
                    command,
                    origin: self.origin.clone(),
                    seconds: limit.as_secs(),
                });
            }
            Err(RunError::Io(e)) => return Err(failed(e.to_string(), String::new())),
        };
        let Some(out) = ran.stdout else {
            return Err(ExecError::BadAnswer {
                command,
                origin: self.origin.clone(),
                problem: format!("printed more than {STDOUT_LIMIT} bytes; the answer was not used"),
            });
        };
        if !ran.status.success() {
            let err = String::from_utf8_lossy(&ran.stderr).into_owned();
            return Err(failed(ran.status.to_string(), last_line(&err)));
        }
        let cached = decode(&command, &self.origin, self.api_version, &out)?;
        tracing::debug!(
            command = %command,
            expires = %cached.expires.map(|t| t.to_string()).unwrap_or_else(|| "never".into()),
            "exec plugin gave a token"
        );
        Ok(cached)
    }
}

/// The last non-empty line of a plugin's stderr, cut to [`REASON_CHARS`] characters.
fn last_line(stderr: &str) -> String {
    stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default()
        .chars()
        .take(REASON_CHARS)
        .collect()
}

/// The token and expiry of a plugin's stdout. Errors never carry the token.
fn decode(
    command: &str,
    origin: &str,
    want: ExecApiVersion,
    out: &[u8],
) -> Result<Cached, ExecError> {
    let bad = |problem: String| ExecError::BadAnswer {
        command: command.to_string(),
        origin: origin.to_string(),
        problem,
    };
    let a: Answer = serde_json::from_slice(out).map_err(|e| {
        bad(format!(
            "the answer is not an ExecCredential (JSON error at line {} column {})",
            e.line(),
            e.column()
        ))
    })?;
    let token = a
        .status
        .as_ref()
        .map(|s| s.token.clone())
        .unwrap_or_default();
    let cut = |s: &str| -> String {
        let s: String = s.chars().take(80).collect();
        if !token.is_empty() && s.contains(&token) {
            "(redacted)".into()
        } else {
            s
        }
    };
    if a.api_version != want.as_str() {
        return Err(bad(format!(
            "answered apiVersion {:?}, but the kubeconfig says {}",
            cut(&a.api_version),
            want.as_str()
        )));
    }
    if a.kind != "ExecCredential" {
        return Err(bad(format!(
            "answered kind {:?}, not ExecCredential",
            cut(&a.kind)
        )));
    }
    let Some(status) = a.status else {
        return Err(bad("the ExecCredential has no status".into()));
    };
    if !status.client_certificate_data.is_empty() || !status.client_key_data.is_empty() {
        return Err(bad(
            "answered a client certificate (status.clientCertificateData), which is not supported; configure the plugin to print a token".into(),
        ));
    }
    if status.token.trim().is_empty() {
        return Err(bad("the ExecCredential has no status.token".into()));
    }
    let expires = match status.expiration_timestamp.as_deref() {
        None | Some("") => None,
        Some(t) => Some(parse_expiry(t).ok_or_else(|| {
            bad(format!(
                "status.expirationTimestamp {:?} is not an RFC 3339 time such as 2026-01-02T15:04:05Z",
                cut(t)
            ))
        })?),
    };
    Ok(Cached {
        token: Secret::new(status.token.trim()),
        expires,
    })
}

/// An RFC 3339 instant (`2026-01-02T15:04:05Z`, an offset, fractional seconds), as Go's
/// `metav1.Time` writes it.
pub(crate) fn parse_expiry(t: &str) -> Option<jiff::Timestamp> {
    t.trim().parse::<jiff::Timestamp>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(cluster: Option<serde_json::Value>, api: ExecApiVersion) -> ExecPlugin {
        ExecPlugin::new(
            "kubeconfig /k, user u".into(),
            PathBuf::from("/bin/true"),
            vec![],
            vec![],
            api,
            InteractiveMode::Never,
            None,
            cluster,
        )
    }

    #[test]
    fn exec_info_carries_the_api_version_interactivity_and_cluster() {
        let p = plugin(None, ExecApiVersion::V1);
        assert_eq!(
            p.exec_info(false),
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}"#
        );
        let p = plugin(
            Some(
                serde_json::json!({"server": "https://k:6443", "certificate-authority-data": "Q0E=", "config": {"region": "eu"}}),
            ),
            ExecApiVersion::V1beta1,
        );
        assert_eq!(
            p.exec_info(true),
            r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":true,"cluster":{"server":"https://k:6443","certificate-authority-data":"Q0E=","config":{"region":"eu"}}}}"#
        );
    }

    #[test]
    fn expiry_is_rfc3339_with_z_offsets_and_fractions() {
        assert_eq!(
            parse_expiry("2026-01-02T15:04:05Z").unwrap().as_second(),
            1_767_366_245
        );
        assert_eq!(
            parse_expiry("2026-01-02T16:04:05+01:00")
                .unwrap()
                .as_second(),
            1_767_366_245
        );
        assert_eq!(
            parse_expiry("2026-01-02T15:04:05.5Z")
                .unwrap()
                .as_millisecond(),
            1_767_366_245_500
        );
        assert_eq!(parse_expiry("tomorrow"), None);
        assert_eq!(parse_expiry("2026-01-02"), None);
    }

    const V1: &str = "client.authentication.k8s.io/v1";

    #[test]
    fn an_answer_gives_token_and_expiry_in_v1_and_v1beta1() {
        let c = decode(
            "p",
            "kubeconfig k, user u",
            ExecApiVersion::V1,
            format!(r#"{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"token":"tok-1","expirationTimestamp":"2026-01-02T15:04:05Z"}}}}"#).as_bytes(),
        )
        .map_err(|e| e.to_string())
        .unwrap();
        assert_eq!(c.token.expose(), "tok-1");
        assert_eq!(c.expires.unwrap().as_second(), 1_767_366_245);
        let c = decode(
            "p",
            "kubeconfig k, user u",
            ExecApiVersion::V1beta1,
            br#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"tok-2"}}"#,
        )
        .map_err(|e| e.to_string())
        .unwrap();
        assert_eq!((c.token.expose(), c.expires), ("tok-2", None));
    }

    #[test]
    fn bad_answers_name_the_problem_never_the_token() {
        let cases: &[(String, &str)] = &[
            (
                r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"s3cr3t-tok"}}"#.into(),
                "exec plugin p (kubeconfig k, user u): answered apiVersion \"client.authentication.k8s.io/v1beta1\", but the kubeconfig says client.authentication.k8s.io/v1",
            ),
            (
                format!(r#"{{"apiVersion":"{V1}","kind":"s3cr3t-tok","status":{{"token":"s3cr3t-tok"}}}}"#),
                "exec plugin p (kubeconfig k, user u): answered kind \"(redacted)\", not ExecCredential",
            ),
            (
                format!(r#"{{"apiVersion":"{V1}","kind":"ExecCredential"}}"#),
                "exec plugin p (kubeconfig k, user u): the ExecCredential has no status",
            ),
            (
                format!(r#"{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"token":" "}}}}"#),
                "exec plugin p (kubeconfig k, user u): the ExecCredential has no status.token",
            ),
            (
                format!(r#"{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"clientCertificateData":"c","clientKeyData":"k"}}}}"#),
                "exec plugin p (kubeconfig k, user u): answered a client certificate (status.clientCertificateData), which is not supported; configure the plugin to print a token",
            ),
            (
                format!(r#"{{"apiVersion":"{V1}","kind":"ExecCredential","status":{{"token":"s3cr3t-tok","expirationTimestamp":"soon"}}}}"#),
                "exec plugin p (kubeconfig k, user u): status.expirationTimestamp \"soon\" is not an RFC 3339 time such as 2026-01-02T15:04:05Z",
            ),
            (
                "s3cr3t-tok".into(),
                "exec plugin p (kubeconfig k, user u): the answer is not an ExecCredential (JSON error at line 1 column 1)",
            ),
        ];
        for (out, want) in cases {
            let got = decode(
                "p",
                "kubeconfig k, user u",
                ExecApiVersion::V1,
                out.as_bytes(),
            )
            .map(|_| ())
            .unwrap_err()
            .to_string();
            assert_eq!(got, *want);
        }
    }

    #[test]
    fn an_expired_token_is_not_served_from_the_cache_and_forget_drops_it() {
        let p = plugin(None, ExecApiVersion::V1);
        let past = parse_expiry("2000-01-01T00:00:00Z");
        *p.cache.lock().unwrap() = Some(Cached {
            token: Secret::new("old"),
            expires: past,
        });
        assert!(p.cached().is_none());
        *p.cache.lock().unwrap() = Some(Cached {
            token: Secret::new("live"),
            expires: parse_expiry("2999-01-01T00:00:00Z"),
        });
        assert_eq!(p.cached().unwrap().expose(), "live");
        p.forget();
        assert!(p.cached().is_none());
    }

    #[test]
    fn last_line_of_stderr_is_kept_and_cut() {
        assert_eq!(last_line("a\nerror: no creds\n\n"), "error: no creds");
        assert_eq!(last_line(&"x".repeat(900)).len(), REASON_CHARS);
        assert_eq!(last_line(""), "");
    }
}
