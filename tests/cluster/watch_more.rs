//! Scenarios 9d, 9f, 9g and 9h: what `pullcheck watch` does with a registry only the
//! kubelet can read (9d), a registry outage (9f, nothing: a transient failure), an index
//! without the node's platform (9g) and a Deployment's pod (9h, only an Event).

use std::path::Path;
use std::time::Instant;

use crate::dockerhub::{kubelet_failed_msg, push_arm64_index};
use crate::node::{NodeError, run_ok};
use crate::run::{RegistryDown, expect, follow, job_yaml, row, save_detail, summary, window};
use crate::sample::{Finished, Target};
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};
use crate::watch::{
    WATCH_LABEL_KV, deleted_seen, first_pull_failure, n_events, run_watched, watch_deleted_t,
    watch_events,
};

/// Lines of the scripted ECR API's call log (one GetAuthorizationToken each).
fn ecr_calls(log: &str) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Scenario 9d: a plain Job on a registry only the kubelet can read (its
/// ecr-credential-provider, a scripted ECR API, TLS + htpasswd); the watch holds no
/// credential and can't resolve the name: it acts on the kubelet's message alone. Then the
/// present tag there: it completes and the watch does nothing.
pub fn s9d(ctx: &mut Ctx) -> Result<(), NodeError> {
    let ecr = ctx.node.var("PULLCHECK_ECR_HOST").to_string();
    if ecr.is_empty() {
        return Err(NodeError::Setup(
            "scenario 9d needs the node started with PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1 (scripts/cluster.sh down; PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1 scripts/cluster.sh up)".into(),
        ));
    }
    let api_log = ctx.node.var("PULLCHECK_ECR_API_LOG").to_string();
    let ns = "ff-s9d";
    let img = format!("{ecr}/work/app:no-such-tag");
    let present = format!("{ecr}/work/app:v1");
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    let c0 = ecr_calls(&api_log);
    let f = job_yaml(ns, "missing", &img, "Never", 0, "1", "2Gi", "");
    let m = run_watched(&ctx.node, ns, "missing", &f, 120.0, 0.5)?;
    let c1 = ecr_calls(&api_log);
    let kmsg = kubelet_failed_msg(&ctx.node, ns, "missing-")?;
    let ms = &m.f.series;
    let notes = format!(
        "Job condition: `{}`. The kubelet's message: `{kmsg}`. The watch's Events: `{}`. GetAuthorizationToken calls (the kubelet's provider): {}.",
        m.cond,
        m.events,
        c1.saturating_sub(c0)
    );
    save_detail(
        ctx,
        "9d",
        "Scenario 9d: the watch, a registry only the kubelet can read (credential provider)",
        &m.f,
        &f,
        &notes,
    );
    let fp = job_yaml(ns, "present", &present, "Never", 0, "1", "2Gi", "");
    let p = run_watched(&ctx.node, ns, "present", &fp, 120.0, 0.5)?;
    let c2 = ecr_calls(&api_log);
    let p_deleted = deleted_seen(&ctx.node, ns, &p.f.series);
    let p_del = if p_deleted == 0 {
        "none".to_string()
    } else {
        format!("{p_deleted} pod(s)")
    };
    let ev = ctx.node.kubectl_json(&["-n", ns, "get", "events"])?;
    let p_events = ev["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["source"]["component"] == "pullcheck-watch"
                && e["involvedObject"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("present-"))
        })
        .count();
    let ps = &p.f.series;
    expect(
        "9d",
        ms.fin() == Finished::Failed
            && m.t_del.is_some()
            && ps.fin() == Finished::Complete
            && p_deleted == 0
            && p_events == 0,
        || {
            format!(
                "want the missing tag Failed after the watch deleted its pod, the present one Complete untouched; got {:?} (deleted at {:?}), present {:?} with {p_deleted} deleted and {p_events} Events",
                ms.fin(),
                m.t_del,
                ps.fin()
            )
        },
    )?;
    row(
        &mut ctx.out,
        "9d",
        [
            &format!(
                "`pullcheck watch` **holding no registry credential** (it can't resolve the name either); plain Job, no inject, **no pull secret**, restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; image `{img}` on a registry only the kubelet can read (`ecr-credential-provider`, scripted ECR API, TLS + htpasswd)"
            ),
            &format!(
                "**{}**: {}; pods: {}. The present tag `work/app:v1` on it: **{}** at {} s, deleted by the watch: {p_del}, watch Events on it: {p_events}",
                ms.fin().as_str(),
                md_escape(&m.cond),
                ms.pods_seen(),
                ps.fin().as_str(),
                t_str(ps.t_fin())
            ),
            &m.times_str(),
            &md_escape(&ms.timeline()),
            &format!(
                "kubelet: {}<br>watch: {}",
                md_escape(&kmsg),
                md_escape(&m.events)
            ),
            &ms.alloc_str(),
            &ms.last_alloc(),
        ],
    );
    summary(
        &mut ctx.out,
        "9d",
        format!(
            "**The watch, a registry only the kubelet can read** (9d, ECR credential provider, no pull secret, the watch holding no credential): Failed at **{} s**, {} s after the kubelet's first ErrImagePull ({} s; \"not found\" through the provider's credentials); requests released at {} s. The present tag there: {} at {} s, nothing deleted.",
            t_str(ms.t_fin()),
            m.err_to_fin(),
            t_str(m.t_err),
            t_str(ms.t_free()),
            ps.fin().as_str(),
            t_str(ps.t_fin())
        ),
    );
    let more = format!(
        "The present tag `{present}` on the same registry (manifest as above with `name: present`): {} at {} s; deleted by the watch: {p_del}; watch Events on it: {p_events}; condition `{}`. GetAuthorizationToken calls for it: {} (the kubelet caches the provider's answer per registry).\n\n",
        ps.fin().as_str(),
        t_str(ps.t_fin()),
        p.cond,
        c2.saturating_sub(c1)
    );
    if let Some(d) = ctx.out.details.get_mut("9d") {
        d.push_str(&more);
    }
    Ok(())
}

/// Scenario 9f: the watch at its default (no `--transient-grace`), a tag the node never
/// pulled, the workload registry stopped before creation and started again after
/// FF_OUTAGE (30 s): the watch only records PullcheckNotActing and the Job completes.
pub fn s9f(ctx: &mut Ctx) -> Result<(), NodeError> {
    let ns = "ff-s9f";
    let down_s = window("FF_OUTAGE", 30);
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    // a tag the node has never pulled (work/app:v1 is cached there by now, and IfNotPresent
    // would not pull it at all)
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let img = format!("{}/work/app:outage-{epoch}", ctx.node.wreg());
    let (src, dst) = (
        format!("docker://{}", ctx.node.present()),
        format!("docker://{img}"),
    );
    run_ok(
        Path::new("/usr/bin/skopeo"),
        &[
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            &src,
            &dst,
        ],
        None,
        120,
    )?;
    let f = job_yaml(ns, "outage", &img, "Never", 0, "1", "2Gi", "");
    let restarter = RegistryDown::stop(&ctx.node)?.start_after(down_s);
    let w = run_watched(&ctx.node, ns, "outage", &f, 240.0, 0.5);
    restarter
        .join()
        .map_err(|_| NodeError::Setup("registry-start thread panicked".into()))??;
    let w = w?;
    let notact = n_events(&ctx.node, ns, "PullcheckNotActing")?;
    let s = &w.f.series;
    let pods = s.pods_seen();
    expect(
        "9f",
        s.fin() == Finished::Complete && w.t_del.is_none() && pods == 1 && notact == 1,
        || {
            format!(
                "want Complete on its one pod, nothing deleted, 1 PullcheckNotActing Event; got {:?} after {pods} pods, deleted at {:?}, {notact} Events",
                s.fin(),
                w.t_del
            )
        },
    )?;
    let deleted = match w.t_del {
        None => "none".to_string(),
        Some(t) => format!("at {t:.1} s"),
    };
    row(
        &mut ctx.out,
        "9f",
        [
            &format!(
                "`pullcheck watch` at default (no `--transient-grace`); plain Job, backoffLimit 0; a tag present in the registry and not on the node, **workload registry stopped** before creation, started again at {down_s} s"
            ),
            &format!(
                "**{}**: {}; pods: {pods}; deleted by the watch: {deleted}",
                s.fin().as_str(),
                md_escape(&w.cond)
            ),
            &format!(
                "{} s (first pull failure {} s)",
                t_str(s.t_fin()),
                t_str(w.t_err)
            ),
            &md_escape(&s.timeline()),
            &md_escape(&w.events),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    summary(
        &mut ctx.out,
        "9f",
        format!(
            "**Registry down, watch at default** (9f): nothing deleted ({pods} pod, {notact} PullcheckNotActing Event); the Job is {} at {} s after the registry came back at {down_s} s (the kubelet's own pull back-off).",
            s.fin().as_str(),
            t_str(s.t_fin())
        ),
    );
    let notes = format!(
        "Job condition: `{}`. The watch's Events: `{}`.",
        w.cond, w.events
    );
    save_detail(
        ctx,
        "9f",
        "Scenario 9f: registry down, the watch at default",
        &w.f,
        &f,
        &notes,
    );
    Ok(())
}

/// Scenario 9g: an index whose only entry is linux/arm64 on the linux/amd64 node: the
/// kubelet's "no match for platform" is platform_missing, and the watch fails the Job.
pub fn s9g(ctx: &mut Ctx) -> Result<(), NodeError> {
    let ns = "ff-s9g";
    let img = format!("{}/work/armonly:v1", ctx.node.wreg());
    push_arm64_index(&ctx.node, &img)?;
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    let f = job_yaml(ns, "armonly", &img, "Never", 0, "1", "2Gi", "");
    let w = run_watched(&ctx.node, ns, "armonly", &f, 120.0, 0.5)?;
    let s = &w.f.series;
    expect(
        "9g",
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
        "9g",
        [
            "`pullcheck watch`; plain Job, backoffLimit 0; image `work/armonly:v1`, an index with **linux/arm64 only** (node linux/amd64)",
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
    summary(
        &mut ctx.out,
        "9g",
        format!(
            "**Platform missing** (9g, arm64-only index): Failed at **{} s**, {} s after the first ErrImagePull.",
            t_str(s.t_fin()),
            w.err_to_fin()
        ),
    );
    let notes = format!(
        "Job condition: `{}`. The watch's Events: `{}`.",
        w.cond, w.events
    );
    save_detail(
        ctx,
        "9g",
        "Scenario 9g: the watch, index without the node's platform",
        &w.f,
        &f,
        &notes,
    );
    Ok(())
}

/// What the watch did to the pods of a controller that is not a batch/v1 Job (9h, and
/// 9h-pytorch in kubeflow.rs): pods now and terminating, its Events, and the first delete.
pub struct NotActing {
    /// Pods with the selector now.
    pub now: usize,
    /// Of those, with a deletionTimestamp.
    pub deleting: usize,
    /// The watch's Events in the namespace.
    pub events: String,
    /// How many of them are PullcheckNotActing.
    pub n: usize,
    /// When the watch deleted a pod (its log), if it did.
    pub deleted: Option<f64>,
}

/// Read [`NotActing`] for the pods of `ns` labelled `selector`, created at `t0`.
pub fn not_acting(
    ctx: &Ctx,
    ns: &str,
    selector: &str,
    t0: std::time::SystemTime,
) -> Result<NotActing, NodeError> {
    let pods = ctx
        .node
        .kubectl_json(&["-n", ns, "get", "pods", "-l", selector])?;
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    Ok(NotActing {
        now: items.len(),
        deleting: items
            .iter()
            .filter(|p| !p["metadata"]["deletionTimestamp"].is_null())
            .count(),
        events: watch_events(&ctx.node, ns)?,
        n: n_events(&ctx.node, ns, "PullcheckNotActing")?,
        deleted: watch_deleted_t(&ctx.node, ns, t0),
    })
}

/// Scenario 9h: a Deployment (1 replica) with a missing tag for FF_NOT_ACTING_WINDOW
/// (30 s): its pod's controller is a ReplicaSet, so the watch only records
/// PullcheckNotActing. No detail section (as before): the row says it all.
pub fn s9h(ctx: &mut Ctx) -> Result<(), NodeError> {
    let ns = "ff-s9h";
    let win = window("FF_NOT_ACTING_WINDOW", 30);
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    let f = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web, job-name: web}}}}
    spec:
      hostNetwork: true
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: {}
          resources:
            requests: {{cpu: 250m, memory: 256Mi}}
            limits: {{cpu: 250m, memory: 256Mi}}
",
        ctx.node.missing()
    );
    let t0 = std::time::SystemTime::now();
    let start = Instant::now();
    ctx.node.kubectl_ok(&["create", "-f", "-"], Some(&f))?;
    // the pods carry job-name=web so that the sampler follows them; there is no Job
    let s = follow(
        &ctx.node,
        &Target::job(ns, "web"),
        "jobs",
        start,
        win as f64,
        0.5,
    );
    let na = not_acting(ctx, ns, "app=web", t0)?;
    let t_err = first_pull_failure(&s);
    let seen = s.pods_seen();
    expect(
        "9h",
        t_err.is_some() && na.deleted.is_none() && na.n == 1 && seen == 1 && na.now == 1,
        || {
            format!(
                "want 1 pod failing to pull, not deleted, 1 PullcheckNotActing Event; got {seen} seen, {} now, first ErrImagePull at {t_err:?}, deleted at {:?}, {} Events",
                na.now, na.deleted, na.n
            )
        },
    )?;
    row(
        &mut ctx.out,
        "9h",
        [
            &format!(
                "`pullcheck watch`; **a Deployment** (1 replica), missing tag, {win} s window"
            ),
            &format!(
                "pods: {seen} created, {} now, {} terminating; deleted by the watch: {}; {} PullcheckNotActing Event(s)",
                na.now,
                na.deleting,
                if na.deleted.is_none() { "none" } else { "yes" },
                na.n
            ),
            &format!(
                "— (a Deployment never finishes; first ErrImagePull {} s)",
                t_str(t_err)
            ),
            &md_escape(&s.timeline()),
            &md_escape(&na.events),
            &s.alloc_str(),
            &s.last_alloc(),
        ],
    );
    summary(
        &mut ctx.out,
        "9h",
        format!(
            "**A Deployment** (9h): the watch records {} `PullcheckNotActing` Event and deletes nothing (the pod's controller is a ReplicaSet; a PyTorchJob's pod: 9h-pytorch).",
            na.n
        ),
    );
    ctx.node.kubectl_ok(
        &["-n", ns, "delete", "deployment", "web", "--wait=false"],
        None,
    )?;
    Ok(())
}
