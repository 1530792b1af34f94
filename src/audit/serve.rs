//! `pullcheck audit --serve`: the audit as an exporter. One pass at start, then one every
//! interval, while `/metrics`, `/healthz` and `/readyz` are served ([`crate::serve`]).
//!
//! - Passes run one after the other in one task, so a pass never overlaps the next; a
//!   pass is bounded by the interval (one that has not ended by then is dropped, counted
//!   `timed_out`), and the next starts one interval after the previous one started, or at
//!   once when that moment has passed.
//! - Each pass gets a fresh resolver state (engine, verdict cache, Secret cache): a verdict
//!   or a Secret read in one pass is never reused by the next, so a tag deleted since is
//!   seen as deleted.
//! - A failed pass is counted and logged; the last good results stay exported and their
//!   age says how old they are ([`super::metrics`]).
//! - `/readyz` turns ready once the first pass has ended, good or not, so that Prometheus
//!   can scrape (and alert on) a pass that fails from the start.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;

use super::metrics::{AuditMetrics, MetricNames, PassOutcome};
use super::report::Report;
use super::{Note, Pass};
use crate::apiserver::ApiClient;
use crate::verdict::Verdict;
use crate::webhook::handler::WebhookState;

/// What `/readyz` answers before the first pass has ended.
const NOT_READY: &str = "not ready: the first audit pass has not ended\n";

/// What the exporter does, from `pullcheck audit --serve`'s flags.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Where `/metrics` and the probes are served (plain HTTP).
    pub listen: SocketAddr,
    /// From the start of one pass to the start of the next; also the bound of one pass.
    pub interval: Duration,
    /// Which metric names.
    pub names: MetricNames,
    /// Per-image rows exported at most.
    pub max_series: usize,
    /// The namespace audited (`None`: every one).
    pub namespace: Option<String>,
    /// The time one workload's images may take (`--timeout`).
    pub budget: Duration,
}

/// Makes the resolver state of one pass; an error is a line to log (the pass fails).
pub(crate) type NewState = Box<dyn Fn() -> Result<Arc<WebhookState>, String> + Send + Sync>;

/// Serve until SIGTERM or SIGINT. Prints `pullcheck audit: listening on http://ADDR` on
/// stderr once bound. Errors: the address can't be bound.
pub(crate) async fn serve(
    client: ApiClient,
    settings: Settings,
    new_state: NewState,
) -> std::io::Result<()> {
    let metrics = Arc::new(AuditMetrics::new(
        settings.names,
        settings.max_series,
        settings.interval,
    ));
    let ready = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind(settings.listen).await?;
    eprintln!(
        "pullcheck audit: listening on http://{}",
        listener.local_addr()?
    );
    let app: Router = crate::serve::probe_routes(
        {
            let ready = ready.clone();
            move || ready.load(Ordering::SeqCst)
        },
        NOT_READY,
        {
            let metrics = metrics.clone();
            move || metrics.render(Instant::now())
        },
    );
    let work = tokio::spawn(passes(client, settings, new_state, metrics, ready));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(crate::serve::shutdown_signal())
        .await;
    work.abort();
    served
}

/// The loop: a pass now, then one every interval, forever.
async fn passes(
    client: ApiClient,
    settings: Settings,
    new_state: NewState,
    metrics: Arc<AuditMetrics>,
    ready: Arc<AtomicBool>,
) {
    let mut ticker = tokio::time::interval(settings.interval);
    // A pass that ran long delays the next start instead of starting a burst to catch up.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut said: Vec<Note> = Vec::new();
    loop {
        ticker.tick().await;
        let started = Instant::now();
        let result =
            tokio::time::timeout(settings.interval, one(&client, &settings, &new_state)).await;
        let took = started.elapsed();
        match result {
            Ok(Ok((report, notes))) => {
                // Said when they change, not every pass: the same 403 every ten minutes is noise.
                if notes != said {
                    for n in &notes {
                        tracing::info!("{n}");
                    }
                    said = notes;
                }
                tracing::info!(
                    "audit pass: {} in {:.1} s",
                    summary(&report),
                    took.as_secs_f64()
                );
                metrics.record(&report, took, Instant::now());
            }
            Ok(Err(line)) => {
                tracing::warn!(
                    "audit pass failed after {:.1} s: {line}; the last results are kept",
                    took.as_secs_f64()
                );
                metrics.failed(PassOutcome::Failed, took);
            }
            Err(_) => {
                tracing::warn!(
                    "audit pass did not end within the interval ({} s) and was abandoned; the last results are kept",
                    settings.interval.as_secs()
                );
                metrics.failed(PassOutcome::TimedOut, took);
            }
        }
        ready.store(true, Ordering::SeqCst);
    }
}

/// One pass with a fresh state.
async fn one(
    client: &ApiClient,
    settings: &Settings,
    new_state: &NewState,
) -> Result<(Report, Vec<Note>), String> {
    let state = new_state()?;
    let pass = Pass {
        state,
        client,
        namespace: settings.namespace.as_deref(),
        budget: settings.budget,
        now: jiff::Timestamp::now(),
    };
    super::run(pass, &|_| {}).await.map_err(|e| e.to_string())
}

/// `7 workloads, 7 images: 3 pullable, 4 not (exit 11)`.
fn summary(report: &Report) -> String {
    let images: Vec<Verdict> = report
        .workloads
        .iter()
        .flat_map(|w| w.images.iter().map(|i| i.verdict))
        .collect();
    let pullable = images.iter().filter(|v| **v == Verdict::Pullable).count();
    format!(
        "{}, {}: {pullable} pullable, {} not (exit {})",
        crate::report::count(report.workloads.len(), "workload"),
        crate::report::count(images.len(), "image"),
        images.len() - pullable,
        report.exit_code
    )
}
