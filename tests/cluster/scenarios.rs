//! The scenario table: each scenario's id, the doc parts it owns, and its runner (the
//! objects it creates, what it waits for, what it measures and the outcome it must have).
//!
//! PARTIAL PORT: the runners of 2, 3, 5, 7, 9a and 9b are here; every other row of
//! scripts/fail-fast-scenarios.sh is in the table with no runner, and a run asking for one
//! fails naming the shell script (which stays until this table reproduces all of it).

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::doc::Results;
use crate::node::{Node, NodeError, run_ok};
use crate::sample::{Finished, Target, pullcheck_terminations, sample, termination_text};
use crate::series::{Series, md_escape, t_str};

/// What a runner needs running beside the node before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing.
    Node,
    /// `pullcheck watch` as a host process (scenarios 9).
    Watch,
}

/// A runner: runs the scenario and writes its parts into the results.
pub type Runner = fn(&mut Ctx) -> Result<(), NodeError>;

/// One row of the table.
pub struct Scenario {
    /// The id FF_SCENARIOS names (`2`, `9a`, `4`).
    pub id: &'static str,
    /// Its summary/detail/chart ids (doc::PART_ORDER).
    pub parts: &'static [&'static str],
    /// Its table row ids (doc::ROW_ORDER).
    pub rows: &'static [&'static str],
    /// The runner; None: not ported yet (scripts/fail-fast-scenarios.sh runs it).
    pub runner: Option<Runner>,
    /// What it needs beside the node.
    pub needs: Needs,
}

/// Every scenario of scripts/fail-fast-scenarios.sh, in its run order.
pub const TABLE: &[Scenario] = &[
    Scenario {
        id: "1",
        parts: &["1"],
        rows: &["1"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "2",
        parts: &["2"],
        rows: &["2"],
        runner: Some(s2),
        needs: Needs::Node,
    },
    Scenario {
        id: "3",
        parts: &["3"],
        rows: &["3"],
        runner: Some(s3),
        needs: Needs::Node,
    },
    Scenario {
        id: "4",
        parts: &["4count", "4ignore"],
        rows: &["4a", "4b"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "5",
        parts: &["5"],
        rows: &["5"],
        runner: Some(s5),
        needs: Needs::Node,
    },
    Scenario {
        id: "6a",
        parts: &["6a"],
        rows: &["6a"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "6b",
        parts: &["6b"],
        rows: &["6b"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "7",
        parts: &["7"],
        rows: &["7"],
        runner: Some(s7),
        needs: Needs::Node,
    },
    Scenario {
        id: "8",
        parts: &["8a", "8b"],
        rows: &["8", "8a", "8b"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "9a",
        parts: &["9a"],
        rows: &["9a"],
        runner: Some(s9a),
        needs: Needs::Watch,
    },
    Scenario {
        id: "9b",
        parts: &["9b"],
        rows: &["9b"],
        runner: Some(s9b),
        needs: Needs::Watch,
    },
    Scenario {
        id: "9c",
        parts: &["9c"],
        rows: &["9c"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9d",
        parts: &["9d"],
        rows: &["9d"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9e",
        parts: &["9e"],
        rows: &["9e"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9f",
        parts: &["9f"],
        rows: &["9f"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9g",
        parts: &["9g"],
        rows: &["9g"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9h",
        parts: &["9h"],
        rows: &["9h"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9h-pytorch",
        parts: &["9h-pytorch"],
        rows: &["9h-pytorch"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9i",
        parts: &["9i", "9i-sidecar-term", "9i-sidecar-ignore"],
        rows: &["9i", "9i-sidecar-term", "9i-sidecar-ignore"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "10a",
        parts: &["10a"],
        rows: &["10a"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "10b",
        parts: &["10b"],
        rows: &["10b"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "10c",
        parts: &["10c"],
        rows: &["10c"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "10d",
        parts: &["10d"],
        rows: &["10d"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "11",
        parts: &["11a", "11b"],
        rows: &["11a", "11b"],
        runner: None,
        needs: Needs::Node,
    },
];

/// The state of one run: the node, this run's parts, and the watch process if started.
pub struct Ctx {
    /// The cluster.
    pub node: Node,
    /// This run's parts.
    pub out: Results,
    /// `pullcheck watch` (scenarios 9), killed on drop.
    pub watch: Option<Proc>,
}

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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
    let node_name = node.var("PULLCHECK_NODE").to_string();
    let mut series = Series::default();
    let mut extra = 0;
    let what = format!("pods,{resource}");
    loop {
        let t = t0.elapsed().as_secs_f64();
        if let Ok(list) = node.kubectl_json(&["get", &what, "-A"]) {
            let s = sample(&list, target, &node_name, t);
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

/// Create `manifest` and follow the Job `ns/name` for at most `max_s`.
pub fn run_job(
    node: &Node,
    ns: &str,
    name: &str,
    manifest: &str,
    max_s: f64,
) -> Result<Followed, NodeError> {
    let target = Target::job(ns, name);
    let t0 = SystemTime::now();
    let start = Instant::now();
    node.kubectl_ok(&["create", "-f", "-"], Some(manifest))?;
    let series = follow(node, &target, "jobs", start, max_s, 0.5);
    let list = node.kubectl_json(&["get", "pods", "-n", ns])?;
    Ok(Followed {
        series,
        terms: pullcheck_terminations(&list, &target),
        t0,
    })
}

/// The True Failed/Complete conditions: (`Type reason: message`, reason of the first).
pub fn job_cond(node: &Node, ns: &str, name: &str) -> Result<(String, String), NodeError> {
    let j = node.kubectl_json(&["-n", ns, "get", "job", name])?;
    let conds: Vec<&Value> = j["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "True" && (c["type"] == "Failed" || c["type"] == "Complete"))
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
fn row(out: &mut Results, id: &str, cells: [&str; 7]) {
    out.rows
        .insert(id.to_string(), format!("| {id} | {} |", cells.join(" | ")));
}

/// A detail section with the manifest and the samples at each change, and the chart rows.
fn save_detail(ctx: &mut Ctx, id: &str, title: &str, f: &Followed, manifest: &str, notes: &str) {
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
fn expect(id: &str, cond: bool, what: impl FnOnce() -> String) -> Result<(), NodeError> {
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
fn exit_codes(terms: &[(i64, String)]) -> Vec<i64> {
    let mut c: Vec<i64> = terms.iter().map(|(c, _)| *c).collect();
    c.dedup();
    c
}

fn s2(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s2", "injected");
    ctx.node.new_ns(ns, None)?;
    let plain = job_yaml(ns, name, &ctx.node.missing(), "Never", 0, "1", "2Gi", "");
    let f = ctx.node.inject(&plain, &[])?.stdout;
    let r = run_job(&ctx.node, ns, name, &f, 120.0)?;
    let (cond, _) = job_cond(&ctx.node, ns, name)?;
    let msg = termination_text(&r.terms);
    let s = &r.series;
    expect(
        "2",
        s.fin() == Finished::Failed && exit_codes(&r.terms) == [11],
        || {
            format!(
                "want Failed with the init container's exit 11, got {:?} {:?}",
                s.fin(),
                exit_codes(&r.terms)
            )
        },
    )?;
    row(
        &mut ctx.out,
        "2",
        [
            "`pullcheck inject`; restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; tag does not exist",
            &format!("**{}** ({cond})", s.fin().as_str()),
            &format!(
                "**{} s** (requests released at {} s)",
                t_str(s.t_fin()),
                t_str(s.t_free())
            ),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("2".into(), format!(
        "- **With the init container** (2, backoffLimit 0): the Job is Failed **{} s** after creation; the pod's requests are released at {} s (pod Failed, exit 11 `not_found`).",
        t_str(s.t_fin()), t_str(s.t_free())));
    let notes = format!("Job condition: `{cond}`. Termination message of `pullcheck`: `{msg}`.");
    save_detail(
        ctx,
        "2",
        "Scenario 2: pullcheck init container, backoffLimit 0",
        &r,
        &f,
        &notes,
    );
    Ok(())
}

fn s3(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s3", "policy");
    ctx.node.new_ns(ns, None)?;
    let plain = job_yaml(ns, name, &ctx.node.missing(), "Never", 6, "1", "2Gi", "");
    let f = ctx.node.inject(&plain, &["--fail-fast"])?.stdout;
    let r = run_job(&ctx.node, ns, name, &f, 120.0)?;
    let (cond, reason) = job_cond(&ctx.node, ns, name)?;
    let pods = ctx
        .node
        .kubectl_json(&["-n", ns, "get", "pods", "-l", "job-name=policy"])?["items"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    let msg = termination_text(&r.terms);
    let s = &r.series;
    expect(
        "3",
        s.fin() == Finished::Failed && reason == "PodFailurePolicy" && pods == 1,
        || {
            format!(
                "want Failed by PodFailurePolicy after 1 pod, got {:?} {reason:?} after {pods}",
                s.fin()
            )
        },
    )?;
    row(
        &mut ctx.out,
        "3",
        [
            "`pullcheck inject --fail-fast`; restartPolicy Never, backoffLimit 6 + podFailurePolicy (FailJob on 10-14); 1 CPU / 2Gi; tag does not exist",
            &format!(
                "**{}** after {pods} pod(s): {}",
                s.fin().as_str(),
                md_escape(&cond)
            ),
            &format!(
                "**{} s** (requests released at {} s)",
                t_str(s.t_fin()),
                t_str(s.t_free())
            ),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("3".into(), format!(
        "- **With podFailurePolicy** (3, backoffLimit 6): Failed at **{} s** on the first pod, reason `{reason}` (FailJob on exit {}), no retries.",
        t_str(s.t_fin()), exit_codes(&r.terms).first().copied().unwrap_or(-1)));
    let notes =
        format!("Pods created: {pods}. Job condition: `{cond}`. Termination message: `{msg}`.");
    save_detail(
        ctx,
        "3",
        "Scenario 3: podFailurePolicy, backoffLimit 6",
        &r,
        &f,
        &notes,
    );
    Ok(())
}

/// `b - a` with a sign and one decimal.
fn diff(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:+.1}", b - a),
        _ => "-".into(),
    }
}

fn s5(ctx: &mut Ctx) -> Result<(), NodeError> {
    let ns = "ff-s5";
    ctx.node.new_ns(ns, None)?;
    let mut text = String::new();
    let mut t = std::collections::BTreeMap::new();
    let mut first_injected = None;
    let mut last_injected = None;
    for i in 1..=2 {
        for variant in ["plain", "injected"] {
            let name = format!("{variant}-{i}");
            let plain = job_yaml(ns, &name, &ctx.node.present(), "Never", 0, "1", "2Gi", "");
            let f = if variant == "plain" {
                plain
            } else {
                ctx.node.inject(&plain, &["--fail-fast"])?.stdout
            };
            let r = run_job(&ctx.node, ns, &name, &f, 120.0)?;
            expect("5", r.series.fin() == Finished::Complete, || {
                format!("{name}: want Complete, got {:?}", r.series.fin())
            })?;
            let mut init = String::new();
            if variant == "injected" {
                let pods = ctx.node.kubectl_json(&[
                    "-n",
                    ns,
                    "get",
                    "pods",
                    "-l",
                    &format!("job-name={name}"),
                ])?;
                let term =
                    &pods["items"][0]["status"]["initContainerStatuses"][0]["state"]["terminated"];
                init = format!(
                    "; init container ran {} → {}, exit {}",
                    term["startedAt"].as_str().unwrap_or("null"),
                    term["finishedAt"].as_str().unwrap_or("null"),
                    term["exitCode"]
                );
            }
            text.push_str(&format!(
                "run {i}, {variant}: Job {} at **{} s**{init}<br>",
                r.series.fin().as_str(),
                t_str(r.series.t_fin())
            ));
            t.insert(format!("{variant}_{i}"), r.series.t_fin());
            if variant == "injected" {
                if i == 1 {
                    first_injected = Some((r, f));
                } else {
                    last_injected = Some(r);
                }
            }
        }
    }
    let g = |k: &str| t.get(k).copied().flatten();
    let (dp1, dp2) = (
        diff(g("plain_1"), g("injected_1")),
        diff(g("plain_2"), g("injected_2")),
    );
    let ts = |k: &str| t_str(g(k));
    let (first, manifest) = first_injected.expect("two injected runs");
    let last = last_injected.expect("two injected runs");
    row(
        &mut ctx.out,
        "5",
        [
            "present tag `work/app:v1` (image cached on the node); 4 Jobs in turn: plain, injected (`--fail-fast`), plain, injected",
            "all Complete",
            &format!(
                "plain {} / {} s; injected {} / {} s; **pullcheck adds {dp1} / {dp2} s**",
                ts("plain_1"),
                ts("plain_2"),
                ts("injected_1"),
                ts("injected_2")
            ),
            &md_escape(&text),
            "—",
            &first.series.alloc_str(),
            &last.series.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("5".into(), format!(
        "- **Present image** (5): Jobs complete in {} / {} s without and {} / {} s with pullcheck: the check adds **{dp1} / {dp2} s** to a Job's run (image cached on the node).",
        ts("plain_1"), ts("plain_2"), ts("injected_1"), ts("injected_2")));
    let notes = text
        .trim_end_matches("<br>")
        .split("<br>")
        .map(|l| format!("- {l}"))
        .collect::<Vec<_>>()
        .join("\n");
    save_detail(
        ctx,
        "5",
        "Scenario 5: present image",
        &first,
        &manifest,
        &notes,
    );
    Ok(())
}

/// A free loopback port (bound, then released for the child to take).
fn free_port() -> Result<u16, NodeError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| NodeError::Setup(format!("no free port: {e}")))
}

/// Poll `url` with curl until it answers 2xx (at most `tries` × 0.2 s).
fn wait_ready(url: &str, ca: Option<&Path>, tries: u32) -> bool {
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
fn spawn(prog: &Path, args: &[&str], envs: &[(&str, &str)], log: &Path) -> Result<Proc, NodeError> {
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

fn s7(ctx: &mut Ctx) -> Result<(), NodeError> {
    let node = ctx.node.clone();
    let ns = "ff-s7";
    node.new_ns(ns, Some("pullcheck-scenario=admission"))?;
    let tls = node.work.join("webhook-tls");
    let lib = node.root.join("scripts/lib.sh");
    run_ok(
        Path::new("/bin/bash"),
        &[
            "-c",
            &format!(". '{}'; make_tls '{}'", lib.display(), tls.display()),
        ],
        None,
        60,
    )?;
    let port = free_port()?;
    let token = node.work.join("apiserver.token");
    std::fs::write(&token, node.var("PULLCHECK_CP_TOKEN"))
        .map_err(|e| NodeError::Setup(e.to_string()))?;
    let cp_ca = format!("{}/cp/pki/ca.crt", node.var("PULLCHECK_CLUSTER_DIR"));
    let listen = format!("127.0.0.1:{port}");
    let (crt, key, ca) = (
        tls.join("server.crt"),
        tls.join("server.key"),
        tls.join("ca.crt"),
    );
    let hook = spawn(
        &node.pc,
        &[
            "webhook",
            "--listen",
            &listen,
            "--tls-cert",
            &crt.display().to_string(),
            "--tls-key",
            &key.display().to_string(),
            "--allow-loopback-registries",
            "--insecure-registry",
            node.wreg(),
            "--apiserver",
            node.var("PULLCHECK_CP_SERVER"),
            "--apiserver-token-file",
            &token.display().to_string(),
            "--apiserver-ca-file",
            &cp_ca,
        ],
        &[],
        &node.work.join("webhook.log"),
    )?;
    wait_ready(&format!("https://{listen}/readyz"), Some(&ca), 50);
    let ca_b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(&ca).map_err(|e| NodeError::Setup(e.to_string()))?)
    };
    let vwc = format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: pullcheck-scenario
webhooks:
  - name: validate.pullcheck.io
    admissionReviewVersions: [\"v1\"]
    sideEffects: None
    failurePolicy: Ignore
    timeoutSeconds: 10
    clientConfig:
      url: https://{listen}/validate
      caBundle: {ca_b64}
    namespaceSelector:
      matchLabels: {{pullcheck-scenario: admission}}
    rules:
      - apiGroups: [\"batch\"]
        apiVersions: [\"v1\"]
        operations: [\"CREATE\", \"UPDATE\"]
        resources: [\"jobs\"]
"
    );
    node.kubectl_ok(&["apply", "-f", "-"], Some(&vwc))?;
    std::thread::sleep(Duration::from_secs(2)); // the apiserver's webhook configuration informer
    let f = job_yaml(ns, "missing", &node.missing(), "Never", 0, "1", "2Gi", "");
    let start = Instant::now();
    let created = node.kubectl(&["create", "-f", "-"], Some(&f))?;
    let tdeny = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(10));
    let count = |what: &str| -> Result<usize, NodeError> {
        Ok(node.kubectl_json(&["-n", ns, "get", what])?["items"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0))
    };
    let (npods, njobs) = (count("pods")?, count("jobs")?);
    let tafter = start.elapsed().as_secs_f64();
    let present = job_yaml(ns, "present", &node.present(), "Never", 0, "1", "2Gi", "");
    let t1 = Instant::now();
    let admitted = node.kubectl(&["create", "-f", "-"], Some(&present))?;
    let tadm = t1.elapsed().as_secs_f64();
    node.kubectl_ok(
        &[
            "delete",
            "validatingwebhookconfiguration",
            "pullcheck-scenario",
        ],
        None,
    )?;
    drop(hook);
    let rc = created.code.unwrap_or(-1);
    let out = format!("{}{}", created.stdout, created.stderr)
        .trim_end()
        .to_string();
    expect(
        "7",
        rc != 0 && npods == 0 && njobs == 0 && admitted.ok(),
        || {
            format!(
                "want rejected, 0 Jobs and pods, the present tag admitted; got exit {rc}, {njobs} Jobs, {npods} pods, present admitted {}",
                admitted.ok()
            )
        },
    )?;
    let outcome = format!(
        "**rejected** at admission (kubectl exit {rc}); {njobs} Jobs, **{npods} pods** in the namespace 10 s later"
    );
    let (tdeny_s, tadm_s, tafter_s) = (
        format!("{tdeny:.1}"),
        format!("{tadm:.1}"),
        format!("{tafter:.1}"),
    );
    row(
        &mut ctx.out,
        "7",
        [
            "`pullcheck webhook` (enforce, fail-open) as a ValidatingWebhookConfiguration by `url`; plain Job, tag does not exist",
            &outcome,
            &format!(
                "**{tdeny_s} s** (kubectl create round trip); a present tag was admitted in {tadm_s} s"
            ),
            "—",
            &md_escape(&out),
            "0m / 0Mi (never scheduled)",
            "0m / 0Mi",
        ],
    );
    ctx.out.timelines.insert("7".into(), format!(
        "7,0.0,0,0,kubectl create\n7,{tdeny_s},0,0,rejected at admission\n7,{tafter_s},0,0,checked: {njobs} Jobs; {npods} pods\n"));
    ctx.out.summaries.insert("7".into(), format!(
        "- **Admission webhook** (7): the Job is rejected in {tdeny_s} s (the `kubectl create` round trip), {njobs} Jobs and {npods} pods exist afterwards: no reservation at all."));
    let adm = format!("{}{}", admitted.stdout, admitted.stderr).replace('\n', " ");
    ctx.out.details.insert("7".into(), format!(
        "### Scenario 7: admission webhook\n\n`kubectl create -f` of the missing-image Job (exit {rc}, {tdeny_s} s):\n\n```\n{out}\n```\n\nThe same Job with the present tag: `{adm}` ({tadm_s} s).\n\n"));
    Ok(())
}

/// The RBAC docs/watch.md lists, for the watch's ServiceAccount.
const WATCH_RBAC: &str = "apiVersion: v1
kind: Namespace
metadata: {name: pullcheck-watch}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: pullcheck-watch, namespace: pullcheck-watch}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: pullcheck-watch}
rules:
  - {apiGroups: [\"\"], resources: [pods], verbs: [get, list, watch, delete]}
  - {apiGroups: [\"\"], resources: [pods/status], verbs: [patch]}
  - {apiGroups: [\"\"], resources: [events], verbs: [create, patch]}
  - {apiGroups: [batch], resources: [jobs], verbs: [get]}
  - {apiGroups: [\"\"], resources: [namespaces], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: pullcheck-watch}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pullcheck-watch}
subjects: [{kind: ServiceAccount, name: pullcheck-watch, namespace: pullcheck-watch}]
";

/// The label of the namespaces the watch acts in.
const WATCH_LABEL_KV: &str = "pullcheck.io/watch=on";

/// Start `pullcheck watch` as a host process with the watch ServiceAccount's token.
pub fn watch_start(ctx: &mut Ctx) -> Result<(), NodeError> {
    let node = &ctx.node;
    node.kubectl_ok(&["apply", "-f", "-"], Some(WATCH_RBAC))?;
    let token = node.kubectl_ok(
        &[
            "-n",
            "pullcheck-watch",
            "create",
            "token",
            "pullcheck-watch",
            "--duration",
            "3h",
        ],
        None,
    )?;
    let token_file = node.work.join("watch.token");
    std::fs::write(&token_file, token.trim()).map_err(|e| NodeError::Setup(e.to_string()))?;
    let port = free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let cp_ca = format!("{}/cp/pki/ca.crt", node.var("PULLCHECK_CLUSTER_DIR"));
    let proc_ = spawn(
        &node.pc,
        &[
            "watch",
            "--apiserver",
            node.var("PULLCHECK_CP_SERVER"),
            "--apiserver-token-file",
            &token_file.display().to_string(),
            "--apiserver-ca-file",
            &cp_ca,
            "--namespace-label",
            WATCH_LABEL_KV,
            "--listen",
            &listen,
        ],
        &[("RUST_LOG", "pullcheck=info")],
        &node.work.join("watch.log"),
    )?;
    if !wait_ready(&format!("http://{listen}/readyz"), None, 100) {
        return Err(NodeError::Setup(format!(
            "pullcheck watch not ready (log {})",
            node.work.join("watch.log").display()
        )));
    }
    ctx.watch = Some(proc_);
    Ok(())
}

/// Seconds from `t0` to the watch's first log line about a pod of `ns` with the field
/// `deleted=true` (the line's first token is its RFC 3339 time). The API keeps a pod's
/// deletionTimestamp in whole seconds only; the watch's own line has the sub-second time.
fn watch_deleted_t(node: &Node, ns: &str, t0: SystemTime) -> Option<f64> {
    let f = std::fs::File::open(node.work.join("watch.log")).ok()?;
    let pod = format!("pod={ns}/");
    for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.iter().any(|w| w.starts_with(&pod)) && fields.contains(&"deleted=true") {
            let out = run_ok(
                Path::new("/bin/date"),
                &["-d", fields.first()?, "+%s.%N"],
                None,
                5,
            )
            .ok()?;
            let at: f64 = out.stdout.trim().parse().ok()?;
            let t0s = t0
                .duration_since(SystemTime::UNIX_EPOCH)
                .ok()?
                .as_secs_f64();
            return Some(((at - t0s) * 10.0).round() / 10.0);
        }
    }
    None
}

/// The watch's Events in `ns`: `Reason on Kind: message`, unique, ` / `-joined.
fn watch_events(node: &Node, ns: &str) -> Result<String, NodeError> {
    let ev = node.kubectl_json(&["-n", ns, "get", "events"])?;
    let mut v: Vec<String> = ev["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["source"]["component"] == "pullcheck-watch")
        .map(|e| {
            format!(
                "{} on {}: {}",
                e["reason"].as_str().unwrap_or(""),
                e["involvedObject"]["kind"].as_str().unwrap_or(""),
                e["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    v.sort();
    v.dedup();
    Ok(v.join(" / "))
}

/// A run under the watch and what the doc says of it.
struct Watched {
    f: Followed,
    cond: String,
    reason: String,
    events: String,
    t_err: Option<f64>,
    t_del: Option<f64>,
}

impl Watched {
    /// Seconds from the first pull failure to the terminal condition.
    fn err_to_fin(&self) -> String {
        match (self.t_err, self.f.series.t_fin()) {
            (Some(a), Some(b)) => format!("{:.1}", b - a),
            _ => "-".into(),
        }
    }

    fn times_str(&self) -> String {
        let s = &self.f.series;
        format!(
            "**{} s** after create, **{} s** after the first ErrImagePull (at ≤ {} s); the watch deleted the pod at {} s; requests released at {} s",
            t_str(s.t_fin()),
            self.err_to_fin(),
            t_str(self.t_err),
            t_str(self.t_del),
            t_str(s.t_free())
        )
    }
}

fn run_watched(
    node: &Node,
    ns: &str,
    name: &str,
    manifest: &str,
    max_s: f64,
) -> Result<Watched, NodeError> {
    let f = run_job(node, ns, name, manifest, max_s)?;
    let t_del = watch_deleted_t(node, ns, f.t0);
    // The watch deletes within milliseconds of the kubelet's report, often before a 0.5 s
    // sample shows the ErrImagePull: the delete is then the best bound on the first failure.
    let pulled = f.series.first_t(|s| {
        s.waiting.iter().any(|r| {
            matches!(
                r.as_str(),
                "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName"
            )
        })
    });
    let t_err = match (pulled, t_del) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let (cond, reason) = job_cond(node, ns, name)?;
    let events = watch_events(node, ns)?;
    Ok(Watched {
        f,
        cond,
        reason,
        events,
        t_err,
        t_del,
    })
}

fn s9a(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s9a", "plain");
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    let f = job_yaml(ns, name, &ctx.node.missing(), "Never", 0, "1", "2Gi", "");
    let w = run_watched(&ctx.node, ns, name, &f, 120.0)?;
    let s = &w.f.series;
    expect(
        "9a",
        s.fin() == Finished::Failed && w.t_del.is_some(),
        || {
            format!(
                "want Failed after the watch deleted the pod, got {:?}, deleted at {:?}",
                s.fin(),
                w.t_del
            )
        },
    )?;
    row(
        &mut ctx.out,
        "9a",
        [
            "`pullcheck watch`; **plain Job, no inject**, restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; tag does not exist",
            &format!(
                "**{}**: {}; pods: {}",
                s.fin().as_str(),
                md_escape(&w.cond),
                s.pods_seen()
            ),
            &w.times_str(),
            &md_escape(&s.timeline()),
            &md_escape(&w.events),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("9a".into(), format!(
        "- **The watch, plain Job** (9a, backoffLimit 0, no inject): Failed at **{} s**, {} s after the first ErrImagePull ({} s); requests released at {} s.",
        t_str(s.t_fin()), w.err_to_fin(), t_str(w.t_err), t_str(s.t_free())));
    let notes = format!(
        "Job condition: `{}`. The watch's Events: `{}`.",
        w.cond, w.events
    );
    save_detail(
        ctx,
        "9a",
        "Scenario 9a: the watch, plain Job, backoffLimit 0",
        &w.f,
        &f,
        &notes,
    );
    Ok(())
}

/// The onPodConditions FailJob rule `inject --fail-fast` writes, as compact JSON.
fn watch_rule(node: &Node) -> Result<String, NodeError> {
    let plain = job_yaml("x", "x", &node.missing(), "Never", 6, "1", "2Gi", "");
    let injected = node.inject(&plain, &["--fail-fast"])?.stdout;
    let docs = pullcheck::k8s::yaml::parse_documents(&injected)
        .map_err(|e| NodeError::Setup(format!("inject printed invalid YAML: {e}")))?;
    let rule = docs
        .first()
        .and_then(|d| {
            d.value["spec"]["podFailurePolicy"]["rules"]
                .as_array()
                .cloned()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|r| r.get("onPodConditions").is_some())
        .ok_or_else(|| {
            NodeError::Setup("inject --fail-fast wrote no onPodConditions rule".into())
        })?;
    Ok(rule.to_string())
}

fn s9b(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s9b", "rule");
    let rule = watch_rule(&ctx.node)?;
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    let extra = format!("  podFailurePolicy:\n    rules: [{rule}]");
    let f = job_yaml(
        ns,
        name,
        &ctx.node.missing(),
        "Never",
        6,
        "1",
        "2Gi",
        &extra,
    );
    let w = run_watched(&ctx.node, ns, name, &f, 120.0)?;
    let s = &w.f.series;
    let pods = s.pods_seen();
    expect(
        "9b",
        s.fin() == Finished::Failed && w.reason == "PodFailurePolicy" && pods == 1,
        || {
            format!(
                "want Failed by PodFailurePolicy on 1 pod, got {:?} {:?} after {pods}",
                s.fin(),
                w.reason
            )
        },
    )?;
    row(
        &mut ctx.out,
        "9b",
        [
            &format!(
                "`pullcheck watch`; plain Job, restartPolicy Never, **backoffLimit 6 + only the onPodConditions rule** of `inject --fail-fast` (`{rule}`); 1 CPU / 2Gi; tag does not exist"
            ),
            &format!(
                "**{}** after {pods} pod(s): {}",
                s.fin().as_str(),
                md_escape(&w.cond)
            ),
            &w.times_str(),
            &md_escape(&s.timeline()),
            &md_escape(&w.events),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("9b".into(), format!(
        "- **The watch + the onPodConditions rule** (9b, backoffLimit 6): Failed at **{} s** on the first pod ({pods} created), {} s after the first ErrImagePull, reason `{}`.",
        t_str(s.t_fin()), w.err_to_fin(), w.reason));
    let notes = format!(
        "Job condition: `{}`. The watch's Events: `{}`.",
        w.cond, w.events
    );
    save_detail(
        ctx,
        "9b",
        "Scenario 9b: the watch, backoffLimit 6 + FailJob on the pod condition",
        &w.f,
        &f,
        &notes,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::{PART_ORDER, ROW_ORDER};

    #[test]
    fn the_table_covers_every_part_of_the_doc_once() {
        let mut parts: Vec<&str> = TABLE.iter().flat_map(|s| s.parts.iter().copied()).collect();
        let mut rows: Vec<&str> = TABLE.iter().flat_map(|s| s.rows.iter().copied()).collect();
        parts.sort();
        rows.sort();
        let mut want_parts = PART_ORDER.to_vec();
        let mut want_rows = ROW_ORDER.to_vec();
        want_parts.sort();
        want_rows.sort();
        assert_eq!(parts, want_parts);
        assert_eq!(rows, want_rows);
    }

    #[test]
    fn the_ported_runners() {
        let ported: Vec<&str> = TABLE
            .iter()
            .filter(|s| s.runner.is_some())
            .map(|s| s.id)
            .collect();
        assert_eq!(ported, ["2", "3", "5", "7", "9a", "9b"]);
    }

    #[test]
    fn job_manifest_is_the_shell_harness_text() {
        let y = job_yaml("ff-s2", "injected", "r/app:x", "Never", 0, "1", "2Gi", "");
        assert_eq!(
            y,
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: injected\n  namespace: ff-s2\nspec:\n  backoffLimit: 0\n\n  template:\n    spec:\n      restartPolicy: Never\n      hostNetwork: true\n      automountServiceAccountToken: false\n      terminationGracePeriodSeconds: 1\n      containers:\n        - name: main\n          image: r/app:x\n          resources:\n            requests: {cpu: \"1\", memory: 2Gi}\n            limits: {cpu: \"1\", memory: 2Gi}\n"
        );
        let docs = pullcheck::k8s::yaml::parse_documents(&y).unwrap();
        assert_eq!(
            docs[0].value["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }
}
