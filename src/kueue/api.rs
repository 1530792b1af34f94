//! [`KueueApi`] on the real API server: Kueue's `kueue.x-k8s.io/v1beta2` objects through the
//! one client ([`crate::apiserver::ApiClient`]), each call bounded by [`CALL`].

use std::time::Duration;

use serde_json::Value;
use url::Url;

use super::controller::{Applied, FIELD_MANAGER, KueueApi};
use crate::apiserver::client::{Limits, Patch, status_error};
use crate::apiserver::error::Verb;
use crate::apiserver::{ApiClient, ApiError};

/// Kueue's API group.
const GROUP: &str = "kueue.x-k8s.io";
/// Kueue's served version.
const VERSION: &str = "v1beta2";
/// Bounds of one call: a Workload with many pod sets is tens of KiB; the Workload CRD's
/// largest objects stay well below 4 MiB.
const CALL: Limits = Limits::new(Duration::from_secs(10), 4 * 1024 * 1024);

/// The admission check's API calls.
#[derive(Clone)]
pub(crate) struct KueueClient {
    client: ApiClient,
}

impl KueueClient {
    /// Calls through `client`.
    pub(crate) fn new(client: ApiClient) -> KueueClient {
        KueueClient { client }
    }

    /// The URL of a Kueue collection or object: `resource` in `namespace` (`None`:
    /// cluster-scoped or every namespace), then `rest` (a name, `status`).
    pub(crate) fn url(&self, namespace: Option<&str>, resource: &str, rest: &[&str]) -> Url {
        let mut segments = vec!["apis", GROUP, VERSION];
        if let Some(ns) = namespace {
            segments.extend(["namespaces", ns]);
        }
        segments.push(resource);
        segments.extend(rest);
        self.client.url(&segments)
    }

    async fn apply(&self, url: &Url, body: &Value) -> Result<Applied, ApiError> {
        let patch = Patch::Apply {
            field_manager: FIELD_MANAGER.to_string(),
            force: true,
        };
        let answer = self.client.patch(url, &patch, body, CALL).await?;
        match answer.status {
            200 | 201 => Ok(Applied::Done),
            409 => Ok(Applied::Conflict),
            404 => Ok(Applied::Gone),
            _ => Err(status_error(Verb::Patch, url.path(), &answer)),
        }
    }
}

impl KueueApi for KueueClient {
    async fn served(&self) -> Result<bool, ApiError> {
        let url = self.client.url(&["apis", GROUP, VERSION]);
        let list = self.client.get(&url, CALL).await?;
        let names: Vec<&str> = list
            .as_ref()
            .and_then(|l| l.get("resources"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("name").and_then(Value::as_str))
            .collect();
        Ok(["workloads", "admissionchecks", "resourceflavors"]
            .iter()
            .all(|n| names.contains(n)))
    }

    async fn admission_check(&self, name: &str) -> Result<Option<Value>, ApiError> {
        self.client
            .get(&self.url(None, "admissionchecks", &[name]), CALL)
            .await
    }

    async fn resource_flavor(&self, name: &str) -> Result<Option<Value>, ApiError> {
        self.client
            .get(&self.url(None, "resourceflavors", &[name]), CALL)
            .await
    }

    async fn apply_workload_status(
        &self,
        namespace: &str,
        name: &str,
        body: &Value,
    ) -> Result<Applied, ApiError> {
        self.apply(
            &self.url(Some(namespace), "workloads", &[name, "status"]),
            body,
        )
        .await
    }

    async fn apply_check_status(&self, name: &str, body: &Value) -> Result<Applied, ApiError> {
        self.apply(&self.url(None, "admissionchecks", &[name, "status"]), body)
            .await
    }

    async fn event(&self, body: &Value) -> Result<(), ApiError> {
        let namespace = body
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let url = self
            .client
            .url(&["api", "v1", "namespaces", namespace, "events"]);
        let answer = self.client.create(&url, body, CALL).await?;
        match answer.status {
            200 | 201 => Ok(()),
            _ => Err(status_error(Verb::Create, url.path(), &answer)),
        }
    }
}
