//! Scenarios 2, 3, 5 and 6a/6b: Jobs with the init container (`pullcheck inject`), a
//! missing tag and a present one.

use crate::node::NodeError;
use crate::run::{
    Plan, exit_codes, expect, job_cond, job_yaml, row, run_job, run_plan, save_detail, window,
};
use crate::sample::{Finished, termination_text};
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};

/// Scenario 2.
pub fn s2(ctx: &mut Ctx) -> Result<(), NodeError> {
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

/// Scenario 3.
pub fn s3(ctx: &mut Ctx) -> Result<(), NodeError> {
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
pub fn diff(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:+.1}", b - a),
        _ => "-".into(),
    }
}

/// Scenario 5.
pub fn s5(ctx: &mut Ctx) -> Result<(), NodeError> {
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

/// Scenario 6a: restartPolicy OnFailure, backoffLimit 0 (inject warns: no podFailurePolicy
/// is allowed with OnFailure).
pub fn s6a(ctx: &mut Ctx) -> Result<(), NodeError> {
    s6(ctx, "a")
}

/// Scenario 6`v`: restartPolicy OnFailure, `a` backoffLimit 0 with 1 CPU / 2Gi, or `b`
/// backoffLimit 6 with 250m / 256Mi sampled every 2 s for up to FF_ONFAILURE_WINDOW (it
/// runs beside the others: baseline::s6b).
pub fn s6(ctx: &mut Ctx, v: &str) -> Result<(), NodeError> {
    let id = format!("6{v}");
    let ns = format!("ff-s6{v}");
    let name = "onfailure";
    let (backoff, cpu, mem, max, every) = if v == "a" {
        (0, "1", "2Gi", 300.0, 0.5)
    } else {
        (
            6,
            "250m",
            "256Mi",
            window("FF_ONFAILURE_WINDOW", 1080) as f64,
            2.0,
        )
    };
    ctx.node.new_ns(&ns, None)?;
    let plain = job_yaml(
        &ns,
        name,
        &ctx.node.missing(),
        "OnFailure",
        backoff,
        cpu,
        mem,
        "",
    );
    let injected = ctx.node.inject(&plain, &["--fail-fast"])?;
    let warn = injected
        .stderr
        .lines()
        .filter(|l| l.to_lowercase().contains("warn"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    let f = injected.stdout;
    let plan = Plan {
        every,
        ..Plan::job(&ns, name)
    };
    let r = run_plan(&ctx.node, &plan, &f, max, &mut |_| {})?;
    let (cond, reason) = job_cond(&ctx.node, &ns, name)?;
    let msg = r.msg();
    let s = &r.series;
    let (restarts, _) = s.restarts();
    // 6a fails once its one restart is spent; 6b once the Job controller counted six
    let want_reason = if v == "a" {
        reason.as_str()
    } else {
        "BackoffLimitExceeded"
    };
    expect(
        &id,
        s.fin() == Finished::Failed && exit_codes(&r.terms) == [11] && reason == want_reason,
        || {
            format!(
                "want Failed ({want_reason}) with exit 11, got {:?} {reason:?} {:?}",
                s.fin(),
                exit_codes(&r.terms)
            )
        },
    )?;
    let last = s.0.last().map(|x| x.pods.clone()).unwrap_or_default();
    let outcome = if s.fin() == Finished::Running {
        format!(
            "**still active after {} s** (window): {last}",
            t_str(s.0.last().map(|x| x.t))
        )
    } else {
        format!("**{}**: {}", s.fin().as_str(), md_escape(&cond))
    };
    let released = s
        .t_free()
        .map(|t| format!(" (requests released at {t:.1} s)"))
        .unwrap_or_default();
    let size = if v == "a" {
        "1 CPU / 2Gi"
    } else {
        "250m / 256Mi"
    };
    row(
        &mut ctx.out,
        &id,
        [
            &format!(
                "`inject --fail-fast` (warns, no podFailurePolicy); **restartPolicy OnFailure**, backoffLimit {backoff}; {size}; tag does not exist"
            ),
            &outcome,
            &format!("{} s{released}", t_str(s.t_fin())),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    let when = if s.fin() == Finished::Running {
        "still active at the end of the window".to_string()
    } else {
        format!("Failed at **{} s**", t_str(s.t_fin()))
    };
    ctx.out.summaries.insert(id.clone(), format!(
        "- **restartPolicy OnFailure, backoffLimit {backoff}** ({id}): {when} after {restarts} restarts of the failing init container (CrashLoopBackOff), the pod Pending and holding its requests all along."));
    let cond_s = if cond.is_empty() {
        "none".to_string()
    } else {
        cond
    };
    let notes = format!(
        "inject's warning: `{}`. Job condition: `{cond_s}`. Termination message: `{msg}`.",
        md_escape(&warn)
    );
    save_detail(
        ctx,
        &id,
        &format!("Scenario {id}: restartPolicy OnFailure, backoffLimit {backoff}"),
        &r,
        &f,
        &notes,
    );
    Ok(())
}
