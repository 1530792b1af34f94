//! Scenarios 9c and 9i: `pullcheck watch` on Jobs the Job controller retries for minutes
//! (backoffLimit 6 without the onPodConditions rule, restartPolicy Never in 9c and
//! OnFailure in 9i: both beside the others), and how long a pod with a native sidecar takes
//! from the watch's delete to the Job's Failed (9i's sidecars).

use crate::node::NodeError;
use crate::run::{expect, job_yaml, row, save_detail, summary, window};
use crate::sample::Finished;
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};
use crate::watch::{WATCH_LABEL_KV, deleted_seen, run_watched};

/// Scenario 9c: restartPolicy Never, backoffLimit 6, no rule; beside the others.
pub fn s9c(ctx: &mut Ctx) -> Result<(), NodeError> {
    eprintln!("[fail-fast] scenario 9c (backoffLimit 6, no rule) runs in the background");
    ctx.in_background("9c", |c| retried(c, "9c"));
    Ok(())
}

/// Scenario 9i: restartPolicy OnFailure, backoffLimit 6, beside the others; then the two
/// native-sidecar Jobs, in the foreground.
pub fn s9i(ctx: &mut Ctx) -> Result<(), NodeError> {
    eprintln!("[fail-fast] scenario 9i (OnFailure, backoffLimit 6) runs in the background");
    ctx.in_background("9i", |c| retried(c, "9i"));
    sidecar(ctx, "term")?;
    sidecar(ctx, "ignore")
}

/// 9c or 9i: a missing tag, 200m / 256Mi, sampled every 1 s for up to
/// FF_ONFAILURE_WINDOW (1080 s). backoffLimit 6 allows 7 pods; the watch deletes each.
fn retried(ctx: &mut Ctx, id: &str) -> Result<(), NodeError> {
    let ns = format!("ff-s{id}");
    let (name, policy) = if id == "9c" {
        ("retries", "Never")
    } else {
        ("onfailure", "OnFailure")
    };
    ctx.node.new_ns(&ns, Some(WATCH_LABEL_KV))?;
    let f = job_yaml(
        &ns,
        name,
        &ctx.node.missing(),
        policy,
        6,
        "200m",
        "256Mi",
        "",
    );
    let max = window("FF_ONFAILURE_WINDOW", 1080) as f64;
    let w = run_watched(&ctx.node, &ns, name, &f, max, 1.0)?;
    let s = &w.f.series;
    let (pods, held) = (s.pods_seen(), s.held_s());
    let deleted = deleted_seen(&ctx.node, &ns, s);
    expect(
        id,
        s.fin() == Finished::Failed
            && w.reason == "BackoffLimitExceeded"
            && pods == 7
            && deleted == 7,
        || {
            format!(
                "want Failed (BackoffLimitExceeded) after 7 pods, each deleted by the watch; got {:?} {:?} after {pods}, {deleted} deleted",
                s.fin(),
                w.reason
            )
        },
    )?;
    // the Events repeat for each pod: the first 400 characters stand for them
    let events: String = w.events.chars().take(400).collect();
    let outcome = format!(
        "**{}** after {pods} pods ({deleted} deleted by the watch): {}",
        s.fin().as_str(),
        md_escape(&w.cond)
    );
    let (setting, time, text, title, notes) = if id == "9c" {
        (
            "`pullcheck watch`; plain Job, restartPolicy Never, **backoffLimit 6, no rule**; 200m / 256Mi; tag does not exist; sampled every 1 s",
            format!(
                "**{} s**; requests held **{held} s** in all (node time of the {pods} pods)",
                t_str(s.t_fin())
            ),
            format!(
                "**The watch without the rule** (9c, backoffLimit 6): {pods} pods, each deleted by the watch; Failed at **{} s** (the Job controller's back-off between pods), the node held for **{held} s** in all.",
                t_str(s.t_fin())
            ),
            "Scenario 9c: the watch, backoffLimit 6 without the rule",
            format!(
                "Job condition: `{}`. Requests held {held} s in all (sum of 1-s sample intervals with requests held).",
                w.cond
            ),
        )
    } else {
        (
            "`pullcheck watch`; plain Job, **restartPolicy OnFailure**, backoffLimit 6; 200m / 256Mi; tag does not exist; sampled every 1 s",
            format!(
                "**{} s**; requests held **{held} s** in all",
                t_str(s.t_fin())
            ),
            format!(
                "**The watch, restartPolicy OnFailure** (9i, backoffLimit 6): {pods} pods, each deleted by the watch; {} at **{} s**, the node held {held} s in all (compare 6b: one pod held throughout).",
                s.fin().as_str(),
                t_str(s.t_fin())
            ),
            "Scenario 9i: the watch, restartPolicy OnFailure, backoffLimit 6",
            format!(
                "Job condition: `{}`. Requests held {held} s in all.",
                w.cond
            ),
        )
    };
    row(
        &mut ctx.out,
        id,
        [
            setting,
            &outcome,
            &time,
            &md_escape(&s.timeline()),
            &format!("{}…", md_escape(&events)),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    summary(&mut ctx.out, id, text);
    save_detail(ctx, id, title, &w.f, &f, &notes);
    Ok(())
}

/// A Job whose pod has a native sidecar (an init container with `restartPolicy: Always`)
/// that exits on SIGTERM (`term`) or ignores it (`ignore`: `sleep` under sh as PID 1, so
/// the kubelet kills it at the end of terminationGracePeriodSeconds 30), and a missing app
/// image: the seconds from the watch's delete to the Job's Failed.
fn sidecar(ctx: &mut Ctx, v: &str) -> Result<(), NodeError> {
    let id = format!("9i-sidecar-{v}");
    let ns = format!("ff-s9i-sidecar-{v}");
    let (cmd, what) = if v == "term" {
        (
            "trap \"exit 0\" TERM; while true; do sleep 1; done",
            "exits on SIGTERM",
        )
    } else {
        ("sleep 3600", "ignores SIGTERM (`sleep` under sh as PID 1)")
    };
    ctx.node.new_ns(&ns, Some(WATCH_LABEL_KV))?;
    let f = format!(
        "apiVersion: batch/v1
kind: Job
metadata: {{name: sidecar, namespace: {ns}}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      hostNetwork: true
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 30
      initContainers:
        - name: sidecar
          image: {}
          restartPolicy: Always
          command: [\"/bin/sh\", \"-c\", '{cmd}']
      containers:
        - name: main
          image: {}
          resources:
            requests: {{cpu: \"1\", memory: 2Gi}}
            limits: {{cpu: \"1\", memory: 2Gi}}
",
        ctx.node.present(),
        ctx.node.missing()
    );
    let w = run_watched(&ctx.node, &ns, "sidecar", &f, 120.0, 0.5)?;
    let s = &w.f.series;
    let grace = match (w.t_del, s.t_fin()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    // a sidecar that ignores SIGTERM holds the pod for the whole grace period (30 s); one
    // that exits on it lets the pod go within seconds
    let grace_ok = grace.is_some_and(|g| if v == "term" { g < 25.0 } else { g >= 25.0 });
    expect(&id, s.fin() == Finished::Failed && grace_ok, || {
        format!(
            "want Failed, {} 25 s from the watch's delete; got {:?}, delete → Failed {grace:?} s",
            if v == "term" { "under" } else { "at least" },
            s.fin()
        )
    })?;
    let grace_s = grace
        .map(|g| format!("{g:.1}"))
        .unwrap_or_else(|| "-".into());
    row(
        &mut ctx.out,
        &id,
        [
            &format!(
                "`pullcheck watch`; Job with a **native sidecar** (init container `restartPolicy: Always`) that {what}, terminationGracePeriodSeconds 30; app image: missing tag"
            ),
            &format!("**{}**: {}", s.fin().as_str(), md_escape(&w.cond)),
            &format!("{}; **delete → Job Failed {grace_s} s**", w.times_str()),
            &md_escape(&s.timeline()),
            &md_escape(&w.events),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    summary(
        &mut ctx.out,
        &id,
        format!(
            "**Native sidecar that {what}** (9i): the watch deletes the pod at {} s; Job Failed at {} s: **{grace_s} s** from delete to Failed.",
            t_str(w.t_del),
            t_str(s.t_fin())
        ),
    );
    let notes = format!("Job condition: `{}`.", w.cond);
    save_detail(
        ctx,
        &id,
        &format!("Scenario 9i: native sidecar ({v})"),
        &w.f,
        &f,
        &notes,
    );
    Ok(())
}
