//! `--max-deletions-per-minute`: a token bucket with a burst of the per-minute rate,
//! refilled continuously at that rate.
//!
//! Kept in whole credits (one token is one minute in nanoseconds, so a nanosecond adds
//! `per_minute` credits): integer arithmetic, so the 31st second of a 2-per-minute bucket
//! holds exactly one token, not 0.9999….

use tokio::time::Instant;

/// Credits in one token: nanoseconds in a minute.
const TOKEN: u128 = 60_000_000_000;

/// The bucket.
pub(crate) struct Bucket {
    per_minute: u128,
    credits: u128,
    at: Instant,
}

impl Bucket {
    /// Full, for `per_minute` deletions a minute (at least 1).
    pub(crate) fn new(per_minute: u32) -> Bucket {
        let per_minute = u128::from(per_minute.max(1));
        Bucket {
            per_minute,
            credits: per_minute * TOKEN,
            at: Instant::now(),
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        let elapsed = now.duration_since(self.at).as_nanos();
        self.credits = (self.credits + elapsed * self.per_minute).min(self.per_minute * TOKEN);
        self.at = now;
    }

    /// Give back a token taken for a write that deleted nothing.
    pub(crate) fn refund(&mut self) {
        self.refill();
        self.credits = (self.credits + TOKEN).min(self.per_minute * TOKEN);
    }

    /// Take a token; false when none is left.
    pub(crate) fn take(&mut self) -> bool {
        self.refill();
        if self.credits >= TOKEN {
            self.credits -= TOKEN;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_refunded_token_can_be_taken_again() {
        let mut b = Bucket::new(1);
        assert!(b.take());
        assert!(!b.take());
        b.refund();
        assert!(b.take());
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_its_rate_and_refills_at_it() {
        let mut b = Bucket::new(2);
        assert!(b.take());
        assert!(b.take());
        assert!(!b.take());
        // One token every 30 s, whatever the number of looks in between.
        for _ in 0..29 {
            tokio::time::advance(Duration::from_secs(1)).await;
            assert!(!b.take());
        }
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(!b.take());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(b.take());
        assert!(!b.take());
        // Never more than the burst.
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(b.take());
        assert!(b.take());
        assert!(!b.take());
    }
}
