//! The API calls the watch makes, on the shared [`ApiClient`]: list and watch Pending pods,
//! read a namespace's labels, mark a pod with a condition, delete it with a UID
//! precondition, and record Events.
//!
//! The list/watch loop is the API's own protocol (`?watch=1&resourceVersion=…`, one JSON
//! event per line, `410 Gone` or an `ERROR` event with code 410 when the version is too
//! old, `BOOKMARK` events carrying a newer version): [`PodWatch`] hands the controller the
//! events and [`WatchError::Expired`] when it must list again.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::apiserver::{ApiClient, error_chain};

/// Deadline of one non-watch request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the API server keeps one watch open before it ends it (it picks a random
/// time up to this; the controller then watches again from the last version).
pub(crate) const WATCH_SECONDS: u64 = 290;
/// Pods per list page.
const PAGE: u32 = 500;
/// Largest list page or watch event read.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// An API call that failed. One line: the verb, the path, what the server said.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// The call never got an answer (connection, TLS, timeout) or the token file.
    #[error("{verb} {path}: {causes}")]
    Transport {
        verb: &'static str,
        path: String,
        causes: String,
    },
    /// An HTTP status other than the expected ones, with the API's `message` if any.
    #[error("{verb} {path}: HTTP {status}{}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    Status {
        verb: &'static str,
        path: String,
        status: u16,
        message: String,
    },
    /// An answer that is not the JSON expected.
    #[error("{verb} {path}: the answer is not {what}")]
    Body {
        verb: &'static str,
        path: String,
        what: &'static str,
    },
}

impl ApiError {
    /// The HTTP status, when the server answered with one.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// How a watch ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchError {
    /// The resource version is too old (410): list again.
    #[error("watch expired (410 Gone): listing again")]
    Expired,
    /// Anything else.
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// One watch event.
#[derive(Debug)]
pub(crate) enum Event {
    /// ADDED or MODIFIED: the pod as it is now.
    Changed(Value),
    /// DELETED, or gone from the Pending phase (the field selector no longer matches).
    Deleted(Value),
    /// A newer resource version with no object change.
    Bookmark(String),
}

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

    async fn send(
        &self,
        verb: &'static str,
        method: reqwest::Method,
        url: url::Url,
        body: Option<(&'static str, Value)>,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, ApiError> {
        let path = url.path().to_string();
        let mut req = self
            .api
            .request(method, url)
            .await
            .map_err(|e| ApiError::Transport {
                verb,
                path: path.clone(),
                causes: e.to_string(),
            })?;
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        if let Some((content_type, body)) = body {
            req = req
                .header(http::header::CONTENT_TYPE, content_type)
                .body(body.to_string());
        }
        req.send().await.map_err(|e| ApiError::Transport {
            verb,
            path,
            causes: error_chain(&e),
        })
    }

    async fn json(
        verb: &'static str,
        resp: reqwest::Response,
        ok: &[u16],
    ) -> Result<Value, ApiError> {
        let path = resp.url().path().to_string();
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| ApiError::Transport {
            verb,
            path: path.clone(),
            causes: error_chain(&e),
        })?;
        let value: Option<Value> = (bytes.len() <= MAX_BODY)
            .then(|| serde_json::from_slice(&bytes).ok())
            .flatten();
        if !ok.contains(&status) {
            let message = value
                .as_ref()
                .and_then(|v| v.get("message"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect();
            return Err(ApiError::Status {
                verb,
                path,
                status,
                message,
            });
        }
        value.ok_or(ApiError::Body {
            verb,
            path,
            what: "a JSON object",
        })
    }

    /// Every Pending pod, page by page, and the list's resource version to watch from.
    pub(crate) async fn list_pending(&self) -> Result<(Vec<Value>, String), ApiError> {
        let mut pods = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let mut url = self.pods_url();
            url.query_pairs_mut()
                .append_pair("fieldSelector", FIELD_SELECTOR)
                .append_pair("limit", &PAGE.to_string());
            if let Some(c) = &next {
                url.query_pairs_mut().append_pair("continue", c);
            }
            let resp = self
                .send(
                    "LIST",
                    reqwest::Method::GET,
                    url,
                    None,
                    Some(REQUEST_TIMEOUT),
                )
                .await?;
            let mut page = Self::json("LIST", resp, &[200]).await?;
            if let Some(Value::Array(items)) = page.get_mut("items").map(Value::take) {
                pods.extend(items);
            }
            let meta = page.get("metadata");
            let rv = meta
                .and_then(|m| m.get("resourceVersion"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            next = meta
                .and_then(|m| m.get("continue"))
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string);
            if next.is_none() {
                return Ok((pods, rv));
            }
        }
    }

    /// Watch Pending pods from `resource_version`.
    pub(crate) async fn watch(&self, resource_version: &str) -> Result<PodWatch, WatchError> {
        let mut url = self.pods_url();
        url.query_pairs_mut()
            .append_pair("watch", "1")
            .append_pair("fieldSelector", FIELD_SELECTOR)
            .append_pair("allowWatchBookmarks", "true")
            .append_pair("timeoutSeconds", &WATCH_SECONDS.to_string())
            .append_pair("resourceVersion", resource_version);
        let resp = self
            .send(
                "WATCH",
                reqwest::Method::GET,
                url,
                None,
                Some(Duration::from_secs(WATCH_SECONDS + 30)),
            )
            .await?;
        match resp.status().as_u16() {
            200 => Ok(PodWatch {
                resp,
                buf: Vec::new(),
            }),
            410 => Err(WatchError::Expired),
            _ => Err(Self::json("WATCH", resp, &[]).await.unwrap_err().into()),
        }
    }

    /// The labels of namespace `name` (`None`: it does not exist).
    pub(crate) async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<serde_json::Map<String, Value>>, ApiError> {
        let url = self.api.url(&["api", "v1", "namespaces", name]);
        let resp = self
            .send(
                "GET",
                reqwest::Method::GET,
                url,
                None,
                Some(REQUEST_TIMEOUT),
            )
            .await?;
        if resp.status().as_u16() == 404 {
            return Ok(None);
        }
        let ns = Self::json("GET", resp, &[200]).await?;
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
        self.conditional(
            "PATCH",
            reqwest::Method::PATCH,
            url,
            ("application/strategic-merge-patch+json", body),
            &[200],
        )
        .await
    }

    /// Delete the pod with its default grace period, only if it is still the one with
    /// `pod.uid`. `Ok(false)`: already gone or replaced (404, 409).
    pub(crate) async fn delete(&self, pod: &PodId) -> Result<bool, ApiError> {
        let url = self
            .api
            .url(&["api", "v1", "namespaces", &pod.namespace, "pods", &pod.name]);
        let body = json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": pod.uid},
        });
        self.conditional(
            "DELETE",
            reqwest::Method::DELETE,
            url,
            ("application/json", body),
            &[200, 202],
        )
        .await
    }

    /// A write whose precondition may no longer hold: `Ok(false)` for 409 (the pod changed
    /// or was replaced) and 404 (gone), `Ok(true)` for one of `ok`.
    async fn conditional(
        &self,
        verb: &'static str,
        method: reqwest::Method,
        url: url::Url,
        body: (&'static str, Value),
        ok: &[u16],
    ) -> Result<bool, ApiError> {
        let resp = self
            .send(verb, method, url, Some(body), Some(REQUEST_TIMEOUT))
            .await?;
        match resp.status().as_u16() {
            409 | 404 => Ok(false),
            _ => Self::json(verb, resp, ok).await.map(|_| true),
        }
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
        let resp = self
            .send(
                "LIST",
                reqwest::Method::GET,
                url,
                None,
                Some(REQUEST_TIMEOUT),
            )
            .await?;
        let list = Self::json("LIST", resp, &[200]).await?;
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

    /// Record a core/v1 Event about `object` (`{apiVersion, kind, name, namespace, uid}`).
    pub(crate) async fn event(
        &self,
        object: &Value,
        event_type: &str,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        let namespace = object
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let name = object.get("name").and_then(Value::as_str).unwrap_or("pod");
        let now = rfc3339(SystemTime::now());
        let url = self
            .api
            .url(&["api", "v1", "namespaces", namespace, "events"]);
        let body = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": format!("{name}.pullcheck-"), "namespace": namespace},
            "involvedObject": object,
            "type": event_type,
            "reason": reason,
            "message": crate::k8s::cut_chars(message, 1024),
            "source": {"component": "pullcheck-watch"},
            "reportingComponent": "pullcheck.io/watch",
            "reportingInstance": std::env::var("HOSTNAME").unwrap_or_else(|_| "pullcheck-watch".into()),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let resp = self
            .send(
                "POST",
                reqwest::Method::POST,
                url,
                Some(("application/json", body)),
                Some(REQUEST_TIMEOUT),
            )
            .await?;
        Self::json("POST", resp, &[201, 200]).await.map(|_| ())
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

/// An open watch: events one at a time.
pub(crate) struct PodWatch {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl PodWatch {
    /// The next event; `Ok(None)` when the server ended the watch (its timeout).
    pub(crate) async fn next(&mut self) -> Result<Option<Event>, WatchError> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return parse_event(&line).map(Some);
            }
            if self.buf.len() > MAX_BODY {
                return Err(ApiError::Body {
                    verb: "WATCH",
                    path: self.resp.url().path().to_string(),
                    what: "a watch event under 64 MiB",
                }
                .into());
            }
            match self.resp.chunk().await {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                Ok(None) => return Ok(None),
                Err(e) => {
                    return Err(ApiError::Transport {
                        verb: "WATCH",
                        path: self.resp.url().path().to_string(),
                        causes: error_chain(&e),
                    }
                    .into());
                }
            }
        }
    }
}

/// One line of a watch stream.
fn parse_event(line: &[u8]) -> Result<Event, WatchError> {
    let bad = || {
        WatchError::Api(ApiError::Body {
            verb: "WATCH",
            path: "pods".into(),
            what: "a watch event",
        })
    };
    let mut v: Value = serde_json::from_slice(line).map_err(|_| bad())?;
    let object = v.get_mut("object").map(Value::take).unwrap_or(Value::Null);
    match v.get("type").and_then(Value::as_str) {
        Some("ADDED" | "MODIFIED") => Ok(Event::Changed(object)),
        Some("DELETED") => Ok(Event::Deleted(object)),
        Some("BOOKMARK") => Ok(Event::Bookmark(
            object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )),
        Some("ERROR") if object.get("code").and_then(Value::as_u64) == Some(410) => {
            Err(WatchError::Expired)
        }
        Some("ERROR") => Err(WatchError::Api(ApiError::Status {
            verb: "WATCH",
            path: "pods".into(),
            status: object.get("code").and_then(Value::as_u64).unwrap_or(0) as u16,
            message: object
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })),
        _ => Err(bad()),
    }
}

/// RFC 3339 UTC with seconds, as the API writes timestamps.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_131_354);
        assert_eq!(rfc3339(t), "2026-12-01T13:22:34Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn watch_lines() {
        assert!(matches!(
            parse_event(br#"{"type":"ADDED","object":{"metadata":{"name":"p"}}}"#),
            Ok(Event::Changed(_))
        ));
        assert!(matches!(
            parse_event(br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"42"}}}"#),
            Ok(Event::Bookmark(rv)) if rv == "42"
        ));
        assert!(matches!(
            parse_event(br#"{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old resource version"}}"#),
            Err(WatchError::Expired)
        ));
        let e = parse_event(
            br#"{"type":"ERROR","object":{"kind":"Status","code":500,"message":"etcd down"}}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "WATCH pods: HTTP 500: etcd down");
        assert_eq!(
            parse_event(b"garbage").unwrap_err().to_string(),
            "WATCH pods: the answer is not a watch event"
        );
    }
}
