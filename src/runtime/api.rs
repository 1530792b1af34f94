//! [`Source`] on the real API server: any collection the [`ApiClient`] can list and watch
//! (pods, Kueue Workloads, …), cluster-wide or in one namespace, with selectors in the URL.
//!
//! A list is read page by page ([`ApiSource::page`] objects a request) and its
//! `metadata.resourceVersion` is where the watch starts; a watch asks for bookmarks and a
//! server-side timeout ([`ApiSource::watch_seconds`]), one event per line. A 410 answer to
//! the watch request, or an `ERROR` event with code 410 in its stream, is
//! [`WatchError::Expired`] (the watcher lists again); see
//! [`crate::apiserver::client`] for the wire rules.

use std::time::Duration;

use serde_json::Value;
use url::Url;

use super::source::{Event, Source, Watch, WatchError};
use crate::apiserver::ApiClient;
use crate::apiserver::ApiError;
use crate::apiserver::client::{Limits, WatchEvent, WatchStream};

/// A watched collection on the API server. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ApiSource {
    client: ApiClient,
    url: Url,
    /// Objects per list page.
    pub page: u32,
    /// Bounds of each list page request (time, body bytes).
    pub list_limits: Limits,
    /// The server ends each watch after at most this many seconds (it picks a random
    /// time up to it); the watcher then watches again from its last version.
    pub watch_seconds: u64,
    /// The largest watch event line, bytes.
    pub max_event: usize,
}

impl ApiSource {
    /// The collection at `url` (a list URL such as `/api/v1/pods` or
    /// `/apis/kueue.x-k8s.io/v1beta2/namespaces/team/workloads`, with `fieldSelector` or
    /// `labelSelector` in its query when wanted), with the defaults: 500 objects a page,
    /// 10 s and 64 MiB a page, watches of 290 s, events of up to 64 MiB.
    pub(crate) fn new(client: ApiClient, url: Url) -> ApiSource {
        ApiSource {
            client,
            url,
            page: 500,
            list_limits: Limits::new(Duration::from_secs(10), 64 * 1024 * 1024),
            watch_seconds: 290,
            max_event: 64 * 1024 * 1024,
        }
    }
}

impl Source for ApiSource {
    type Watch = ApiWatch;

    async fn list(&self) -> Result<(Vec<Value>, String), ApiError> {
        let list = self
            .client
            .list(&self.url, self.page, self.list_limits)
            .await?;
        Ok((list.items, list.resource_version))
    }

    async fn watch(&self, resource_version: &str) -> Result<ApiWatch, WatchError> {
        // The whole stream's timeout: the server's own end of it, and a margin for a
        // server that never ends it (a proxy holding a dead connection open).
        let limits = Limits::new(Duration::from_secs(self.watch_seconds + 30), self.max_event);
        let stream = self
            .client
            .watch(&self.url, resource_version, self.watch_seconds, limits)
            .await?;
        Ok(ApiWatch { stream })
    }
}

/// An open watch on the API server.
pub(crate) struct ApiWatch {
    stream: WatchStream,
}

impl Watch for ApiWatch {
    async fn next(&mut self) -> Result<Option<Event>, WatchError> {
        Ok(self.stream.next().await?.map(|e| match e {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => Event::Changed(o),
            WatchEvent::Deleted(o) => Event::Deleted(o),
            WatchEvent::Bookmark(rv) => Event::Bookmark(rv),
        }))
    }
}
