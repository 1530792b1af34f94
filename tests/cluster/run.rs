//! What the runners share: the Job manifest, creating and following a Job, its
//! condition, the doc's row and detail section, and host processes beside the node.

#[path = "../integration/support/ports.rs"]
mod ports;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::doc::Results;
use crate::node::{Node, NodeError, run_ok};
use crate::sample::{Finished, Target, pullcheck_terminations, sample};
use crate::scenarios::{Ctx, Proc};
use crate::series::Series;

/// `kubectl create` of a Job: batch/v1, hostNetwork, no token, requests = limits (the
/// shell harness's job_yaml, the same text).
#[allow(clippy::too_many_arguments)]
pub fn job_yaml(
    ns: &str,
    name: &str,
    image: &str,
    restart: &str,
    backoff: u32,
    cpu: &str,
    mem: &str,
    extra: &str,
) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {ns}
spec:
  backoffLimit: {backoff}
{extra}
  template:
    spec:
      restartPolicy: {restart}
      hostNetwork: true
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: {image}
          resources:
            requests: {{cpu: \"{cpu}\", memory: {mem}}}
            limits: {{cpu: \"{cpu}\", memory: {mem}}}
"
    )
}

/// What following a created object gave.
pub struct Followed {
    /// The samples.
    pub series: Series,
    /// The pullcheck init container's last seen terminations (kept when the pods go).
    pub terms: Vec<(i64, String)>,
    /// When `kubectl create` was started.
    pub t0: SystemTime,
    /// The pods were gone at the end: `terms` are from the last sample that had them.
    pub pods_gone: bool,
}

impl Followed {
    /// The termination messages as the doc prints them, marked when the pod is gone.
    pub fn msg(&self) -> String {
        let t = crate::sample::termination_text(&self.terms);
        if self.pods_gone && !t.is_empty() {
            format!("{t} (pod since deleted)")
        } else {
            t
        }
    }
}

/// Sample `target` every `every` s until it finished and its namespace holds no requests
/// (two samples more), or `max_s` passed.
pub fn follow(
    node: &Node,
    target: &Target,
    resource: &str,
    t0: Instant,
    max_s: f64,
    every: f64,
) -> Series {
    follow_hooked(node, target, resource, t0, max_s, every, &mut |_| {})
}

/// [`follow`], calling `on_sample` with every sample as it is taken (scenario 4 restarts
/// the registry once two pods failed).
pub fn follow_hooked(
    node: &Node,
    target: &Target,
    resource: &str,
    t0: Instant,
    max_s: f64,
    every: f64,
    on_sample: &mut dyn FnMut(&crate::sample::Sample),
) -> Series {
    let node_name = node.var("PULLCHECK_NODE").to_string();
    let mut series = Series::default();
    let mut extra = 0;
    let what = format!("pods,{resource}");
    loop {
        let t = t0.elapsed().as_secs_f64();
        if let Ok(list) = node.kubectl_json(&["get", &what, "-A"]) {
            let s = sample(&list, target, &node_name, t);
            on_sample(&s);
            let done = s.finished != Finished::Running && s.ns_cpu_m == 0.0;
            series.0.push(s);
            if done {
                extra += 1;
                if extra >= 2 {
                    break;
                }
            }
        }
        if t >= max_s {
            break;
        }
        std::thread::sleep(Duration::from_secs_f64(every));
    }
    series
}

/// How a run creates and samples its object (beyond the Job defaults of [`run_job`]).
pub struct Plan<'a> {
    /// The object followed.
    pub target: Target,
    /// The resource listed beside the pods (`jobs`, `pytorchjobs`).
    pub resource: &'a str,
    /// Seconds between samples.
    pub every: f64,
    /// Extra `kubectl create` flags (`--validate=false`).
    pub create_args: &'a [&'a str],
}

impl Plan<'_> {
    /// A batch/v1 Job sampled every 0.5 s.
    pub fn job(ns: &str, name: &str) -> Plan<'static> {
        Plan {
            target: Target::job(ns, name),
            resource: "jobs",
            every: 0.5,
            create_args: &[],
        }
    }
}

/// Create `manifest` and follow `plan`'s object for at most `max_s`, calling `on_sample`
/// with each sample.
pub fn run_plan(
    node: &Node,
    plan: &Plan,
    manifest: &str,
    max_s: f64,
    on_sample: &mut dyn FnMut(&crate::sample::Sample),
) -> Result<Followed, NodeError> {
    let target = &plan.target;
    let t0 = SystemTime::now();
    let start = Instant::now();
    let mut args = vec!["create"];
    args.extend(plan.create_args);
    args.extend(["-f", "-"]);
    node.kubectl_ok(&args, Some(manifest))?;
    let series = follow_hooked(
        node,
        target,
        plan.resource,
        start,
        max_s,
        plan.every,
        on_sample,
    );
    let list = node.kubectl_json(&["get", "pods", "-n", &target.ns])?;
    let mut terms = pullcheck_terminations(&list, target);
    let pods_gone = terms.is_empty() && !series.last_terms().is_empty();
    if pods_gone {
        terms = series.last_terms();
    }
    Ok(Followed {
        series,
        terms,
        t0,
        pods_gone,
    })
}

/// Create `manifest` and follow the Job `ns/name` for at most `max_s`.
pub fn run_job(
    node: &Node,
    ns: &str,
    name: &str,
    manifest: &str,
    max_s: f64,
) -> Result<Followed, NodeError> {
    run_plan(node, &Plan::job(ns, name), manifest, max_s, &mut |_| {})
}

/// The True Failed/Complete conditions: (`Type reason: message`, reason of the first).
pub fn job_cond(node: &Node, ns: &str, name: &str) -> Result<(String, String), NodeError> {
    cond_of(node, "job", "Complete", ns, name)
}

/// The True `Failed`/`success` conditions of the `kind` object `ns/name` (a PyTorchJob
/// succeeds with `Succeeded`): (`Type reason: message`, reason of the first).
pub fn cond_of(
    node: &Node,
    kind: &str,
    success: &str,
    ns: &str,
    name: &str,
) -> Result<(String, String), NodeError> {
    let j = node.kubectl_json(&["-n", ns, "get", kind, name])?;
    let conds: Vec<&Value> = j["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "True" && (c["type"] == "Failed" || c["type"] == success))
        .collect();
    let text = conds
        .iter()
        .map(|c| {
            format!(
                "{} {}: {}",
                c["type"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let reason = conds
        .first()
        .and_then(|c| c["reason"].as_str())
        .unwrap_or("")
        .to_string();
    Ok((text, reason))
}

/// A table row.
#[allow(clippy::too_many_arguments)]
pub fn row(out: &mut Results, id: &str, cells: [&str; 7]) {
    out.rows
        .insert(id.to_string(), format!("| {id} | {} |", cells.join(" | ")));
}

/// A detail section with the manifest and the samples at each change, and the chart rows.
pub fn save_detail(
    ctx: &mut Ctx,
    id: &str,
    title: &str,
    f: &Followed,
    manifest: &str,
    notes: &str,
) {
    let state = ctx.node.var("PULLCHECK_CLUSTER_DIR").to_string();
    let manifest = manifest.replace(&state, "$STATE");
    let mut d = format!("### {title}\n\n");
    if !notes.is_empty() {
        d.push_str(&format!("{notes}\n\n"));
    }
    d.push_str("Manifest as applied (`kubectl create -f`):\n\n```yaml\n");
    d.push_str(&manifest);
    if !manifest.ends_with('\n') {
        d.push('\n');
    }
    d.push_str("```\n\nSamples at each change (t in s from creation; job; pods; requests held by the namespace / the node):\n\n```\n");
    d.push_str(&f.series.detail_lines());
    d.push_str("```\n\n");
    ctx.out.details.insert(id.to_string(), d);
    ctx.out
        .timelines
        .insert(id.to_string(), f.series.csv_rows(id));
}

/// Fail the scenario unless `cond`.
pub fn expect(id: &str, cond: bool, what: impl FnOnce() -> String) -> Result<(), NodeError> {
    if cond {
        Ok(())
    } else {
        Err(NodeError::Outcome {
            id: id.to_string(),
            what: what(),
        })
    }
}

/// The exit codes of the pullcheck init container's terminations.
pub fn exit_codes(terms: &[(i64, String)]) -> Vec<i64> {
    let mut c: Vec<i64> = terms.iter().map(|(c, _)| *c).collect();
    c.dedup();
    c
}

/// A free loopback port below the ephemeral range (tests/integration/support/ports.rs).
pub fn free_port() -> Result<u16, NodeError> {
    ports::free_port().map_err(|e| NodeError::Setup(format!("no free port: {e}")))
}

/// Poll `url` with curl until it answers 2xx (at most `tries` × 0.2 s).
pub fn wait_ready(url: &str, ca: Option<&Path>, tries: u32) -> bool {
    let curl = Path::new("/usr/bin/curl");
    for _ in 0..tries {
        let mut args = vec!["-fsS", "--max-time", "2"];
        let ca_s;
        if let Some(c) = ca {
            ca_s = c.display().to_string();
            args.extend(["--cacert", ca_s.as_str()]);
        }
        args.push(url);
        if crate::node::run(curl, &args, None, 5).is_ok_and(|o| o.ok()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// Start a host process with its output to `log`, killed when the returned value drops.
pub fn spawn(
    prog: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
    log: &Path,
) -> Result<Proc, NodeError> {
    let file = std::fs::File::create(log)
        .map_err(|e| NodeError::Setup(format!("{}: {e}", log.display())))?;
    let err = file
        .try_clone()
        .map_err(|e| NodeError::Setup(e.to_string()))?;
    let mut c = Command::new(prog);
    c.args(args).stdin(Stdio::null()).stdout(file).stderr(err);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.spawn().map(Proc).map_err(|source| NodeError::Spawn {
        cmd: prog.display().to_string(),
        source,
    })
}

/// A webhook configuration by url (`https://LISTEN/PATH`) for the Jobs of namespaces
/// labelled `pullcheck-scenario=LABEL`; `kind` Validating or Mutating, `ops` as YAML list
/// items (`"CREATE", "UPDATE"`).
#[allow(clippy::too_many_arguments)]
pub fn register_webhook(
    node: &Node,
    kind: &str,
    name: &str,
    path: &str,
    listen: &str,
    ca: &Path,
    label: &str,
    ops: &str,
) -> Result<(), NodeError> {
    use base64::Engine as _;
    let pem = std::fs::read(ca).map_err(|e| NodeError::Setup(format!("{}: {e}", ca.display())))?;
    let ca_b64 = base64::engine::general_purpose::STANDARD.encode(pem);
    let conf = format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: {kind}WebhookConfiguration
metadata:
  name: {name}
webhooks:
  - name: {path}.pullcheck.io
    admissionReviewVersions: [\"v1\"]
    sideEffects: None
    failurePolicy: Ignore
    timeoutSeconds: 10
    clientConfig:
      url: https://{listen}/{path}
      caBundle: {ca_b64}
    namespaceSelector:
      matchLabels: {{pullcheck-scenario: {label}}}
    rules:
      - apiGroups: [\"batch\"]
        apiVersions: [\"v1\"]
        operations: [{ops}]
        resources: [\"jobs\"]
"
    );
    node.kubectl_ok(&["apply", "-f", "-"], Some(&conf))
        .map(|_| ())
}

/// A throwaway CA and a server certificate for 127.0.0.1 in `dir` (scripts/lib.sh make_tls).
pub fn make_tls(node: &Node, dir: &Path) -> Result<(), NodeError> {
    let lib = node.root.join("scripts/lib.sh");
    let script = format!(". '{}'; make_tls '{}'", lib.display(), dir.display());
    run_ok(Path::new("/bin/bash"), &["-c", &script], None, 60).map(|_| ())
}

/// `scripts/cluster.sh ARGS` (registry-stop, registry-start).
pub fn cluster_sh(node: &Node, args: &[&str]) -> Result<(), NodeError> {
    run_ok(&node.root.join("scripts/cluster.sh"), args, None, 120).map(|_| ())
}

/// The workload registry stopped; started again when dropped (a failed scenario must not
/// leave it down for the next).
pub struct RegistryDown(Option<Node>);

impl RegistryDown {
    /// Stop the workload registry.
    pub fn stop(node: &Node) -> Result<RegistryDown, NodeError> {
        cluster_sh(node, &["registry-stop"])?;
        Ok(RegistryDown(Some(node.clone())))
    }

    /// Start it again after `secs` seconds, from a thread (the scenario samples meanwhile).
    pub fn start_after(self, secs: u64) -> std::thread::JoinHandle<Result<(), NodeError>> {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(secs));
            self.start()
        })
    }

    /// Start it now.
    pub fn start(mut self) -> Result<(), NodeError> {
        match self.0.take() {
            Some(node) => cluster_sh(&node, &["registry-start"]),
            None => Ok(()),
        }
    }
}

impl Drop for RegistryDown {
    fn drop(&mut self) {
        if let Some(node) = self.0.take() {
            let _ = cluster_sh(&node, &["registry-start"]);
        }
    }
}

/// The highest `.status.failed` of the Job (`0` when unset).
pub fn job_failed(node: &Node, ns: &str, name: &str) -> Result<u64, NodeError> {
    let j = node.kubectl_json(&["-n", ns, "get", "job", name])?;
    Ok(j["status"]["failed"].as_u64().unwrap_or(0))
}

/// A summary line (`- TEXT`).
pub fn summary(out: &mut Results, id: &str, text: String) {
    out.summaries.insert(id.to_string(), format!("- {text}"));
}

/// `inject --fail-fast --transient restart --kubernetes-version 1.35` (scenarios 10).
pub const RESTART_ARGS: &[&str] = &[
    "--fail-fast",
    "--transient",
    "restart",
    "--kubernetes-version",
    "1.35",
];

/// A window in whole seconds from the environment (`FF_BASELINE_WINDOW`, …), or `default`.
pub fn window(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The pods of `ns` labelled `selector`, counted by phase: `2 Failed, 1 Succeeded` (phases
/// in name order).
pub fn phases(node: &Node, ns: &str, selector: &str) -> Result<String, NodeError> {
    let pods = node.kubectl_json(&["-n", ns, "get", "pods", "-l", selector])?;
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for p in pods["items"].as_array().into_iter().flatten() {
        *by.entry(p["status"]["phase"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    Ok(by
        .iter()
        .map(|(phase, n)| format!("{n} {phase}"))
        .collect::<Vec<_>>()
        .join(", "))
}

/// Seconds from `t0` to now, one decimal (the shell harness's `rel`).
pub fn since(t0: Instant) -> String {
    format!("{:.1}", t0.elapsed().as_secs_f64())
}
