//! Scenarios 8, 9h-pytorch and 10d: Kubeflow training-operator v1 PyTorchJobs
//! (scripts/cluster/kubeflow.sh runs the operator; `scripts/cluster/node-tools.sh
//! training-operator` builds it). The PyTorchJobs have one Master replica only: a Worker
//! gets the operator's own init container, which waits for the Master's DNS name (no
//! cluster DNS here).

use serde_json::{Value, json};

use crate::node::{Node, NodeError, run, run_ok};
use crate::run::{
    Followed, Plan, RESTART_ARGS, cond_of, exit_codes, expect, follow, row, run_plan, save_detail,
    summary, window,
};
use crate::sample::{Finished, Target};
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};
use crate::watch::{WATCH_LABEL_KV, first_pull_failure, watch_log_t};
use crate::watch_more::not_acting;

/// The training operator, started by `kubeflow.sh start`; stopped when dropped.
pub struct Operator(Node);

impl Drop for Operator {
    fn drop(&mut self) {
        let sh = self.0.root.join("scripts/cluster/kubeflow.sh");
        let _ = run(&sh, &["stop"], None, 120);
    }
}

/// Start the training operator unless this run already did.
fn ensure_operator(ctx: &mut Ctx) -> Result<(), NodeError> {
    if ctx.kubeflow.is_some() {
        return Ok(());
    }
    eprintln!("[fail-fast] training operator (scripts/cluster/kubeflow.sh start)");
    let sh = ctx.node.root.join("scripts/cluster/kubeflow.sh");
    // the first start may build the operator from the Go module proxy (minutes on 2 cores)
    let out = run(&sh, &["start"], None, 3600)?;
    std::fs::write(ctx.node.work.join("kubeflow.err"), &out.stderr)
        .map_err(|e| NodeError::Setup(e.to_string()))?;
    if !out.ok() {
        let tail: Vec<&str> = out.stderr.lines().rev().take(3).collect();
        return Err(NodeError::Setup(format!(
            "the training operator did not start (scripts/cluster/kubeflow.sh start): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )));
    }
    ctx.kubeflow = Some(Operator(ctx.node.clone()));
    Ok(())
}

/// The training operator's version (`node-tools.sh --versions`).
fn operator_version(node: &Node) -> String {
    let tools = node.root.join("scripts/cluster/node-tools.sh");
    run_ok(&tools, &["--versions"], None, 30)
        .map(|o| {
            o.stdout
                .lines()
                .find_map(|l| l.strip_prefix("training-operator\t").map(str::to_string))
                .unwrap_or_default()
        })
        .unwrap_or_default()
}

/// A kubeflow.org/v1 PyTorchJob with one Master replica (`restart` its restartPolicy,
/// `run_policy` YAML under spec, requests = limits), the missing tag.
fn pytorchjob_yaml(
    node: &Node,
    ns: &str,
    name: &str,
    restart: &str,
    run_policy: &str,
    cpu: &str,
    mem: &str,
) -> String {
    format!(
        "apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {name}
  namespace: {ns}
spec:
{run_policy}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: {restart}
      template:
        spec:
          hostNetwork: true
          automountServiceAccountToken: false
          terminationGracePeriodSeconds: 1
          containers:
            - name: pytorch
              image: {}
              resources:
                requests: {{cpu: \"{cpu}\", memory: {mem}}}
                limits: {{cpu: \"{cpu}\", memory: {mem}}}
",
        node.missing()
    )
}

/// How a PyTorchJob is followed: its pods carry `training.kubeflow.org/job-name`.
fn ptj_plan<'a>(ns: &str, name: &str, every: f64, create_args: &'a [&'a str]) -> Plan<'a> {
    Plan {
        target: ptj_target(ns, name),
        resource: "pytorchjobs",
        every,
        create_args,
    }
}

fn ptj_target(ns: &str, name: &str) -> Target {
    Target {
        kind: "PyTorchJob",
        ns: ns.to_string(),
        name: name.to_string(),
        label: "training.kubeflow.org/job-name",
    }
}

/// Delete the PyTorchJob and wait until its pods are gone: every PyTorchJob pod here is
/// on the host network and asks for the operator's default port (23456), so the next
/// PyTorchJob's pod is not scheduled while one of them is left (the scheduler then retries
/// for minutes).
fn delete_ptj(node: &Node, ns: &str, name: &str) -> Result<(), NodeError> {
    node.kubectl_ok(
        &[
            "-n",
            ns,
            "delete",
            "pytorchjob",
            name,
            "--ignore-not-found",
            "--wait=true",
            "--timeout=60s",
        ],
        None,
    )?;
    let selector = format!("training.kubeflow.org/job-name={name}");
    for _ in 0..120 {
        let pods = node.kubectl_json(&["-n", ns, "get", "pods", "-l", &selector])?;
        if pods["items"].as_array().is_none_or(|a| a.is_empty()) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    Err(NodeError::Setup(format!(
        "the pods of PyTorchJob {ns}/{name} are still there 60 s after its deletion"
    )))
}

/// The True Failed/Succeeded conditions of the PyTorchJob.
fn ptj_cond(node: &Node, ns: &str, name: &str) -> Result<String, NodeError> {
    cond_of(node, "pytorchjob", "Succeeded", ns, name).map(|(text, _)| text)
}

/// Scenario 8: 8a, a PyTorchJob as usually written (OnFailure, no runPolicy.backoffLimit,
/// no pullcheck), still only Created after FF_BASELINE_WINDOW (120 s); 8b, the same after
/// `inject --fail-fast` with restartPolicy Never and runPolicy.backoffLimit 0: Failed.
pub fn s8(ctx: &mut Ctx) -> Result<(), NodeError> {
    ensure_operator(ctx)?;
    let w = window("FF_BASELINE_WINDOW", 120);
    let ns = "ff-s8a";
    ctx.node.new_ns(ns, None)?;
    let f = pytorchjob_yaml(&ctx.node, ns, "baseline", "OnFailure", "", "1", "2Gi");
    let a = run_plan(
        &ctx.node,
        &ptj_plan(ns, "baseline", 0.5, &[]),
        &f,
        w as f64,
        &mut |_| {},
    )?;
    let s = &a.series;
    let state = s.0.last().map(|x| x.job.clone()).unwrap_or_default();
    delete_ptj(&ctx.node, ns, "baseline")?;
    expect(
        "8a",
        s.fin() == Finished::Running && state.ends_with(" [Created]"),
        || {
            format!(
                "want still only Created after {w} s, got {:?} ({state})",
                s.fin()
            )
        },
    )?;
    row(
        &mut ctx.out,
        "8a",
        [
            &format!(
                "Kubeflow PyTorchJob (training-operator {}), Master ×1, **restartPolicy OnFailure, no runPolicy.backoffLimit**, no pullcheck; 1 CPU / 2Gi; tag does not exist",
                operator_version(&ctx.node)
            ),
            &format!("**still running after {w} s** ({state})"),
            "— (never)",
            &md_escape(&s.timeline()),
            "—",
            &s.alloc_str(),
            &format!("still held at {w} s: {}", s.last_alloc()),
        ],
    );
    summary(
        &mut ctx.out,
        "8a",
        format!(
            "**Kubeflow PyTorchJob, as usually written** (8a, OnFailure, no runPolicy.backoffLimit): after {w} s still only `Created`, its pod in ImagePullBackOff holding {}.",
            s.alloc_str()
        ),
    );
    save_detail(ctx, "8a", "Scenario 8a: PyTorchJob baseline", &a, &f, "");

    let ns = "ff-s8b";
    ctx.node.new_ns(ns, None)?;
    let plain = pytorchjob_yaml(
        &ctx.node,
        ns,
        "injected",
        "Never",
        "  runPolicy:\n    backoffLimit: 0\n    cleanPodPolicy: Running",
        "1",
        "2Gi",
    );
    let f = ctx.node.inject(&plain, &["--fail-fast"])?.stdout;
    let b = run_plan(
        &ctx.node,
        &ptj_plan(ns, "injected", 0.5, &[]),
        &f,
        180.0,
        &mut |_| {},
    )?;
    let cond = ptj_cond(&ctx.node, ns, "injected")?;
    delete_ptj(&ctx.node, ns, "injected")?;
    let msg = b.msg();
    let s = &b.series;
    expect(
        "8b",
        s.fin() == Finished::Failed && exit_codes(&b.terms) == [11],
        || {
            format!(
                "want Failed on the init container's exit 11, got {:?} {:?}",
                s.fin(),
                exit_codes(&b.terms)
            )
        },
    )?;
    let released = s
        .t_free()
        .map(|t| format!(" (requests released at {t:.1} s)"))
        .unwrap_or_default();
    row(
        &mut ctx.out,
        "8b",
        [
            "same PyTorchJob after `pullcheck inject --fail-fast`; **restartPolicy Never, runPolicy.backoffLimit 0**, cleanPodPolicy Running",
            &format!("**{}**: {}", s.fin().as_str(), md_escape(&cond)),
            &format!("**{} s**{released}", t_str(s.t_fin())),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    summary(
        &mut ctx.out,
        "8b",
        format!(
            "**PyTorchJob with pullcheck** (8b, Never, runPolicy.backoffLimit 0): Failed at **{} s**, requests released at {} s.",
            t_str(s.t_fin()),
            t_str(s.t_free())
        ),
    );
    let notes = format!("Condition: `{cond}`. Termination message: `{msg}`.");
    save_detail(
        ctx,
        "8b",
        "Scenario 8b: PyTorchJob with pullcheck",
        &b,
        &f,
        &notes,
    );
    Ok(())
}

/// Scenario 9h-pytorch: a PyTorchJob's pod is not a Job's: the watch only records
/// PullcheckNotActing, and after FF_NOT_ACTING_WINDOW (30 s) the pod still holds its
/// requests.
pub fn s9h_pytorch(ctx: &mut Ctx) -> Result<(), NodeError> {
    ensure_operator(ctx)?;
    let ns = "ff-s9h-pytorch";
    let win = window("FF_NOT_ACTING_WINDOW", 30);
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    let f = pytorchjob_yaml(&ctx.node, ns, "train", "OnFailure", "", "250m", "256Mi");
    let t0 = std::time::SystemTime::now();
    let start = std::time::Instant::now();
    ctx.node.kubectl_ok(&["create", "-f", "-"], Some(&f))?;
    let series = follow(
        &ctx.node,
        &ptj_target(ns, "train"),
        "pytorchjobs",
        start,
        win as f64,
        0.5,
    );
    let na = not_acting(ctx, ns, "training.kubeflow.org/job-name=train", t0)?;
    let t_err = first_pull_failure(&series);
    let state = series.0.last().map(|x| x.job.clone()).unwrap_or_default();
    let t_ev = watch_log_t(&ctx.node, ns, t0, |fields| {
        fields.iter().any(|w| w.contains("PullcheckNotActing"))
    });
    let seen = series.pods_seen();
    delete_ptj(&ctx.node, ns, "train")?;
    expect(
        "9h-pytorch",
        t_err.is_some() && na.deleted.is_none() && na.n == 1 && series.fin() == Finished::Running,
        || {
            format!(
                "want the PyTorchJob still running, its pod failing to pull and not deleted, 1 PullcheckNotActing Event; got {:?}, first ErrImagePull at {t_err:?}, deleted at {:?}, {} Events",
                series.fin(),
                na.deleted,
                na.n
            )
        },
    )?;
    let deleted = match na.deleted {
        None => "none".to_string(),
        Some(t) => format!("yes, at {t:.1} s"),
    };
    let logged = t_ev
        .map(|t| format!(", the watch's Event logged at {t:.1} s"))
        .unwrap_or_default();
    let alloc = series.alloc_str();
    row(
        &mut ctx.out,
        "9h-pytorch",
        [
            &format!(
                "`pullcheck watch`; **a Kubeflow v1 PyTorchJob** (training-operator, Master ×1, replica restartPolicy OnFailure, no runPolicy), no inject; 250m / 256Mi; missing tag, {win} s window"
            ),
            &format!(
                "PyTorchJob `{state}`; pods: {seen} created, {} now, {} terminating; deleted by the watch: {deleted}; {} PullcheckNotActing Event(s)",
                na.now, na.deleting, na.n
            ),
            &format!(
                "— (not acted on; first ErrImagePull {} s{logged})",
                t_str(t_err)
            ),
            &md_escape(&series.timeline()),
            &md_escape(&na.events),
            &alloc,
            &series.last_alloc(),
        ],
    );
    let deletes = match na.deleted {
        None => "nothing".to_string(),
        Some(t) => format!("the pod (at {t:.1} s)"),
    };
    summary(
        &mut ctx.out,
        "9h-pytorch",
        format!(
            "**A Kubeflow PyTorchJob** (9h-pytorch): the watch records {} `PullcheckNotActing` Event and deletes {deletes}; after {win} s the PyTorchJob is `{state}`, its pod still holding {alloc}.",
            na.n
        ),
    );
    let notes = format!("The watch's Events: `{}`.", na.events);
    let followed = Followed {
        series,
        terms: Vec::new(),
        t0,
        pods_gone: false,
    };
    save_detail(
        ctx,
        "9h-pytorch",
        "Scenario 9h-pytorch: the watch and a PyTorchJob",
        &followed,
        &f,
        &notes,
    );
    Ok(())
}

/// Scenario 10d: the PyTorchJob after `inject --fail-fast --transient restart` with
/// replica OnFailure (the Kubeflow default) and runPolicy.backoffLimit 6, for up to
/// FF_PTJ_WINDOW (default FF_ONFAILURE_WINDOW, 1080 s) beside the others. The CRD's pod
/// template has no restartPolicyRules, so inject writes the count mode there (it used to
/// write the rules: kubectl's Strict validation rejected them, `--validate=false` pruned
/// them); the harness still tries Strict first and records what the API server stored.
pub fn s10d(ctx: &mut Ctx) -> Result<(), NodeError> {
    ensure_operator(ctx)?;
    eprintln!("[fail-fast] scenario 10d (PyTorchJob, restart, OnFailure) runs in the background");
    ctx.in_background("10d", restart);
    Ok(())
}

fn restart(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s10d", "restart");
    let max = window("FF_PTJ_WINDOW", window("FF_ONFAILURE_WINDOW", 1080)) as f64;
    ctx.node.new_ns(ns, None)?;
    let plain = pytorchjob_yaml(
        &ctx.node,
        ns,
        name,
        "OnFailure",
        "  runPolicy:\n    backoffLimit: 6",
        "200m",
        "256Mi",
    );
    let f = ctx.node.inject(&plain, RESTART_ARGS)?.stdout;
    // a file, as a user would create it: kubectl names it in its error
    let path = ctx.node.work.join("s10d.yaml");
    std::fs::write(&path, &f).map_err(|e| NodeError::Setup(e.to_string()))?;
    let path_s = path.display().to_string();
    let strict = ctx
        .node
        .kubectl(&["create", "--dry-run=server", "-f", &path_s], None)?;
    let strict_text = format!("{}{}", strict.stdout, strict.stderr)
        .trim_end()
        .to_string();
    let rejected = !strict.ok();
    if rejected {
        eprintln!("[fail-fast]   strict create rejected: {strict_text}");
    }
    // what a user gets past the rejection with: unknown fields pruned
    let create_args: &[&str] = if rejected { &["--validate=false"] } else { &[] };
    let r = run_plan(
        &ctx.node,
        &ptj_plan(ns, name, 1.0, create_args),
        &f,
        max,
        &mut |_| {},
    )?;
    let client = ctx
        .node
        .kubectl_json(&["create", "--dry-run=client", "-f", &path_s])?;
    let init = |v: &Value| {
        v["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["initContainers"][0].clone()
    };
    let sent_c = init(&client);
    let sent = json!({"restartPolicy": sent_c["restartPolicy"], "restartPolicyRules": sent_c["restartPolicyRules"]})
        .to_string();
    let stored = init(
        &ctx.node
            .kubectl_json(&["-n", ns, "get", "pytorchjob", name])?,
    );
    let stored_rp = stored["restartPolicy"].as_str().unwrap_or("").to_string();
    let stored_rules = if stored["restartPolicyRules"].is_null() {
        String::new()
    } else {
        stored["restartPolicyRules"].to_string()
    };
    let cond = ptj_cond(&ctx.node, ns, name)?;
    let msg = r.msg();
    let s = &r.series;
    let (pods, (_, init_r), held) = (s.pods_seen(), s.restarts(), s.held_s());
    let t_podfail = s.first_t(|x| x.failed_pods > 0);
    // inject writes no container restart rules on a Kubeflow replica (the CRD has no
    // restartPolicyRules: kubectl's Strict validation rejected them, and without it they
    // were pruned), only the count mode: nothing to reject, nothing sent or stored, and
    // the kubelet restarts the failing init container in place (replica OnFailure)
    let nothing_sent = sent_c["restartPolicy"].is_null() && sent_c["restartPolicyRules"].is_null();
    expect(
        "10d",
        !rejected
            && nothing_sent
            && stored_rules.is_empty()
            && stored_rp.is_empty()
            && pods == 1
            && init_r >= 1
            && s.fin() != Finished::Succeeded
            && exit_codes(&r.terms) == [11],
        || {
            format!(
                "want the strict create accepted with no restart fields sent or stored, 1 pod whose init container restarts in place on exit 11; got rejected={rejected}, sent {sent}, stored {stored_rp:?} {stored_rules:?}, {pods} pods, {init_r} restarts, {:?}, exits {:?}",
                s.fin(),
                exit_codes(&r.terms)
            )
        },
    )?;
    let how = if rejected {
        format!(
            "**rejected** by kubectl create (Strict field validation): `{}`; then created with `kubectl create --validate=false` (unknown fields pruned)",
            md_escape(&strict_text)
        )
    } else {
        "created with kubectl's default (Strict) field validation".to_string()
    };
    let or_none = |v: &str, none: &str| {
        if v.is_empty() {
            none.to_string()
        } else {
            v.to_string()
        }
    };
    row(
        &mut ctx.out,
        "10d",
        [
            &format!(
                "Kubeflow PyTorchJob (Master ×1) after `inject --fail-fast --transient restart`; **replica restartPolicy OnFailure**, runPolicy.backoffLimit 6 (set); 200m / 256Mi; tag does not exist; sampled every 1 s; {how}"
            ),
            &format!(
                "**{}**: {}; pods: {pods}; init restarts: {init_r}; first pod Failed at {} s. Stored init container: restartPolicy `{}`, restartPolicyRules `{}` (sent: `{sent}`)",
                s.fin().as_str(),
                md_escape(&cond),
                t_str(t_podfail),
                or_none(&stored_rp, "none"),
                or_none(&stored_rules, "none (pruned)")
            ),
            &format!("**{} s**; requests held {held} s in all", t_str(s.t_fin())),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    let rejects = if rejected {
        "kubectl create **rejects** it (the CRD's schema has no restartPolicyRules: strict decoding error); with --validate=false (rules pruned): "
    } else {
        ""
    };
    summary(
        &mut ctx.out,
        "10d",
        format!(
            "**PyTorchJob, `--transient restart`, replica OnFailure** (10d, runPolicy.backoffLimit 6): {rejects}first pod Failed at {} s ({init_r} init restarts), {pods} pod(s) in all, PyTorchJob {} at **{} s**, the node held {held} s; the API server stored restartPolicy `{}` and restartPolicyRules `{}` (the CRD's pod template schema decides).",
            t_str(t_podfail),
            s.fin().as_str(),
            t_str(s.t_fin()),
            or_none(&stored_rp, "none"),
            or_none(&stored_rules, "none")
        ),
    );
    let notes = format!(
        "The manifest was {how}. Condition: `{cond}`. Termination message: `{msg}`. Init container as sent: `{sent}`; as stored: restartPolicy `{}`, restartPolicyRules `{}`.",
        or_none(&stored_rp, "none"),
        or_none(&stored_rules, "none")
    );
    save_detail(
        ctx,
        "10d",
        "Scenario 10d: PyTorchJob, --transient restart, replica OnFailure",
        &r,
        &f,
        &notes,
    );
    Ok(())
}
