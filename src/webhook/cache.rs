//! The verdict cache: one engine lookup answers every identical question for a while.
//!
//! Keyed by (normalized reference, the fingerprints of the credentials that match it, the
//! platform set), so one namespace's credentials never answer for another's: two namespaces
//! share an entry only when the same credentials (or none) apply. Pullable verdicts live
//! [`CacheConfig::positive_ttl`], failing ones [`CacheConfig::negative_ttl`]; transient ones
//! are never stored. Concurrent identical lookups run once (`or_try_insert_with`: the
//! other callers wait for that one). Memory is bounded by a weigher over the strings kept.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::Expiry;
use moka::future::Cache;

use super::config::CacheConfig;
use crate::engine::Outcome;
use crate::verdict::Verdict;

/// What a verdict depends on besides the registry's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct VerdictKey {
    /// `Reference::full()`: `docker.io/library/busybox:latest`, or the image as written if
    /// it does not parse.
    pub reference: String,
    /// `Credential::fingerprint()` of every matching credential, in the order tried
    /// (empty: anonymous).
    pub credentials: Vec<String>,
    /// The platforms an index must offer, e.g. `linux/amd64,linux/arm64`.
    pub platforms: String,
}

/// Fixed cost of one entry on top of its strings (the `Outcome` and key structs, moka's
/// per-entry bookkeeping, allocator slack): measured, 100 000 distinct cached verdicts
/// cost about 1.3 KB of RSS each against about 300 bytes of strings (docs/benchmarks.md),
/// so the weigher counts 1 KiB per entry plus its strings. It also bounds the entry count at
/// `max_bytes / MIN_WEIGHT`.
const MIN_WEIGHT: usize = 1024;

fn weight(key: &VerdictKey, value: &Arc<Outcome>) -> u32 {
    let o = value.as_ref();
    let strings = key.reference.len()
        + key.credentials.iter().map(String::len).sum::<usize>()
        + key.platforms.len()
        + o.image.len()
        + o.detail.len()
        + o.reference.as_ref().map_or(0, String::len)
        + o.digest.as_ref().map_or(0, String::len)
        + o.media_type.as_ref().map_or(0, String::len)
        + o.registry.as_ref().map_or(0, String::len)
        + o.endpoint.as_ref().map_or(0, String::len)
        + o.credential.as_ref().map_or(0, String::len)
        + o.warnings.iter().map(String::len).sum::<usize>();
    u32::try_from(MIN_WEIGHT + strings).unwrap_or(u32::MAX)
}

struct VerdictExpiry {
    positive: Duration,
    negative: Duration,
}

impl Expiry<VerdictKey, Arc<Outcome>> for VerdictExpiry {
    fn expire_after_create(
        &self,
        _key: &VerdictKey,
        value: &Arc<Outcome>,
        _created_at: Instant,
    ) -> Option<Duration> {
        // An assumed pass was not verified (a provider failed, a node credential): keep it
        // as briefly as a failure, so the next review tries again soon.
        Some(if value.verdict == Verdict::Pullable && !value.assumed {
            self.positive
        } else {
            self.negative
        })
    }
}

/// Shared verdict cache (cheap to clone).
#[derive(Clone)]
pub(crate) struct VerdictCache {
    inner: Cache<VerdictKey, Arc<Outcome>>,
}

impl VerdictCache {
    /// A cache sized and timed by `cfg`.
    pub(crate) fn new(cfg: &CacheConfig) -> VerdictCache {
        VerdictCache {
            inner: Cache::builder()
                .name("pullcheck-verdicts")
                .max_capacity(cfg.max_bytes)
                .weigher(weight)
                .expire_after(VerdictExpiry {
                    positive: cfg.positive_ttl,
                    negative: cfg.negative_ttl,
                })
                .build(),
        }
    }

    /// The cached verdict for `key`, or the result of `lookup` (run at most once per key
    /// at a time). Returns the outcome and whether it came from the cache (a caller that
    /// waited for someone else's lookup counts as a hit).
    pub(crate) async fn get_or_check<F>(&self, key: VerdictKey, lookup: F) -> (Arc<Outcome>, bool)
    where
        F: Future<Output = Outcome>,
    {
        let result = self
            .inner
            .entry(key)
            .or_try_insert_with(async {
                let outcome = lookup.await;
                if outcome.verdict == Verdict::Transient {
                    Err(outcome)
                } else {
                    Ok(Arc::new(outcome))
                }
            })
            .await;
        match result {
            Ok(entry) => {
                let hit = !entry.is_fresh();
                (entry.into_value(), hit)
            }
            Err(transient) => (Arc::new((*transient).clone()), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn outcome(verdict: Verdict) -> Outcome {
        Outcome::new("r.example/app:v1", verdict, "d".into())
    }

    fn key(creds: &[&str]) -> VerdictKey {
        VerdictKey {
            reference: "r.example/app:v1".into(),
            credentials: creds.iter().map(|c| c.to_string()).collect(),
            platforms: "linux/amd64".into(),
        }
    }

    fn cfg(positive_ms: u64, negative_ms: u64) -> CacheConfig {
        CacheConfig {
            positive_ttl: Duration::from_millis(positive_ms),
            negative_ttl: Duration::from_millis(negative_ms),
            ..CacheConfig::default()
        }
    }

    #[tokio::test]
    async fn hits_misses_and_credential_isolation() {
        let cache = VerdictCache::new(&cfg(60_000, 60_000));
        let calls = AtomicUsize::new(0);
        let look = |v| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { outcome(v) }
        };
        let (o, hit) = cache
            .get_or_check(key(&["aa"]), look(Verdict::Pullable))
            .await;
        assert!(!hit);
        assert_eq!(o.verdict, Verdict::Pullable);
        let (_, hit) = cache
            .get_or_check(key(&["aa"]), look(Verdict::NotFound))
            .await;
        assert!(hit);
        // Other credentials: another entry, another lookup.
        let (o, hit) = cache
            .get_or_check(key(&[]), look(Verdict::Unauthenticated))
            .await;
        assert!(!hit);
        assert_eq!(o.verdict, Verdict::Unauthenticated);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn an_assumed_pass_expires_like_a_failure() {
        let c = VerdictCache::new(&cfg(60_000, 100));
        let assumed = || {
            let mut o = outcome(Verdict::Pullable);
            o.assumed = true;
            o
        };
        c.get_or_check(key(&[]), async { assumed() }).await;
        let (_, hit) = c.get_or_check(key(&[]), async { assumed() }).await;
        assert!(hit);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (_, hit) = c.get_or_check(key(&[]), async { assumed() }).await;
        assert!(!hit, "an assumed pass is kept for the negative TTL only");
    }

    #[tokio::test]
    async fn transient_is_never_stored_and_negative_expires_first() {
        let cache = VerdictCache::new(&cfg(60_000, 50));
        let (o, _) = cache
            .get_or_check(key(&[]), async { outcome(Verdict::Transient) })
            .await;
        assert_eq!(o.verdict, Verdict::Transient);
        let (o, hit) = cache
            .get_or_check(key(&[]), async { outcome(Verdict::NotFound) })
            .await;
        assert!(!hit);
        assert_eq!(o.verdict, Verdict::NotFound);
        let (_, hit) = cache
            .get_or_check(key(&[]), async { outcome(Verdict::Pullable) })
            .await;
        assert!(hit);
        tokio::time::sleep(Duration::from_millis(120)).await;
        let (o, hit) = cache
            .get_or_check(key(&[]), async { outcome(Verdict::Pullable) })
            .await;
        assert!(!hit);
        assert_eq!(o.verdict, Verdict::Pullable);
    }

    #[tokio::test]
    async fn identical_lookups_in_flight_run_once() {
        let cache = VerdictCache::new(&cfg(60_000, 60_000));
        let calls = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let cache = cache.clone();
            let calls = calls.clone();
            tasks.push(tokio::spawn(async move {
                cache
                    .get_or_check(key(&["aa"]), async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        outcome(Verdict::Pullable)
                    })
                    .await
            }));
        }
        let mut hits = 0;
        for t in tasks {
            if t.await.unwrap().1 {
                hits += 1;
            }
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(hits, 7);
    }

    #[test]
    fn weight_has_a_floor() {
        assert!(weight(&key(&[]), &Arc::new(outcome(Verdict::Pullable))) >= MIN_WEIGHT as u32);
    }
}
