//! The watcher's back-off: exponential (backon's builder, no jitter so the first delays are
//! the documented 0.5 s, 1 s, 2 s …, up to 30 s), at least the server's `Retry-After`, and
//! reset only once the watcher has been healthy for a while (a watch up [`HEALTHY`]), not
//! on every successful call: a list that succeeds before each failing watch must not keep
//! the delay at its minimum.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tokio::time::Instant;

use crate::apiserver::ApiError;

/// The first delay.
pub(crate) const FIRST: Duration = Duration::from_millis(500);
/// The longest delay.
pub(crate) const MAX: Duration = Duration::from_secs(30);
/// How long a watch must stay up before the back-off starts again from [`FIRST`].
pub(crate) const HEALTHY: Duration = Duration::from_secs(30);
/// The longest `Retry-After` honoured: a server asking for more gets asked again after
/// this (a bad header must not stop the watch for hours).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// Delays between failed attempts, with the healthy-interval reset.
pub(crate) struct Backoff {
    builder: ExponentialBuilder,
    delays: ExponentialBackoff,
    /// Since when the watcher has been healthy (a watch is up), if it is.
    healthy_since: Option<Instant>,
}

impl Default for Backoff {
    fn default() -> Backoff {
        let builder = ExponentialBuilder::new()
            .with_min_delay(FIRST)
            .with_max_delay(MAX)
            .with_factor(2.0)
            .without_max_times();
        Backoff {
            delays: builder.build(),
            builder,
            healthy_since: None,
        }
    }
}

impl Backoff {
    /// A watch started: the healthy interval runs from now (unless it already runs).
    pub(crate) fn healthy(&mut self) {
        self.healthy_since.get_or_insert_with(Instant::now);
    }

    /// Something failed: the delay before the next attempt. Starts again from [`FIRST`]
    /// when the watcher had been healthy for [`HEALTHY`]; never less than the error's
    /// `Retry-After` (capped at [`MAX_RETRY_AFTER`]).
    pub(crate) fn failed(&mut self, error: Option<&ApiError>) -> Duration {
        if self
            .healthy_since
            .take()
            .is_some_and(|since| since.elapsed() >= HEALTHY)
        {
            self.delays = self.builder.build();
        }
        let delay = self.delays.next().unwrap_or(MAX);
        match error.and_then(retry_after) {
            Some(asked) => delay.max(asked.min(MAX_RETRY_AFTER)),
            None => delay,
        }
    }
}

/// The `Retry-After` an API answer carried.
fn retry_after(e: &ApiError) -> Option<Duration> {
    match e {
        ApiError::Status { retry_after, .. } => *retry_after,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::error::Verb;

    fn status(retry_after: Option<Duration>) -> ApiError {
        ApiError::Status {
            verb: Verb::List,
            path: "/api/v1/pods".into(),
            status: 429,
            reason: "TooManyRequests".into(),
            message: String::new(),
            retry_after,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn delays_double_to_the_cap() {
        let mut b = Backoff::default();
        let got: Vec<Duration> = (0..9).map(|_| b.failed(None)).collect();
        let want: Vec<Duration> = [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
            .map(ms)
            .to_vec();
        assert_eq!(got, want);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_a_floor_with_a_cap() {
        let mut b = Backoff::default();
        assert_eq!(b.failed(Some(&status(Some(ms(3000))))), ms(3000));
        // The back-off went on underneath: 1 s is next, and a Retry-After below it is moot.
        assert_eq!(b.failed(Some(&status(Some(ms(200))))), ms(1000));
        assert_eq!(
            b.failed(Some(&status(Some(Duration::from_secs(86_400))))),
            MAX_RETRY_AFTER
        );
        assert_eq!(b.failed(Some(&status(None))), ms(4000));
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_healthy_interval_resets_it() {
        let mut b = Backoff::default();
        assert_eq!(b.failed(None), ms(500));
        assert_eq!(b.failed(None), ms(1000));
        // A watch up less than HEALTHY: no reset.
        b.healthy();
        tokio::time::advance(HEALTHY - ms(1)).await;
        assert_eq!(b.failed(None), ms(2000));
        // Up HEALTHY: from the start again.
        b.healthy();
        tokio::time::advance(HEALTHY).await;
        assert_eq!(b.failed(None), ms(500));
        assert_eq!(b.failed(None), ms(1000));
    }
}
