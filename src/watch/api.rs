//! The API calls the watch makes, on the shared [`ApiClient`]: list and watch Pending pods,
//! read a namespace's labels, mark a pod with a condition, delete it with a UID
//! precondition, and record Events.
//!
//! The list and watch of Pending pods is the runtime's [`ApiSource`] on the pods URL with a
//! `status.phase=Pending` field selector ([`WatchApi::pending_pods`]).
//!
//! Two traits stand in front of these calls, so the controller runs on in-memory fakes
//! under `cargo test`: [`crate::runtime::Source`] (list, watch: the runtime's watcher) and
//! [`Effects`] (the reconciler's reads and writes, implemented here by [`WatchApi`]).

use std::future::Future;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::apiserver::ApiClient;
pub(crate) use crate::apiserver::ApiError;
use crate::apiserver::client::{Limits, Patch, Preconditions};
use crate::apiserver::error::Verb;
use crate::k8s::event::{EventType, Reporter};
use crate::runtime::api::ApiSource;

/// Bounds of one request: 10 s, and an object or Event list of at most 64 MiB.
const REQUEST: Limits = Limits::new(Duration::from_secs(10), 64 * 1024 * 1024);

/// The watch's API access.
#[derive(Clone)]
pub(crate) struct WatchApi {
    api: ApiClient,
    /// `None`: every namespace.
    namespace: Option<String>,
}

/// The pods list and watch selector: only Pending pods, where every pull failure is.
const FIELD_SELECTOR: &str = "status.phase=Pending";

impl WatchApi {
    /// Pods of `namespace` (`None`: all namespaces).
    pub(crate) fn new(api: ApiClient, namespace: Option<String>) -> WatchApi {
        WatchApi { api, namespace }
    }

    fn pods_url(&self) -> url::Url {
        match &self.namespace {
            Some(ns) => self.api.url(&["api", "v1", "namespaces", ns, "pods"]),
            None => self.api.url(&["api", "v1", "pods"]),
        }
    }

    /// The Pending pods, as the runtime's [`crate::runtime::Source`]: listed page by page
    /// and watched with [`ApiSource::new`]'s bounds (500 a page, 10 s and 64 MiB a page,
    /// watches of 290 s).
    pub(crate) fn pending_pods(&self) -> ApiSource {
        let mut url = self.pods_url();
        url.query_pairs_mut()
            .append_pair("fieldSelector", FIELD_SELECTOR);
        ApiSource::new(self.api.clone(), url)
    }

    /// The labels of namespace `name` (`None`: it does not exist).
    pub(crate) async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<serde_json::Map<String, Value>>, ApiError> {
        let url = self.api.url(&["api", "v1", "namespaces", name]);
        let Some(ns) = self.api.get(&url, REQUEST).await? else {
            return Ok(None);
        };
        Ok(Some(
            ns.pointer("/metadata/labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        ))
    }

    /// Add (or replace) the pod condition, conditional on the pod's `resourceVersion`: a
    /// strategic-merge patch of `pods/status` (conditions merge by `type`), never a full
    /// update. `Ok(false)`: the pod changed or is gone since it was read (409, 404), so
    /// another replica may have acted; read it again.
    pub(crate) async fn mark(
        &self,
        pod: &PodId,
        resource_version: &str,
        condition: Value,
    ) -> Result<bool, ApiError> {
        let url = self.api.url(&[
            "api",
            "v1",
            "namespaces",
            &pod.namespace,
            "pods",
            &pod.name,
            "status",
        ]);
        let body = json!({
            "metadata": {"uid": pod.uid, "resourceVersion": resource_version},
            "status": {"conditions": [condition]},
        });
        let answer = self
            .api
            .patch(&url, &Patch::Strategic, &body, REQUEST)
            .await?;
        conditional(Verb::Patch, &url, &answer, &[200])
    }

    /// Delete the pod with its default grace period, only if it is still the one with
    /// `pod.uid`. `Ok(false)`: already gone or replaced (404, 409).
    pub(crate) async fn delete(&self, pod: &PodId) -> Result<bool, ApiError> {
        let url = self
            .api
            .url(&["api", "v1", "namespaces", &pod.namespace, "pods", &pod.name]);
        let pre = Preconditions {
            uid: Some(pod.uid.clone()),
            resource_version: None,
        };
        let answer = self.api.delete(&url, &pre, REQUEST).await?;
        conditional(Verb::Delete, &url, &answer, &[200, 202])
    }

    /// The messages of the pod's `Failed` Events, oldest first (for kubelets older than
    /// 1.32, whose back-off message lacks the pull error).
    pub(crate) async fn failed_events(&self, pod: &PodId) -> Result<Vec<String>, ApiError> {
        let mut url = self
            .api
            .url(&["api", "v1", "namespaces", &pod.namespace, "events"]);
        url.query_pairs_mut().append_pair(
            "fieldSelector",
            &format!("involvedObject.uid={},reason=Failed", pod.uid),
        );
        let list = self
            .api
            .expect(Verb::List, &url, None, REQUEST, &[200])
            .await?;
        let mut events: Vec<(String, String)> = list
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let at = e
                    .get("lastTimestamp")
                    .or_else(|| e.get("eventTime"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                Some((at, e.get("message")?.as_str()?.to_string()))
            })
            .collect();
        events.sort();
        Ok(events.into_iter().map(|(_, m)| m).collect())
    }

    /// Record a core/v1 Event about `object` (`{apiVersion, kind, name, namespace, uid}`),
    /// as [`crate::k8s::event::event`] writes every Event of pullcheck's.
    pub(crate) async fn event(
        &self,
        object: &Value,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        let namespace = crate::k8s::event::namespace_of(object);
        let url = self
            .api
            .url(&["api", "v1", "namespaces", namespace, "events"]);
        let body = crate::k8s::event::event(
            object,
            event_type,
            reason,
            message,
            REPORTER,
            &std::env::var("HOSTNAME").unwrap_or_else(|_| "pullcheck-watch".into()),
            &rfc3339(SystemTime::now()),
        );
        let answer = self.api.create(&url, &body, REQUEST).await?;
        if !matches!(answer.status, 200 | 201) {
            return Err(crate::apiserver::client::status_error(
                Verb::Create,
                url.path(),
                &answer,
            ));
        }
        Ok(())
    }
}

/// Who writes the watch's Events.
const REPORTER: Reporter = Reporter {
    component: "pullcheck-watch",
    reporting: "pullcheck.io/watch",
};

/// A write whose precondition may no longer hold: `Ok(false)` for 409 (the pod changed or
/// was replaced) and 404 (gone), `Ok(true)` for one of `ok`, else the status as an error.
fn conditional(
    verb: Verb,
    url: &url::Url,
    answer: &crate::apiserver::client::Answer,
    ok: &[u16],
) -> Result<bool, ApiError> {
    match answer.status {
        409 | 404 => Ok(false),
        s if ok.contains(&s) => Ok(true),
        _ => Err(crate::apiserver::client::status_error(
            verb,
            url.path(),
            answer,
        )),
    }
}

/// A pod's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PodId {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodId {
    /// From a pod object; `None` without namespace, name or uid.
    pub(crate) fn of(pod: &Value) -> Option<PodId> {
        let m = pod.get("metadata")?;
        let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
        Some(PodId {
            namespace: s("namespace")?,
            name: s("name")?,
            uid: s("uid")?,
        })
    }

    /// The Event `involvedObject` for the pod.
    pub(crate) fn object(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "namespace": self.namespace, "name": self.name, "uid": self.uid})
    }
}

/// The reconciler's API calls, as [`WatchApi`] makes them (see each method there for the
/// request, its limits and its answers); the tests implement it in memory.
pub(crate) trait Effects: Send + Sync + 'static {
    /// [`WatchApi::namespace_labels`].
    fn namespace_labels(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Map<String, Value>>, ApiError>> + Send;
    /// [`WatchApi::mark`].
    fn mark(
        &self,
        pod: &PodId,
        resource_version: &str,
        condition: Value,
    ) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// [`WatchApi::delete`].
    fn delete(&self, pod: &PodId) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// [`WatchApi::failed_events`].
    fn failed_events(
        &self,
        pod: &PodId,
    ) -> impl Future<Output = Result<Vec<String>, ApiError>> + Send;
    /// [`WatchApi::event`].
    fn event(
        &self,
        object: &Value,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

impl Effects for WatchApi {
    fn namespace_labels(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<serde_json::Map<String, Value>>, ApiError>> + Send {
        WatchApi::namespace_labels(self, name)
    }
    fn mark(
        &self,
        pod: &PodId,
        resource_version: &str,
        condition: Value,
    ) -> impl Future<Output = Result<bool, ApiError>> + Send {
        WatchApi::mark(self, pod, resource_version, condition)
    }
    fn delete(&self, pod: &PodId) -> impl Future<Output = Result<bool, ApiError>> + Send {
        WatchApi::delete(self, pod)
    }
    fn failed_events(
        &self,
        pod: &PodId,
    ) -> impl Future<Output = Result<Vec<String>, ApiError>> + Send {
        WatchApi::failed_events(self, pod)
    }
    fn event(
        &self,
        object: &Value,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        WatchApi::event(self, object, event_type, reason, message)
    }
}

pub(crate) use crate::apiserver::time::{parse_time, rfc3339};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_131_354_750);
        // Whole seconds, as the API keeps them.
        assert_eq!(rfc3339(t), "2026-12-01T13:22:34Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
        assert_eq!(
            parse_time("2026-12-01T13:22:34Z"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_131_354))
        );
        assert_eq!(
            parse_time("2026-12-01T14:22:34.5+01:00"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_131_354_500))
        );
        assert_eq!(parse_time("yesterday"), None);
    }
}
