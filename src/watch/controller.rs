//! The watch's reconciler: for one Pending pod the kubelet reports an image-pull failure
//! on, apply the decision table ([`super::decide`]) and carry it out. It runs on the
//! controller runtime ([`crate::runtime`]), which lists and watches the pods and calls
//! [`PodReconciler::reconcile`] per pod: never twice at once for one pod, in tasks of their
//! own (a slow write never stalls the watch stream), and again when it asks
//! ([`Requeue::After`]).
//!
//! Acting on a pod, in order (a step that fails stops the rest, and the pod is reconciled
//! again after [`WRITE_RETRY`]):
//! 1. a conditional strategic-merge patch of `pods/status` adds [`CONDITION_TYPE`] (True,
//!    reason = the verdict); the patch carries the pod's `resourceVersion`, so of two
//!    replicas acting on one pod only one succeeds, and the other sees a 409 and stops;
//! 2. Events on the pod and on its Job;
//! 3. `DELETE` with a UID precondition and the pod's own grace period (never 0: a pod
//!    deleted that way may vanish before the kubelet marks it Failed, and the Job controller
//!    would not count it).
//!
//! State is one small entry per pod currently failing ([`Tracked`]: when it was first
//! seen, whether it was reported, a delete this watch owes); everything else is read from
//! the pod. A restart re-reads the marker from the pod, so a pod is never marked twice.
//! Every wait is a requeue, not a wait for an event: the transient grace, the rate limit,
//! a failed write's retry and the stale-mark takeover each come due on time though the
//! pod never changes, and an event in between (the mark's own MODIFIED) does not cancel
//! a retry this watch owes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::time::Instant;

use super::api::{ApiError, Effects, parse_time, rfc3339};
use super::decide::{Decision, Inputs, Owner, Why, decide};
use super::metrics::{Action, VerdictLabels, WatchMetrics};
use super::pod::{
    CONDITION_TYPE, Finding, Lifecycle, Mark, Scope, condition_reason, finding, from_events,
    lacks_the_error,
};
use super::ratelimit::Bucket;
use super::text::{explain_failure, printable, why_text};
use crate::k8s::event::EventType;
use crate::runtime::{Clock, Key, Reconciler, Requeue};
use crate::verdict::Verdict;

/// How the watch behaves.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Report what would be done; write nothing.
    pub dry_run: bool,
    /// `--transient-grace`: act on a transient failure after this long (`None`: never).
    pub transient_grace: Option<Duration>,
    /// At most this many pods marked and deleted per minute (a token bucket).
    pub deletions_per_minute: u32,
    /// Only namespaces with this label (`key`, `value`); `None`: every namespace.
    pub namespace_label: Option<(String, String)>,
    /// containerd `certs.d` root, to know which registries have mirrors.
    pub hosts_dir: Option<PathBuf>,
}

/// Pods reconciled at once (each reconcile makes at most five API calls of up to 10 s).
pub(crate) const CONCURRENCY: usize = 4;
/// How long a namespace's labels are trusted.
const NAMESPACE_TTL: Duration = Duration::from_secs(30);
/// A pod marked this long ago and still not terminating lost its deleter (a replica that
/// stopped between the mark and the delete): delete it.
pub(crate) const STALE_MARK: Duration = Duration::from_secs(30);
/// A failed write (mark, delete) or namespace read is tried again after this long.
pub(crate) const WRITE_RETRY: Duration = Duration::from_secs(5);
/// A pod held back by the rate limit is looked at again after this long.
pub(crate) const RATE_RETRY: Duration = Duration::from_secs(1);

/// What the decision table said about one pod, with what it was given.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assessment {
    /// What the pod says.
    pub finding: Finding,
    /// The decision table's answer.
    pub decision: Decision,
    /// The hosts dir has mirrors for the failing image's registry (an input of the table).
    pub mirrors: bool,
}

/// Apply the decision table to one failing pod.
pub(crate) fn assess(
    finding: Finding,
    settings: &Settings,
    first_failure: SystemTime,
    now: SystemTime,
) -> Option<Assessment> {
    let failure = finding.failure.as_ref()?;
    let mirrors = has_mirrors(settings.hosts_dir.as_deref(), &failure.image);
    let decision = decide(&Inputs {
        classification: failure.classification,
        mirrors,
        first_failure,
        now,
        transient_grace: settings.transient_grace,
        owner: finding.owner,
    });
    Some(Assessment {
        finding,
        decision,
        mirrors,
    })
}

/// True when the hosts dir configures a mirror for the image's registry.
fn has_mirrors(hosts_dir: Option<&std::path::Path>, image: &str) -> bool {
    let Some(dir) = hosts_dir else {
        return false;
    };
    let Ok(reference) = crate::reference::Reference::parse(image) else {
        return false;
    };
    match crate::registry::hosts::endpoints(Some(dir), reference.domain(), &[]) {
        Ok(eps) => eps.iter().any(|e| e.is_mirror),
        // A hosts.toml that no longer reads (edited since start) may hold mirrors: the safe
        // reading is "mirrors", which only reports.
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the hosts dir; treating the registry as mirrored (report only)");
            true
        }
    }
}

/// One failing pod the watch follows, from its first failure until it is gone, terminating
/// or no longer failing.
struct Tracked {
    /// The pod's uid: a pod recreated under the same name starts afresh.
    uid: String,
    /// When the watch first saw the failure (wall clock, for the transient grace).
    first_seen: SystemTime,
    /// The same on the monotonic clock (`seconds_to_action`).
    first_instant: Instant,
    /// An Event (or the dry run's log line) was written already.
    reported: bool,
    /// A delete this watch owes (it marked the pod, or took a stale mark over, and the
    /// delete failed), due at this time whatever events come first.
    owed_delete: Option<Instant>,
}

/// The watch's [`Reconciler`], over the API calls `E` ([`super::api::WatchApi`] in
/// production).
pub(crate) struct PodReconciler<E> {
    api: E,
    settings: Settings,
    metrics: Arc<WatchMetrics>,
    clock: Clock,
    tracked: Mutex<HashMap<Key, Tracked>>,
    bucket: Mutex<Bucket>,
    /// Namespace → when its labels were read, and whether they put it in scope.
    namespaces: Mutex<HashMap<String, (Instant, bool)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A reconcile that panicked holding the lock left plain data behind: keep using it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<E: Effects> Reconciler for PodReconciler<E> {
    async fn reconcile(&self, key: &Key, object: Option<Arc<Value>>) -> Requeue {
        let Some(pod) = object else {
            lock(&self.tracked).remove(key);
            return Requeue::Never;
        };
        // Taken out while the reconcile runs: the runtime never runs one key twice at once.
        let mut slot = lock(&self.tracked).remove(key);
        let requeue = self.reconcile_pod(&pod, &mut slot).await;
        if let Some(t) = slot {
            lock(&self.tracked).insert(key.clone(), t);
        }
        requeue
    }
}

impl<E: Effects> PodReconciler<E> {
    /// A reconciler over `api`, reading the wall time from `clock`.
    pub(crate) fn new(
        api: E,
        settings: Settings,
        metrics: Arc<WatchMetrics>,
        clock: Clock,
    ) -> PodReconciler<E> {
        PodReconciler {
            bucket: Mutex::new(Bucket::new(settings.deletions_per_minute)),
            api,
            settings,
            metrics,
            clock,
            tracked: Mutex::default(),
            namespaces: Mutex::default(),
        }
    }

    /// One pod, as the store holds it now; `slot` is its entry, `None` to drop it.
    async fn reconcile_pod(&self, pod: &Value, slot: &mut Option<Tracked>) -> Requeue {
        let Some(f) = finding(pod) else {
            *slot = None;
            return Requeue::Never;
        };
        if f.failure.is_none() || f.lifecycle == Lifecycle::Terminating {
            *slot = None;
            return Requeue::Never;
        }
        if f.scope == Scope::Skipped {
            return Requeue::Never;
        }
        match self.in_scope(&f.pod.namespace).await {
            Some(true) => {}
            Some(false) => return Requeue::Never,
            None => return Requeue::After(WRITE_RETRY),
        }
        let now = self.clock.now();
        if slot.as_ref().is_some_and(|t| t.uid != f.pod.uid) {
            *slot = None;
        }
        let t = slot.get_or_insert_with(|| {
            let verdict = f
                .failure
                .as_ref()
                .and_then(|x| x.classification.verdict)
                .map_or("unknown", |v| v.as_str());
            self.metrics
                .stuck
                .get_or_create(&VerdictLabels {
                    verdict: verdict.into(),
                })
                .inc();
            Tracked {
                uid: f.pod.uid.clone(),
                first_seen: now,
                first_instant: Instant::now(),
                reported: false,
                owed_delete: None,
            }
        });
        if f.mark == Mark::Marked {
            if f.owner != Owner::Job || self.settings.dry_run {
                return Requeue::Never;
            }
            // A delete this watch owes comes due at its time: the events its own mark
            // causes run this reconcile sooner, and must not cancel it.
            if let Some(at) = t.owed_delete {
                let left = at.saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    return Requeue::After(left);
                }
                return self.delete(&f, t).await;
            }
            // Another replica's (or an earlier run's) mark: its deleter has until the mark
            // is STALE_MARK old, then this watch takes over, event or no event.
            return match mark_age(pod, now) {
                Some(age) if age < STALE_MARK => Requeue::After(STALE_MARK - age),
                _ => self.delete(&f, t).await,
            };
        }
        let f = self.with_events(f).await;
        let Some(a) = assess(f, &self.settings, t.first_seen, now) else {
            return Requeue::Never;
        };
        match a.decision {
            Decision::Act { verdict } => self.act(&a.finding, verdict, t).await,
            Decision::Wait { until } => {
                Requeue::After(until.duration_since(now).unwrap_or_default())
            }
            Decision::EventOnly { why } => {
                self.report(&a.finding, &why, t).await;
                Requeue::Never
            }
            Decision::Ignore => Requeue::Never,
        }
    }

    /// `--namespace-label`, cached for [`NAMESPACE_TTL`]; `None` when the labels can't be
    /// read (the pod is looked at again after [`WRITE_RETRY`]).
    async fn in_scope(&self, namespace: &str) -> Option<bool> {
        if self.settings.namespace_label.is_none() {
            return Some(true);
        }
        if let Some((at, ok)) = lock(&self.namespaces).get(namespace)
            && at.elapsed() < NAMESPACE_TTL
        {
            return Some(*ok);
        }
        let ok = match namespace_in_scope(&self.api, &self.settings, namespace).await {
            Ok(ok) => ok,
            Err(e) => {
                tracing::warn!(namespace, error = %e, "cannot read the namespace's labels; skipping its pods for now");
                return None;
            }
        };
        lock(&self.namespaces).insert(namespace.to_string(), (Instant::now(), ok));
        Some(ok)
    }

    /// For a back-off message without the pull error (kubelet < 1.32), the error from the
    /// pod's `Failed` Events.
    async fn with_events(&self, mut f: Finding) -> Finding {
        let Some(failure) = f.failure.as_mut() else {
            return f;
        };
        if !lacks_the_error(&failure.classification) {
            return f;
        }
        match self.api.failed_events(&f.pod).await {
            Ok(messages) => {
                if let Some(c) = from_events(&failure.image, &messages) {
                    failure.classification = c;
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the pod's Events"),
        }
        f
    }

    /// An Event (once per pod) saying why the watch does not act.
    async fn report(&self, f: &Finding, why: &Why, t: &mut Tracked) {
        if t.reported {
            return;
        }
        t.reported = true;
        self.metrics.action(Action::EventOnly);
        let failure = f
            .failure
            .as_ref()
            .expect("assessed findings have a failure");
        let what = match failure.classification.verdict {
            Some(v) => explain_failure(failure, v),
            None => format!(
                "container {}: image {}",
                printable(&failure.container),
                printable(&failure.image)
            ),
        };
        let message = format!("{what}: {}", why_text(why));
        tracing::info!(pod = %format!("{}/{}", f.pod.namespace, f.pod.name), %message, "pull failure reported");
        if self.settings.dry_run {
            return;
        }
        if let Err(e) = self
            .api
            .event(
                &f.pod.object(),
                EventType::Warning,
                "PullcheckNotActing",
                &message,
            )
            .await
        {
            tracing::warn!(error = %e, "cannot record an Event");
        }
    }

    /// Mark, record the Events, delete.
    async fn act(&self, f: &Finding, verdict: Verdict, t: &mut Tracked) -> Requeue {
        let failure = f
            .failure
            .as_ref()
            .expect("assessed findings have a failure");
        let text = explain_failure(failure, verdict);
        let pod_name = format!("{}/{}", f.pod.namespace, f.pod.name);
        if self.settings.dry_run {
            if !t.reported {
                t.reported = true;
                self.metrics.action(Action::DryRun);
                tracing::warn!(pod = %pod_name, %text, "dry run: would mark and delete the pod");
            }
            return Requeue::Never;
        }
        if !lock(&self.bucket).take() {
            self.metrics.action(Action::RateLimited);
            return Requeue::After(RATE_RETRY);
        }
        let condition = json!({
            "type": CONDITION_TYPE,
            "status": "True",
            "reason": condition_reason(verdict),
            "message": crate::k8s::cut_chars(&text, 1024),
            "lastTransitionTime": rfc3339(self.clock.now()),
        });
        match self.api.mark(&f.pod, &f.resource_version, condition).await {
            Ok(true) => {}
            Ok(false) => {
                // Changed since read (another replica, the kubelet): the next event has it.
                self.metrics.action(Action::Conflict);
                return Requeue::Never;
            }
            Err(e) => {
                // A write that failed deleted nothing: it must not use up the budget.
                lock(&self.bucket).refund();
                self.write_failed(f, "mark", &e);
                return Requeue::After(WRITE_RETRY);
            }
        }
        // Marked: from here on the delete is owed, whatever happens to the Events.
        t.owed_delete = Some(Instant::now());
        let message = format!(
            "{text}: marked {CONDITION_TYPE} and deleting the pod, so its Job fails now instead of waiting in ImagePullBackOff"
        );
        if let Err(e) = self
            .api
            .event(
                &f.pod.object(),
                EventType::Warning,
                "PullcheckImagePullFailed",
                &message,
            )
            .await
        {
            tracing::warn!(error = %e, "cannot record an Event on the pod");
        }
        if let Some(job) = &f.owner_object {
            let message = format!("pod {}: {message}", f.pod.name);
            if let Err(e) = self
                .api
                .event(
                    job,
                    EventType::Warning,
                    "PullcheckImagePullFailed",
                    &message,
                )
                .await
            {
                tracing::warn!(error = %e, "cannot record an Event on the Job");
            }
        }
        self.delete(f, t).await
    }

    /// `DELETE` with the UID precondition; a failure is owed and retried after
    /// [`WRITE_RETRY`].
    async fn delete(&self, f: &Finding, t: &mut Tracked) -> Requeue {
        match self.api.delete(&f.pod).await {
            Ok(deleted) => {
                self.metrics.action(if deleted {
                    Action::Deleted
                } else {
                    Action::AlreadyGone
                });
                t.owed_delete = None;
                if deleted {
                    self.metrics
                        .seconds_to_action
                        .observe(t.first_instant.elapsed().as_secs_f64());
                }
                // At warn, so a watch run by hand at the default level says what it deleted.
                tracing::warn!(pod = %format!("{}/{}", f.pod.namespace, f.pod.name), deleted, "pod marked and deleted (UID precondition)");
                // The entry stays until the pod is seen terminating or gone, so the events
                // the mark and the delete cause don't count the pod as newly stuck.
                Requeue::Never
            }
            Err(e) => {
                self.write_failed(f, "delete", &e);
                t.owed_delete = Some(Instant::now() + WRITE_RETRY);
                Requeue::After(WRITE_RETRY)
            }
        }
    }

    fn write_failed(&self, f: &Finding, what: &str, e: &ApiError) {
        self.metrics.action(Action::Failed);
        let hint = if e.status() == Some(403) {
            "; the watch's ServiceAccount lacks a permission listed in docs/watch.md"
        } else {
            ""
        };
        tracing::warn!(pod = %format!("{}/{}", f.pod.namespace, f.pod.name), error = %e, "cannot {what} the pod{hint}");
    }
}

/// `--namespace-label`: the namespace carries the label (always true without one; a
/// namespace that doesn't exist is out of scope).
pub(crate) async fn namespace_in_scope<E: Effects>(
    api: &E,
    settings: &Settings,
    namespace: &str,
) -> Result<bool, ApiError> {
    let Some((key, value)) = &settings.namespace_label else {
        return Ok(true);
    };
    Ok(api
        .namespace_labels(namespace)
        .await?
        .is_some_and(|labels| labels.get(key).and_then(Value::as_str) == Some(value.as_str())))
}

/// How long ago pullcheck's condition was set on `pod` (by its `lastTransitionTime`; a
/// time ahead of `now` is 0). `None` when no timestamp reads: such a mark can't be dated,
/// and is taken as stale.
fn mark_age(pod: &Value, now: SystemTime) -> Option<Duration> {
    let at = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(CONDITION_TYPE))
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .and_then(parse_time)?;
    Some(now.duration_since(at).unwrap_or_default())
}

#[cfg(test)]
mod tests;
