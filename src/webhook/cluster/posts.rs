//! The webhook's writes to the Kubernetes API, all POSTs: TokenRequests for token-mode
//! credential providers, and the dry-run probe Pod of [`crate::webhook::restart_rules`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{Cluster, REQUEST, REQUEST_TIMEOUT};
use crate::apiserver::ApiError;
use crate::apiserver::error::{BodyProblem, Verb};
use crate::credentials::Secret;
use crate::credentials::provider::{ServiceAccountInfo, ServiceAccountTokens, TokenSourceError};

/// How long a ServiceAccount token pullcheck requests is valid (the API's minimum), and how
/// long it is reused: half of that, so a plugin never gets one about to expire.
const TOKEN_EXPIRATION_SECONDS: u64 = 600;
pub(super) const TOKEN_REUSE: Duration = Duration::from_secs(TOKEN_EXPIRATION_SECONDS / 2);

impl Cluster {
    /// `POST serviceaccounts/NAME/token` (TokenRequest) for `audience`; one token per
    /// ServiceAccount and audience is reused for [`TOKEN_REUSE`].
    async fn token_request(
        &self,
        namespace: &str,
        name: &str,
        audience: &str,
    ) -> Result<Secret, TokenSourceError> {
        let key = format!("{namespace}\0{name}\0{audience}");
        let failed = |problem: String| TokenSourceError::TokenRequest {
            namespace: namespace.to_string(),
            name: name.to_string(),
            problem,
        };
        self.tokens
            .try_get_with(key, async {
                let mut url = self.url(namespace, "serviceaccounts", name);
                if let Ok(mut segs) = url.path_segments_mut() {
                    segs.push("token");
                }
                let body = serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"audiences": [audience], "expirationSeconds": TOKEN_EXPIRATION_SECONDS},
                });
                // No error quotes the answer's body: a TokenRequest's holds a token.
                let answer = self
                    .api
                    .create(&url, &body, REQUEST)
                    .await
                    .map_err(|e| failed(e.to_string()))?;
                match answer.status {
                    200 | 201 => {}
                    403 => {
                        return Err(TokenSourceError::Forbidden {
                            namespace: namespace.to_string(),
                            name: name.to_string(),
                        });
                    }
                    status => return Err(failed(format!("HTTP {status}"))),
                }
                let v: Value = serde_json::from_slice(&answer.body)
                    .map_err(|_| failed("the answer is not a TokenRequest".into()))?;
                v.pointer("/status/token")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .map(Secret::new)
                    .ok_or_else(|| failed("the answer has no status.token".into()))
            })
            .await
            .map_err(|e: Arc<TokenSourceError>| (*e).clone())
    }
}

impl ServiceAccountTokens for Cluster {
    fn service_account<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ServiceAccountInfo, TokenSourceError>> {
        Box::pin(async move {
            let deadline = Instant::now() + REQUEST_TIMEOUT;
            let sa = self
                .get(namespace, "serviceaccounts", name, deadline)
                .await
                .map_err(|e| TokenSourceError::Unreadable {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    reason: e.to_string(),
                })?
                .ok_or_else(|| TokenSourceError::Missing {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                })?;
            let meta = sa.get("metadata");
            Ok(ServiceAccountInfo {
                uid: meta
                    .and_then(|m| m.get("uid"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                annotations: meta
                    .and_then(|m| m.get("annotations"))
                    .and_then(Value::as_object)
                    .map(|a| {
                        a.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
        })
    }

    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, Result<Secret, TokenSourceError>> {
        Box::pin(self.token_request(namespace, name, audience))
    }
}

impl Cluster {
    /// `POST namespaces/NAMESPACE/RESOURCE?dryRun=All` of `object`: the status and the JSON
    /// answer (the object as it would be stored, or a `Status`). Nothing is stored. Errors:
    /// the request failed, the deadline passed, or the answer is not JSON.
    pub(crate) async fn dry_run_create(
        &self,
        namespace: &str,
        resource: &str,
        object: &Value,
        deadline: Instant,
    ) -> Result<(u16, Value), ApiError> {
        let mut url = self
            .api
            .url(&["api", "v1", "namespaces", namespace, resource]);
        url.query_pairs_mut().append_pair("dryRun", "All");
        let answer = self.api.create(&url, object, REQUEST.by(deadline)).await?;
        let value = answer.json().ok_or_else(|| ApiError::Body {
            verb: Verb::Create,
            path: url.path().to_string(),
            problem: BodyProblem::NotJson("JSON"),
        })?;
        Ok((answer.status, value))
    }
}
