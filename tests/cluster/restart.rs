//! Scenarios 10a, 10b and 10c: `inject --fail-fast --transient restart` (KEP-5307 container
//! restart rules): the init container restarted in place on a transient failure (10a, the
//! workload registry down) and a missing tag under restartPolicy Never (10b) and OnFailure
//! (10c, retried for minutes: beside the others).

use crate::node::NodeError;
use crate::run::{
    Plan, RESTART_ARGS, RegistryDown, exit_codes, expect, job_cond, job_failed, job_yaml, row,
    run_job, run_plan, save_detail, summary, window,
};
use crate::sample::Finished;
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};

/// Scenario 10a: a present tag with the workload registry stopped before creation and
/// started again after FF_OUTAGE (30 s): one pod, its init container restarted in place,
/// nothing counted toward backoffLimit.
pub fn s10a(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s10a", "outage");
    let down_s = window("FF_OUTAGE", 30);
    ctx.node.new_ns(ns, None)?;
    let plain = job_yaml(
        ns,
        name,
        &ctx.node.present(),
        "Never",
        6,
        "1",
        "2Gi",
        "  activeDeadlineSeconds: 600",
    );
    let f = ctx.node.inject(&plain, RESTART_ARGS)?.stdout;
    let restarter = RegistryDown::stop(&ctx.node)?.start_after(down_s);
    let r = run_job(&ctx.node, ns, name, &f, 400.0);
    restarter
        .join()
        .map_err(|_| NodeError::Setup("registry-start thread panicked".into()))??;
    let r = r?;
    let (cond, _) = job_cond(&ctx.node, ns, name)?;
    let msg = r.msg();
    let failed = job_failed(&ctx.node, ns, name)?;
    let s = &r.series;
    let (pods, (_, init_r)) = (s.pods_seen(), s.restarts());
    expect(
        "10a",
        s.fin() == Finished::Complete
            && pods == 1
            && failed == 0
            && init_r >= 1
            && exit_codes(&r.terms) == [0],
        || {
            format!(
                "want Complete on 1 pod whose init container restarted in place (last exit 0), .status.failed=0; got {:?}, {pods} pods, {init_r} restarts, .status.failed={failed}, exits {:?}",
                s.fin(),
                exit_codes(&r.terms)
            )
        },
    )?;
    row(
        &mut ctx.out,
        "10a",
        [
            &format!(
                "`inject --fail-fast --transient restart`; restartPolicy Never, backoffLimit 6, activeDeadlineSeconds 600; present tag, **workload registry stopped** before creation, started again at {down_s} s"
            ),
            &format!(
                "**{}**: {}; pods created: {pods}; init container restarts: {init_r}; Job .status.failed={failed}",
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
    summary(
        &mut ctx.out,
        "10a",
        format!(
            "**Registry down, `--transient restart`** (10a): {pods} pod, its init container restarted {init_r} times in place, Job `.status.failed` = {failed}; {} at {} s after the registry came back at {down_s} s (compare 4a: new pods, counted failures).",
            s.fin().as_str(),
            t_str(s.t_fin())
        ),
    );
    let notes = format!(
        "Job condition: `{cond}`; `.status.failed` = {failed}. Termination messages: `{msg}`."
    );
    save_detail(
        ctx,
        "10a",
        &format!("Scenario 10a: --transient restart, registry down {down_s} s"),
        &r,
        &f,
        &notes,
    );
    Ok(())
}

/// Scenario 10b: a missing tag, restartPolicy Never: the podFailurePolicy fails the Job on
/// the first pod.
pub fn s10b(ctx: &mut Ctx) -> Result<(), NodeError> {
    missing(ctx, "b")
}

/// Scenario 10c: a missing tag, restartPolicy OnFailure, for up to FF_ONFAILURE_WINDOW
/// (1080 s) beside the others.
pub fn s10c(ctx: &mut Ctx) -> Result<(), NodeError> {
    eprintln!("[fail-fast] scenario 10c (restart, OnFailure) runs in the background");
    ctx.in_background("10c", |c| missing(c, "c"));
    Ok(())
}

/// 10b (`v` = b: Never, 1 CPU / 2Gi, 180 s) or 10c (c: OnFailure, 200m / 256Mi, sampled
/// every 1 s): a missing tag under `--transient restart`.
fn missing(ctx: &mut Ctx, v: &str) -> Result<(), NodeError> {
    let id = format!("10{v}");
    let ns = format!("ff-s10{v}");
    let name = "missing";
    let (policy, cpu, mem, max, every) = if v == "b" {
        ("Never", "1", "2Gi", 180.0, 0.5)
    } else {
        (
            "OnFailure",
            "200m",
            "256Mi",
            window("FF_ONFAILURE_WINDOW", 1080) as f64,
            1.0,
        )
    };
    ctx.node.new_ns(&ns, None)?;
    let plain = job_yaml(
        &ns,
        name,
        &ctx.node.missing(),
        policy,
        6,
        cpu,
        mem,
        "  activeDeadlineSeconds: 1200",
    );
    let f = ctx.node.inject(&plain, RESTART_ARGS)?.stdout;
    let plan = Plan {
        every,
        ..Plan::job(&ns, name)
    };
    let r = run_plan(&ctx.node, &plan, &f, max, &mut |_| {})?;
    let (cond, reason) = job_cond(&ctx.node, &ns, name)?;
    let msg = r.msg();
    let s = &r.series;
    let (pods, (_, init_r), held) = (s.pods_seen(), s.restarts(), s.held_s());
    // Never: the podFailurePolicy's FailJob on exit 11, one pod. OnFailure forbids a
    // podFailurePolicy: every failed pod counts, backoffLimit 6 allows 7.
    let (want_reason, want_pods) = if v == "b" {
        ("PodFailurePolicy", 1)
    } else {
        ("BackoffLimitExceeded", 7)
    };
    expect(
        &id,
        s.fin() == Finished::Failed
            && reason == want_reason
            && pods == want_pods
            && init_r == 0
            && exit_codes(&r.terms) == [11],
        || {
            format!(
                "want Failed by {want_reason} on exit 11 after {want_pods} pod(s), no init restart; got {:?} {reason:?} {:?} after {pods}, {init_r} restarts",
                s.fin(),
                exit_codes(&r.terms)
            )
        },
    )?;
    let sampled = if v == "c" { "; sampled every 1 s" } else { "" };
    row(
        &mut ctx.out,
        &id,
        [
            &format!(
                "`inject --fail-fast --transient restart`; **restartPolicy {policy}**, backoffLimit 6, activeDeadlineSeconds 1200; {cpu} / {mem}; tag does not exist{sampled}"
            ),
            &format!(
                "**{}**: {}; pods: {pods}; init restarts: {init_r}",
                s.fin().as_str(),
                md_escape(&cond)
            ),
            &format!("**{} s**; requests held {held} s in all", t_str(s.t_fin())),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    let why = if v == "c" {
        "; each pod fails at once, but without a podFailurePolicy (OnFailure forbids it) every failed pod counts toward backoffLimit, so the Job controller retries with new pods under its back-off"
    } else {
        ""
    };
    summary(
        &mut ctx.out,
        &id,
        format!(
            "**Missing tag, `--transient restart`, restartPolicy {policy}** ({id}): {} at **{} s** after {pods} pod(s), {init_r} init restarts, the node held {held} s in all{why}.",
            s.fin().as_str(),
            t_str(s.t_fin())
        ),
    );
    let notes = format!("Job condition: `{cond}`. Termination message: `{msg}`.");
    save_detail(
        ctx,
        &id,
        &format!("Scenario {id}: --transient restart, missing tag, {policy}"),
        &r,
        &f,
        &notes,
    );
    Ok(())
}
