//! The exporter's Prometheus metrics (`pullcheck audit --serve`, OpenMetrics text on
//! `/metrics`; the names, labels and the cardinality bound are in docs/audit.md,
//! "Exporter").
//!
//! The per-image series are replaced as a whole by each good pass ([`AuditMetrics::record`])
//! under one lock that [`AuditMetrics::render`] takes too, so a scrape never sees half of
//! one pass and half of the next. A failed pass leaves them as they were: the last good
//! results stay, and `pullcheck_audit_results_age_seconds` says how old they are.
//!
//! With [`MetricNames::Deckhouse`] the same rows are also exported under the names of
//! deckhouse's k8s-image-availability-exporter (its README, "Metrics", and
//! `pkg/store/image_store.go`): one gauge per availability mode and container, 1 for the
//! container's mode and 0 for the others, labels `namespace`, `container`, `image`, `kind`
//! (lower case) and `name`, and the counter `…_completed_rechecks_total`.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::report::{ImageRow, Report, WorkloadRow};
use crate::verdict::Verdict;

/// A label value longer than this many bytes is cut (at a character boundary) and ends
/// in `…`: Kubernetes bounds names (253) and container names (63), but not `image`.
pub(crate) const MAX_LABEL_BYTES: usize = 512;

/// The default of `--max-series`: per-image rows exported at most.
pub(crate) const DEFAULT_MAX_SERIES: usize = 10_000;

/// Which metric names the per-image series are exported under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricNames {
    /// pullcheck's own (`pullcheck_audit_image_verdict`).
    Pullcheck,
    /// pullcheck's own and, as well, deckhouse k8s-image-availability-exporter's.
    Deckhouse,
}

/// How a pass ended: the `outcome` label of `pullcheck_audit_passes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PassOutcome {
    /// Every list the pass needs answered; the results replaced the last ones.
    Succeeded,
    /// A list failed (the API refused or did not answer): the last results are kept.
    Failed,
    /// The pass did not end within one interval and was abandoned: the last results are kept.
    TimedOut,
}

impl PassOutcome {
    /// Every outcome, so each has a sample from the start (0 until it happens).
    const ALL: [PassOutcome; 3] = [
        PassOutcome::Succeeded,
        PassOutcome::Failed,
        PassOutcome::TimedOut,
    ];

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PassOutcome::Succeeded => "succeeded",
            PassOutcome::Failed => "failed",
            PassOutcome::TimedOut => "timed_out",
        }
    }
}

/// With which credentials an image was checked: the `credentials` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CheckedWith {
    /// The credentials its pods would have (their pull secrets, or none when they name none).
    Pod,
    /// The pull secrets its pods name may not be read (403): checked without them, so a
    /// failure is assumed, not proven (the table's `*`).
    AnonymousAssumed,
}

impl CheckedWith {
    fn of(row: &ImageRow) -> CheckedWith {
        match row.credentials {
            Some(_) => CheckedWith::AnonymousAssumed,
            None => CheckedWith::Pod,
        }
    }
}

/// The peer's availability modes (its `pkg/store/image_store.go`), in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerMode {
    /// `available`.
    Available,
    /// `absent`.
    Absent,
    /// `bad_image_format`.
    BadImageFormat,
    /// `registry_unavailable`.
    RegistryUnavailable,
    /// `authentication_failure`.
    AuthenticationFailure,
    /// `authorization_failure`.
    AuthorizationFailure,
    /// `unknown_error`: no pullcheck verdict maps here; exported (always 0) so that
    /// queries naming it still find the series.
    UnknownError,
}

impl PeerMode {
    const ALL: [PeerMode; 7] = [
        PeerMode::Available,
        PeerMode::Absent,
        PeerMode::BadImageFormat,
        PeerMode::RegistryUnavailable,
        PeerMode::AuthenticationFailure,
        PeerMode::AuthorizationFailure,
        PeerMode::UnknownError,
    ];

    /// The metric name: `k8s_image_availability_exporter_<mode>`.
    fn metric(self) -> &'static str {
        match self {
            PeerMode::Available => "k8s_image_availability_exporter_available",
            PeerMode::Absent => "k8s_image_availability_exporter_absent",
            PeerMode::BadImageFormat => "k8s_image_availability_exporter_bad_image_format",
            PeerMode::RegistryUnavailable => "k8s_image_availability_exporter_registry_unavailable",
            PeerMode::AuthenticationFailure => {
                "k8s_image_availability_exporter_authentication_failure"
            }
            PeerMode::AuthorizationFailure => {
                "k8s_image_availability_exporter_authorization_failure"
            }
            PeerMode::UnknownError => "k8s_image_availability_exporter_unknown_error",
        }
    }

    /// A verdict in the peer's terms (docs/audit.md has the table and the reasons): the
    /// peer HEADs the tag with no platform, so a platform missing from the index is what
    /// comes nearest to its "manifest absent"; transient is its "registry unavailable".
    pub(crate) fn of(verdict: Verdict) -> PeerMode {
        match verdict {
            Verdict::Pullable => PeerMode::Available,
            Verdict::NotFound | Verdict::PlatformMissing => PeerMode::Absent,
            Verdict::InvalidReference => PeerMode::BadImageFormat,
            Verdict::Transient => PeerMode::RegistryUnavailable,
            Verdict::Unauthenticated => PeerMode::AuthenticationFailure,
            Verdict::Denied => PeerMode::AuthorizationFailure,
            // The peer HEADs the tag and would call it available; it is not usable, and
            // the peer's alerts fire on every mode but available.
            Verdict::UnusableArtifact => PeerMode::UnknownError,
        }
    }
}

macro_rules! label_value {
    ($($t:ty),*) => {$(
        impl EncodeLabelValue for $t {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                std::fmt::Write::write_str(encoder, self.label())
            }
        }
    )*};
}

impl PassOutcome {
    fn label(&self) -> &'static str {
        self.as_str()
    }
}

impl CheckedWith {
    fn label(&self) -> &'static str {
        match self {
            CheckedWith::Pod => "pod",
            CheckedWith::AnonymousAssumed => "anonymous_assumed",
        }
    }
}

label_value!(PassOutcome, CheckedWith);

/// Labels of `pullcheck_audit_image_verdict`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ImageLabels {
    /// The workload's namespace.
    pub namespace: String,
    /// Its kind as the API spells it (`CronJob`).
    pub kind: String,
    /// Its name.
    pub name: String,
    /// The container (or image volume).
    pub container: String,
    /// The image as written.
    pub image: String,
    /// The verdict.
    pub verdict: Verdict,
    /// With which credentials it was checked.
    pub credentials: CheckedWith,
}

/// Labels of the peer's per-image gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PeerLabels {
    /// The workload's namespace.
    pub namespace: String,
    /// The container.
    pub container: String,
    /// The image as written.
    pub image: String,
    /// The kind in lower case (`deployment`), as the peer writes it.
    pub kind: String,
    /// The workload's name.
    pub name: String,
}

/// Labels of `pullcheck_audit_images`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VerdictLabels {
    /// The verdict.
    pub verdict: Verdict,
}

/// Labels of `pullcheck_audit_passes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabels {
    /// How the pass ended.
    pub outcome: PassOutcome,
}

/// Labels of the quota gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RegistryLabels {
    /// The registry host (`docker.io`).
    pub registry: String,
}

/// What a scrape reads, guarded as one.
struct Results {
    /// When the last good pass ended (`None`: none yet).
    last_good: Option<Instant>,
}

/// Every metric the exporter serves.
pub(crate) struct AuditMetrics {
    registry: Registry,
    names: MetricNames,
    max_series: usize,
    state: Mutex<Results>,
    image_verdict: Family<ImageLabels, Gauge>,
    peer: Vec<(PeerMode, Family<PeerLabels, Gauge>)>,
    peer_rechecks: Counter,
    images: Family<VerdictLabels, Gauge>,
    workloads: Gauge,
    series_dropped: Gauge,
    passes: Family<OutcomeLabels, Counter>,
    pass_seconds: Gauge<f64, AtomicU64>,
    results_age: Gauge<f64, AtomicU64>,
    quota_remaining: Family<RegistryLabels, Gauge>,
    quota_limit: Family<RegistryLabels, Gauge>,
}

impl AuditMetrics {
    /// Register every family. `max_series` bounds the per-image rows exported (failing rows
    /// first); `interval` is exported so alerts can compare the results' age with it.
    pub(crate) fn new(names: MetricNames, max_series: usize, interval: Duration) -> AuditMetrics {
        let mut registry = Registry::default();
        let image_verdict = Family::<ImageLabels, Gauge>::default();
        registry.register(
            "pullcheck_audit_image_verdict",
            "1 for each image of each audited workload, labelled with its verdict and the credentials it was checked with (the last good pass)",
            image_verdict.clone(),
        );
        let images = Family::<VerdictLabels, Gauge>::default();
        registry.register(
            "pullcheck_audit_images",
            "Images of audited workloads (one per container and workload), by verdict, in the last good pass",
            images.clone(),
        );
        let workloads = Gauge::default();
        registry.register(
            "pullcheck_audit_workloads",
            "Workloads audited in the last good pass",
            workloads.clone(),
        );
        let series_dropped = Gauge::default();
        registry.register(
            "pullcheck_audit_image_series_dropped",
            "Per-image rows of the last good pass not exported because of --max-series (pullable ones are dropped first)",
            series_dropped.clone(),
        );
        let passes = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "pullcheck_audit_passes",
            "Audit passes, by outcome",
            passes.clone(),
        );
        for outcome in PassOutcome::ALL {
            passes.get_or_create(&OutcomeLabels { outcome }).inc_by(0);
        }
        let pass_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "pullcheck_audit_last_pass_duration_seconds",
            "Wall time of the last pass, good or not",
            pass_seconds.clone(),
        );
        let results_age = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "pullcheck_audit_results_age_seconds",
            "Seconds since the last good pass ended (the age of the exported results); -1 before the first",
            results_age.clone(),
        );
        let interval_seconds = Gauge::<f64, AtomicU64>::default();
        interval_seconds.set(interval.as_secs_f64());
        registry.register(
            "pullcheck_audit_interval_seconds",
            "The time between the starts of two passes (--interval)",
            interval_seconds.clone(),
        );
        let quota_remaining = Family::<RegistryLabels, Gauge>::default();
        registry.register(
            "pullcheck_registry_quota_remaining",
            "Pulls left as the registry last stated them (Docker Hub's ratelimit-remaining; the lowest seen in the last pass that saw one), from this pod's egress address",
            quota_remaining.clone(),
        );
        let quota_limit = Family::<RegistryLabels, Gauge>::default();
        registry.register(
            "pullcheck_registry_quota_limit",
            "Pulls allowed per window as the registry last stated them (Docker Hub's ratelimit-limit)",
            quota_limit.clone(),
        );
        let peer_rechecks = Counter::default();
        let mut peer = Vec::new();
        if names == MetricNames::Deckhouse {
            for mode in PeerMode::ALL {
                let f = Family::<PeerLabels, Gauge>::default();
                registry.register(
                    mode.metric(),
                    "deckhouse k8s-image-availability-exporter's name (pullcheck audit --metric-names deckhouse): 1 when the image's availability is this mode",
                    f.clone(),
                );
                peer.push((mode, f));
            }
            registry.register(
                "k8s_image_availability_exporter_completed_rechecks",
                "deckhouse k8s-image-availability-exporter's name: audit passes that succeeded",
                peer_rechecks.clone(),
            );
        }
        AuditMetrics {
            registry,
            names,
            max_series,
            state: Mutex::new(Results { last_good: None }),
            image_verdict,
            peer,
            peer_rechecks,
            images,
            workloads,
            series_dropped,
            passes,
            pass_seconds,
            results_age,
            quota_remaining,
            quota_limit,
        }
    }

    /// A pass that ended without results (`outcome` is not [`PassOutcome::Succeeded`]):
    /// counted, its duration set; the last good results stay.
    pub(crate) fn failed(&self, outcome: PassOutcome, took: Duration) {
        let _guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.passes.get_or_create(&OutcomeLabels { outcome }).inc();
        self.pass_seconds.set(took.as_secs_f64());
    }

    /// A good pass: its rows replace the last ones (at most `max_series` of them, failing
    /// rows first), the counts and quotas are set, the pass is counted.
    pub(crate) fn record(&self, report: &Report, took: Duration, now: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.passes
            .get_or_create(&OutcomeLabels {
                outcome: PassOutcome::Succeeded,
            })
            .inc();
        self.peer_rechecks.inc();
        self.pass_seconds.set(took.as_secs_f64());
        state.last_good = Some(now);

        let rows: Vec<(&WorkloadRow, &ImageRow)> = report
            .workloads
            .iter()
            .flat_map(|w| w.images.iter().map(move |i| (w, i)))
            .collect();
        for verdict in Verdict::ALL {
            let n = rows.iter().filter(|(_, i)| i.verdict == verdict).count();
            self.images
                .get_or_create(&VerdictLabels { verdict })
                .set(to_i64(n));
        }
        self.workloads.set(to_i64(report.workloads.len()));

        let kept = bounded(&rows, self.max_series);
        self.series_dropped
            .set(to_i64(rows.len().saturating_sub(kept.len())));
        self.image_verdict.clear();
        for (w, i) in &kept {
            self.image_verdict
                .get_or_create(&ImageLabels {
                    namespace: label(&w.namespace),
                    kind: label(&w.kind),
                    name: label(&w.name),
                    container: label(&i.container),
                    image: label(&i.image),
                    verdict: i.verdict,
                    credentials: CheckedWith::of(i),
                })
                .set(1);
        }
        if self.names == MetricNames::Deckhouse {
            self.record_peer(&kept);
        }
        for (registry, q) in &report.registry_quota {
            let l = RegistryLabels {
                registry: label(registry),
            };
            self.quota_remaining
                .get_or_create(&l)
                .set(i64::try_from(q.remaining).unwrap_or(i64::MAX));
            self.quota_limit
                .get_or_create(&l)
                .set(i64::try_from(q.limit).unwrap_or(i64::MAX));
        }
    }

    /// The peer's seven gauges per container. Its labels have no verdict and no template,
    /// so two rows of one workload and container (two templates of a JobSet or a
    /// PyTorchJob naming the same container) are one series: the first failing row's
    /// mode wins, so `available == 0` still fires.
    fn record_peer(&self, kept: &[(&WorkloadRow, &ImageRow)]) {
        let mut modes: Vec<(PeerLabels, PeerMode)> = Vec::new();
        for (w, i) in kept {
            let labels = PeerLabels {
                namespace: label(&w.namespace),
                container: label(&i.container),
                image: label(&i.image),
                kind: label(&w.kind.to_lowercase()),
                name: label(&w.name),
            };
            let mode = PeerMode::of(i.verdict);
            match modes.iter_mut().find(|(l, _)| *l == labels) {
                Some((_, m)) if *m == PeerMode::Available => *m = mode,
                Some(_) => {}
                None => modes.push((labels, mode)),
            }
        }
        for (mode, family) in &self.peer {
            family.clear();
            for (labels, m) in &modes {
                family.get_or_create(labels).set(i64::from(m == mode));
            }
        }
    }

    /// The OpenMetrics text, the results' age as of `now`.
    pub(crate) fn render(&self, now: Instant) -> String {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.results_age.set(match state.last_good {
            Some(t) => now.saturating_duration_since(t).as_secs_f64(),
            None => -1.0,
        });
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// At most `max` rows, the failing ones first (in report order), then the pullable ones.
fn bounded<'a>(
    rows: &[(&'a WorkloadRow, &'a ImageRow)],
    max: usize,
) -> Vec<(&'a WorkloadRow, &'a ImageRow)> {
    let failing = rows.iter().filter(|(_, i)| i.verdict != Verdict::Pullable);
    let pullable = rows.iter().filter(|(_, i)| i.verdict == Verdict::Pullable);
    failing.chain(pullable).take(max).copied().collect()
}

/// `v` as a label value: at most [`MAX_LABEL_BYTES`], cut at a character boundary.
fn label(v: &str) -> String {
    if v.len() <= MAX_LABEL_BYTES {
        return v.to_string();
    }
    let mut end = MAX_LABEL_BYTES - '…'.len_utf8();
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &v[..end])
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
