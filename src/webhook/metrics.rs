//! Prometheus metrics (OpenMetrics text on `/metrics`): admissions by kind and verdict,
//! registry lookups by outcome, latencies, cache hits and misses.

use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::fmt::Write as _;

use super::triage::Webhook;
use crate::verdict::Verdict;

/// What the webhook answered a review: the `verdict` label of `pullcheck_admissions_total`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Admitted with nothing to say (validate), or without a patch (mutate).
    Allowed,
    /// Denied (`--mode enforce`).
    Denied,
    /// Admitted with warnings: a failing or unverified image under `--mode warn` or
    /// fail-open.
    Warned,
    /// Admitted with a JSON patch (mutate).
    Patched,
    /// Not looked at (opted out, owned by a controller, a kind or operation not checked).
    Skipped,
    /// The review could not be decoded.
    Invalid,
    /// The body was over the size limit and not read.
    TooLarge,
}

impl Answer {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Answer::Allowed => "allowed",
            Answer::Denied => "denied",
            Answer::Warned => "warned",
            Answer::Patched => "patched",
            Answer::Skipped => "skipped",
            Answer::Invalid => "invalid",
            Answer::TooLarge => "too_large",
        }
    }
}

/// Which verdict-cache-like store a hit or miss is counted for.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Cache {
    /// The verdict cache (`webhook::cache`).
    Verdict,
    /// Secrets and ServiceAccounts read from the API (`webhook::cluster`).
    Secret,
}

/// Label values written as their names, one implementation for every label enum here.
macro_rules! label_value {
    ($($t:ty => $f:expr),* $(,)?) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                let name: fn(&$t) -> &'static str = $f;
                encoder.write_str(name(self))
            }
        }
    )*};
}

label_value! {
    Answer => |a| a.as_str(),
    Cache => |c| match c { Cache::Verdict => "verdict", Cache::Secret => "secret" },
    Webhook => |w| w.as_str(),
    Verdict => |v| v.as_str(),
}

/// Labels of `pullcheck_admissions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AdmissionLabels {
    /// `validate` or `mutate`.
    pub webhook: Webhook,
    /// The object's kind (`Job`, `CronJob`, …; `unknown` when undecodable): open-ended,
    /// so text.
    pub kind: String,
    /// What was answered.
    pub verdict: Answer,
}

/// Labels of per-webhook families.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WebhookLabels {
    /// `validate` or `mutate`.
    pub webhook: Webhook,
}

/// Labels of `pullcheck_registry_lookups_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    /// The verdict (`pullable`, `not_found`, `transient`, …).
    pub outcome: Verdict,
}

/// Labels of `pullcheck_registry_quota_remaining`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RegistryLabels {
    /// The registry host (`docker.io`).
    pub registry: String,
}

/// Labels of `pullcheck_admission_check_answers_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CheckStateLabels {
    /// The Kueue check state written: `Ready`, `Retry`, `Rejected` (`kueue::CheckState`'s
    /// spelling; `kueue` sits above `webhook`, so its enum can't be named here).
    pub state: &'static str,
}

/// Labels of the cache counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CacheLabels {
    /// `verdict` or `secret`.
    pub cache: Cache,
}

fn latency() -> Histogram {
    // 5 ms … ~20 s.
    Histogram::new(exponential_buckets(0.005, 2.0, 13))
}

/// Every metric the webhook exports.
pub(crate) struct Metrics {
    registry: Registry,
    pub admissions: Family<AdmissionLabels, Counter>,
    /// Time from request to answer.
    pub admission_seconds: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    /// Engine lookups (cache misses) by verdict.
    pub registry_lookups: Family<OutcomeLabels, Counter>,
    /// Time of one engine lookup.
    pub registry_lookup_seconds: Histogram,
    /// HTTP requests sent to registries (updated when scraped).
    pub registry_http_requests: Counter,
    http_seen: Mutex<u64>,
    pub cache_hits: Family<CacheLabels, Counter>,
    pub cache_misses: Family<CacheLabels, Counter>,
    /// Images answered as not verified because the budget ran out.
    pub budget_exhausted: Counter,
    /// Pulls left, as the registry last stated them to this replica.
    pub quota_remaining: Family<RegistryLabels, Gauge>,
    /// Kueue admission-check answers written, by state.
    pub check_answers: Family<CheckStateLabels, Counter>,
    /// Kueue: time from the Workload's `QuotaReserved` to our answer.
    pub check_answer_seconds: Histogram,
    /// Kueue: age of the oldest check of ours still Pending on a Workload holding quota.
    pub oldest_pending_seconds: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Create and register every family.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("pullcheck");
        let admissions = Family::<AdmissionLabels, Counter>::default();
        registry.register(
            "admissions",
            "Admission reviews answered, by webhook, kind and verdict",
            admissions.clone(),
        );
        let admission_seconds =
            Family::<WebhookLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency);
        registry.register(
            "admission_duration_seconds",
            "Time from receiving an admission review to answering it",
            admission_seconds.clone(),
        );
        let registry_lookups = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "registry_lookups",
            "Image lookups against registries (verdict cache misses), by outcome",
            registry_lookups.clone(),
        );
        let registry_lookup_seconds = latency();
        registry.register(
            "registry_lookup_duration_seconds",
            "Time of one image lookup against its registry",
            registry_lookup_seconds.clone(),
        );
        let registry_http_requests = Counter::default();
        registry.register(
            "registry_http_requests",
            "HTTP requests sent to registries (retries and pings included)",
            registry_http_requests.clone(),
        );
        let cache_hits = Family::<CacheLabels, Counter>::default();
        registry.register(
            "cache_hits",
            "Cache hits (verdict: image verdicts; secret: pull secrets and ServiceAccounts)",
            cache_hits.clone(),
        );
        let cache_misses = Family::<CacheLabels, Counter>::default();
        registry.register("cache_misses", "Cache misses", cache_misses.clone());
        let budget_exhausted = Counter::default();
        registry.register(
            "budget_exhausted_images",
            "Images left unverified because the answer was due",
            budget_exhausted.clone(),
        );
        let quota_remaining = Family::<RegistryLabels, Gauge>::default();
        registry.register(
            "registry_quota_remaining",
            "Pulls left as the registry last stated them (Docker Hub's ratelimit-remaining), seen from this replica's egress address",
            quota_remaining.clone(),
        );
        let check_answers = Family::<CheckStateLabels, Counter>::default();
        registry.register(
            "admission_check_answers",
            "Kueue admission-check answers written, by state",
            check_answers.clone(),
        );
        let check_answer_seconds = latency();
        registry.register(
            "admission_check_answer_seconds",
            "Kueue: time from a Workload's quota reservation to pullcheck's answer",
            check_answer_seconds.clone(),
        );
        let oldest_pending_seconds = Gauge::default();
        registry.register(
            "admission_check_oldest_pending_seconds",
            "Kueue: age in seconds of the oldest pullcheck admission check still Pending on a Workload that holds quota (0: none); it grows when no replica answers",
            oldest_pending_seconds.clone(),
        );
        Metrics {
            registry,
            admissions,
            admission_seconds,
            registry_lookups,
            registry_lookup_seconds,
            registry_http_requests,
            http_seen: Mutex::new(0),
            cache_hits,
            cache_misses,
            budget_exhausted,
            quota_remaining,
            check_answers,
            check_answer_seconds,
            oldest_pending_seconds,
        }
    }

    /// Record the quota a registry stated.
    pub(crate) fn quota(&self, registry: &str, remaining: u64) {
        self.quota_remaining
            .get_or_create(&RegistryLabels {
                registry: registry.into(),
            })
            .set(i64::try_from(remaining).unwrap_or(i64::MAX));
    }

    /// Count one answer.
    pub(crate) fn admission(&self, webhook: Webhook, kind: &str, verdict: Answer, seconds: f64) {
        self.admissions
            .get_or_create(&AdmissionLabels {
                webhook,
                kind: kind.into(),
                verdict,
            })
            .inc();
        self.admission_seconds
            .get_or_create(&WebhookLabels { webhook })
            .observe(seconds);
    }

    /// Count a cache hit or miss.
    pub(crate) fn cache(&self, cache: Cache, hit: bool) {
        let labels = CacheLabels { cache };
        if hit {
            self.cache_hits.get_or_create(&labels).inc();
        } else {
            self.cache_misses.get_or_create(&labels).inc();
        }
    }

    /// Count one engine lookup.
    pub(crate) fn lookup(&self, outcome: Verdict, seconds: f64) {
        self.registry_lookups
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
        self.registry_lookup_seconds.observe(seconds);
    }

    /// Count one Kueue admission-check answer in `state`, `seconds` after the Workload's
    /// quota reservation.
    pub(crate) fn check_answer(&self, state: &'static str, seconds: f64) {
        self.check_answers
            .get_or_create(&CheckStateLabels { state })
            .inc();
        self.check_answer_seconds.observe(seconds);
    }

    /// Set the age of the oldest Pending check of ours (`kueue::stalled`), in whole
    /// seconds.
    pub(crate) fn oldest_pending(&self, age: std::time::Duration) {
        self.oldest_pending_seconds
            .set(i64::try_from(age.as_secs()).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text. `http_requests_sent` is the engine's registry request count.
    pub(crate) fn render(&self, http_requests_sent: u64) -> String {
        let total = http_requests_sent;
        {
            let mut seen = self.http_seen.lock().expect("metrics lock");
            if total > *seen {
                self.registry_http_requests.inc_by(total - *seen);
                *seen = total;
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_families() {
        let m = Metrics::new();
        m.admission(Webhook::Validate, "Job", Answer::Denied, 0.02);
        m.cache(Cache::Verdict, true);
        m.cache(Cache::Verdict, false);
        m.lookup(Verdict::NotFound, 0.1);
        m.quota("docker.io", 76);
        m.check_answer("Rejected", 1.5);
        m.oldest_pending(std::time::Duration::from_millis(300_900));
        let text = m.render(7);
        for needle in [
            "pullcheck_admissions_total{webhook=\"validate\",kind=\"Job\",verdict=\"denied\"} 1",
            "pullcheck_cache_hits_total{cache=\"verdict\"} 1",
            "pullcheck_cache_misses_total{cache=\"verdict\"} 1",
            "pullcheck_registry_lookups_total{outcome=\"not_found\"} 1",
            "pullcheck_registry_http_requests_total 7",
            "pullcheck_admission_duration_seconds_bucket",
            "pullcheck_registry_quota_remaining{registry=\"docker.io\"} 76",
            "pullcheck_admission_check_answers_total{state=\"Rejected\"} 1",
            "pullcheck_admission_check_answer_seconds_sum 1.5",
            "pullcheck_admission_check_oldest_pending_seconds 300",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        // Counters never go down even if the pool shrinks.
        let text = m.render(3);
        assert!(
            text.contains("pullcheck_registry_http_requests_total 7"),
            "{text}"
        );
    }
}
