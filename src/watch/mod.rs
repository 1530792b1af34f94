//! `pullcheck watch`: act on the kubelet's own image-pull failures, so a Job whose image
//! can't be pulled fails in seconds whatever created its pods and wherever its images live.
//!
//! - [`classify`] turns a container's waiting reason and message into one of pullcheck's
//!   verdicts; [`decide`] applies the written decision table (docs/watch.md). Both pure.
//! - [`pod`] reads what a pod object says (the failing container, the controller, the
//!   marker); pure too.
//! - [`controller`] lists and watches Pending pods through [`api`] and carries decisions out:
//!   condition, Events, delete with a UID precondition.
//! - [`serve`] runs the controller beside `/healthz`, `/readyz` and `/metrics`; [`once`]
//!   reports what it would do, for `pullcheck watch --once`.

pub(crate) mod api;
pub(crate) mod classify;
pub(crate) mod controller;
pub(crate) mod decide;
mod metrics;
pub(crate) mod pod;
#[cfg(test)]
mod recorded;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};
use serde_json::{Value, json};

pub(crate) use controller::Settings;
use controller::{Assessment, assess, explain_failure, why_text};
use decide::Decision;

/// What `--once` found: one assessment per failing Pending pod in scope (the same
/// `--namespace-label` scope as the running watch).
pub(crate) async fn once(
    api: &api::WatchApi,
    settings: &Settings,
) -> Result<Vec<Assessment>, api::ApiError> {
    let (pods, _) = api.list_pending().await?;
    let now = SystemTime::now();
    let mut scope: HashMap<String, bool> = HashMap::new();
    let mut out = Vec::new();
    for f in pods
        .iter()
        .filter_map(pod::finding)
        .filter(|f| !f.terminating && !f.skipped && f.failure.is_some())
    {
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

/// `--once -o json`: `{"schema_version":1,"pods":[{namespace,name,container,image,reason,
/// verdict,action,why,marked}]}`.
pub(crate) fn report_json(report: &[Assessment]) -> String {
    let pods: Vec<Value> = report
        .iter()
        .map(|a| {
            let f = a
                .finding
                .failure
                .as_ref()
                .expect("assessed findings have a failure");
            let (action, why) = decision_text(a);
            json!({
                "namespace": a.finding.pod.namespace,
                "name": a.finding.pod.name,
                "container": f.container,
                "image": f.image,
                "reason": f.classification.reason.map(|r| r.as_str()),
                "verdict": f.classification.verdict.map(|v| v.as_str()),
                "action": action,
                "why": why,
                "marked": a.finding.marked,
            })
        })
        .collect();
    serde_json::to_string_pretty(&json!({"schema_version": 1, "pods": pods})).unwrap_or_default()
        + "\n"
}

/// `--once` as a table.
pub(crate) fn report_text(report: &[Assessment]) -> String {
    if report.is_empty() {
        return "no Pending pod is failing an image pull\n".into();
    }
    let mut out = String::from("POD\tCONTAINER\tKUBELET\tVERDICT\tACTION\tWHY\n");
    for a in report {
        let f = a
            .finding
            .failure
            .as_ref()
            .expect("assessed findings have a failure");
        let (action, why) = decision_text(a);
        out.push_str(&format!(
            "{}/{}\t{}\t{}\t{}\t{}\t{}\n",
            a.finding.pod.namespace,
            a.finding.pod.name,
            f.container,
            f.classification.reason.map_or("-", |r| r.as_str()),
            f.classification.verdict.map_or("unknown", |v| v.as_str()),
            action,
            why
        ));
    }
    out
}

#[derive(Clone)]
struct Shared {
    ready: Arc<AtomicBool>,
    metrics: Arc<metrics::WatchMetrics>,
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<Shared>) -> Response {
    if s.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no pod list yet\n",
        )
            .into_response()
    }
}

async fn metrics_text(State(s): State<Shared>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.render(),
    )
        .into_response()
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
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(Shared {
            ready: ready.clone(),
            metrics: metrics.clone(),
        });
    let controller = controller::Controller::new(api, settings, metrics, ready);
    let work = tokio::spawn(controller.run());
    axum::serve(listener, app)
        .with_graceful_shutdown(crate::webhook::server::shutdown_signal())
        .await?;
    work.abort();
    Ok(())
}
