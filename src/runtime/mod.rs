//! One controller runtime for every pullcheck controller (the watch now; the Kueue
//! admission check and the cluster audit next), shaped like kube-runtime's: a watcher keeps
//! a store of the watched collection in sync, and a reconciler is run per object key off a
//! delay queue.
//!
//! - [`source`]: the collection as a trait ([`Source`]: list, watch), so the loop is tested
//!   against the in-memory [`fake`] cluster under `cargo test`; [`api`]: the trait on the
//!   API server, for any collection URL ([`api::ApiSource`]);
//! - [`watcher`]: the list/watch state machine, with [`backoff`] on every failure;
//! - [`queue`]: the delay queue, one pending run per key;
//! - [`run`]: the loop: the store, the queue, and at most [`Settings::concurrency`]
//!   reconciles at once, never two of one key;
//! - [`clock`]: the wall clock reconcilers read, paused in tests.
//!
//! Objects are `serde_json::Value`s, keyed by namespace and name ([`Key`]): no typed struct
//! of a pinned API version drops a field the reconciler writes back.
//!
//! **A controller on it** (the watch's is `PodReconciler` in `src/watch/controller.rs`):
//! 1. the collection: `ApiSource::new(client, url)` with the list URL, namespaced or not and
//!    with selectors in its query: `/api/v1/pods?fieldSelector=status.phase=Pending`, or
//!    `/apis/kueue.x-k8s.io/v1beta2/workloads` (all namespaces) and
//!    `/apis/kueue.x-k8s.io/v1beta2/namespaces/NS/workloads` (one). Workloads are
//!    namespaced objects, so their [`Key`] carries the namespace; a cluster-scoped kind
//!    (ClusterQueue, AdmissionCheck) has an empty one. To read a second kind (the
//!    AdmissionChecks a Workload names), a reconciler reads it itself, or runs a second
//!    `run` whose reconciler only updates a shared cache;
//! 2. a [`Reconciler`]: it gets the object as the store holds it now (`None`: gone, drop its
//!    state), makes its writes (raw JSON patches: server-side apply of a status entry,
//!    conditional merge patches), and answers [`Requeue::After`] for anything that must come
//!    back without a change (a retry after a failed write, a wait, a bounded re-check) or
//!    [`Requeue::Never`]. It keeps per-key state in its own map (no two runs of one key
//!    overlap, so take the entry out at the start and put it back at the end) and reads the
//!    wall time from a [`Clock`], so its tests run in paused time;
//! 3. `tokio::spawn(run(source, Arc::new(reconciler), Settings { kind, concurrency },
//!    status))`, with [`Status::ready`] behind `/readyz`; abort the task to stop it;
//! 4. tests: the [`fake`] cluster is a [`Source`] of any JSON objects (apply, update, remove,
//!    compact → 410, scripted list/watch failures, bookmarks, a call log with times); its
//!    writes are watch events, so a fake of the reconciler's writes built on it (as the
//!    watch's tests do) sees its own writes come back as events, as on the API server.
//!
//! **Deleted objects.** An object gone from the collection (a DELETED event, or absent from
//! a relist) is dropped from the store and its key is reconciled with `None`, under the
//! same one-at-a-time rule, so the reconciler drops its state for it there and only there.

pub(crate) mod api;
pub(crate) mod backoff;
pub(crate) mod clock;
#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod lease;
pub(crate) mod queue;
pub(crate) mod run;
pub(crate) mod source;
#[cfg(test)]
mod tests;
pub(crate) mod watcher;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use serde_json::Value;

pub(crate) use clock::Clock;
pub(crate) use run::run;
pub(crate) use source::Source;

/// An object's identity in the store: namespace (empty for a cluster-scoped object) and
/// name. A deleted and recreated object has the same key; its uid tells them apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    /// `metadata.namespace`, or empty.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl Key {
    /// From an object's metadata; `None` without a name.
    pub(crate) fn of(object: &Value) -> Option<Key> {
        let m = object.get("metadata")?;
        Some(Key {
            namespace: m
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            name: m.get("name")?.as_str()?.to_string(),
        })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Requeue {
    /// Nothing until the object changes.
    Never,
    /// Reconcile the key again after this long, even if nothing changes (an event sooner
    /// runs it sooner: one pending run per key, at the earliest time).
    After(Duration),
}

/// A controller's logic: bring the world in line with one object.
pub(crate) trait Reconciler: Send + Sync + 'static {
    /// Reconcile `key`: `Some(object)` as the store holds it now, `None` when it is gone
    /// from the collection (drop its state). Never called twice at once for one key;
    /// errors are the reconciler's to log, and to retry by [`Requeue::After`].
    fn reconcile(
        &self,
        key: &Key,
        object: Option<Arc<Value>>,
    ) -> impl Future<Output = Requeue> + Send;
}

/// How the runtime runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// The collection in log lines: `cannot list pods`.
    pub kind: &'static str,
    /// At most this many reconciles at once (at least 1).
    pub concurrency: usize,
}

/// What the runtime reports to its host (`/readyz`, `/metrics`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Status {
    /// True once a list succeeded; false again while lists fail.
    pub ready: Arc<AtomicBool>,
    /// Successful lists (start, 410, errors).
    pub lists: Counter,
}
