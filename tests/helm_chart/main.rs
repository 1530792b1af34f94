//! Static checks of the Helm chart `charts/pullcheck`: `helm lint --strict`, and
//! `helm template` with the default values and with each option combination, asserting
//! the kinds, the counts and the fields the webhook's safety depends on (failurePolicy,
//! namespace exclusions, matchConditions, TLS wiring, RBAC scope, restricted
//! securityContext, ...).
//!
//! Every test needs a `helm` binary, so each is `#[ignore]`d for a plain `cargo test`;
//! `scripts/helm-check.sh` builds helm once (`scripts/go-tools.sh`, cached), exports
//! `HELM` and runs this target with `--ignored`. Without `HELM` a test fails with a line
//! naming the script, never skips.
//!
//! A test is a list of named checks (the names read as the chart's contract). Each test
//! runs all of its checks and then fails with every failed check listed, so one broken
//! value does not hide the next one.

mod admission_check;
mod audit;
mod checks;
mod credential_providers;
mod options;
mod restart_rules_probe;
mod tls_modes;
mod watch;
mod webhook_defaults;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The release namespace every render uses.
const NS: &str = "pullcheck-system";
/// The chart, relative to the package root (tests run with the package root as cwd).
const CHART: &str = "charts/pullcheck";
/// The chart has no default image (`image.repository` is required, see
/// `webhook_defaults::image_is_required`); every other render passes this one first, and a
/// later `--set` may override it.
const REPO: &str = "registry.example.com/mirror/pullcheck";

/// The `helm` binary: `$HELM` (exported by scripts/helm-check.sh).
fn helm_bin() -> PathBuf {
    match std::env::var_os("HELM") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!("HELM is not set: run scripts/helm-check.sh (it builds helm and sets HELM)"),
    }
}

/// What one helm run gave.
struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Run `helm ARGS` to completion (helm renders locally; it has no network call to bound).
fn helm(args: &[&str]) -> Run {
    let out = Command::new(helm_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", helm_bin().display()));
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// How to render.
#[derive(Clone, Copy)]
struct Opts {
    /// Keep the restart-rules probe's Role, RoleBinding and policy (their own test checks
    /// them; every other test counts only its own RBAC).
    probe: bool,
    /// Pass `--set image.repository=REPO` first.
    image: bool,
}

const PLAIN: Opts = Opts {
    probe: false,
    image: true,
};
const WITH_PROBE: Opts = Opts {
    probe: true,
    image: true,
};

/// `helm template pc CHART --namespace NS [--set image.repository=REPO] ARGS`.
fn template(args: &[&str], opts: Opts) -> Run {
    let image = format!("image.repository={REPO}");
    let mut all = vec!["template", "pc", CHART, "--namespace", NS];
    if opts.image {
        all.extend(["--set", &image]);
    }
    all.extend(args);
    helm(&all)
}

/// The documents of a successful render; panics with helm's stderr when it fails.
fn render_with(args: &[&str], opts: Opts) -> Vec<Value> {
    let r = template(args, opts);
    assert!(r.ok, "helm template {args:?} failed:\n{}", r.stderr);
    let docs = pullcheck::k8s::yaml::parse_documents(&r.stdout)
        .unwrap_or_else(|e| panic!("helm template {args:?} printed invalid YAML: {e}"));
    docs.into_iter()
        .map(|d| d.value)
        .filter(|d| {
            opts.probe
                || !d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-restart-rules-probe"))
        })
        .collect()
}

/// [`render_with`] without the probe's objects.
fn render(args: &[&str]) -> Vec<Value> {
    render_with(args, PLAIN)
}

/// True when `helm template ARGS` fails and its stderr names `error`.
fn fails_with(args: &[&str], error: &str) -> bool {
    let r = template(args, PLAIN);
    if r.ok || !r.stderr.contains(error) {
        eprintln!(
            "helm template {args:?}: exit ok={}, stderr (wanted {error:?}):\n{}",
            r.ok, r.stderr
        );
        return false;
    }
    true
}

/// A values file holding `values` (JSON is YAML), kept while the returned guard lives.
fn values_file(values: &Value) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("temp values file");
    f.write_all(values.to_string().as_bytes())
        .expect("write values file");
    f
}

/// Render with `-f VALUES` followed by `args`.
fn render_values(values: &Value, args: &[&str]) -> Vec<Value> {
    let f = values_file(values);
    let path = f.path().to_str().expect("utf-8 temp path").to_string();
    let mut all = vec!["-f", path.as_str()];
    all.extend(args);
    render(&all)
}

/// True when rendering with `-f VALUES` fails naming `error`.
fn values_fail_with(values: &Value, error: &str) -> bool {
    let f = values_file(values);
    let path = f.path().to_str().expect("utf-8 temp path").to_string();
    fails_with(&["-f", path.as_str()], error)
}

/// Kind → number of documents of that kind.
fn kinds(docs: &[Value]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for d in docs {
        *out.entry(d["kind"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    out
}

/// The expected kind counts, written as a table.
fn counts(table: &[(&str, usize)]) -> BTreeMap<String, usize> {
    table.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// The one document of `kind`; panics when there are none or several.
fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "{} documents of kind {kind}", found.len());
    found[0]
}

/// The documents named `name`.
fn named<'a>(docs: &'a [Value], name: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| d["metadata"]["name"] == name)
        .collect()
}

/// The first container's args of the one Deployment.
fn deployment_args(docs: &[Value]) -> Vec<String> {
    strings(&one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"])
}

/// A JSON array of strings as a Vec (non-strings and a non-array give nothing).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `openssl ARGS` with `stdin`: (success, stdout + stderr).
fn openssl(args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl is required (scripts/deps.sh test installs it)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write to openssl");
    let out = child.wait_with_output().expect("openssl output");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Base64 decode of a Secret's data value into text.
fn b64_text(v: &Value) -> String {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or(""))
        .expect("base64 Secret data");
    String::from_utf8(raw).expect("utf-8 Secret data")
}
