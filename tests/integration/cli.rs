//! Running the real `pullcheck` binary from tests: exit code, stdout, stderr, parsed JSON.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// One finished run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout parsed as JSON (panics with the output if it isn't).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// The `images[i]` object of the JSON document.
    pub fn image(&self, i: usize) -> Value {
        self.json()["images"][i].clone()
    }

    /// Assert the exit code, printing both streams on mismatch.
    #[track_caller]
    pub fn assert_code(&self, want: i32) -> &Self {
        assert_eq!(
            self.code, want,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Path of the binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pullcheck")
}

/// Run `pullcheck` with `args`, an empty Docker config (so the developer's own
/// ~/.docker/config.json never leaks into a test), and extra environment.
pub fn pullcheck(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env_remove("DOCKER_CONFIG")
        .env_remove("SSL_CERT_FILE")
        .env_remove("RUST_LOG")
        .env_remove("PULLCHECK_PULL_SECRETS")
        .env_remove("PULLCHECK_TERMINATION_LOG")
        .env("HOME", "/nonexistent-pullcheck-home");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run pullcheck");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `pullcheck check --output json --quiet <args…>` with the test CA trusted.
pub fn check(args: &[&str]) -> Run {
    let ca = super::support::fixture()
        .ca_file
        .to_string_lossy()
        .into_owned();
    let mut all = vec!["check", "--output", "json", "--ca-file", ca.as_str()];
    all.extend_from_slice(args);
    pullcheck(&all, &[])
}

/// Write a `.dockerconfigjson` pull secret into `dir/<name>` with one `auths` entry per
/// `(key, user, password)` (through `support::secret`: under `PULLCHECK_TEST_SENTINEL` the
/// harness's own passwords carry the sentinel); returns its path as a String.
pub fn pull_secret(dir: &Path, name: &str, entries: &[(&str, &str, &str)]) -> String {
    use base64::Engine;
    let mut auths = serde_json::Map::new();
    for (key, user, pass) in entries {
        let pass = super::support::secret(pass);
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        auths.insert(key.to_string(), serde_json::json!({ "auth": auth }));
    }
    let path = dir.join(name);
    std::fs::write(&path, serde_json::json!({ "auths": auths }).to_string()).unwrap();
    path.to_string_lossy().into_owned()
}
