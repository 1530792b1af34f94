//! `kubectl pullcheck watch --once` as a kubectl user runs it: no pullcheck flag names the
//! cluster; the real `kubectl` finds the plugin on `PATH`, and pullcheck reads the user's
//! `$KUBECONFIG`, whose user gets its token from an exec credential plugin
//! (`client.authentication.k8s.io/v1`), here a scripted one (a shell script: the real
//! plugins, `aws eks get-token` and the like, need a cloud). The plugin's command, the
//! cluster's CA and nothing else are relative paths, resolved against the kubeconfig's
//! directory as client-go resolves them.
//!
//! The plugin counts its runs in a file and writes the `KUBERNETES_EXEC_INFO` it was given,
//! so the tests assert how often it ran and what it was told.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::watch::{create_pod, kubelet_status, missing_tag, not_found_text, watched_namespace};
use crate::support::{self, process};

/// The plugin: run `n` gives the token `wrong` while `n <= BAD_RUNS`, then the token of
/// `TOKEN_FILE`, valid until 2099.
const PLUGIN: &str = r#"#!/bin/sh
n=$(( $(cat "$RUNS_FILE" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$RUNS_FILE"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$INFO_FILE"
if [ "$n" -le "$BAD_RUNS" ]; then tok=wrong; else tok=$(cat "$TOKEN_FILE"); fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"2099-01-01T00:00:00Z"}}\n' "$tok"
"#;

/// A kubeconfig directory: `config`, `token-plugin.sh`, `ca.crt`, the admin token, and a
/// `bin` with `kubectl-pullcheck`.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(bad_runs: u32, namespace: Option<&str>) -> Setup {
        let dir = support::temp_dir();
        let conf = dir.path().join("conf");
        std::fs::create_dir_all(conf.join("plugins")).unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        let plugin = conf.join("plugins/token-plugin.sh");
        std::fs::write(&plugin, PLUGIN).unwrap();
        std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        std::fs::copy(
            std::env::var("PULLCHECK_CP_CA").unwrap(),
            conf.join("ca.crt"),
        )
        .unwrap();
        let token = dir.path().join("admin.token");
        std::fs::write(&token, std::env::var("PULLCHECK_CP_TOKEN").unwrap()).unwrap();
        let server = std::env::var("PULLCHECK_CP_SERVER").unwrap();
        let path = |p: PathBuf| p.display().to_string();
        let config = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {
                "server": server, "certificate-authority": "ca.crt",
                "extensions": [{"name": "client.authentication.k8s.io/exec",
                                "extension": {"audience": "pullcheck-e2e"}}]}}],
            "users": [{"name": "e2e-user", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "./plugins/token-plugin.sh",
                "interactiveMode": "Never",
                "provideClusterInfo": true,
                "env": [
                    {"name": "RUNS_FILE", "value": path(dir.path().join("runs"))},
                    {"name": "INFO_FILE", "value": path(dir.path().join("info.json"))},
                    {"name": "TOKEN_FILE", "value": path(token)},
                    {"name": "BAD_RUNS", "value": bad_runs.to_string()},
                ]}}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e-user"}}],
        });
        let mut config = config;
        if let Some(ns) = namespace {
            config["contexts"][0]["context"]["namespace"] = json!(ns);
        }
        // JSON is YAML: kubectl and pullcheck both read it.
        std::fs::write(conf.join("config"), config.to_string()).unwrap();
        drop(process::pullcheck_as(
            &dir.path().join("bin/kubectl-pullcheck"),
        ));
        Setup { dir }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("conf/config")
    }

    fn plugin(&self) -> PathBuf {
        self.dir.path().join("conf/plugins/token-plugin.sh")
    }

    fn runs(&self) -> u32 {
        std::fs::read_to_string(self.dir.path().join("runs"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    fn info(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.dir.path().join("info.json")).unwrap()).unwrap()
    }

    /// `kubectl pullcheck ARGS` with `$KUBECONFIG` set to [`Setup::kubeconfig`] and the
    /// plugin directory first on `PATH`.
    fn kubectl_pullcheck(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let path = std::env::var("PATH").unwrap_or_default();
        let out = Command::new("kubectl")
            .arg("pullcheck")
            .args(args)
            .env(
                "PATH",
                format!("{}:{path}", self.dir.path().join("bin").display()),
            )
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path())
            .env_remove("RUST_LOG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run kubectl");
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }
}

fn source_line(kubeconfig: &Path) -> String {
    format!(
        "pullcheck: using kubeconfig $KUBECONFIG ({}), context e2e",
        kubeconfig.display()
    )
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn kubectl_pullcheck_watch_once_reads_the_kubeconfig_and_its_exec_plugin() {
    let label = "pullcheck-e2e/kubeconfig";
    let ns = "e2e-kubeconfig";
    watched_namespace(ns, label);
    let other = "e2e-kubeconfig-other";
    watched_namespace(other, label);
    let (image, reason, message) = missing_tag();
    for n in [ns, other] {
        create_pod(n, "bare", &image, None, json!({}));
        kubelet_status(n, "bare", &image, &reason, &message);
    }
    let row = |n: &str| {
        json!({
            "namespace": n, "name": "bare", "container": "main", "image": image,
            "reason": "ErrImagePull", "verdict": "not_found", "action": "event",
            "why": "not_found but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done",
            "marked": false})
    };

    // The plugin's first token is refused (401): pullcheck runs it again once and goes on.
    // The context's namespace is the scope, as in kubectl.
    let s = Setup::new(1, Some(ns));
    let selector = format!("--namespace-label={label}=true");
    let (code, stdout, stderr) = s.kubectl_pullcheck(&["watch", "--once", "-o", "json", &selector]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr.trim_end(), source_line(&s.kubeconfig()), "{stderr}");
    let got: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        got,
        json!({"schema_version": 1, "exit_code": 0, "pods": [row(ns)]}),
        "{}",
        not_found_text(&image)
    );
    assert_eq!(s.runs(), 2, "one refused token, one run again");
    // -A: every namespace. A new process runs the plugin again (nothing is cached on
    // disk, as in client-go); its token is good this time.
    let (code, stdout, stderr) =
        s.kubectl_pullcheck(&["watch", "--once", "-A", "-o", "json", &selector]);
    assert_eq!(code, Some(0), "{stderr}");
    let got: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        got,
        json!({"schema_version": 1, "exit_code": 0, "pods": [row(ns), row(other)]})
    );
    assert_eq!(s.runs(), 3);
    // -n beside -A is ignored, as `kubectl get -n x -A` ignores it.
    let (code, stdout, stderr) = s.kubectl_pullcheck(&[
        "watch", "--once", "-n", other, "-A", "-o", "json", &selector,
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let got: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        got,
        json!({"schema_version": 1, "exit_code": 0, "pods": [row(ns), row(other)]})
    );
    assert_eq!(s.runs(), 4);
    // What client-go gives a plugin with provideClusterInfo: the server, the CA as base64
    // data, the cluster's exec extension; and not interactive (stdin is no terminal).
    let ca = std::fs::read(s.dir.path().join("conf/ca.crt")).unwrap();
    assert_eq!(
        s.info(),
        json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
               "spec": {"interactive": false, "cluster": {
                   "server": std::env::var("PULLCHECK_CP_SERVER").unwrap(),
                   "certificate-authority-data": base64::Engine::encode(
                       &base64::engine::general_purpose::STANDARD, &ca),
                   "config": {"audience": "pullcheck-e2e"}}}})
    );
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn a_plugin_whose_tokens_are_always_refused_is_named_and_run_twice() {
    // The context names no namespace: `default`, as kubectl (the path below says so).
    let s = Setup::new(u32::MAX, None);
    let (code, stdout, stderr) = s.kubectl_pullcheck(&["watch", "--once"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stdout, "");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(lines[0], source_line(&s.kubeconfig()));
    assert_eq!(
        lines[1],
        format!(
            "pullcheck: LIST /api/v1/namespaces/default/pods: HTTP 401: Unauthorized; the token of exec plugin {} (kubeconfig {}, user e2e-user) was refused, also after running it again; check what it prints and the user it logs in as",
            s.plugin().display(),
            s.kubeconfig().display()
        )
    );
    assert_eq!(s.runs(), 2);
}
