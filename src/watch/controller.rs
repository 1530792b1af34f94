//! The watch loop: list Pending pods, watch them, and for each pod the kubelet reports an
//! image-pull failure on, apply the decision table ([`super::decide`]) and carry it out.
//!
//! Acting on a pod, in order (each step's failure stops the rest for now; the pod is seen
//! again on its next change or the next tick):
//! 1. a conditional strategic-merge patch of `pods/status` adds [`CONDITION_TYPE`] (True,
//!    reason = the verdict); the patch carries the pod's `resourceVersion`, so of two
//!    replicas acting on one pod only one succeeds, and the other sees a 409 and stops;
//! 2. Events on the pod and on its Job;
//! 3. `DELETE` with a UID precondition and the pod's own grace period (never 0: a pod
//!    deleted that way may vanish before the kubelet marks it Failed, and the Job controller
//!    would not count it).
//!
//! State is one small entry per pod currently failing (when it was first seen, whether it
//! was reported); nothing else is kept between events. A restart re-reads the marker from
//! the pod, so a pod is never marked twice.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use super::api::{ApiError, Event, PodId, WatchApi, WatchError, rfc3339};
use super::decide::{Decision, Inputs, Owner, Why, decide};
use super::metrics::{VerdictLabels, WatchMetrics};
use super::pod::{
    CONDITION_TYPE, Failure, Finding, Lifecycle, Mark, Scope, condition_reason, finding,
    from_events, lacks_the_error,
};
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

/// How long a namespace's labels are trusted.
const NAMESPACE_TTL: Duration = Duration::from_secs(30);
/// A pod marked this long ago and still not terminating lost its deleter (a replica that
/// stopped between the mark and the delete): delete it.
const STALE_MARK: Duration = Duration::from_secs(30);
/// How often waits (transient grace, rate limit) are looked at again.
const TICK: Duration = Duration::from_millis(500);

/// What the decision table said about one pod, with what it was given.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assessment {
    pub finding: Finding,
    pub decision: Decision,
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

/// `text` with control characters escaped (`\u{1b}`): image names and messages come from
/// whoever writes a pod, and must not reach a terminal or a log line raw.
pub(crate) fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// The text of the condition and the Events: the container, the image, what the kubelet
/// said and what it means.
pub(crate) fn explain_failure(f: &Failure, verdict: Verdict) -> String {
    let reason = f
        .classification
        .reason
        .map(|r| r.as_str())
        .unwrap_or("unknown");
    let phrase = f.classification.matched.unwrap_or("no known phrase");
    let said = if phrase == reason {
        reason.to_string()
    } else {
        format!("{reason}: {phrase}")
    };
    let what = match &f.volume {
        Some(v) => format!("image volume {}", printable(v)),
        None => "image".to_string(),
    };
    format!(
        "container {}: {what} {}: {} ({said})",
        printable(&f.container),
        printable(&f.image),
        verdict.as_str()
    )
}

/// Why a failure is only reported, in a sentence.
pub(crate) fn why_text(why: &Why) -> String {
    match why {
        Why::Unknown => "the kubelet's message matches no known pull failure; nothing done".into(),
        Why::BehindMirrors { kubelet } => format!(
            "the kubelet says {} through registry mirrors, which may hide the upstream's answer; nothing done",
            kubelet.as_str()
        ),
        Why::TransientGraceOff => {
            "a transient failure and --transient-grace is off; the kubelet keeps retrying".into()
        }
        // A bare pod has nobody to recreate it: deleting it would only lose it.
        Why::NotAJob {
            owner: Owner::BarePod,
            verdict,
        } => format!(
            "{} but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done",
            verdict.as_str()
        ),
        Why::NotAJob { owner, verdict } => format!(
            "{} but the pod's controller is {}, not a batch/v1 Job: deleting it would only make its controller recreate it; nothing done",
            verdict.as_str(),
            owner.describe()
        ),
    }
}

struct Tracked {
    first_seen: SystemTime,
    first_instant: Instant,
    pod: Value,
    reported: bool,
    retry_at: Option<SystemTime>,
    /// This watch marked the pod and its delete has not succeeded yet: a retry of the delete
    /// is due at `retry_at`, whatever events the mark itself causes.
    pending_delete: bool,
}

/// A token bucket: `per_minute` deletions, refilled continuously.
struct Bucket {
    per_minute: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(per_minute: u32) -> Bucket {
        Bucket {
            per_minute: f64::from(per_minute.max(1)),
            tokens: f64::from(per_minute.max(1)),
            at: Instant::now(),
        }
    }

    fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.per_minute);
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * self.per_minute / 60.0;
        self.tokens = (self.tokens + refill).min(self.per_minute);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The controller. One per process.
pub(crate) struct Controller {
    api: WatchApi,
    settings: Settings,
    metrics: Arc<WatchMetrics>,
    ready: Arc<AtomicBool>,
    tracked: HashMap<String, Tracked>,
    bucket: Bucket,
    namespaces: HashMap<String, (Instant, bool)>,
}

enum After {
    Rewatch,
    Relist,
}

impl Controller {
    /// A controller over `api`.
    pub(crate) fn new(
        api: WatchApi,
        settings: Settings,
        metrics: Arc<WatchMetrics>,
        ready: Arc<AtomicBool>,
    ) -> Controller {
        Controller {
            bucket: Bucket::new(settings.deletions_per_minute),
            api,
            settings,
            metrics,
            ready,
            tracked: HashMap::new(),
            namespaces: HashMap::new(),
        }
    }

    /// List, then watch, forever; API errors are logged and retried with a back-off of up
    /// to 30 s (readiness is lost while no list succeeds).
    pub(crate) async fn run(mut self) {
        let mut backoff = Duration::from_millis(500);
        loop {
            let (pods, mut version) = match self.api.list_pending().await {
                Ok(l) => l,
                Err(e) => {
                    self.ready.store(false, Ordering::SeqCst);
                    tracing::warn!(error = %e, retry_in_s = backoff.as_secs_f64(), "cannot list pods");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    continue;
                }
            };
            backoff = Duration::from_millis(500);
            self.metrics.relists.inc();
            let present: HashSet<String> = pods
                .iter()
                .filter_map(|p| PodId::of(p).map(|id| id.uid))
                .collect();
            self.tracked.retain(|uid, _| present.contains(uid));
            for pod in pods {
                self.handle(pod).await;
            }
            self.ready.store(true, Ordering::SeqCst);
            while let After::Rewatch = self.watch_once(&mut version).await {}
        }
    }

    async fn watch_once(&mut self, version: &mut String) -> After {
        let mut watch = match self.api.watch(version).await {
            Ok(w) => w,
            Err(WatchError::Expired) => return After::Relist,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch pods; listing again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                return After::Relist;
            }
        };
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                event = watch.next() => match event {
                    Ok(Some(Event::Changed(pod))) => {
                        if let Some(v) = pod.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                            *version = v.to_string();
                        }
                        self.handle(pod).await;
                    }
                    Ok(Some(Event::Deleted(pod))) => {
                        if let Some(v) = pod.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                            *version = v.to_string();
                        }
                        if let Some(id) = PodId::of(&pod) {
                            self.tracked.remove(&id.uid);
                        }
                    }
                    Ok(Some(Event::Bookmark(v))) => {
                        if !v.is_empty() {
                            *version = v;
                        }
                    }
                    Ok(None) => return After::Rewatch,
                    Err(WatchError::Expired) => return After::Relist,
                    Err(e) => {
                        tracing::warn!(error = %e, "pod watch failed; listing again");
                        return After::Relist;
                    }
                },
                _ = tick.tick() => self.revisit().await,
            }
        }
    }

    /// Pods whose wait (transient grace, rate limit, a failed write) is over.
    async fn revisit(&mut self) {
        let now = SystemTime::now();
        let due: Vec<Value> = self
            .tracked
            .values()
            .filter(|t| t.retry_at.is_some_and(|at| at <= now))
            .map(|t| t.pod.clone())
            .collect();
        for pod in due {
            self.handle(pod).await;
        }
    }

    async fn in_scope(&mut self, namespace: &str) -> bool {
        if self.settings.namespace_label.is_none() {
            return true;
        }
        if let Some((at, ok)) = self.namespaces.get(namespace)
            && at.elapsed() < NAMESPACE_TTL
        {
            return *ok;
        }
        let ok = match namespace_in_scope(&self.api, &self.settings, namespace).await {
            Ok(ok) => ok,
            Err(e) => {
                tracing::warn!(namespace, error = %e, "cannot read the namespace's labels; skipping its pods for now");
                return false;
            }
        };
        self.namespaces
            .insert(namespace.to_string(), (Instant::now(), ok));
        ok
    }

    /// One pod, as it is now.
    async fn handle(&mut self, pod: Value) {
        let Some(f) = finding(&pod) else {
            return;
        };
        let uid = f.pod.uid.clone();
        if f.failure.is_none() || f.lifecycle == Lifecycle::Terminating {
            self.tracked.remove(&uid);
            return;
        }
        if f.scope == Scope::Skipped || !self.in_scope(&f.pod.namespace).await {
            return;
        }
        let now = SystemTime::now();
        let entry = self.tracked.entry(uid.clone()).or_insert_with(|| {
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
                first_seen: now,
                first_instant: Instant::now(),
                pod: Value::Null,
                reported: false,
                retry_at: None,
                pending_delete: false,
            }
        });
        entry.pod = pod;
        // An event supersedes a wait, except a delete this watch still owes: the events
        // its own mark causes must not cancel the retry of a failed delete.
        let owed_retry = entry.retry_at.filter(|_| entry.pending_delete);
        entry.retry_at = None;
        let first_seen = entry.first_seen;
        if f.mark == Mark::Marked {
            if f.owner != Owner::Job || self.settings.dry_run {
                return;
            }
            if let Some(at) = owed_retry
                && at > now
            {
                entry.retry_at = Some(at);
                return;
            }
            if entry.pending_delete || marked_before(&entry.pod, STALE_MARK) {
                self.delete(&f).await;
            } else {
                // Another replica's fresh mark: take it over once it is stale, without
                // waiting for the pod to change again.
                entry.retry_at = Some(now + STALE_MARK);
            }
            return;
        }
        let f = self.with_events(f).await;
        let Some(a) = assess(f, &self.settings, first_seen, now) else {
            return;
        };
        match a.decision {
            Decision::Act { verdict } => self.act(&a.finding, verdict).await,
            Decision::Wait { until } => {
                if let Some(t) = self.tracked.get_mut(&uid) {
                    t.retry_at = Some(until);
                }
            }
            Decision::EventOnly { why } => self.report(&a.finding, &why).await,
            Decision::Ignore => {}
        }
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

    async fn report(&mut self, f: &Finding, why: &Why) {
        let Some(t) = self.tracked.get_mut(&f.pod.uid) else {
            return;
        };
        if t.reported {
            return;
        }
        t.reported = true;
        self.metrics.action("event_only");
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
            .event(&f.pod.object(), "Warning", "PullcheckNotActing", &message)
            .await
        {
            tracing::warn!(error = %e, "cannot record an Event");
        }
    }

    async fn act(&mut self, f: &Finding, verdict: Verdict) {
        let failure = f
            .failure
            .as_ref()
            .expect("assessed findings have a failure");
        let text = explain_failure(failure, verdict);
        let pod_name = format!("{}/{}", f.pod.namespace, f.pod.name);
        if self.settings.dry_run {
            let t = self.tracked.get_mut(&f.pod.uid).expect("tracked");
            if !t.reported {
                t.reported = true;
                self.metrics.action("dry_run");
                tracing::warn!(pod = %pod_name, %text, "dry run: would mark and delete the pod");
            }
            return;
        }
        if !self.bucket.take() {
            self.metrics.action("rate_limited");
            if let Some(t) = self.tracked.get_mut(&f.pod.uid) {
                t.retry_at = Some(SystemTime::now() + Duration::from_secs(1));
            }
            return;
        }
        let condition = json!({
            "type": CONDITION_TYPE,
            "status": "True",
            "reason": condition_reason(verdict),
            "message": crate::k8s::cut_chars(&text, 1024),
            "lastTransitionTime": rfc3339(SystemTime::now()),
        });
        match self.api.mark(&f.pod, &f.resource_version, condition).await {
            Ok(true) => {}
            Ok(false) => {
                // Changed since read (another replica, the kubelet): the next event has it.
                self.metrics.action("conflict");
                return;
            }
            Err(e) => {
                // A write that failed deleted nothing: it must not use up the budget.
                self.bucket.refund();
                self.write_failed(f, "mark", &e);
                return;
            }
        }
        if let Some(t) = self.tracked.get_mut(&f.pod.uid) {
            t.pending_delete = true;
        }
        let message = format!(
            "{text}: marked {CONDITION_TYPE} and deleting the pod, so its Job fails now instead of waiting in ImagePullBackOff"
        );
        if let Err(e) = self
            .api
            .event(
                &f.pod.object(),
                "Warning",
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
                .event(job, "Warning", "PullcheckImagePullFailed", &message)
                .await
            {
                tracing::warn!(error = %e, "cannot record an Event on the Job");
            }
        }
        self.delete(f).await;
    }

    async fn delete(&mut self, f: &Finding) {
        match self.api.delete(&f.pod).await {
            Ok(deleted) => {
                self.metrics
                    .action(if deleted { "deleted" } else { "already_gone" });
                // The entry stays until the pod is seen terminating or gone, so the events the
                // mark and the delete cause don't count the pod as newly stuck.
                if let Some(t) = self.tracked.get_mut(&f.pod.uid) {
                    t.retry_at = None;
                    t.pending_delete = false;
                    if deleted {
                        self.metrics
                            .seconds_to_action
                            .observe(t.first_instant.elapsed().as_secs_f64());
                    }
                }
                // At warn, so a watch run by hand at the default level says what it deleted.
                tracing::warn!(pod = %format!("{}/{}", f.pod.namespace, f.pod.name), deleted, "pod marked and deleted (UID precondition)");
            }
            Err(e) => self.write_failed(f, "delete", &e),
        }
    }

    fn write_failed(&mut self, f: &Finding, what: &str, e: &ApiError) {
        self.metrics.action("failed");
        let hint = if e.status() == Some(403) {
            "; the watch's ServiceAccount lacks a permission listed in docs/watch.md"
        } else {
            ""
        };
        tracing::warn!(pod = %format!("{}/{}", f.pod.namespace, f.pod.name), error = %e, "cannot {what} the pod{hint}");
        if let Some(t) = self.tracked.get_mut(&f.pod.uid) {
            t.retry_at = Some(SystemTime::now() + Duration::from_secs(5));
        }
    }
}

/// `--namespace-label`: the namespace carries the label (always true without one; a
/// namespace that doesn't exist is out of scope).
pub(crate) async fn namespace_in_scope(
    api: &WatchApi,
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

/// The pod's pullcheck condition was set at least `age` ago (by its `lastTransitionTime`).
fn marked_before(pod: &Value, age: Duration) -> bool {
    let Some(at) = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(CONDITION_TYPE))
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
    else {
        return true;
    };
    let now = rfc3339(SystemTime::now() - age);
    // RFC 3339 UTC timestamps of one shape compare as strings.
    at <= now.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            dry_run: false,
            transient_grace: None,
            deletions_per_minute: 2,
            namespace_label: None,
            hosts_dir: None,
        }
    }

    #[test]
    fn not_a_job_names_the_owner_in_words() {
        let rs = why_text(&Why::NotAJob {
            owner: Owner::ReplicaSet,
            verdict: Verdict::NotFound,
        });
        assert_eq!(
            rs,
            "not_found but the pod's controller is a ReplicaSet (a Deployment's), not a batch/v1 Job: deleting it would only make its controller recreate it; nothing done"
        );
        // A bare pod has no controller to recreate it (the text once said "controller is BarePod").
        let bare = why_text(&Why::NotAJob {
            owner: Owner::BarePod,
            verdict: Verdict::NotFound,
        });
        assert_eq!(
            bare,
            "not_found but the pod has no controller, so no Job fails with it: deleting it would only lose it; nothing done"
        );
    }

    #[test]
    fn what_a_pod_writes_is_printed_escaped() {
        assert_eq!(
            printable("r.io/a\u{1b}[31mX\tb:v1"),
            "r.io/a\\u{1b}[31mX\\tb:v1"
        );
        assert_eq!(printable("plain/ünïcode:v1"), "plain/ünïcode:v1");
    }

    #[test]
    fn a_refunded_token_can_be_taken_again() {
        let mut b = Bucket::new(1);
        assert!(b.take());
        assert!(!b.take());
        b.refund();
        assert!(b.take());
    }

    #[test]
    fn the_bucket_allows_its_rate() {
        let mut b = Bucket::new(2);
        assert!(b.take());
        assert!(b.take());
        assert!(!b.take());
    }

    #[test]
    fn stale_marks() {
        let old = json!({"status": {"conditions": [{"type": CONDITION_TYPE, "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        assert!(marked_before(&old, STALE_MARK));
        let fresh = json!({"status": {"conditions": [{"type": CONDITION_TYPE, "status": "True", "lastTransitionTime": rfc3339(SystemTime::now())}]}});
        assert!(!marked_before(&fresh, STALE_MARK));
    }

    #[test]
    fn a_not_found_through_mirrors_is_only_reported() {
        let hosts = tempfile::tempdir().unwrap();
        let dir = hosts.path().join("r.io");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join("hosts.toml"),
            "server = \"https://r.io\"\n[host.\"https://mirror.example\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        )
        .unwrap();
        let pod = json!({
            "metadata": {"namespace": "n", "name": "p", "uid": "u", "resourceVersion": "1",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]},
            "spec": {"containers": [{"name": "main", "image": "r.io/app:nope"}]},
            "status": {"containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ErrImagePull",
                "message": "rpc error: code = NotFound desc = failed to pull and unpack image \"r.io/app:nope\": failed to resolve image: r.io/app:nope: not found"}}}]},
        });
        let now = SystemTime::now();
        let with_mirrors = Settings {
            hosts_dir: Some(hosts.path().to_path_buf()),
            ..settings()
        };
        let a = assess(finding(&pod).unwrap(), &with_mirrors, now, now).unwrap();
        assert!(a.mirrors);
        assert_eq!(
            a.decision,
            Decision::EventOnly {
                why: Why::BehindMirrors {
                    kubelet: Verdict::NotFound
                }
            }
        );
        let plain = assess(finding(&pod).unwrap(), &settings(), now, now).unwrap();
        assert_eq!(
            plain.decision,
            Decision::Act {
                verdict: Verdict::NotFound
            }
        );
    }

    /// Every recorded kubelet message, on a Job's pod, through `assess`: the decision the
    /// watch takes on a real node's words.
    #[test]
    fn recorded_failures_are_decided_as_the_table_says() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/watch/kubelet-1.35.4-containerd-2.2.9");
        let mut got: Vec<(String, String)> = Vec::new();
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        for path in names {
            let rec: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let w = &rec["waiting"][0];
            let pod = json!({
                "metadata": {"namespace": "n", "name": "p", "uid": "u", "resourceVersion": "1",
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]},
                "spec": {"containers": [{"name": "main", "image": rec["image"]}]},
                "status": {"containerStatuses": [{"name": "main", "state": {"waiting": {"reason": w["reason"], "message": w["message"]}}}]},
            });
            let now = SystemTime::now();
            let a = assess(finding(&pod).unwrap(), &settings(), now, now).unwrap();
            let decision = match a.decision {
                Decision::Act { verdict } => format!("act {}", verdict.as_str()),
                Decision::EventOnly { why } => format!("event {why:?}"),
                Decision::Wait { .. } => "wait".into(),
                Decision::Ignore => "ignore".into(),
            };
            got.push((rec["scenario"].as_str().unwrap().to_string(), decision));
        }
        let want: Vec<(String, String)> = [
            ("auth-missing-tag", "act not_found"),
            ("auth-no-secret", "act unauthenticated"),
            ("auth-wrong-password", "act denied"),
            ("dns", "event TransientGraceOff"),
            ("invalid-name", "act invalid_reference"),
            ("mirror-401-upstream-down", "act unauthenticated"),
            ("mirror-404-upstream-down", "act not_found"),
            ("missing-repository", "act not_found"),
            ("missing-tag", "act not_found"),
            ("never-pull", "event Unknown"),
            ("platform-missing", "act platform_missing"),
            ("registry-down", "event TransientGraceOff"),
            ("status-429", "event TransientGraceOff"),
            ("status-503", "event TransientGraceOff"),
            ("x509", "event TransientGraceOff"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }
}
