//! Scenarios 2, 3 and 5: Jobs with the init container (`pullcheck inject`), a missing tag
//! and a present one.

use crate::node::NodeError;
use crate::run::{exit_codes, expect, job_cond, job_yaml, row, run_job, save_detail};
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
    let (ns, name) = ("ff-s6a", "onfailure");
    ctx.node.new_ns(ns, None)?;
    let plain = job_yaml(
        ns,
        name,
        &ctx.node.missing(),
        "OnFailure",
        0,
        "1",
        "2Gi",
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
    let r = run_job(&ctx.node, ns, name, &f, 300.0)?;
    let (cond, _) = job_cond(&ctx.node, ns, name)?;
    let msg = r.msg();
    let s = &r.series;
    let (restarts, _) = s.restarts();
    expect(
        "6a",
        s.fin() == Finished::Failed && exit_codes(&r.terms) == [11],
        || {
            format!(
                "want Failed with exit 11, got {:?} {:?}",
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
    row(
        &mut ctx.out,
        "6a",
        [
            "`inject --fail-fast` (warns, no podFailurePolicy); **restartPolicy OnFailure**, backoffLimit 0; 1 CPU / 2Gi; tag does not exist",
            &outcome,
            &format!("{} s{released}", t_str(s.t_fin())),
            &md_escape(&s.timeline()),
            &md_escape(&msg),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("6a".into(), format!(
        "- **restartPolicy OnFailure, backoffLimit 0** (6a): Failed at **{} s** after {restarts} restarts of the failing init container (CrashLoopBackOff), the pod Pending and holding its requests all along.",
        t_str(s.t_fin())));
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
        "6a",
        "Scenario 6a: restartPolicy OnFailure, backoffLimit 0",
        &r,
        &f,
        &notes,
    );
    Ok(())
}

/// Scenario 10b: `--transient restart` (KEP-5307 container restart rules), missing tag,
/// restartPolicy Never.
pub fn s10b(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s10b", "missing");
    ctx.node.new_ns(ns, None)?;
    let plain = job_yaml(
        ns,
        name,
        &ctx.node.missing(),
        "Never",
        6,
        "1",
        "2Gi",
        "  activeDeadlineSeconds: 1200",
    );
    let args = [
        "--fail-fast",
        "--transient",
        "restart",
        "--kubernetes-version",
        "1.35",
    ];
    let f = ctx.node.inject(&plain, &args)?.stdout;
    let r = run_job(&ctx.node, ns, name, &f, 180.0)?;
    let (cond, reason) = job_cond(&ctx.node, ns, name)?;
    let msg = r.msg();
    let s = &r.series;
    let (pods, (_, init_r), held) = (s.pods_seen(), s.restarts(), s.held_s());
    expect(
        "10b",
        s.fin() == Finished::Failed
            && reason == "PodFailurePolicy"
            && pods == 1
            && exit_codes(&r.terms) == [11],
        || {
            format!(
                "want Failed by PodFailurePolicy on exit 11 after 1 pod, got {:?} {reason:?} {:?} after {pods}",
                s.fin(),
                exit_codes(&r.terms)
            )
        },
    )?;
    row(
        &mut ctx.out,
        "10b",
        [
            "`inject --fail-fast --transient restart`; **restartPolicy Never**, backoffLimit 6, activeDeadlineSeconds 1200; 1 / 2Gi; tag does not exist",
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
    ctx.out.summaries.insert("10b".into(), format!(
        "- **Missing tag, `--transient restart`, restartPolicy Never** (10b): {} at **{} s** after {pods} pod(s), {init_r} init restarts, the node held {held} s in all.",
        s.fin().as_str(), t_str(s.t_fin())));
    let notes = format!("Job condition: `{cond}`. Termination message: `{msg}`.");
    save_detail(
        ctx,
        "10b",
        "Scenario 10b: --transient restart, missing tag, Never",
        &r,
        &f,
        &notes,
    );
    Ok(())
}
