//! The watch's Prometheus metrics (OpenMetrics text on `/metrics`).

use std::fmt::Write;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `pullcheck_watch_stuck_pods_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct VerdictLabels {
    /// The kubelet's failure as a verdict (`not_found`, …), or `unknown`.
    pub verdict: String,
}

/// What the watch did about a failing pod: the `action` label of
/// `pullcheck_watch_actions_total` (docs/watch.md lists them).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum Action {
    /// Marked and deleted.
    Deleted,
    /// Marked, and the pod was gone (or replaced) by the delete.
    AlreadyGone,
    /// `--dry-run`: would have marked and deleted.
    DryRun,
    /// Only an Event (the decision table said so).
    EventOnly,
    /// The mark's precondition failed: the pod changed, another replica may act.
    Conflict,
    /// Held back by `--max-deletions-per-minute`.
    RateLimited,
    /// A mark or delete failed (retried).
    Failed,
}

impl Action {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Action::Deleted => "deleted",
            Action::AlreadyGone => "already_gone",
            Action::DryRun => "dry_run",
            Action::EventOnly => "event_only",
            Action::Conflict => "conflict",
            Action::RateLimited => "rate_limited",
            Action::Failed => "failed",
        }
    }
}

impl EncodeLabelValue for Action {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// Labels of `pullcheck_watch_actions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ActionLabels {
    /// What was done.
    pub action: Action,
}

/// Every metric the watch exports.
pub(crate) struct WatchMetrics {
    registry: Registry,
    /// Pods seen waiting on an image pull, once per pod, by verdict.
    pub stuck: Family<VerdictLabels, Counter>,
    /// What the watch did about them.
    pub actions: Family<ActionLabels, Counter>,
    /// Seconds from the watch first seeing a pod's pull failure to deleting the pod.
    pub seconds_to_action: Histogram,
    /// Successful pod lists (the start, a 410, errors): the runtime's
    /// [`crate::runtime::Status::lists`].
    pub relists: Counter,
}

impl WatchMetrics {
    /// Create and register every family.
    pub(crate) fn new() -> WatchMetrics {
        let mut registry = Registry::with_prefix("pullcheck_watch");
        let stuck = Family::<VerdictLabels, Counter>::default();
        registry.register(
            "stuck_pods",
            "Pods seen waiting on an image pull, counted once per pod, by the kubelet's failure as a verdict",
            stuck.clone(),
        );
        let actions = Family::<ActionLabels, Counter>::default();
        registry.register(
            "actions",
            "What the watch did about a failing pod, by action",
            actions.clone(),
        );
        // 0.05 s … ~200 s.
        let seconds_to_action = Histogram::new(exponential_buckets(0.05, 2.0, 13));
        registry.register(
            "seconds_to_action",
            "Seconds from the watch first seeing a pod's pull failure to deleting the pod",
            seconds_to_action.clone(),
        );
        let relists = Counter::default();
        registry.register(
            "relists",
            "Times the pod list was read again (watch expiry, API errors, start)",
            relists.clone(),
        );
        WatchMetrics {
            registry,
            stuck,
            actions,
            seconds_to_action,
            relists,
        }
    }

    /// Count one action.
    pub(crate) fn action(&self, action: Action) {
        self.actions.get_or_create(&ActionLabels { action }).inc();
    }

    /// How many times `action` was counted.
    #[cfg(test)]
    pub(crate) fn actions_of(&self, action: Action) -> u64 {
        self.actions.get_or_create(&ActionLabels { action }).get()
    }

    /// The OpenMetrics text.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String never fails");
        out
    }
}
