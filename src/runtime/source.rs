//! What the runtime watches, as a trait: list a collection, watch it from a resource
//! version. `ApiSource` (`api.rs`) implements it on the API server for any collection; the
//! tests use the in-memory `FakeCluster` (`fake.rs`). (Named without links: this module is
//! below both.)

use std::future::Future;

use serde_json::Value;

use crate::apiserver::ApiError;

/// One watch event.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// ADDED or MODIFIED: the object as it is now.
    Changed(Value),
    /// DELETED, or gone from the watched collection (a field selector no longer matches).
    Deleted(Value),
    /// A newer resource version with no object change (`BOOKMARK`).
    Bookmark(String),
}

/// How a watch (its start or its stream) failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum WatchError {
    /// The resource version is too old (410 Gone, or an `ERROR` event with code 410): list
    /// again.
    #[error("watch expired (410 Gone): listing again")]
    Expired,
    /// Anything else.
    #[error(transparent)]
    Api(ApiError),
}

impl From<ApiError> for WatchError {
    fn from(e: ApiError) -> WatchError {
        if e.status() == Some(410) {
            WatchError::Expired
        } else {
            WatchError::Api(e)
        }
    }
}

/// A listable, watchable collection of JSON objects.
pub(crate) trait Source: Send + Sync + 'static {
    /// An open watch.
    type Watch: Watch;

    /// Every object of the collection (all pages), and the list's resource version to
    /// watch from.
    fn list(&self) -> impl Future<Output = Result<(Vec<Value>, String), ApiError>> + Send;

    /// Watch the collection from `resource_version`. [`WatchError::Expired`]: list again.
    fn watch(
        &self,
        resource_version: &str,
    ) -> impl Future<Output = Result<Self::Watch, WatchError>> + Send;
}

/// An open watch: its events one at a time.
pub(crate) trait Watch: Send + 'static {
    /// The next event; `Ok(None)` when the server ended the watch (its timeout).
    fn next(&mut self) -> impl Future<Output = Result<Option<Event>, WatchError>> + Send;
}
