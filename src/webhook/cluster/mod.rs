//! The namespace's pull credentials, read from the Kubernetes API the way the kubelet would
//! assemble them for a pod made from a template.
//!
//! - The template's own `imagePullSecrets`; only when it has none, its ServiceAccount's
//!   (`serviceAccountName`, default `default`): the ServiceAccount admission plugin copies
//!   them into a Pod only when the Pod lists none of its own.
//! - A missing Secret is skipped, as the kubelet skips it; so is a Secret of another type.
//!   Every usable secret goes into one keyring, in order.
//! - A secret that can't be read (403, timeout) or decoded is a *problem*: the images then
//!   can't be proven unpullable, so the handler reports them as not verified instead.
//!
//! Plain HTTPS with the ServiceAccount token (re-read each time: projected tokens rotate) and
//! the cluster CA; in-cluster from `KUBERNETES_SERVICE_HOST`/`_PORT` and
//! `/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}`, or from `--apiserver`.
//! Objects are cached briefly (a few seconds) and concurrent reads of one object coalesced.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use moka::future::Cache;
use serde_json::Value;
use sha2::{Digest, Sha256};
use url::Url;

use super::metrics::Metrics;

mod posts;
pub(crate) use crate::apiserver::ClusterError;
use crate::apiserver::client::Limits;
use crate::apiserver::{ApiClient, ApiError, ApiServer};

use crate::credentials::{DockerConfig, DockerConfigError, Keyring, Secret};
use crate::k8s::KubernetesVersion;
use crate::k8s::templates::pull_secret_names;
use crate::k8s::trainjob::{RuntimeKind, RuntimeRef, TRAINER_GROUP, TRAINER_VERSION};

/// Largest API object read (a Secret is at most 1 MiB).
const MAX_OBJECT_BYTES: usize = 2 * 1024 * 1024;
/// Deadline of one API request (the budget may cut it shorter).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Bounds of one API request: [`REQUEST_TIMEOUT`] and [`MAX_OBJECT_BYTES`].
const REQUEST: Limits = Limits::new(REQUEST_TIMEOUT, MAX_OBJECT_BYTES);

/// A pull secret of a docker-config type whose data can't be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretError {
    /// The data is not base64.
    #[error("data[{key}] is not base64: {source}")]
    Base64 {
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
        /// The decode error.
        source: base64::DecodeError,
    },
    /// The decoded data is not a docker config.
    #[error(transparent)]
    Config(#[from] DockerConfigError),
}

/// The keyring for one pod template, and what went wrong assembling it.
#[derive(Debug, Clone, Default)]
pub(crate) struct TemplateCredentials {
    /// Every usable pull secret, in kubelet order.
    pub keyring: Keyring,
    /// A digest of the secrets' names and contents (`anonymous` when none): equal
    /// identities have equal keyrings.
    pub identity: String,
    /// Secrets (or the ServiceAccount) that could not be read or decoded, one each, in
    /// the order met.
    pub problems: Vec<Problem>,
    /// Names of the secrets used, `namespace/name`.
    pub used: Vec<String>,
    /// The template's ServiceAccount (`serviceAccountName`, else `default`): whose token a
    /// token-mode credential provider gets.
    pub service_account: String,
}

/// A pull secret or ServiceAccount that could not be used for a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// One line naming the object and why.
    pub line: String,
    /// Why it could not be used: the audit checks on without a refused one, the webhook
    /// never does.
    pub cause: ProblemCause,
}

/// Why a credential object could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProblemCause {
    /// The API answered 403: the caller's RBAC does not let it read the object.
    Refused,
    /// Any other failure: a timeout, a 5xx, data that doesn't decode.
    Other,
}

impl Problem {
    /// A problem reading an object from the API: [`ProblemCause::Refused`] for a 403.
    fn reading(line: String, e: &ApiError) -> Problem {
        let cause = if e.status() == Some(403) {
            ProblemCause::Refused
        } else {
            ProblemCause::Other
        };
        Problem { line, cause }
    }
}

impl TemplateCredentials {
    /// No credentials at all.
    pub(crate) fn anonymous() -> TemplateCredentials {
        TemplateCredentials {
            identity: "anonymous".into(),
            service_account: "default".into(),
            ..Default::default()
        }
    }
}

/// Reads Secrets and ServiceAccounts.
pub(crate) struct Cluster {
    api: ApiClient,
    objects: Cache<String, Option<Arc<Value>>>,
    metrics: Arc<Metrics>,
    /// The API server's version, once it answered (`None` inside: no readable version).
    version: tokio::sync::OnceCell<Option<KubernetesVersion>>,
    /// ServiceAccount tokens for token-mode credential providers, by ServiceAccount and
    /// audience.
    tokens: Cache<String, Secret>,
}

impl Cluster {
    /// A client for `api`; errors name the flag or file.
    pub(crate) fn new(
        api: &ApiServer,
        ttl: Duration,
        metrics: Arc<Metrics>,
    ) -> Result<Cluster, ClusterError> {
        let api = ApiClient::new(api)?;
        Ok(Cluster {
            api,
            objects: Cache::builder()
                .name("pullcheck-api-objects")
                .max_capacity(10_000)
                .time_to_live(ttl)
                .build(),
            metrics,
            version: tokio::sync::OnceCell::new(),
            tokens: Cache::builder()
                .name("pullcheck-serviceaccount-tokens")
                .max_capacity(10_000)
                .time_to_live(posts::TOKEN_REUSE)
                .build(),
        })
    }

    fn url(&self, namespace: &str, resource: &str, name: &str) -> Url {
        self.api
            .url(&["api", "v1", "namespaces", namespace, resource, name])
    }

    /// GET one object; `None` for 404.
    async fn fetch(&self, url: Url, deadline: Instant) -> Result<Option<Arc<Value>>, ApiError> {
        Ok(self
            .api
            .get(&url, REQUEST.by(deadline))
            .await?
            .map(Arc::new))
    }

    /// The API server's Kubernetes version from `GET /version`, asked once: the first
    /// answer (or a 404, giving `None`) is kept for the life of the process; a failed
    /// request is not, so the next call asks again.
    pub(crate) async fn version(
        &self,
        deadline: Instant,
    ) -> Result<Option<KubernetesVersion>, ApiError> {
        self.version
            .get_or_try_init(|| async {
                let url = self.api.url(&["version"]);
                Ok(self
                    .fetch(url, deadline)
                    .await?
                    .and_then(|v| version_of(&v)))
            })
            .await
            .copied()
    }

    /// One object, through the cache.
    async fn get(
        &self,
        namespace: &str,
        resource: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Option<Arc<Value>>, ApiError> {
        let url = self.url(namespace, resource, name);
        let entry = self
            .objects
            .entry(url.to_string())
            .or_try_insert_with(self.fetch(url, deadline))
            .await
            .map_err(|e| (*e).clone())?;
        self.metrics
            .cache(crate::webhook::metrics::Cache::Secret, !entry.is_fresh());
        Ok(entry.into_value())
    }

    /// The Kubeflow Trainer runtime a TrainJob of `namespace` names: a
    /// ClusterTrainingRuntime cluster-wide, a TrainingRuntime in `namespace`
    /// (`trainer.kubeflow.org/v1alpha1`); `None` for 404. Not cached: a runtime an admin just
    /// fixed is read fresh by the next TrainJob.
    pub(crate) async fn training_runtime(
        &self,
        namespace: &str,
        runtime: &RuntimeRef,
        deadline: Instant,
    ) -> Result<Option<Arc<Value>>, ApiError> {
        let resource = runtime.kind.resource();
        let url = match runtime.kind {
            RuntimeKind::Cluster => self.api.url(&[
                "apis",
                TRAINER_GROUP,
                TRAINER_VERSION,
                resource,
                &runtime.name,
            ]),
            RuntimeKind::Namespaced => self.api.url(&[
                "apis",
                TRAINER_GROUP,
                TRAINER_VERSION,
                "namespaces",
                namespace,
                resource,
                &runtime.name,
            ]),
        };
        self.fetch(url, deadline).await
    }

    /// The credentials for a pod template in `namespace`.
    pub(crate) async fn credentials(
        &self,
        namespace: &str,
        template: &Value,
        deadline: Instant,
    ) -> TemplateCredentials {
        let mut out = TemplateCredentials::anonymous();
        let mut names = pull_secret_names(template);
        let sa = service_account_of(template);
        out.service_account = sa.to_string();
        if names.is_empty() {
            match self.get(namespace, "serviceaccounts", sa, deadline).await {
                Ok(Some(obj)) => names = pull_secret_names_of_sa(&obj),
                Ok(None) => {}
                Err(e) => out.problems.push(Problem::reading(
                    format!("ServiceAccount {namespace}/{sa} not readable: {e}"),
                    &e,
                )),
            }
        }
        let mut hasher = Sha256::new();
        for name in &names {
            match self.get(namespace, "secrets", name, deadline).await {
                Ok(Some(secret)) => match docker_config_of(&secret) {
                    None => {}
                    Some(Err(e)) => out.problems.push(Problem {
                        line: format!("pull secret {namespace}/{name}: {e}"),
                        cause: ProblemCause::Other,
                    }),
                    Some(Ok((cfg, raw))) => {
                        let origin = format!("pull secret {namespace}/{name}");
                        out.keyring.add(&cfg, &origin);
                        out.used.push(format!("{namespace}/{name}"));
                        hasher.update(namespace.as_bytes());
                        hasher.update([0]);
                        hasher.update(name.as_bytes());
                        hasher.update([0]);
                        hasher.update(&raw);
                        hasher.update([0]);
                    }
                },
                Ok(None) => {}
                Err(e) => out.problems.push(Problem::reading(
                    format!("pull secret {namespace}/{name} not readable: {e}"),
                    &e,
                )),
            }
        }
        if !out.used.is_empty() {
            let digest = hasher.finalize();
            out.identity = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        }
        out
    }
}

/// A pod template's ServiceAccount: `serviceAccountName`, else the deprecated
/// `serviceAccount`, else `default` (what admission sets).
pub(crate) fn service_account_of(template: &Value) -> &str {
    let spec = template.get("spec");
    spec.and_then(|s| s.get("serviceAccountName"))
        .or_else(|| spec.and_then(|s| s.get("serviceAccount")))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or("default")
}

/// The version in a `/version` answer: `gitVersion` (`v1.35.4`), else `major` and `minor`
/// (the minor may carry a `+`, as managed clusters write it).
fn version_of(v: &Value) -> Option<KubernetesVersion> {
    let field = |k: &str| v.get(k).and_then(Value::as_str);
    field("gitVersion")
        .and_then(KubernetesVersion::parse)
        .or_else(|| {
            let minor = field("minor")?.trim_end_matches('+');
            KubernetesVersion::parse(&format!("{}.{minor}", field("major")?))
        })
}

/// `imagePullSecrets[].name` of a ServiceAccount object, in order, without duplicates.
pub(crate) fn pull_secret_names_of_sa(sa: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in sa
        .get("imagePullSecrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
    {
        if !n.is_empty() && !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}

/// The docker config in a Secret object (and its raw bytes), per the kubelet's rule: type
/// `kubernetes.io/dockerconfigjson` with `.dockerconfigjson`, or `kubernetes.io/dockercfg`
/// with `.dockercfg`, non-empty. `None` for any other secret.
pub(crate) fn docker_config_of(
    secret: &Value,
) -> Option<Result<(DockerConfig, Vec<u8>), SecretError>> {
    let kind = secret.get("type").and_then(Value::as_str)?;
    let (key, json) = match kind {
        "kubernetes.io/dockerconfigjson" => (".dockerconfigjson", true),
        "kubernetes.io/dockercfg" => (".dockercfg", false),
        _ => return None,
    };
    let data = secret
        .pointer(&format!("/data/{key}"))
        .and_then(Value::as_str)?;
    if data.is_empty() {
        return None;
    }
    let raw = match base64::engine::general_purpose::STANDARD.decode(data) {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return None,
        Err(source) => return Some(Err(SecretError::Base64 { key, source })),
    };
    let parsed = if json {
        DockerConfig::from_config_json(&raw)
    } else {
        DockerConfig::from_dockercfg(&raw)
    };
    Some(parsed.map(|c| (c, raw)).map_err(SecretError::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn secrets_are_used_only_with_their_type() {
        let cfg = r#"{"auths":{"r.example":{"auth":"dTpw"}}}"#;
        let ok = json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64(cfg)}});
        let (c, raw) = docker_config_of(&ok).unwrap().unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(raw, cfg.as_bytes());
        let opaque = json!({"type": "Opaque", "data": {".dockerconfigjson": b64(cfg)}});
        assert!(docker_config_of(&opaque).is_none());
        let empty =
            json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": ""}});
        assert!(docker_config_of(&empty).is_none());
        let legacy = json!({"type": "kubernetes.io/dockercfg", "data": {".dockercfg": b64(r#"{"r.example":{"auth":"dTpw"}}"#)}});
        assert_eq!(docker_config_of(&legacy).unwrap().unwrap().0.len(), 1);
        let bad = json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": b64("{")}});
        assert!(docker_config_of(&bad).unwrap().is_err());
    }

    #[test]
    fn service_account_pull_secrets_in_order() {
        let sa = json!({"imagePullSecrets": [{"name": "b"}, {"name": "a"}, {"name": "b"}, {}]});
        assert_eq!(pull_secret_names_of_sa(&sa), vec!["b", "a"]);
    }

    #[test]
    fn versions_from_the_version_endpoint() {
        let v = |j: Value| version_of(&j);
        let want = KubernetesVersion::parse("1.35");
        assert_eq!(
            v(json!({"major": "1", "minor": "35", "gitVersion": "v1.35.4"})),
            want
        );
        assert_eq!(v(json!({"major": "1", "minor": "35+"})), want);
        assert_eq!(v(json!({"gitVersion": "v1.35.4-eks-1234"})), want);
        assert_eq!(v(json!({"kind": "Status"})), None);
    }

    #[test]
    fn urls_are_built_from_segments() {
        let api = ApiServer::from_flags("https://10.0.0.1:6443/".into(), None, None);
        let c = Cluster::new(&api, Duration::from_secs(1), Arc::new(Metrics::new())).unwrap();
        assert_eq!(
            c.url("team-a", "secrets", "regcred").as_str(),
            "https://10.0.0.1:6443/api/v1/namespaces/team-a/secrets/regcred"
        );
    }
}
