//! The one Kubernetes API client ([`ApiClient`]): get, list (paged), watch (a line stream),
//! create, patch (merge, strategic merge, apply) and delete with preconditions. Every call
//! carries its own [`Limits`] (a timeout, a body cap enforced while the body streams in, an
//! optional deadline), sends the current bearer token ([`super::Credentials`]) and fails
//! with one typed [`ApiError`].
//!
//! The wire rules are the API server's: a failure answer's body is a `Status` object
//! (`reason`, `message`, `code`); a list is paged with `limit` and `continue` and its
//! `metadata.resourceVersion` is where a watch starts; a watch is one JSON event per line
//! (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR` with a `Status`), and "too old"
//! comes as 410 or as an `ERROR` event with code 410
//! (k8s.io/apimachinery `pkg/apis/meta/v1/types.go` `Status`, `WatchEvent`; client-go
//! `tools/cache/reflector.go` lists then watches from the list's version).

use std::time::{Duration, Instant};

use serde_json::Value;
use url::Url;

mod answer;
mod watch;

use super::error::{ApiError, BodyProblem, Verb};
use super::{ApiServer, ClusterError};
use answer::read_answer;
pub(crate) use answer::{Answer, status_error};
pub(crate) use watch::{WatchEvent, WatchStream};

/// Connect deadline of every API request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The bounds of one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The whole request, body included (for a watch: the whole stream).
    pub timeout: Duration,
    /// The largest body read (for a watch: one event line), bytes.
    pub max_body: usize,
    /// A budget the call must end by (the webhook's admission deadline); `None`: none.
    pub deadline: Option<Instant>,
}

impl Limits {
    /// `timeout` and `max_body`, no deadline.
    pub(crate) const fn new(timeout: Duration, max_body: usize) -> Limits {
        Limits {
            timeout,
            max_body,
            deadline: None,
        }
    }

    /// The same, cut short by `deadline`.
    pub(crate) fn by(self, deadline: Instant) -> Limits {
        Limits {
            deadline: Some(deadline),
            ..self
        }
    }

    /// The timeout to give the request now; `None` when the deadline has passed.
    fn remaining(&self) -> Option<Duration> {
        match self.deadline {
            None => Some(self.timeout),
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                (!left.is_zero()).then(|| left.min(self.timeout))
            }
        }
    }
}

/// How a PATCH body merges (its `Content-Type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Patch {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// Kubernetes strategic merge patch (lists merge by their patch key, e.g. conditions by
    /// `type`); built-in types only.
    Strategic,
    /// Server-side apply as `field_manager`; `force` takes fields other managers own.
    Apply {
        /// `fieldManager`.
        field_manager: String,
        /// `force=true`.
        force: bool,
    },
}

impl Patch {
    fn content_type(&self) -> &'static str {
        match self {
            Patch::Merge => "application/merge-patch+json",
            Patch::Strategic => "application/strategic-merge-patch+json",
            // JSON is YAML: the API server reads it as the apply configuration.
            Patch::Apply { .. } => "application/apply-patch+yaml",
        }
    }
}

/// The preconditions of a DELETE: it happens only if the object still has this UID (and,
/// when given, this resourceVersion); otherwise the server answers 409.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preconditions {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
}

/// One page of a list, or all pages joined.
#[derive(Debug, Clone, Default)]
pub(crate) struct List {
    /// The objects.
    pub items: Vec<Value>,
    /// The list's `metadata.resourceVersion`: where a watch of the same collection starts.
    pub resource_version: String,
}

/// The one client of the Kubernetes API. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ApiClient {
    client: reqwest::Client,
    base: Url,
    credentials: super::Credentials,
    /// What ends an "unknown issuer" message: where this client's CA came from
    /// ([`ApiServer::ca_hint`]).
    ca_hint: std::sync::Arc<str>,
}

impl ApiClient {
    /// A client for `api`; errors name the flag or file at fault.
    pub(crate) fn new(api: &ApiServer) -> Result<ApiClient, ClusterError> {
        let base = api.base_url()?;
        let tls = api.tls_config()?;
        api.check_token_file()?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(format!("pullcheck/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ClusterError::Client)?;
        Ok(ApiClient {
            client,
            base,
            credentials: api.credentials.clone(),
            ca_hint: api.ca_hint().into(),
        })
    }

    /// The base URL with these path segments (each percent-encoded as needed).
    pub(crate) fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segs) = url.path_segments_mut() {
            segs.pop_if_empty().extend(segments);
        }
        url
    }

    /// Send one request with the current token. A 401 to a token that may have changed
    /// (an exec plugin's) is asked once more with a fresh one.
    async fn send(
        &self,
        verb: Verb,
        url: &Url,
        body: Option<(&'static str, &[u8])>,
        limits: &Limits,
    ) -> Result<reqwest::Response, ApiError> {
        let path = url.path().to_string();
        let mut second = false;
        loop {
            let Some(timeout) = limits.remaining() else {
                return Err(ApiError::NoTimeLeft { verb, path });
            };
            let token =
                self.credentials
                    .bearer()
                    .await
                    .map_err(|source| ApiError::Credentials {
                        verb,
                        path: path.clone(),
                        source: Box::new(source),
                    })?;
            let mut req = self
                .client
                .request(verb.method(), url.clone())
                .header(http::header::ACCEPT, "application/json")
                .timeout(timeout);
            if let Some(t) = &token {
                req = req.bearer_auth(t.expose());
            }
            if let Some((content_type, bytes)) = body {
                req = req
                    .header(http::header::CONTENT_TYPE, content_type)
                    .body(bytes.to_vec());
            }
            let resp = req.send().await.map_err(|e| ApiError::Transport {
                verb,
                server: url.origin().ascii_serialization(),
                path: path.clone(),
                failure: crate::registry::http::classify_transport(&e, &self.ca_hint),
            })?;
            if resp.status().as_u16() == 401 && !second && self.credentials.refused() {
                second = true;
                continue;
            }
            return Ok(resp);
        }
    }

    /// One call: any status, the body read within `limits.max_body`.
    pub(crate) async fn call(
        &self,
        verb: Verb,
        url: &Url,
        body: Option<(&'static str, &[u8])>,
        limits: Limits,
    ) -> Result<Answer, ApiError> {
        let resp = self.send(verb, url, body, &limits).await?;
        read_answer(verb, url.path(), resp, limits.max_body).await
    }

    /// One call whose answer must be one of `ok` and a JSON value; any other status is an
    /// [`ApiError::Status`].
    pub(crate) async fn expect(
        &self,
        verb: Verb,
        url: &Url,
        body: Option<(&'static str, &[u8])>,
        limits: Limits,
        ok: &[u16],
    ) -> Result<Value, ApiError> {
        let answer = self.call(verb, url, body, limits).await?;
        if !ok.contains(&answer.status) {
            return Err(status_error(verb, url.path(), &answer));
        }
        answer.json().ok_or_else(|| ApiError::Body {
            verb,
            path: url.path().to_string(),
            problem: BodyProblem::NotJson("a JSON object"),
        })
    }

    /// GET one object; `Ok(None)` for 404.
    pub(crate) async fn get(&self, url: &Url, limits: Limits) -> Result<Option<Value>, ApiError> {
        let answer = self.call(Verb::Get, url, None, limits).await?;
        match answer.status {
            404 => Ok(None),
            200 => answer.json().map(Some).ok_or_else(|| ApiError::Body {
                verb: Verb::Get,
                path: url.path().to_string(),
                problem: BodyProblem::NotJson("a JSON object"),
            }),
            _ => Err(status_error(Verb::Get, url.path(), &answer)),
        }
    }

    /// Every object of a collection (`url` may carry selectors), `page` per request, the
    /// pages joined; the version is the last page's. Each page gets `limits`.
    pub(crate) async fn list(
        &self,
        url: &Url,
        page: u32,
        limits: Limits,
    ) -> Result<List, ApiError> {
        let mut out = List::default();
        let mut next: Option<String> = None;
        loop {
            let mut u = url.clone();
            u.query_pairs_mut().append_pair("limit", &page.to_string());
            if let Some(c) = &next {
                u.query_pairs_mut().append_pair("continue", c);
            }
            let mut v = self.expect(Verb::List, &u, None, limits, &[200]).await?;
            if let Some(Value::Array(items)) = v.get_mut("items").map(Value::take) {
                out.items.extend(items);
            }
            let meta = v.get("metadata");
            out.resource_version = meta
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
                return Ok(out);
            }
        }
    }

    /// Watch a collection from `resource_version`, with bookmarks, for at most
    /// `timeout_seconds` (the server ends the stream then). `limits.max_body` caps each
    /// event line; `limits.timeout` should exceed `timeout_seconds`. A 410 answer is an
    /// [`ApiError::Status`] with status 410: list again.
    pub(crate) async fn watch(
        &self,
        url: &Url,
        resource_version: &str,
        timeout_seconds: u64,
        limits: Limits,
    ) -> Result<WatchStream, ApiError> {
        let mut u = url.clone();
        u.query_pairs_mut()
            .append_pair("watch", "1")
            .append_pair("allowWatchBookmarks", "true")
            .append_pair("timeoutSeconds", &timeout_seconds.to_string())
            .append_pair("resourceVersion", resource_version);
        let resp = self.send(Verb::Watch, &u, None, &limits).await?;
        if resp.status().as_u16() != 200 {
            let answer = read_answer(Verb::Watch, u.path(), resp, limits.max_body).await?;
            return Err(status_error(Verb::Watch, u.path(), &answer));
        }
        Ok(WatchStream {
            path: u.path().to_string(),
            resp,
            buf: Vec::new(),
            max_event: limits.max_body,
        })
    }

    /// POST `object` to a collection; the answer as it came (201, or a `Status`).
    pub(crate) async fn create(
        &self,
        url: &Url,
        object: &Value,
        limits: Limits,
    ) -> Result<Answer, ApiError> {
        let body = object.to_string();
        self.call(
            Verb::Create,
            url,
            Some(("application/json", body.as_bytes())),
            limits,
        )
        .await
    }

    /// PATCH an object (or a subresource) with `patch` of `kind`; the answer as it came.
    pub(crate) async fn patch(
        &self,
        url: &Url,
        kind: &Patch,
        patch: &Value,
        limits: Limits,
    ) -> Result<Answer, ApiError> {
        let mut u = url.clone();
        if let Patch::Apply {
            field_manager,
            force,
        } = kind
        {
            u.query_pairs_mut()
                .append_pair("fieldManager", field_manager)
                .append_pair("force", if *force { "true" } else { "false" });
        }
        let body = patch.to_string();
        self.call(
            Verb::Patch,
            &u,
            Some((kind.content_type(), body.as_bytes())),
            limits,
        )
        .await
    }

    /// DELETE an object with its default grace period, only if `preconditions` hold (else
    /// the server answers 409); the answer as it came.
    pub(crate) async fn delete(
        &self,
        url: &Url,
        preconditions: &Preconditions,
        limits: Limits,
    ) -> Result<Answer, ApiError> {
        let mut pre = serde_json::Map::new();
        if let Some(uid) = &preconditions.uid {
            pre.insert("uid".into(), Value::String(uid.clone()));
        }
        if let Some(rv) = &preconditions.resource_version {
            pre.insert("resourceVersion".into(), Value::String(rv.clone()));
        }
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": pre,
        })
        .to_string();
        self.call(
            Verb::Delete,
            url,
            Some(("application/json", body.as_bytes())),
            limits,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_patch_kind_has_its_content_type() {
        assert_eq!(Patch::Merge.content_type(), "application/merge-patch+json");
        assert_eq!(
            Patch::Strategic.content_type(),
            "application/strategic-merge-patch+json"
        );
        let apply = Patch::Apply {
            field_manager: "pullcheck".into(),
            force: true,
        };
        assert_eq!(apply.content_type(), "application/apply-patch+yaml");
    }

    #[test]
    fn a_passed_deadline_leaves_no_time() {
        let l = Limits::new(Duration::from_secs(3), 10).by(Instant::now());
        assert_eq!(l.remaining(), None);
        let l =
            Limits::new(Duration::from_secs(3), 10).by(Instant::now() + Duration::from_secs(60));
        assert_eq!(l.remaining(), Some(Duration::from_secs(3)));
    }

    /// A scripted server (no real API server sends an endless body): a 200 whose chunked
    /// body never ends. The cap must stop the read at `max_body`, long before the timeout;
    /// the clients before this one read the whole body and compared it afterwards, so they
    /// waited for the timeout holding everything read.
    #[tokio::test]
    async fn the_body_cap_is_enforced_while_the_body_streams() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = sent.clone();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut req = [0u8; 4096];
            let _ = sock.read(&mut req).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
            if sock.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b' '; 64 * 1024];
            let frame = [
                format!("{:x}\r\n", chunk.len()).into_bytes(),
                chunk,
                b"\r\n".to_vec(),
            ]
            .concat();
            while sock.write_all(&frame).await.is_ok() {
                counter.fetch_add(64 * 1024, Ordering::Relaxed);
            }
        });
        let api = ApiServer::from_flags(format!("http://{addr}"), None, None);
        let client = ApiClient::new(&api).unwrap();
        let url = client.url(&["api", "v1", "pods"]);
        let started = Instant::now();
        let err = client
            .get(&url, Limits::new(Duration::from_secs(20), 1024 * 1024))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "GET /api/v1/pods: larger than 1048576 bytes"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // What the server got into the socket: the cap, plus what the kernel buffers hold.
        assert!(sent.load(Ordering::Relaxed) < 16 * 1024 * 1024);
    }
}
