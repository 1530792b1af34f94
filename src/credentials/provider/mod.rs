//! The kubelet's exec credential-provider plugins (`--image-credential-provider-config`,
//! `--image-credential-provider-bin-dir`): ECR's `ecr-credential-provider`, GCP's
//! `auth-provider-gcp`, Azure's `acr-credential-provider`, or any plugin of that protocol.
//!
//! For one image (kubernetes `pkg/credentialprovider/plugin/plugin.go` `pluginProvider.provide`):
//! 1. every provider whose `matchImages` matches the image (keyring glob rules) is asked;
//! 2. its cache is tried first, by the image, then its registry, then the global key (each
//!    combined with the ServiceAccount key in token mode);
//! 3. else the plugin runs ([`exec`]); its answer is cached under the key type it names for
//!    `cacheDuration` (absent: the provider's `defaultCacheDuration`; zero: not cached);
//! 4. every answer's `auth` map joins **one** keyring, in provider order, so overlapping
//!    patterns try the earlier provider's credential first and the most specific pattern
//!    wins as everywhere in the keyring.
//!
//! A plugin that fails gives nothing, as in the kubelet; pullcheck also remembers why
//! ([`ProviderOutcome`]), because a verdict reached without a provider's credential is not
//! the kubelet's verdict.
//!
//! Token mode (KEP-4412, `tokenAttributes`): the kubelet passes a token bound to the pod.
//! pullcheck has no pod: it asks a [`ServiceAccountTokens`] source (the webhook's, through
//! the TokenRequest API) for a token of the workload's ServiceAccount with the configured
//! audience. Without one the provider is [`ProviderOutcome::NoToken`].
//!
//! One deviation: plugin runs of one provider are serialized (one async lock per provider),
//! so concurrent checks of images on one registry make one call where the kubelet's
//! per-image single-flight can make several.

mod config;
pub(crate) mod duration;
mod error;
mod exec;
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use sha2::{Digest, Sha256};

use config::ExecApi;
pub(crate) use config::{ConfigError, ProviderSpec, TokenAttributes, TokenCacheType};
pub(crate) use error::PluginError;
pub(crate) use exec::{PluginRunner, plugin_timeout};
pub(crate) use wire::CacheKeyType;

use super::Credential;
use super::docker_config::DockerConfig;
use super::keyring::{Keyring, urls_match_str};
use super::secret::Secret;

/// The ServiceAccount facts a token-mode provider needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ServiceAccountInfo {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// Why a token-mode provider got no ServiceAccount or no token. Each is one line naming the
/// ServiceAccount (and what to grant where RBAC refused), never a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenSourceError {
    /// The ServiceAccount could not be read; `reason` is the API client's one-line error.
    #[error("ServiceAccount {namespace}/{name} not readable: {reason}")]
    Unreadable {
        namespace: String,
        name: String,
        reason: String,
    },
    /// The ServiceAccount does not exist.
    #[error("ServiceAccount {namespace}/{name} does not exist")]
    Missing { namespace: String, name: String },
    /// RBAC refused the TokenRequest.
    #[error(
        "POST serviceaccounts/{name}/token in namespace {namespace}: 403 Forbidden; grant the webhook create on serviceaccounts/token in {namespace} (chart value credentialProviders.tokenRequests.namespaces)"
    )]
    Forbidden { namespace: String, name: String },
    /// The TokenRequest failed otherwise (transport, status, an answer without a token);
    /// `problem` never quotes the answer's body, which may hold a token.
    #[error("POST serviceaccounts/{name}/token in namespace {namespace}: {problem}")]
    TokenRequest {
        namespace: String,
        name: String,
        problem: String,
    },
}

/// Where token-mode providers get ServiceAccounts and their tokens.
pub(crate) trait ServiceAccountTokens: Send + Sync {
    /// `GET serviceaccounts/NAME` in `namespace`.
    fn service_account<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ServiceAccountInfo, TokenSourceError>>;
    /// A token for the ServiceAccount with exactly this audience (TokenRequest).
    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audience: &'a str,
    ) -> BoxFuture<'a, Result<Secret, TokenSourceError>>;
}

/// Who an image is pulled for: the namespace and ServiceAccount of the workload, and the
/// token source. Only token-mode providers use it.
#[derive(Clone)]
pub(crate) struct Workload {
    /// The workload's namespace.
    pub namespace: String,
    /// `serviceAccountName` (the admission default is `default`); `None` when it has none.
    pub service_account: Option<String>,
    /// Where tokens come from.
    pub tokens: Arc<dyn ServiceAccountTokens>,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("namespace", &self.namespace)
            .field("service_account", &self.service_account)
            .finish_non_exhaustive()
    }
}

/// What one matching provider did for an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProviderOutcome {
    /// It answered (now or from its cache).
    Answered {
        /// The key type and the key its answer is (or would be) cached under: the image,
        /// its registry, or `global`.
        key_type: CacheKeyType,
        key: String,
        /// From the cache, without running the plugin.
        cached: bool,
    },
    /// It ran and gave nothing usable.
    Failed(PluginError),
    /// Token mode, and no token could be had: not run.
    NoToken(String),
    /// Token mode, and the kubelet would not run it for this workload either (no
    /// ServiceAccount where one is required, a required annotation missing): its nothing
    /// is the kubelet's nothing.
    NotRun(String),
    /// It answered, but none of its answer's keyring keys matches the image (a key without
    /// the image's port, another host): the kubelet, with the same keyring rules, gets
    /// nothing from it either.
    NoMatchingKey {
        /// The answer's `auth` keys.
        keys: Vec<String>,
    },
}

/// A provider's part in one lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProviderUse {
    /// The provider's name.
    pub provider: String,
    /// The `matchImages` pattern that matched.
    pub matched: String,
    /// What happened.
    pub outcome: ProviderOutcome,
}

impl ProviderUse {
    /// True when this provider's nothing is not what the kubelet would get: it failed here
    /// or had no token, so a refusal or a 404 seen without it is not the node's verdict.
    pub(crate) fn gave_nothing_unlike_the_kubelet(&self) -> bool {
        matches!(
            self.outcome,
            ProviderOutcome::Failed(_) | ProviderOutcome::NoToken(_)
        )
    }

    /// One line for `explain` and warnings.
    /// The reason comes early, so that it survives an admission warning's 256 characters.
    pub(crate) fn describe(&self) -> String {
        let name = &self.provider;
        match &self.outcome {
            ProviderOutcome::Answered {
                key_type,
                key,
                cached,
            } => format!(
                "credential provider {name} (matchImages {}): answered{}, cache key {key_type:?} {key}",
                self.matched,
                if *cached { " from its cache" } else { "" }
            ),
            // The error names the provider already.
            ProviderOutcome::Failed(e) => e.to_string(),
            ProviderOutcome::NoToken(why) | ProviderOutcome::NotRun(why) => {
                format!("credential provider {name}: {why}")
            }
            ProviderOutcome::NoMatchingKey { keys } => format!(
                "credential provider {name} answered for {}, and no key matches the image: keyring keys need the image's host labels and its port",
                keys.join(", ")
            ),
        }
    }
}

/// The result of asking every matching provider about one image.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProviderLookup {
    /// The credentials, in keyring order.
    pub credentials: Vec<Credential>,
    /// One entry per matching provider, in config order.
    pub uses: Vec<ProviderUse>,
}

struct Entry {
    auth: DockerConfig,
    expires: Instant,
}

struct Provider {
    spec: ProviderSpec,
    cache: tokio::sync::Mutex<HashMap<String, Entry>>,
    calls: AtomicU64,
}

/// The configured providers with their caches: one per process (the webhook keeps it for
/// its lifetime).
pub(crate) struct Providers {
    runner: PluginRunner,
    providers: Vec<Provider>,
    timeout: Duration,
    /// Log each provider failure as a warning (the webhook, whose answers are cut to a
    /// warning's length); the CLI reports them in its verdict's warnings instead.
    log_failures: bool,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("bin_dir", &self.runner.bin_dir)
            .field(
                "providers",
                &self
                    .providers
                    .iter()
                    .map(|p| &p.spec.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Entries beyond this make an insert sweep out the expired ones first.
const CACHE_SWEEP_AT: usize = 1024;

impl Providers {
    /// Read the config at `config` (file or directory) and check that every plugin exists
    /// in `bin_dir`, as the kubelet does at start. `timeout` bounds each plugin run.
    pub(crate) fn load(
        config: &Path,
        bin_dir: &Path,
        timeout: Duration,
    ) -> Result<Providers, ConfigError> {
        let specs = config::load(config)?;
        if !bin_dir.is_dir() {
            return Err(ConfigError::BinDir {
                path: bin_dir.to_path_buf(),
            });
        }
        for spec in &specs {
            use std::os::unix::fs::PermissionsExt;
            let path = bin_dir.join(&spec.name);
            let problem = match std::fs::metadata(&path) {
                Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => continue,
                Ok(m) if m.is_file() => format!(
                    "{} is not executable; chmod +x it (or fix the copy into the bin dir)",
                    path.display()
                ),
                _ => format!(
                    "no executable {}; copy the plugin into --image-credential-provider-bin-dir",
                    path.display()
                ),
            };
            return Err(ConfigError::Invalid {
                file: spec.file.clone(),
                problem: format!("provider {}: {problem}", spec.name),
            });
        }
        Ok(Self::new(
            specs,
            PluginRunner {
                bin_dir: bin_dir.to_path_buf(),
                base_env: None,
            },
            timeout,
        ))
    }

    /// Providers from validated specs.
    pub(crate) fn new(specs: Vec<ProviderSpec>, runner: PluginRunner, timeout: Duration) -> Self {
        Providers {
            runner,
            providers: specs
                .into_iter()
                .map(|spec| Provider {
                    spec,
                    cache: tokio::sync::Mutex::new(HashMap::new()),
                    calls: AtomicU64::new(0),
                })
                .collect(),
            timeout,
            log_failures: false,
        }
    }

    /// The same providers, logging each failure as a warning (the webhook).
    pub(crate) fn logging_failures(self) -> Providers {
        Providers {
            log_failures: true,
            ..self
        }
    }

    /// The configured providers, in order.
    pub(crate) fn specs(&self) -> impl Iterator<Item = &ProviderSpec> {
        self.providers.iter().map(|p| &p.spec)
    }

    /// How often each provider's plugin has run, by name.
    #[cfg(test)]
    pub(crate) fn calls(&self) -> Vec<(String, u64)> {
        self.providers
            .iter()
            .map(|p| (p.spec.name.clone(), p.calls.load(Ordering::Relaxed)))
            .collect()
    }

    /// The names of the providers whose `matchImages` match `image`, without running them.
    pub(crate) fn matching_names<'a>(&'a self, image: &'a str) -> impl Iterator<Item = &'a str> {
        self.providers
            .iter()
            .filter(move |p| p.spec.match_images.iter().any(|m| urls_match_str(m, image)))
            .map(|p| p.spec.name.as_str())
    }

    /// Credentials for `image` (the kubelet's repository to pull, without tag or digest)
    /// from every matching provider. Never fails: a provider's problem is its
    /// [`ProviderOutcome`].
    pub(crate) async fn lookup(&self, image: &str, workload: Option<&Workload>) -> ProviderLookup {
        let mut keyring = Keyring::new();
        let mut uses = Vec::new();
        for p in &self.providers {
            let Some(matched) = p
                .spec
                .match_images
                .iter()
                .find(|m| urls_match_str(m, image))
            else {
                continue;
            };
            let (mut outcome, auth) = self.provide(p, image, workload).await;
            if let Some(auth) = auth {
                let mut own = Keyring::new();
                own.add(&auth, "");
                if own.lookup(image).is_empty() && !auth.is_empty() {
                    outcome = ProviderOutcome::NoMatchingKey {
                        keys: auth.iter().map(|(k, _)| k.to_string()).collect(),
                    };
                }
                keyring.add(&auth, &format!("credential provider {}", p.spec.name));
            }
            uses.push(ProviderUse {
                provider: p.spec.name.clone(),
                matched: matched.clone(),
                outcome,
            });
        }
        ProviderLookup {
            credentials: keyring.lookup(image),
            uses,
        }
    }

    async fn provide(
        &self,
        p: &Provider,
        image: &str,
        workload: Option<&Workload>,
    ) -> (ProviderOutcome, Option<DockerConfig>) {
        let token = match &p.spec.token {
            None => None,
            Some(attrs) => {
                match token_for(attrs, &p.spec.name, workload, self.log_failures).await {
                    Ok(t) => t,
                    Err(outcome) => return (outcome, None),
                }
            }
        };
        let sa_key = token
            .as_ref()
            .map(|t| t.cache_key.clone())
            .unwrap_or_default();
        let registry = registry_of(image);
        let mut cache = p.cache.lock().await;
        let now = Instant::now();
        for (key_type, base) in [
            (CacheKeyType::Image, image),
            (CacheKeyType::Registry, registry),
            (CacheKeyType::Global, "global"),
        ] {
            if let Some(e) = cache.get(&cache_key(base, &sa_key))
                && e.expires > now
            {
                tracing::debug!(provider = %p.spec.name, image, key_type = ?key_type, key = base, "credential provider answer from its cache");
                return (
                    ProviderOutcome::Answered {
                        key_type,
                        key: base.to_string(),
                        cached: true,
                    },
                    Some(e.auth.clone()),
                );
            }
        }
        p.calls.fetch_add(1, Ordering::Relaxed);
        let request = wire::Request {
            image,
            service_account_token: token.as_ref().map(|t| &t.token),
            service_account_annotations: token.as_ref().map(|t| &t.annotations),
        };
        let started = Instant::now();
        let result = self.runner.run(&p.spec, &request, self.timeout).await;
        tracing::debug!(provider = %p.spec.name, image, elapsed_ms = started.elapsed().as_millis() as u64, ok = result.is_ok(), "credential provider plugin ran");
        let response = match result {
            Ok(r) => r,
            Err(e) => {
                if self.log_failures {
                    tracing::warn!(provider = %p.spec.name, image, error = %e, "credential provider gave no credentials");
                } else {
                    tracing::debug!(provider = %p.spec.name, image, error = %e, "credential provider gave no credentials");
                }
                return (ProviderOutcome::Failed(e), None);
            }
        };
        let base = match response.cache_key_type {
            CacheKeyType::Image => image,
            CacheKeyType::Registry => registry,
            CacheKeyType::Global => "global",
        };
        let ttl = response
            .cache_duration
            .unwrap_or(p.spec.default_cache_duration);
        if !ttl.is_zero() {
            if cache.len() >= CACHE_SWEEP_AT {
                cache.retain(|_, e| e.expires > now);
            }
            cache.insert(
                cache_key(base, &sa_key),
                Entry {
                    auth: response.auth.clone(),
                    expires: now + ttl,
                },
            );
        }
        (
            ProviderOutcome::Answered {
                key_type: response.cache_key_type,
                key: base.to_string(),
                cached: false,
            },
            Some(response.auth),
        )
    }
}

/// A token-mode request's parts.
struct TokenParts {
    token: Secret,
    annotations: BTreeMap<String, String>,
    cache_key: String,
}

/// The token and annotations for a token-mode provider, `Ok(None)` when the kubelet would
/// run it without one (no ServiceAccount, not required), or why it is not run.
async fn token_for(
    attrs: &TokenAttributes,
    provider: &str,
    workload: Option<&Workload>,
    log_failures: bool,
) -> Result<Option<TokenParts>, ProviderOutcome> {
    let Some(w) = workload else {
        return Err(ProviderOutcome::NoToken(format!(
            "token-mode provider (audience {}): pullcheck has no workload ServiceAccount token here; not run",
            attrs.audience
        )));
    };
    let Some(sa) = w.service_account.as_deref().filter(|s| !s.is_empty()) else {
        return if attrs.require_service_account {
            Err(ProviderOutcome::NotRun(
                "requireServiceAccount is set and the workload has no ServiceAccount; the kubelet would not run it either".into(),
            ))
        } else {
            Ok(None)
        };
    };
    let info = w
        .tokens
        .service_account(&w.namespace, sa)
        .await
        .map_err(|e| ProviderOutcome::NoToken(e.to_string()))?;
    let mut annotations = BTreeMap::new();
    for k in &attrs.required_annotation_keys {
        match info.annotations.get(k) {
            Some(v) => {
                annotations.insert(k.clone(), v.clone());
            }
            None => {
                return Err(ProviderOutcome::NotRun(format!(
                    "ServiceAccount {}/{sa} lacks required annotation {k}; the kubelet would not run it either",
                    w.namespace
                )));
            }
        }
    }
    for k in &attrs.optional_annotation_keys {
        if let Some(v) = info.annotations.get(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    let token = w
        .tokens
        .token(&w.namespace, sa, &attrs.audience)
        .await
        .map_err(|e| {
            if log_failures {
                tracing::warn!(provider, namespace = %w.namespace, service_account = sa, error = %e, "no ServiceAccount token for a token-mode credential provider");
            }
            ProviderOutcome::NoToken(e.to_string())
        })?;
    let mut key = length_prefixed(&[&w.namespace, sa, &info.uid]);
    for (k, v) in &annotations {
        key.push_str(&length_prefixed(&[k, v]));
    }
    if attrs.cache_type == TokenCacheType::Token {
        key.push_str(&format!("{:x}", Sha256::digest(token.expose().as_bytes())));
    }
    Ok(Some(TokenParts {
        token,
        annotations,
        cache_key: key,
    }))
}

/// Fields joined so that no two different lists give the same text.
fn length_prefixed(fields: &[&str]) -> String {
    fields.iter().map(|f| format!("{}:{f};", f.len())).collect()
}

fn cache_key(base: &str, sa_key: &str) -> String {
    length_prefixed(&[base, sa_key])
}

/// The kubelet's `parseRegistry`: the image up to its first `/`.
fn registry_of(image: &str) -> &str {
    image.split('/').next().unwrap_or(image)
}

/// The two decoders a user or a plugin feeds, for the fuzz target (`fuzz/fuzz_targets/
/// credential_provider.rs`): a `CredentialProviderConfig` text and a plugin's stdout, each
/// for every exec API version. Returns how many providers and auth entries decoded, or the
/// one-line error; never panics.
#[doc(hidden)]
pub fn fuzz_decoders(
    config: &str,
    response: &[u8],
) -> (Result<usize, String>, Vec<Result<usize, String>>) {
    let specs = config::parse(config).map(|s| s.len());
    let answers = [ExecApi::V1, ExecApi::V1beta1, ExecApi::V1alpha1]
        .into_iter()
        .map(|api| {
            wire::decode("fuzz", api, response)
                .map(|r| r.auth.iter().count())
                .map_err(|e| error::redacted(e, response).to_string())
        })
        .collect();
    (specs, answers)
}

#[cfg(test)]
mod tests;
