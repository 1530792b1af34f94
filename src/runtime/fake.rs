//! An in-memory cluster for tests: one collection with resource versions, a history that
//! watches replay from, compaction (410), and scripted failures. Named a fake on purpose:
//! it stands in for the API server only where a unit test must be exact about time (back-off
//! delays, requeues under paused time); the real-API tests (`tests/integration/apiserver/`)
//! cover the protocol itself.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Key;
use super::source::{Event, Source, Watch, WatchError};
use crate::apiserver::ApiError;

/// A call the fake answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    /// A list.
    List,
    /// A watch start from this version.
    Watch(String),
}

/// The cluster. Clones share it.
#[derive(Clone, Default)]
pub(crate) struct FakeCluster {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    objects: BTreeMap<Key, Value>,
    version: u64,
    history: Vec<(u64, Event)>,
    /// Watches from a version below this get 410.
    compacted: u64,
    watchers: Vec<mpsc::UnboundedSender<Result<Event, WatchError>>>,
    list_errors: VecDeque<ApiError>,
    watch_errors: VecDeque<WatchError>,
    calls: Vec<(Instant, Call)>,
}

impl Inner {
    fn emit(&mut self, event: Event) {
        self.history.push((self.version, event.clone()));
        self.watchers.retain(|w| w.send(Ok(event.clone())).is_ok());
    }
}

impl FakeCluster {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Create or replace `object` (needs `metadata.name`): a new resource version, an
    /// ADDED/MODIFIED event. Returns it as stored.
    pub(crate) fn apply(&self, mut object: Value) -> Value {
        let key = Key::of(&object).expect("a fake object has a name");
        let mut inner = self.lock();
        inner.version += 1;
        object["metadata"]["resourceVersion"] = Value::String(inner.version.to_string());
        inner.objects.insert(key, object.clone());
        inner.emit(Event::Changed(object.clone()));
        object
    }

    /// Change the stored object `key` with `edit` (a new version, a MODIFIED event).
    pub(crate) fn update(&self, key: &Key, edit: impl FnOnce(&mut Value)) -> Option<Value> {
        let mut object = self.get(key)?;
        edit(&mut object);
        Some(self.apply(object))
    }

    /// Remove `key` (a DELETED event).
    pub(crate) fn remove(&self, key: &Key) {
        let mut inner = self.lock();
        if let Some(mut object) = inner.objects.remove(key) {
            inner.version += 1;
            object["metadata"]["resourceVersion"] = Value::String(inner.version.to_string());
            inner.emit(Event::Deleted(object));
        }
    }

    /// The stored object `key`.
    pub(crate) fn get(&self, key: &Key) -> Option<Value> {
        self.lock().objects.get(key).cloned()
    }

    /// The next lists fail with these errors, one each.
    pub(crate) fn fail_lists(&self, errors: impl IntoIterator<Item = ApiError>) {
        self.lock().list_errors.extend(errors);
    }

    /// The next watch starts fail with these errors, one each.
    pub(crate) fn fail_watches(&self, errors: impl IntoIterator<Item = WatchError>) {
        self.lock().watch_errors.extend(errors);
    }

    /// Forget the history: open watches get a 410 `ERROR` event, and watches from an older
    /// version are refused with 410.
    pub(crate) fn compact(&self) {
        let mut inner = self.lock();
        inner.compacted = inner.version;
        inner.history.clear();
        for w in inner.watchers.drain(..) {
            let _ = w.send(Err(WatchError::Expired));
        }
    }

    /// Open watches fail mid-stream with `error`.
    pub(crate) fn break_watches(&self, error: ApiError) {
        for w in self.lock().watchers.drain(..) {
            let _ = w.send(Err(WatchError::Api(error.clone())));
        }
    }

    /// The server ends open watches (their timeout).
    pub(crate) fn end_watches(&self) {
        self.lock().watchers.clear();
    }

    /// A `BOOKMARK` at the current version to open watches, after a change no watch sees
    /// (an object of another collection): the version moves, nothing else.
    pub(crate) fn bookmark(&self) -> String {
        let mut inner = self.lock();
        inner.version += 1;
        let v = inner.version.to_string();
        inner
            .watchers
            .retain(|w| w.send(Ok(Event::Bookmark(v.clone()))).is_ok());
        v
    }

    /// Every call so far, with when it came.
    pub(crate) fn calls(&self) -> Vec<(Instant, Call)> {
        self.lock().calls.clone()
    }
}

/// An open fake watch.
pub(crate) struct FakeWatch {
    rx: mpsc::UnboundedReceiver<Result<Event, WatchError>>,
}

impl Watch for FakeWatch {
    async fn next(&mut self) -> Result<Option<Event>, WatchError> {
        match self.rx.recv().await {
            None => Ok(None),
            Some(Ok(e)) => Ok(Some(e)),
            Some(Err(e)) => Err(e),
        }
    }
}

impl Source for FakeCluster {
    type Watch = FakeWatch;

    async fn list(&self) -> Result<(Vec<Value>, String), ApiError> {
        let mut inner = self.lock();
        inner.calls.push((Instant::now(), Call::List));
        if let Some(e) = inner.list_errors.pop_front() {
            return Err(e);
        }
        Ok((
            inner.objects.values().cloned().collect(),
            inner.version.to_string(),
        ))
    }

    async fn watch(&self, resource_version: &str) -> Result<FakeWatch, WatchError> {
        let mut inner = self.lock();
        inner
            .calls
            .push((Instant::now(), Call::Watch(resource_version.to_string())));
        if let Some(e) = inner.watch_errors.pop_front() {
            return Err(e);
        }
        let from: u64 = resource_version.parse().unwrap_or(0);
        if from < inner.compacted {
            return Err(WatchError::Expired);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        for (v, e) in &inner.history {
            if *v > from {
                let _ = tx.send(Ok(e.clone()));
            }
        }
        inner.watchers.push(tx);
        Ok(FakeWatch { rx })
    }
}
