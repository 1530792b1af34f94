//! Runs a docker credential helper (`docker-credential-<name> get`) the way the docker
//! CLI's client does.
//!
//! Protocol (docker-credential-helpers `client/client.go`, `credentials/error.go`): the
//! server URL goes to stdin with no newline; success is exit 0 with
//! `{"ServerURL":…,"Username":…,"Secret":…}` on stdout; a non-zero exit whose trimmed
//! stdout is `credentials not found in native keychain` means "no credentials".
//!
//! pullcheck adds what the docker CLI lacks: a deadline ([`HELPER_TIMEOUT`]; the process
//! is killed when it passes), a cap on what is read from the helper
//! ([`HELPER_OUTPUT_LIMIT`]), and a refusal to run helper names containing a path
//! separator.

use std::ffi::OsString;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::docker_config::{Json, string_fields};
use super::secret::Secret;

/// How long a helper may run, end to end.
pub(crate) const HELPER_TIMEOUT: Duration = Duration::from_secs(5);

/// The most bytes read from a helper's stdout or stderr.
pub(crate) const HELPER_OUTPUT_LIMIT: u64 = 1024 * 1024;

/// The helper's "not found" answer (docker-credential-helpers `credentials/error.go`).
const NOT_FOUND_MESSAGE: &str = "credentials not found in native keychain";

/// What a helper answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HelperAnswer {
    /// Exit 0 with credentials. `username == "<token>"` means `secret` is an identity
    /// token (docker CLI `native_store.go`).
    Found { username: String, secret: Secret },
    /// The helper has nothing for this server.
    NotFound,
}

/// Why running a helper failed. Never contains the secret.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HelperError {
    #[error("{program}: refusing to run a helper whose name contains a path separator")]
    BadName { program: String },
    #[error("{program}: cannot start: {io}; install it or fix credHelpers/credsStore")]
    Spawn { program: String, io: std::io::Error },
    #[error("{program}: no answer within {} s; the helper was stopped", timeout.as_secs_f64())]
    Timeout { program: String, timeout: Duration },
    #[error("{program}: printed more than {HELPER_OUTPUT_LIMIT} bytes")]
    TooMuchOutput { program: String },
    #[error("{program}: failed ({status}){}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    Failed {
        program: String,
        status: String,
        message: String,
    },
    #[error("{program}: answer is not {{\"ServerURL\",\"Username\",\"Secret\"}} JSON ({problem})")]
    BadAnswer { program: String, problem: String },
    #[error("{program}: {io}")]
    Io { program: String, io: std::io::Error },
}

/// Runs helpers with a deadline. `search_path` replaces `PATH` for the child (tests use
/// it to find fake helpers without touching the process environment).
#[derive(Clone, Debug)]
pub(crate) struct HelperRunner {
    pub(crate) timeout: Duration,
    pub(crate) search_path: Option<OsString>,
}

impl Default for HelperRunner {
    fn default() -> Self {
        HelperRunner {
            timeout: HELPER_TIMEOUT,
            search_path: None,
        }
    }
}

/// `docker-credential-<name>`.
pub(crate) fn program_name(name: &str) -> String {
    format!("docker-credential-{name}")
}

impl HelperRunner {
    /// `docker-credential-<name> get` with `server_url` on stdin.
    pub(crate) async fn get(
        &self,
        name: &str,
        server_url: &str,
    ) -> Result<HelperAnswer, HelperError> {
        let program = program_name(name);
        if name.is_empty() || name.contains(['/', '\\']) {
            return Err(HelperError::BadName { program });
        }
        // Bounded by self.timeout inside (super::child kills the helper's process group).
        self.run(&program, server_url).await
    }

    async fn run(&self, program: &str, server_url: &str) -> Result<HelperAnswer, HelperError> {
        use super::child::{self, Group, RunError};
        let mut cmd = Command::new(program);
        cmd.arg("get").stdin(Stdio::piped()).stderr(Stdio::piped());
        if let Some(path) = &self.search_path {
            cmd.env("PATH", path);
        }
        let spawned =
            child::spawn(&mut cmd, Group::Own)
                .await
                .map_err(|io| HelperError::Spawn {
                    program: program.to_owned(),
                    io,
                })?;
        let ran = child::finish(
            spawned,
            Some(server_url.as_bytes()),
            HELPER_OUTPUT_LIMIT,
            HELPER_OUTPUT_LIMIT,
            self.timeout,
        )
        .await
        .map_err(|e| match e {
            RunError::Timeout => HelperError::Timeout {
                program: program.to_owned(),
                timeout: self.timeout,
            },
            RunError::Io(io) => HelperError::Io {
                program: program.to_owned(),
                io,
            },
        })?;
        let (Some(out), false) = (ran.stdout, ran.stderr_cut) else {
            return Err(HelperError::TooMuchOutput {
                program: program.to_owned(),
            });
        };
        let (status, err) = (ran.status, ran.stderr);
        if !status.success() {
            let stdout_text = String::from_utf8_lossy(&out);
            if stdout_text.trim() == NOT_FOUND_MESSAGE {
                return Ok(HelperAnswer::NotFound);
            }
            return Err(HelperError::Failed {
                program: program.to_owned(),
                status: status.to_string(),
                message: first_line(&String::from_utf8_lossy(&err))
                    .or_else(|| first_line(&stdout_text))
                    .unwrap_or_default(),
            });
        }
        parse_answer(&out).map_err(|problem| HelperError::BadAnswer {
            program: program.to_owned(),
            problem,
        })
    }
}

/// The first non-empty line, trimmed and cut to 160 characters, for an error message.
/// Only used for failed runs, whose output is an error text rather than credentials.
fn first_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(160).collect())
}

/// Decodes the first JSON value of a successful answer (Go's `json.Decoder.Decode`
/// ignores what follows it), with Go's case-insensitive field names.
fn parse_answer(out: &[u8]) -> Result<HelperAnswer, String> {
    let node = serde_json::Deserializer::from_slice(out)
        .into_iter::<Json>()
        .next()
        .ok_or_else(|| "empty output".to_owned())?
        .map_err(|e| format!("invalid JSON at line {} column {}", e.line(), e.column()))?;
    let [_server, username, secret] = string_fields(
        &node,
        ["ServerURL", "Username", "Secret"],
        None,
        "the answer",
    )
    .map_err(|e| e.to_string())?;
    Ok(HelperAnswer::Found {
        username: username.unwrap_or_default(),
        secret: Secret::new(secret.unwrap_or_default()),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    /// Writes an executable `docker-credential-<name>` shell script into `dir`.
    pub(crate) fn fake_helper(dir: &Path, name: &str, body: &str) {
        let path = dir.join(program_name(name));
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    pub(crate) fn runner(dir: &Path, timeout: Duration) -> HelperRunner {
        let mut path = OsString::from(dir);
        path.push(":/usr/bin:/bin");
        HelperRunner {
            timeout,
            search_path: Some(path),
        }
    }

    #[tokio::test]
    async fn helper_get_reads_url_from_stdin() {
        let dir = tempfile::tempdir().unwrap();
        // Echo the URL back as the username to prove it arrived on stdin, without newline.
        fake_helper(
            dir.path(),
            "test",
            r#"[ "$1" = get ] || exit 3
url=$(cat)
printf '{"ServerURL":"%s","Username":"%s","Secret":"s3cret"}' "$url" "user-$url""#,
        );
        let answer = runner(dir.path(), HELPER_TIMEOUT)
            .get("test", "ghcr.io")
            .await
            .unwrap();
        assert_eq!(
            answer,
            HelperAnswer::Found {
                username: "user-ghcr.io".into(),
                secret: Secret::new("s3cret"),
            }
        );
    }

    #[tokio::test]
    async fn helper_not_found_and_failure() {
        let dir = tempfile::tempdir().unwrap();
        fake_helper(
            dir.path(),
            "none",
            "echo 'credentials not found in native keychain'; exit 1",
        );
        fake_helper(dir.path(), "broken", "echo 'keychain locked' >&2; exit 2");
        fake_helper(dir.path(), "garbage", "echo 'not json'");
        let r = runner(dir.path(), HELPER_TIMEOUT);
        assert_eq!(r.get("none", "x.io").await.unwrap(), HelperAnswer::NotFound);
        let err = r.get("broken", "x.io").await.unwrap_err().to_string();
        assert!(
            err.contains("docker-credential-broken") && err.contains("keychain locked"),
            "{err}"
        );
        assert!(matches!(
            r.get("garbage", "x.io").await,
            Err(HelperError::BadAnswer { .. })
        ));
        assert!(matches!(
            r.get("missing", "x.io").await,
            Err(HelperError::Spawn { .. })
        ));
        assert!(matches!(
            r.get("../evil", "x.io").await,
            Err(HelperError::BadName { .. })
        ));
    }

    #[tokio::test]
    async fn helper_timeout_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        fake_helper(dir.path(), "slow", "exec sleep 30");
        let started = std::time::Instant::now();
        let err = runner(dir.path(), Duration::from_millis(300))
            .get("slow", "x.io")
            .await
            .unwrap_err();
        assert!(matches!(err, HelperError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn answer_parsing_follows_go() {
        let a = parse_answer(br#"{"serverurl":"x","USERNAME":"<token>","secret":"t"} trailing"#)
            .unwrap();
        assert_eq!(
            a,
            HelperAnswer::Found {
                username: "<token>".into(),
                secret: Secret::new("t"),
            }
        );
        let err = parse_answer(br#"{"Username":"u","Secret":12345}"#).unwrap_err();
        assert!(!err.contains("12345"), "{err}");
    }
}
