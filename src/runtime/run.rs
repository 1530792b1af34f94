//! The loop: the watcher's changes into the store and the queue, due keys out to
//! reconcile tasks.
//!
//! The watcher runs in its own task and only reads the stream; reconciles (the effects:
//! API writes of up to 10 s each) run in their own tasks, at most
//! [`Settings::concurrency`] at once. This loop does neither: it moves objects and keys
//! between them, so a slow write never stalls the stream. A key is never reconciled twice
//! at once: a change to a key while it is being reconciled is remembered and the key is
//! reconciled again right after, with the store's newest object.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;

use super::queue::Queue;
use super::watcher::{self, Change};
use super::{Key, Reconciler, Requeue, Settings, Source, Status};

/// Changes the watcher may send ahead of the loop.
const CHANNEL: usize = 1024;
/// A reconcile that panicked is tried again after this long.
const AFTER_PANIC: Duration = Duration::from_secs(5);

/// Run the controller: watch `source`, reconcile with `reconciler`, for ever (until the
/// task running it is aborted, which aborts the watcher and the reconciles too).
pub(crate) async fn run<S: Source, R: Reconciler>(
    source: S,
    reconciler: Arc<R>,
    settings: Settings,
    status: Status,
) {
    let (tx, mut rx) = mpsc::channel(CHANNEL);
    let mut background = JoinSet::new();
    background.spawn(async move { watcher::run(&source, settings.kind, tx, &status).await });
    let mut state = Loop::default();
    let concurrency = settings.concurrency.max(1);
    loop {
        state.start_due(&reconciler, concurrency);
        let next = (state.tasks.len() < concurrency)
            .then(|| state.queue.next_time())
            .flatten();
        tokio::select! {
            change = rx.recv() => match change {
                Some(c) => state.apply(c),
                // The watcher is gone (it only ends when this loop is): nothing more to do.
                None => return,
            },
            Some(done) = state.tasks.join_next_with_id(), if !state.tasks.is_empty() => {
                state.finished(done);
            }
            () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {}
        }
    }
}

#[derive(Default)]
struct Loop {
    store: HashMap<Key, Arc<Value>>,
    queue: Queue,
    tasks: JoinSet<Requeue>,
    /// The key of each running task.
    running: HashMap<Id, Key>,
    /// Keys being reconciled, with the earliest time another run was asked for meanwhile.
    busy: HashMap<Key, Option<Instant>>,
}

impl Loop {
    fn schedule(&mut self, key: Key, at: Instant) {
        match self.busy.get_mut(&key) {
            Some(asked) => *asked = Some(asked.map_or(at, |a| a.min(at))),
            None => self.queue.schedule(key, at),
        }
    }

    fn apply(&mut self, change: Change) {
        let now = Instant::now();
        match change {
            Change::Listed(items) => {
                let mut store = HashMap::with_capacity(items.len());
                for o in items {
                    if let Some(k) = Key::of(&o) {
                        store.insert(k, Arc::new(o));
                    }
                }
                let gone: Vec<Key> = self
                    .store
                    .keys()
                    .filter(|k| !store.contains_key(*k))
                    .cloned()
                    .collect();
                self.store = store;
                let listed: Vec<Key> = self.store.keys().cloned().collect();
                for k in gone.into_iter().chain(listed) {
                    self.schedule(k, now);
                }
            }
            Change::Applied(o) => {
                if let Some(k) = Key::of(&o) {
                    self.store.insert(k.clone(), Arc::new(o));
                    self.schedule(k, now);
                }
            }
            Change::Deleted(o) => {
                if let Some(k) = Key::of(&o) {
                    self.store.remove(&k);
                    self.schedule(k, now);
                }
            }
        }
    }

    fn start_due<R: Reconciler>(&mut self, reconciler: &Arc<R>, concurrency: usize) {
        let now = Instant::now();
        while self.tasks.len() < concurrency {
            let Some(key) = self.queue.pop_due(now) else {
                return;
            };
            let object = self.store.get(&key).cloned();
            let r = reconciler.clone();
            let k = key.clone();
            let handle = self
                .tasks
                .spawn(async move { r.reconcile(&k, object).await });
            self.running.insert(handle.id(), key.clone());
            self.busy.insert(key, None);
        }
    }

    fn finished(&mut self, done: Result<(Id, Requeue), JoinError>) {
        let now = Instant::now();
        let (id, requeue) = match done {
            Ok((id, requeue)) => (id, requeue),
            Err(e) => {
                tracing::error!(error = %e, "a reconcile failed; trying its object again later");
                (e.id(), Requeue::After(AFTER_PANIC))
            }
        };
        let Some(key) = self.running.remove(&id) else {
            return;
        };
        let asked = self.busy.remove(&key).flatten();
        let wanted = match requeue {
            Requeue::Never => None,
            Requeue::After(d) => Some(now + d),
        };
        let at = match (asked, wanted) {
            (Some(a), Some(w)) => Some(a.min(w)),
            (a, w) => a.or(w),
        };
        if let Some(at) = at {
            self.queue.schedule(key, at);
        }
    }
}
