//! Scenarios 1, 4 and 6b: the baseline without pullcheck, a transient failure (the
//! workload registry stopped) under `--transient count|ignore`, and restartPolicy OnFailure
//! with backoffLimit 6 running beside the others.

use std::time::Instant;

use crate::node::NodeError;
use crate::run::{
    Plan, RegistryDown, exit_codes, expect, job_cond, job_failed, job_yaml, phases, row, run_job,
    run_plan, save_detail, since, summary, window,
};
use crate::sample::{Finished, termination_text};
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};

/// Scenario 1: no pullcheck, a missing tag; the Job is still active at the end of the
/// window (FF_BASELINE_WINDOW, 120 s) and only deleting it frees the node.
pub fn s1(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s1", "baseline");
    let w = window("FF_BASELINE_WINDOW", 120);
    ctx.node.new_ns(ns, None)?;
    let f = job_yaml(ns, name, &ctx.node.missing(), "Never", 0, "1", "2Gi", "");
    let r = run_job(&ctx.node, ns, name, &f, w as f64)?;
    let s = &r.series;
    let last = s.0.last().cloned();
    let state = last.as_ref().map(|x| x.job.clone()).unwrap_or_default();
    let active = last.as_ref().map(|x| x.pods.clone()).unwrap_or_default();
    let held = s.last_alloc();
    let td0 = Instant::now();
    ctx.node.kubectl_ok(
        &[
            "-n",
            ns,
            "delete",
            "job",
            name,
            "--cascade=foreground",
            "--wait=true",
        ],
        None,
    )?;
    let tdel = since(td0);
    let node_name = ctx.node.var("PULLCHECK_NODE").to_string();
    let after = ctx.node.kubectl_json(&["get", "pods", "-A"])?["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            p["spec"]["nodeName"] == node_name.as_str()
                && p["metadata"]["namespace"] == ns
                && p["status"]["phase"] != "Succeeded"
                && p["status"]["phase"] != "Failed"
        })
        .count();
    expect(
        "1",
        s.fin() == Finished::Running && s.pods_seen() == 1 && after == 0,
        || {
            format!(
                "want still active on its one pod, and no pod left after the delete; got {:?} after {} pods, {after} left",
                s.fin(),
                s.pods_seen()
            )
        },
    )?;
    row(
        &mut ctx.out,
        "1",
        [
            "no pullcheck; restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; tag does not exist",
            &format!("**still active after {w} s** ({state})"),
            "— (never)",
            &md_escape(&s.timeline()),
            "—",
            &s.alloc_str(),
            &format!(
                "still held at {w} s: {held}; released only by deleting the Job ({tdel} s, {after} pods left)"
            ),
        ],
    );
    summary(
        &mut ctx.out,
        "1",
        format!(
            "**Without pullcheck** (1): after {w} s the Job is still active, its pod cycling ErrImagePull/ImagePullBackOff and holding {} of the node; only deleting the Job frees it.",
            s.alloc_str()
        ),
    );
    let notes = format!(
        "At the end of the {w} s window: `{state}`, pods `{active}`. The reservation was released only by `kubectl delete job --cascade=foreground`."
    );
    save_detail(
        ctx,
        "1",
        "Scenario 1: baseline without pullcheck",
        &r,
        &f,
        &notes,
    );
    // the chart's last point: the window's end, the requests still held
    let (cpu, mem) = last
        .map(|x| (crate::sample::num(x.ns_cpu_m), x.ns_mem_mi))
        .unwrap_or_else(|| ("0".into(), 0));
    if let Some(rows) = ctx.out.timelines.get_mut("1") {
        rows.push_str(&format!(
            "1,{w}.0,{cpu},{mem},window end: Job still active\n"
        ));
    }
    Ok(())
}

/// Scenario 4: `inject --fail-fast --transient MODE` with the workload registry stopped
/// before creation and started again once two pods failed; `count` (backoffLimit 6) counts
/// the failures, `ignore` (backoffLimit 0, activeDeadlineSeconds 600) does not.
pub fn s4(ctx: &mut Ctx) -> Result<(), NodeError> {
    s4_mode(ctx, "count")?;
    s4_mode(ctx, "ignore")
}

fn s4_mode(ctx: &mut Ctx, mode: &str) -> Result<(), NodeError> {
    let ns = format!("ff-s4-{mode}");
    let name = "transient";
    let (backoff, extra, row_id, want_failed) = if mode == "count" {
        (6, "", "4a", 2)
    } else {
        (0, "  activeDeadlineSeconds: 600", "4b", 0)
    };
    ctx.node.new_ns(&ns, None)?;
    let plain = job_yaml(
        &ns,
        name,
        &ctx.node.present(),
        "Never",
        backoff,
        "1",
        "2Gi",
        extra,
    );
    let f = ctx
        .node
        .inject(&plain, &["--fail-fast", "--transient", mode])?
        .stdout;
    let down = RegistryDown::stop(&ctx.node)?;
    // started again from the sampler once two pods failed; the time is kept for the doc
    let mut down = Some(down);
    let mut hook = None;
    let mut hook_err = None;
    let t0 = Instant::now();
    let r = run_plan(&ctx.node, &Plan::job(&ns, name), &f, 400.0, &mut |s| {
        if s.failed_pods >= 2
            && let Some(d) = down.take()
        {
            eprintln!(
                "[fail-fast]   t={:.1}s: {} failed pods: registry-start",
                s.t, s.failed_pods
            );
            if let Err(e) = d.start() {
                hook_err = Some(e);
            }
            hook = Some(since(t0));
        }
    })?;
    drop(down);
    if let Some(e) = hook_err {
        return Err(e);
    }
    let hook = hook.unwrap_or_else(|| "-".into());
    let msg = termination_text(&r.terms);
    let (cond, _) = job_cond(&ctx.node, &ns, name)?;
    let pods = phases(&ctx.node, &ns, "job-name=transient")?;
    let failed = job_failed(&ctx.node, &ns, name)?;
    let s = &r.series;
    expect(
        &format!("4{mode}"),
        s.fin() == Finished::Complete
            && pods == "2 Failed, 1 Succeeded"
            && failed == want_failed
            && exit_codes(&r.terms) == [0, 20],
        || {
            format!(
                "want Complete after 2 Failed pods (exit 20) and 1 Succeeded, .status.failed={want_failed}; got {:?}, pods {pods}, .status.failed={failed}, exits {:?}",
                s.fin(),
                exit_codes(&r.terms)
            )
        },
    )?;
    let deadline = if extra.is_empty() {
        ""
    } else {
        ", activeDeadlineSeconds 600"
    };
    row(
        &mut ctx.out,
        row_id,
        [
            &format!(
                "`inject --fail-fast --transient {mode}`; backoffLimit {backoff}{deadline}; present tag, **workload registry stopped** before creation, restarted after 2 failed pods (at {hook} s)"
            ),
            &format!(
                "**{}**: {}; pods: {pods}; Job .status.failed={failed}",
                s.fin().as_str(),
                md_escape(&cond)
            ),
            &format!("{} s", t_str(s.t_fin())),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    let id = format!("4{mode}");
    summary(
        &mut ctx.out,
        &id,
        format!(
            "**Registry down** (4, `--transient {mode}`, backoffLimit {backoff}): pods exit 20 (transient) and are retried; Job `.status.failed` = {failed}; after the registry restart ({hook} s) the Job is {} at {} s.",
            s.fin().as_str(),
            t_str(s.t_fin())
        ),
    );
    let notes = format!(
        "Pods: {pods}; Job `.status.failed` = {failed}. Job condition: `{cond}`. Termination messages of `pullcheck`: `{msg}`."
    );
    save_detail(
        ctx,
        &id,
        &format!("Scenario 4 ({mode}): transient failure, registry restarted at {hook} s"),
        &r,
        &f,
        &notes,
    );
    Ok(())
}

/// Scenario 6b: restartPolicy OnFailure, backoffLimit 6, for up to FF_ONFAILURE_WINDOW
/// (1080 s), beside the others (jobs::s6).
pub fn s6b(ctx: &mut Ctx) -> Result<(), NodeError> {
    eprintln!("[fail-fast] scenario 6b (OnFailure, backoffLimit 6) runs in the background");
    ctx.in_background("6b", |c| crate::jobs::s6(c, "b"));
    Ok(())
}
