//! What every long-running face (`webhook`, `watch`, the controllers to come) serves beside
//! its own work, written once: `/healthz`, `/readyz`, `/metrics` ([`probe_routes`]), and
//! the signal that ends it ([`shutdown_signal`]).

use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};

/// The OpenMetrics text exposition's content type (prometheus-client's encoder writes that
/// format, `# EOF` included).
pub(crate) const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `/healthz` (always `ok`: the process answers), `/readyz` (200 `ok` while `ready()` is
/// true, else 503 with the line `not_ready`) and `/metrics` (200 with what `metrics()`
/// renders, as [`OPENMETRICS`]). The routes use no router state, so they merge into any.
pub(crate) fn probe_routes<S>(
    ready: impl Fn() -> bool + Clone + Send + Sync + 'static,
    not_ready: &'static str,
    metrics: impl Fn() -> String + Clone + Send + Sync + 'static,
) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || async move {
                if ready() {
                    (StatusCode::OK, "ok\n").into_response()
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, not_ready).into_response()
                }
            }),
        )
        .route(
            "/metrics",
            get(move || async move {
                let text = metrics();
                Response::builder()
                    .header(header::CONTENT_TYPE, OPENMETRICS)
                    .body(axum::body::Body::from(text))
                    .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
            }),
        )
}

/// Resolves on SIGTERM (the kubelet's stop) or SIGINT (Ctrl-C). Where the SIGTERM handler
/// can't be installed, only SIGINT ends it.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    async fn get_text(app: &Router, path: &str) -> (u16, String, Option<String>) {
        use tower::ServiceExt as _;
        let resp = app
            .clone()
            .oneshot(
                http::Request::get(path)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string());
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap(), ct)
    }

    #[tokio::test]
    async fn the_probe_routes_answer_as_documented() {
        let ready = Arc::new(AtomicBool::new(false));
        let r = ready.clone();
        let app: Router = probe_routes(
            move || r.load(Ordering::SeqCst),
            "not ready: no pod list yet\n",
            || "# EOF\n".to_string(),
        );
        assert_eq!(get_text(&app, "/healthz").await.0, 200);
        assert_eq!(
            get_text(&app, "/readyz").await,
            (
                503,
                "not ready: no pod list yet\n".to_string(),
                Some("text/plain; charset=utf-8".to_string())
            )
        );
        ready.store(true, Ordering::SeqCst);
        assert_eq!(get_text(&app, "/readyz").await.0, 200);
        assert_eq!(
            get_text(&app, "/metrics").await,
            (200, "# EOF\n".to_string(), Some(OPENMETRICS.to_string()))
        );
    }
}
