//! `pullcheck watch`: act on the kubelet's own image-pull failures, so a Job whose image
//! can't be pulled fails in seconds whatever created its pods and wherever its images live.
//!
//! - [`classify`] turns a container's waiting reason and message into one of pullcheck's
//!   verdicts; [`decide`] applies the written decision table (docs/watch.md). Both pure.
//! - [`pod`] reads what a pod object says (the failing container, the controller, the
//!   marker); pure too.
//! - [`controller`] is the reconciler: for one pod, the decision carried out (condition,
//!   Events, delete with a UID precondition) through [`api`]'s calls, with the wording of
//!   [`text`] and the rate limit of [`ratelimit`].
//! - [`serve`] runs it on the controller runtime ([`crate::runtime`]: list and watch of
//!   Pending pods, per-pod queue, bounded concurrency) beside `/healthz`, `/readyz` and
//!   `/metrics`; [`once`] reports what it would do, for `pullcheck watch --once`.

pub(crate) mod api;
pub(crate) mod classify;
pub(crate) mod controller;
pub(crate) mod decide;
mod metrics;
pub(crate) mod pod;
mod ratelimit;
#[cfg(test)]
mod recorded;
pub(crate) mod text;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use axum::Router;
use serde_json::{Value, json};

pub(crate) use controller::Settings;
use controller::{Assessment, assess};
use decide::Decision;
use text::{explain_failure, why_text};

use crate::runtime::Source;

/// What `--once` found: one assessment per failing Pending pod in scope (the same
/// `--namespace-label` scope as the running watch).
pub(crate) async fn once(
    api: &api::WatchApi,
    settings: &Settings,
) -> Result<Vec<Assessment>, api::ApiError> {
    let (pods, _) = api.pending_pods().list().await?;
    let now = SystemTime::now();
    let mut scope: HashMap<String, bool> = HashMap::new();
    let mut out = Vec::new();
    for f in pods.iter().filter_map(pod::finding).filter(|f| {
        f.lifecycle == pod::Lifecycle::Live && f.scope == pod::Scope::Watched && f.failure.is_some()
    }) {
        let in_scope = match scope.get(&f.pod.namespace) {
            Some(ok) => *ok,
            None => {
                let ok = controller::namespace_in_scope(api, settings, &f.pod.namespace).await?;
                scope.insert(f.pod.namespace.clone(), ok);
                ok
            }
        };
        if in_scope {
            out.extend(assess(f, settings, now, now));
        }
    }
    // By namespace, then pod: the API server lists in its storage key order, in which
    // `team-a-x/` comes before `team-a/`.
    out.sort_by(|a, b| {
        (&a.finding.pod.namespace, &a.finding.pod.name)
            .cmp(&(&b.finding.pod.namespace, &b.finding.pod.name))
    });
    Ok(out)
}

fn decision_text(a: &Assessment) -> (String, String) {
    let f = a
        .finding
        .failure
        .as_ref()
        .expect("assessed findings have a failure");
    match &a.decision {
        Decision::Act { verdict } => (
            "delete".into(),
            format!(
                "{}: would mark and delete the pod",
                explain_failure(f, *verdict)
            ),
        ),
        Decision::Wait { .. } => (
            "wait".into(),
            "transient: would act once --transient-grace has passed".into(),
        ),
        Decision::EventOnly { why } => ("event".into(), why_text(why)),
        Decision::Ignore => ("none".into(), String::new()),
    }
}

/// `--once -o json`: `{"schema_version":1,"exit_code":N,"pods":[{namespace,name,container,
/// image,reason,verdict,action,why,marked}]}`; `exit_code` is the process's, as in every other
/// `-o json` document.
pub(crate) fn report_json(
    report: &[Assessment],
    exit_code: u8,
) -> Result<String, crate::report::json::RenderError> {
    let pods: Vec<Value> = report
        .iter()
        .map(|a| {
            let f = a
                .finding
                .failure
                .as_ref()
                .expect("assessed findings have a failure");
            let (action, why) = decision_text(a);
            let mut row = json!({
                "namespace": a.finding.pod.namespace,
                "name": a.finding.pod.name,
                "container": f.container,
                "image": f.image,
                "reason": f.classification.reason.map(|r| r.as_str()),
                "verdict": f.classification.verdict.map(|v| v.as_str()),
                "action": action,
                "why": why,
                "marked": a.finding.mark == pod::Mark::Marked,
            });
            if let Some(v) = &f.volume {
                row["volume"] = json!(v);
            }
            row
        })
        .collect();
    crate::report::json::render(&json!({
        "schema_version": crate::report::json::SCHEMA_VERSION,
        "exit_code": exit_code,
        "pods": pods,
    }))
}

/// `--once` as a table, aligned as kubectl aligns its tables.
pub(crate) fn report_text(report: &[Assessment]) -> String {
    if report.is_empty() {
        return "no Pending pod is failing an image pull\n".into();
    }
    let mut rows: Vec<Vec<String>> = vec![
        ["POD", "CONTAINER", "KUBELET", "VERDICT", "ACTION", "WHY"]
            .map(String::from)
            .to_vec(),
    ];
    for a in report {
        let f = a
            .finding
            .failure
            .as_ref()
            .expect("assessed findings have a failure");
        let (action, why) = decision_text(a);
        rows.push(vec![
            format!("{}/{}", a.finding.pod.namespace, a.finding.pod.name),
            f.container.clone(),
            f.classification.reason.map_or("-", |r| r.as_str()).into(),
            f.classification
                .verdict
                .map_or("unknown", |v| v.as_str())
                .into(),
            action,
            why,
        ]);
    }
    aligned(&rows)
}

/// Rows as kubectl prints a table: Go's `text/tabwriter` with kubectl's settings
/// (`k8s.io/cli-runtime/pkg/printers/tabwriter.go` `GetNewTabWriter`: minwidth 6, padding 3,
/// padded with spaces, left-aligned). Every column but the last is as wide as its widest
/// cell plus 3, at least 6; the last is not padded, and no line ends in a space.
fn aligned(rows: &[Vec<String>]) -> String {
    const MIN_WIDTH: usize = 6;
    const PADDING: usize = 3;
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns.saturating_sub(1))
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count() + PADDING)
                .max()
                .unwrap_or(0)
                .max(MIN_WIDTH)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if let Some(w) = widths.get(c)
                && c + 1 < row.len()
            {
                line.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `--once --exit-code`: the code `check` would give the verdicts of the pods the watch
/// would act on (the lowest permanent code among them, else 20, else 0), so a script sees
/// "it would act" and why from the code alone. Pods it would only report don't count.
pub(crate) fn once_exit_code(report: &[Assessment]) -> u8 {
    crate::verdict::combined_exit_code(report.iter().filter_map(|a| match a.decision {
        Decision::Act { verdict } => Some(verdict),
        _ => None,
    }))
}

/// Run the controller and the HTTP endpoints until SIGTERM or SIGINT. Prints `pullcheck
/// watch: listening on http://ADDR` on stderr once bound. Errors: the address can't be bound.
pub(crate) async fn serve(
    api: api::WatchApi,
    settings: Settings,
    listen: SocketAddr,
) -> std::io::Result<()> {
    let ready = Arc::new(AtomicBool::new(false));
    let metrics = Arc::new(metrics::WatchMetrics::new());
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!(
        "pullcheck watch: listening on http://{}{}",
        listener.local_addr()?,
        if settings.dry_run { " (dry run)" } else { "" }
    );
    let app: Router = crate::serve::probe_routes(
        {
            let ready = ready.clone();
            move || ready.load(Ordering::SeqCst)
        },
        "not ready: no pod list yet\n",
        {
            let metrics = metrics.clone();
            move || metrics.render()
        },
    );
    let status = crate::runtime::Status {
        ready,
        lists: metrics.relists.clone(),
    };
    let pods = api.pending_pods();
    let reconciler = Arc::new(controller::PodReconciler::new(
        api,
        settings,
        metrics,
        crate::runtime::Clock::system(),
    ));
    let runtime = crate::runtime::Settings {
        kind: "pods",
        concurrency: controller::CONCURRENCY,
    };
    let work = tokio::spawn(crate::runtime::run(pods, reconciler, runtime, status));
    axum::serve(listener, app)
        .with_graceful_shutdown(crate::serve::shutdown_signal())
        .await?;
    work.abort();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Pending pod of `owner` (a Job when `Some`) whose `main` container waits on `message`.
    fn stuck(name: &str, job: bool, message: &str) -> Assessment {
        let owners = if job {
            json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}])
        } else {
            json!([])
        };
        let pod = json!({
            "metadata": {"namespace": "ml", "name": name, "uid": name, "resourceVersion": "1",
                "ownerReferences": owners},
            "spec": {"containers": [{"name": "main", "image": "r.io/app:nope"}]},
            "status": {"containerStatuses": [{"name": "main", "state": {"waiting": {
                "reason": "ErrImagePull", "message": message}}}]},
        });
        let settings = Settings {
            dry_run: false,
            transient_grace: None,
            deletions_per_minute: 1,
            namespace_label: None,
            hosts_dir: None,
        };
        let now = SystemTime::now();
        assess(pod::finding(&pod).unwrap(), &settings, now, now).unwrap()
    }

    const NOT_FOUND: &str = "rpc error: code = NotFound desc = failed to pull and unpack image \"r.io/app:nope\": failed to resolve image: r.io/app:nope: not found";
    const DOWN: &str = "rpc error: code = Unknown desc = failed to pull and unpack image \"r.io/app:nope\": failed to resolve reference \"r.io/app:nope\": failed to do request: Head \"https://r.io/v2/app/manifests/nope\": dial tcp 10.0.0.1:443: connect: connection refused";

    #[test]
    fn the_table_is_aligned_as_kubectl_aligns_it() {
        let rows = vec![
            vec!["NAME".to_string(), "A".into(), "LAST".into()],
            vec!["a-long-name".to_string(), "".into(), "x y".into()],
            vec!["b".to_string(), "bb".into(), "".into()],
        ];
        assert_eq!(
            aligned(&rows),
            "NAME          A     LAST\na-long-name         x y\nb             bb\n"
        );
    }

    #[test]
    fn once_text_and_exit_code() {
        let job = stuck("train-0", true, NOT_FOUND);
        let bare = stuck("bare", false, NOT_FOUND);
        let down = stuck("down-0", true, DOWN);
        let text = report_text(&[job.clone(), bare.clone(), down.clone()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "POD          CONTAINER   KUBELET        VERDICT     ACTION   WHY"
        );
        assert!(
            lines[1].starts_with("ml/train-0   main        ErrImagePull   not_found   delete   "),
            "{text}"
        );
        assert_eq!(
            lines[2],
            "ml/bare      main        ErrImagePull   not_found   event    not_found but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done"
        );
        assert_eq!(
            lines[3],
            "ml/down-0    main        ErrImagePull   transient   event    a transient failure and --transient-grace is off; the kubelet keeps retrying"
        );
        // --exit-code: the verdicts of the pods it would act on only.
        assert_eq!(once_exit_code(&[job, bare.clone(), down.clone()]), 11);
        assert_eq!(once_exit_code(&[bare, down]), 0);
        assert_eq!(once_exit_code(&[]), 0);
    }
}
