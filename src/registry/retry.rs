//! Retries for transient failures: exponential backoff with jitter (backon), `Retry-After`
//! honoured, and never past the overall deadline.

use std::future::Future;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};

use super::error::RegistryError;
use super::limits;

/// Run `op` until it succeeds, fails permanently, runs out of attempts, or the next wait
/// would cross `deadline`. `op` returns `Err` for retryable statuses as well
/// ([`RegistryError::is_retryable`] decides).
pub(crate) async fn with_retries<T, F, Fut>(deadline: Instant, op: F) -> Result<T, RegistryError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RegistryError>>,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(limits::MAX_ATTEMPTS - 1)
        .with_jitter();
    op.retry(backoff)
        .sleep(tokio::time::sleep)
        .when(|e: &RegistryError| e.is_retryable())
        .adjust(move |e: &RegistryError, next: Option<Duration>| {
            let wait = match (e.retry_after(), next) {
                (_, None) => return None,
                (Some(ra), Some(_)) => ra,
                (None, Some(d)) => d,
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            // Waiting past the deadline is pointless: report now.
            if wait >= remaining { None } else { Some(wait) }
        })
        .notify(|e: &RegistryError, wait: Duration| {
            tracing::debug!(error = %e, wait_ms = wait.as_millis() as u64, "retrying");
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn status(code: u16, retry_after: Option<Duration>) -> RegistryError {
        RegistryError::Status {
            method: "HEAD".into(),
            url: "https://r/v2/x/manifests/y".into(),
            status: code,
            diagnostics: vec![],
            retry_after,
            credential_sent: false,
            from_token_endpoint: false,
        }
    }

    #[tokio::test]
    async fn retries_transient_then_succeeds() {
        let n = AtomicUsize::new(0);
        let r = with_retries(Instant::now() + Duration::from_secs(10), || async {
            if n.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(status(503, None))
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(n.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn permanent_errors_are_not_retried() {
        let n = AtomicUsize::new(0);
        let r: Result<(), _> = with_retries(Instant::now() + Duration::from_secs(10), || async {
            n.fetch_add(1, Ordering::SeqCst);
            Err(status(404, None))
        })
        .await;
        assert_eq!(r.unwrap_err().status(), Some(404));
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn retry_after_beyond_deadline_stops_at_once() {
        let n = AtomicUsize::new(0);
        let start = Instant::now();
        let r: Result<(), _> = with_retries(Instant::now() + Duration::from_secs(5), || async {
            n.fetch_add(1, Ordering::SeqCst);
            Err(status(429, Some(Duration::from_secs(3600))))
        })
        .await;
        assert_eq!(r.unwrap_err().status(), Some(429));
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn attempts_are_bounded() {
        let n = AtomicUsize::new(0);
        let r: Result<(), _> = with_retries(Instant::now() + Duration::from_secs(60), || async {
            n.fetch_add(1, Ordering::SeqCst);
            Err(status(500, None))
        })
        .await;
        assert!(r.is_err());
        assert_eq!(n.load(Ordering::SeqCst), limits::MAX_ATTEMPTS);
    }
}
