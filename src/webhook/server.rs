//! HTTPS server: axum routes on axum-server with rustls (ring).
//!
//! - The certificate and key are re-read every `--reload-interval` and swapped in when their
//!   contents changed (cert-manager rotates them through a symlink swap; polling and comparing
//!   contents is simpler and safer than watching inodes). A pair that doesn't load keeps the
//!   old one serving, and is tried again on the next tick.
//! - Bodies above [`MAX_BODY_BYTES`] are refused with 413 before they are read when
//!   `Content-Length` says so, and while reading otherwise.
//! - SIGTERM (or SIGINT): `/readyz` turns 503 and, for a short settle period
//!   ([`settle_period`]), requests are still served but every answer carries
//!   `Connection: close`; then the listener closes and in-flight requests finish within the
//!   rest of `--shutdown-grace`. Closing at once would drop the requests that keep-alive
//!   clients (the API server) have already written to an idle connection: the server closes
//!   idle connections unread, and a POST is not retried.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::handler::{WebhookState, admit};
use super::triage::Webhook;

/// Largest admission review accepted (the API server's own request limit is 3 MiB).
pub(crate) const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

type Shared = Arc<WebhookState>;

/// Why the server could not start or stopped serving.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// `--tls-cert` or `--tls-key` can't be read.
    #[error("{flag} {}: {source}", path.display())]
    Read {
        /// `--tls-cert` or `--tls-key`.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O failure, or "not a regular file".
        source: crate::files::FileError,
    },
    /// The pair does not load as a certificate chain and its key.
    #[error("--tls-cert {} / --tls-key {}: {source}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        source: std::io::Error,
    },
    /// Binding or serving failed.
    #[error("--listen {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The I/O failure.
        source: std::io::Error,
    },
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

fn too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("admission review larger than {MAX_BODY_BYTES} bytes\n"),
    )
        .into_response()
}

async fn read_body(headers: &HeaderMap, body: Body) -> Result<Bytes, Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| too_large())
}

async fn review(state: Shared, webhook: Webhook, headers: HeaderMap, body: Body) -> Response {
    let bytes = match read_body(&headers, body).await {
        Ok(b) => b,
        Err(r) => {
            state
                .metrics
                .admission(webhook, "unknown", super::metrics::Answer::TooLarge, 0.0);
            return r;
        }
    };
    let (status, value) = admit(&state, webhook, &bytes).await;
    json(status, &value)
}

async fn validate(State(s): State<Shared>, headers: HeaderMap, body: Body) -> Response {
    review(s, Webhook::Validate, headers, body).await
}

async fn mutate(State(s): State<Shared>, headers: HeaderMap, body: Body) -> Response {
    review(s, Webhook::Mutate, headers, body).await
}

/// `/validate` and `/mutate` (POST), `/healthz`, `/readyz` and `/metrics` (GET).
pub(crate) fn router(state: Shared) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .merge(crate::serve::probe_routes(
            {
                let s = state.clone();
                move || s.ready.load(Ordering::SeqCst)
            },
            "not ready\n",
            {
                let s = state.clone();
                move || s.metrics.render(s.engine.registry().requests_sent())
            },
        ))
        .with_state(state)
}

/// The routes, answering with `Connection: close` once `closing` is set (after SIGTERM), so
/// that each keep-alive connection ends right after an answer instead of being closed while
/// a request may already be on its way.
pub(crate) fn router_closing_when(state: Shared, closing: Arc<AtomicBool>) -> Router {
    router(state).layer(axum::middleware::map_response(move |mut res: Response| {
        let closing = closing.clone();
        async move {
            if closing.load(Ordering::SeqCst) {
                res.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            res
        }
    }))
}

/// How long requests are still served (with `Connection: close`) after SIGTERM before the
/// listener closes: a quarter of the grace period, at most 2 s.
pub(crate) fn settle_period(grace: Duration) -> Duration {
    (grace / 4).min(Duration::from_secs(2))
}

/// The largest serving certificate chain or key read.
const MAX_TLS_FILE_BYTES: u64 = 1024 * 1024;

async fn read_file(flag: &'static str, path: &Path) -> Result<Vec<u8>, ServeError> {
    crate::files::read_capped_async(path, MAX_TLS_FILE_BYTES)
        .await
        .map_err(|source| ServeError::Read {
            flag,
            path: path.to_path_buf(),
            source,
        })
}

async fn read_pair(state: &WebhookState) -> Result<(Vec<u8>, Vec<u8>), ServeError> {
    let c = &state.config;
    let cert = read_file("--tls-cert", &c.tls_cert).await?;
    let key = read_file("--tls-key", &c.tls_key).await?;
    Ok((cert, key))
}

/// Poll the certificate files and swap them in when they change.
async fn reload_loop(state: Shared, tls: RustlsConfig, mut current: (Vec<u8>, Vec<u8>)) {
    let every = state.config.reload_interval;
    loop {
        tokio::time::sleep(every).await;
        let pair = match read_pair(&state).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the serving certificate; keeping the current one");
                continue;
            }
        };
        if pair == current {
            continue;
        }
        match tls.reload_from_pem(pair.0.clone(), pair.1.clone()).await {
            Ok(()) => {
                tracing::info!("serving certificate reloaded");
                current = pair;
            }
            Err(e) => {
                tracing::warn!(error = %e, "new certificate or key does not load; keeping the current one")
            }
        }
    }
}

/// Serve until SIGTERM; returns after in-flight requests have drained (or the grace period
/// ended). Prints `pullcheck webhook: listening on https://ADDR` on stderr once bound.
pub(crate) async fn serve(state: Shared) -> Result<(), ServeError> {
    crate::pem::install_crypto_provider();
    let pair = read_pair(&state).await?;
    let tls = RustlsConfig::from_pem(pair.0.clone(), pair.1.clone())
        .await
        .map_err(|source| ServeError::Pair {
            cert: state.config.tls_cert.clone(),
            key: state.config.tls_key.clone(),
            source,
        })?;
    let reloader = tokio::spawn(reload_loop(state.clone(), tls.clone(), pair));
    let handle: Handle<SocketAddr> = Handle::new();
    {
        let handle = handle.clone();
        let state = state.clone();
        tokio::spawn(async move {
            if let Some(addr) = handle.listening().await {
                state.ready.store(true, Ordering::SeqCst);
                eprintln!("pullcheck webhook: listening on https://{addr}");
            }
        });
    }
    let closing = Arc::new(AtomicBool::new(false));
    {
        let handle = handle.clone();
        let state = state.clone();
        let closing = closing.clone();
        let grace = state.config.shutdown_grace;
        tokio::spawn(async move {
            crate::serve::shutdown_signal().await;
            state.ready.store(false, Ordering::SeqCst);
            closing.store(true, Ordering::SeqCst);
            let settle = settle_period(grace);
            tracing::info!(
                settle_ms = settle.as_millis() as u64,
                "shutting down: answering with Connection: close, then draining in-flight requests"
            );
            tokio::time::sleep(settle).await;
            handle.graceful_shutdown(Some(grace.saturating_sub(settle)));
        });
    }
    let app = router_closing_when(state.clone(), closing);
    let result = axum_server::bind_rustls(state.config.listen, tls)
        .handle(handle)
        .serve(app.into_make_service())
        .await
        .map_err(|source| ServeError::Listen {
            addr: state.config.listen,
            source,
        });
    reloader.abort();
    result
}
