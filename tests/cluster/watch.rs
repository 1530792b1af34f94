//! Scenarios 9a, 9b and 9e: `pullcheck watch` as a host process acting on the kubelet's
//! ErrImagePull of plain Jobs, and doing nothing for a present image; the watch's start and
//! what the other scenarios 9 read of it (its log, its Events).

use std::io::BufRead as _;
use std::path::Path;
use std::time::SystemTime;

use crate::node::{Node, NodeError, run_ok};
use crate::run::{
    Followed, Plan, expect, free_port, job_cond, job_yaml, row, run_job, run_plan, save_detail,
    spawn, wait_ready,
};
use crate::sample::Finished;
use crate::scenarios::Ctx;
use crate::series::{md_escape, t_str};

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
pub const WATCH_LABEL_KV: &str = "pullcheck.io/watch=on";

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
pub fn watch_deleted_t(node: &Node, ns: &str, t0: SystemTime) -> Option<f64> {
    watch_log_t(node, ns, t0, |fields| fields.contains(&"deleted=true"))
}

/// Seconds from `t0` to the watch's first log line about a pod of `ns` whose fields
/// satisfy `pred`.
pub fn watch_log_t(
    node: &Node,
    ns: &str,
    t0: SystemTime,
    pred: impl Fn(&[&str]) -> bool,
) -> Option<f64> {
    let f = std::fs::File::open(node.work.join("watch.log")).ok()?;
    let pod = format!("pod={ns}/");
    for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.iter().any(|w| w.starts_with(&pod)) && pred(&fields) {
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

/// How many of the pods the samples saw the watch deleted (its log line about the pod
/// has `deleted=true`; a pod of an earlier run's Job of the same name does not count).
pub fn deleted_seen(node: &Node, ns: &str, series: &crate::series::Series) -> usize {
    let log = std::fs::read_to_string(node.work.join("watch.log")).unwrap_or_default();
    let mut names: Vec<&String> = series.0.iter().flat_map(|s| &s.pod_names).collect();
    names.sort();
    names.dedup();
    names
        .iter()
        .filter(|n| {
            let pod = format!("pod={ns}/{n}");
            log.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.contains(&pod.as_str()) && f.contains(&"deleted=true")
            })
        })
        .count()
}

/// How many of the watch's Events in `ns` have `reason`.
pub fn n_events(node: &Node, ns: &str, reason: &str) -> Result<usize, NodeError> {
    let ev = node.kubectl_json(&["-n", ns, "get", "events"])?;
    Ok(ev["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["source"]["component"] == "pullcheck-watch" && e["reason"] == reason)
        .count())
}

/// The watch's Events in `ns`: `Reason on Kind: message`, unique, ` / `-joined.
pub fn watch_events(node: &Node, ns: &str) -> Result<String, NodeError> {
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
pub struct Watched {
    /// The run.
    pub f: Followed,
    /// The Job's terminal condition (`Type reason: message`).
    pub cond: String,
    /// Its reason.
    pub reason: String,
    /// The watch's Events in the namespace.
    pub events: String,
    /// The first pull failure: the first sample showing it, or the delete if earlier.
    pub t_err: Option<f64>,
    /// When the watch deleted the pod (its log).
    pub t_del: Option<f64>,
}

impl Watched {
    /// Seconds from the first pull failure to the terminal condition.
    pub fn err_to_fin(&self) -> String {
        match (self.t_err, self.f.series.t_fin()) {
            (Some(a), Some(b)) => format!("{:.1}", b - a),
            _ => "-".into(),
        }
    }

    /// The doc's time cell: after create, after the first ErrImagePull, delete, release.
    pub fn times_str(&self) -> String {
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

/// The first sample showing a pull failure (ErrImagePull, ImagePullBackOff,
/// InvalidImageName) of any of the pods.
pub fn first_pull_failure(series: &crate::series::Series) -> Option<f64> {
    series.first_t(|s| {
        s.waiting.iter().any(|r| {
            matches!(
                r.as_str(),
                "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName"
            )
        })
    })
}

/// Create `manifest` and follow the Job `ns/name` (sampled every `every` s, at most
/// `max_s`), then read what the watch did.
pub fn run_watched(
    node: &Node,
    ns: &str,
    name: &str,
    manifest: &str,
    max_s: f64,
    every: f64,
) -> Result<Watched, NodeError> {
    let plan = Plan {
        every,
        ..Plan::job(ns, name)
    };
    let f = run_plan(node, &plan, manifest, max_s, &mut |_| {})?;
    let t_del = watch_deleted_t(node, ns, f.t0);
    // The watch deletes within milliseconds of the kubelet's report, often before a 0.5 s
    // sample shows the ErrImagePull: the delete is then the best bound on the first failure.
    let pulled = first_pull_failure(&f.series);
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

/// Scenario 9a.
pub fn s9a(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns, name) = ("ff-s9a", "plain");
    ctx.node.new_ns(ns, Some(WATCH_LABEL_KV))?;
    let f = job_yaml(ns, name, &ctx.node.missing(), "Never", 0, "1", "2Gi", "");
    let w = run_watched(&ctx.node, ns, name, &f, 120.0, 0.5)?;
    let s = &w.f.series;
    expect(
        "9a",
        s.fin() == Finished::Failed
            && w.reason == "BackoffLimitExceeded"
            && s.pods_seen() == 1
            && w.t_del.is_some()
            && s.t_free().is_some(),
        || {
            format!(
                "want Failed (BackoffLimitExceeded) on its one pod after the watch deleted it, requests released; got {:?} {:?} after {} pods, deleted at {:?}, released at {:?}",
                s.fin(),
                w.reason,
                s.pods_seen(),
                w.t_del,
                s.t_free()
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
pub fn watch_rule(node: &Node) -> Result<String, NodeError> {
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

/// Scenario 9b.
pub fn s9b(ctx: &mut Ctx) -> Result<(), NodeError> {
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
    let w = run_watched(&ctx.node, ns, name, &f, 120.0, 0.5)?;
    let s = &w.f.series;
    let pods = s.pods_seen();
    expect(
        "9b",
        s.fin() == Finished::Failed
            && w.reason == "PodFailurePolicy"
            && pods == 1
            // the watch's condition matched the rule inject --fail-fast writes
            && w
                .cond
                .contains("pullcheck.io/ImagePullFailed matching FailJob rule at index 0"),
        || {
            format!(
                "want Failed by PodFailurePolicy (the watch's condition matching the rule at index 0) on 1 pod, got {:?} {:?} after {pods}",
                s.fin(),
                w.cond
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

/// Scenario 9e: a present image, plain Jobs outside and inside the watch's namespaces.
pub fn s9e(ctx: &mut Ctx) -> Result<(), NodeError> {
    let (ns_plain, ns_w) = ("ff-s9e-plain", "ff-s9e-watched");
    ctx.node.new_ns(ns_plain, None)?;
    ctx.node.new_ns(ns_w, Some(WATCH_LABEL_KV))?;
    let mut text = String::new();
    let mut t = std::collections::BTreeMap::new();
    let mut fins = Vec::new();
    let (mut watched_1, mut watched_2) = (None, None);
    for i in 1..=2 {
        for v in ["plain", "watched"] {
            let ns = format!("ff-s9e-{v}");
            let name = format!("{v}-{i}");
            let f = job_yaml(&ns, &name, &ctx.node.present(), "Never", 0, "1", "2Gi", "");
            let r = run_job(&ctx.node, &ns, &name, &f, 120.0)?;
            let fin = r.series.fin();
            text.push_str(&format!(
                "run {i}, {v}: Job {} at **{} s**<br>",
                fin.as_str(),
                t_str(r.series.t_fin())
            ));
            t.insert(format!("{v}_{i}"), r.series.t_fin());
            fins.push(fin);
            if v == "watched" {
                if i == 1 {
                    watched_1 = Some(r);
                } else {
                    watched_2 = Some(r);
                }
            }
        }
    }
    let events = watch_events(&ctx.node, ns_w)?;
    expect(
        "9e",
        fins.iter().all(|f| *f == Finished::Complete) && events.is_empty(),
        || format!("want 4 Complete Jobs and no watch Event, got {fins:?}, Events {events:?}"),
    )?;
    let g = |k: &str| t.get(k).copied().flatten();
    let ts = |k: &str| t_str(g(k));
    let d1 = crate::jobs::diff(g("plain_1"), g("watched_1"));
    let d2 = crate::jobs::diff(g("plain_2"), g("watched_2"));
    let fin_s = fins
        .iter()
        .map(|f| f.as_str())
        .collect::<Vec<_>>()
        .join(" / ");
    let (w1, w2) = (
        watched_1.expect("two watched runs"),
        watched_2.expect("two watched runs"),
    );
    let ev = if events.is_empty() {
        "none".to_string()
    } else {
        events
    };
    row(
        &mut ctx.out,
        "9e",
        [
            "`pullcheck watch` running; present tag (cached); 4 plain Jobs in turn: outside the watch's namespaces, inside, outside, inside",
            &format!("{fin_s}; watch Events: {ev}"),
            &format!(
                "outside {} / {} s; watched {} / {} s; **difference {d1} / {d2} s**",
                ts("plain_1"),
                ts("plain_2"),
                ts("watched_1"),
                ts("watched_2")
            ),
            &md_escape(&text),
            "—",
            &w1.series.alloc_str(),
            &w2.series.last_alloc(),
        ],
    );
    ctx.out.summaries.insert("9e".into(), format!(
        "- **Present image under the watch** (9e): Jobs complete in {} / {} s outside and {} / {} s inside the watch's namespaces ({d1} / {d2} s: the sampling noise; the watch writes nothing for a pod that pulls).",
        ts("plain_1"), ts("plain_2"), ts("watched_1"), ts("watched_2")));
    Ok(())
}
