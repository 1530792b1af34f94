//! The flag groups several commands share ([`ResolveArgs`], [`RegistryArgs`], [`Output`])
//! and their validators. Raw flags only: `cli/plan.rs` turns them into an engine plan once,
//! and nothing below the CLI sees clap types. Each command's own arguments live beside it.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::UsageError;
use crate::engine::{DEFAULT_METERED_MARGIN, MeteredGet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// Human-readable text.
    Text,
    /// A JSON document on stdout (docs/json-schema.md).
    Json,
}

/// `--node-runtime`'s parser: the spellings of [`crate::engine::NodeRuntime::ALL`].
fn node_runtime(s: &str) -> Result<crate::engine::NodeRuntime, String> {
    crate::engine::NodeRuntime::parse(s).ok_or_else(|| {
        let all: Vec<&str> = crate::engine::NodeRuntime::ALL
            .iter()
            .map(|r| r.as_str())
            .collect();
        format!("not a node runtime; one of {}", all.join(", "))
    })
}

/// Registry and node configuration shared by every command that resolves images (the
/// CLI commands and the webhook).
#[derive(Debug, Args, Clone)]
pub(crate) struct RegistryArgs {
    /// containerd certs.d directory (hosts.toml: mirrors, CAs, skip_verify).
    #[arg(
        long = "hosts-dir",
        value_name = "DIR",
        help_heading = "Registry",
        long_help = "A containerd certs.d root, as on the node (/etc/containerd/certs.d): \
<host>/hosts.toml with server, [host.\"…\"] mirrors tried in file order (tags need the \
resolve capability), ca, skip_verify, override_path, header. Mirror requests carry ?ns=."
    )]
    pub hosts_dir: Option<PathBuf>,

    /// The nodes' container runtime: containerd-2 (default), containerd-1.7 or cri-o.
    #[arg(
        long = "node-runtime",
        value_name = "RUNTIME",
        default_value = "containerd-2",
        value_parser = node_runtime,
        help_heading = "Registry",
        long_help = "The container runtime of the nodes the verdict must match, when every \
mirror and the upstream fail differently: containerd-2 (2.0 and later: a 404 outranks a \
connection or TLS error, so an unreachable mirror in front of a missing tag is not_found), \
containerd-1.7 (the first non-404 failure wins: transient), cri-o (the upstream, tried last, \
decides). README \"Which error wins across mirrors\" has the table."
    )]
    pub node_runtime: crate::engine::NodeRuntime,

    /// Use plain HTTP for HOST[:PORT] (repeatable).
    #[arg(
        long = "insecure-registry",
        value_name = "HOST[:PORT]",
        help_heading = "Registry",
        long_help = "Talk plain HTTP to this registry (repeatable). Only these registries, or \
hosts.toml entries, ever use plain HTTP; the scheme is never guessed from a host name."
    )]
    pub insecure_registry: Vec<String>,

    /// Extra CA certificates (PEM) to trust (repeatable).
    #[arg(
        long = "ca-file",
        value_name = "FILE",
        help_heading = "Registry",
        long_help = "PEM file of CA certificates trusted in addition to the Mozilla roots built \
into the binary (repeatable). SSL_CERT_FILE is honoured too."
    )]
    pub ca_file: Vec<PathBuf>,

    /// Registries whose verdict 14 passes (node credential providers).
    #[arg(
        long = "node-credentials",
        value_name = "PATTERN",
        help_heading = "Credentials",
        long_help = node_credentials_help()
    )]
    pub node_credentials: Vec<String>,

    /// The kubelet's credential provider config (file or directory).
    #[arg(
        long = "image-credential-provider-config",
        value_name = "PATH",
        help_heading = "Credentials",
        requires = "image_credential_provider_bin_dir",
        long_help = "The kubelet's --image-credential-provider-config: a CredentialProviderConfig \
(kubelet.config.k8s.io v1, v1beta1 or v1alpha1; JSON or YAML), or a directory of *.json, \
*.yaml, *.yml files merged in name order. Matching plugins (ecr-credential-provider, \
auth-provider-gcp, acr-credential-provider) run last, after the pull secrets (and, outside \
the webhook, the docker config), with the kubelet's exec protocol and cache rules; each run \
gets half the deadline (--timeout, the webhook's --budget), at most the kubelet's minute. \
See docs/credential-providers.md."
    )]
    pub image_credential_provider_config: Option<PathBuf>,

    /// Directory holding the credential provider plugins.
    #[arg(
        long = "image-credential-provider-bin-dir",
        value_name = "DIR",
        help_heading = "Credentials",
        requires = "image_credential_provider_config",
        long_help = "The kubelet's --image-credential-provider-bin-dir: each provider's `name` \
is an executable here. The process environment is passed on with the provider's env \
appended, so the cloud identity (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_*) is the one \
pullcheck runs with."
    )]
    pub image_credential_provider_bin_dir: Option<PathBuf>,

    /// Registries that meter manifest GETs (repeatable; default docker.io).
    #[arg(
        long = "metered-registry",
        value_name = "HOST",
        help_heading = "Registry",
        long_help = format!(
            "Registries where every manifest GET counts as a pull (repeatable). Default: {}. \
'none' clears the list.",
            crate::engine::DEFAULT_METERED_REGISTRIES.join(", ")
        )
    )]
    pub metered_registry: Vec<String>,

    /// Always GET the index on metered registries (same as --metered-get always).
    #[arg(
        long = "verify-platform-on-metered",
        help_heading = "Registry",
        long_help = "Docker Hub counts every manifest GET as a pull (HEAD is free). With this \
flag the platform check always fetches the index there, whatever quota is left; the same as \
--metered-get always."
    )]
    pub verify_platform_on_metered: bool,

    /// When to GET an index on metered registries.
    #[arg(long = "metered-get", value_enum, value_name = "WHEN", default_value_t = MeteredGetArg::Affordable,
        help_heading = "Registry",
        long_help = "On metered registries (Docker Hub) the first request is a free HEAD, whose \
answer states the pull quota left (ratelimit-remaining). affordable: GET the index to \
verify the platform when that answer states no limit or more than --metered-quota-margin pulls \
left; otherwise say the platform was not verified, with the quota seen. always: GET regardless. \
never: HEAD only, the platform is never verified there.")]
    pub metered_get: MeteredGetArg,

    /// Pulls that must stay left before a check spends one on an index.
    #[arg(long = "metered-quota-margin", value_name = "PULLS", default_value_t = DEFAULT_METERED_MARGIN,
        help_heading = "Registry",
        long_help = "With --metered-get affordable, the index is fetched only while the registry \
states more than this many pulls left, so the kubelet's own pull that follows is \
not the one that runs out.")]
    pub metered_quota_margin: u64,
}

/// `--metered-get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MeteredGetArg {
    /// When the quota the HEAD answer states affords it.
    Affordable,
    /// Always.
    Always,
    /// Never: the platform is not verified on metered registries.
    Never,
}

impl RegistryArgs {
    /// When an index is fetched on a metered registry, from `--metered-get`,
    /// `--metered-quota-margin` and `--verify-platform-on-metered`.
    pub(super) fn metered_get(&self) -> MeteredGet {
        match self.metered_get {
            _ if self.verify_platform_on_metered => MeteredGet::Always,
            MeteredGetArg::Always => MeteredGet::Always,
            MeteredGetArg::Never => MeteredGet::Never,
            MeteredGetArg::Affordable => MeteredGet::IfAffordable {
                margin: self.metered_quota_margin,
            },
        }
    }

    /// The credential providers from `--image-credential-provider-config` and
    /// `--image-credential-provider-bin-dir` (clap makes them come together). Each plugin
    /// run gets [`crate::credentials::provider::plugin_timeout`] of `budget`.
    pub(crate) fn credential_providers(
        &self,
        budget: std::time::Duration,
    ) -> Result<Option<crate::credentials::provider::Providers>, UsageError> {
        let (Some(config), Some(bin_dir)) = (
            &self.image_credential_provider_config,
            &self.image_credential_provider_bin_dir,
        ) else {
            return Ok(None);
        };
        crate::credentials::provider::Providers::load(
            config,
            bin_dir,
            crate::credentials::provider::plugin_timeout(budget),
        )
        .map(Some)
        .map_err(|e| UsageError(e.to_string()))
    }

    /// `--hosts-dir`, checked to be a directory.
    pub(super) fn hosts_dir(&self) -> Result<Option<PathBuf>, UsageError> {
        match &self.hosts_dir {
            Some(d) if !d.is_dir() => Err(UsageError(format!(
                "--hosts-dir {}: not a directory; pass a containerd certs.d root such as /etc/containerd/certs.d",
                d.display()
            ))),
            d => Ok(d.clone()),
        }
    }
}

/// `--concurrency`, checked to be between 1 and 1024.
pub(super) fn concurrency(n: usize) -> Result<usize, UsageError> {
    if n == 0 || n > 1024 {
        return Err(UsageError(format!(
            "--concurrency {n}: must be between 1 and 1024"
        )));
    }
    Ok(n)
}

/// `--node-credentials`' long help, whose default list is
/// [`crate::engine::DEFAULT_NODE_CREDENTIAL_PATTERNS`] itself (never a hand copy).
fn node_credentials_help() -> String {
    format!(
        "Registry patterns (kubelet matchImages glob syntax) where the kubelet pulls with node \
credential providers pullcheck can't see (ECR, Artifact Registry, ACR): there verdict 14 \
becomes a pass with a warning. Where --image-credential-provider-config has a provider for the \
image, the provider decides instead. Repeatable; default: {}. 'none' disables.",
        crate::engine::DEFAULT_NODE_CREDENTIAL_PATTERNS.join(", ")
    )
}

/// Options shared by every command that resolves images.
#[derive(Debug, Args, Clone)]
pub(crate) struct ResolveArgs {
    #[command(flatten)]
    pub registry: RegistryArgs,

    /// Pull secret file or directory of mounted secrets (repeatable).
    #[arg(
        long = "pull-secrets",
        value_name = "PATH",
        help_heading = "Credentials",
        env = "PULLCHECK_PULL_SECRETS",
        hide_env_values = true,
        value_delimiter = ',',
        long_help = "A pull secret: a .dockerconfigjson ({\"auths\":{…}}) or legacy .dockercfg \
file, or a directory holding mounted Kubernetes secrets (files named .dockerconfigjson or \
.dockercfg, directly or one directory down). Repeatable; matched with the kubelet's keyring \
rules (host globs, ports, path prefixes, most specific first). A credential helper is never \
run because a pull secret names one. The environment variable takes a comma-separated list."
    )]
    pub pull_secrets: Vec<PathBuf>,

    /// Docker config directory (config.json with auths, credHelpers, credsStore).
    #[arg(
        long = "docker-config",
        value_name = "DIR",
        help_heading = "Credentials",
        long_help = "Directory holding the user's Docker config.json; default $DOCKER_CONFIG, \
then ~/.docker. Its auths, credHelpers and credsStore are used after the pull secrets, like \
the kubelet's node keyring; helpers run with a 5 s deadline. A DIR given here without a \
config.json in it is a usage error (a typo would otherwise check anonymously)."
    )]
    pub docker_config: Option<PathBuf>,

    /// Don't read any Docker config (the init container's mode).
    #[arg(
        long = "no-docker-config",
        help_heading = "Credentials",
        long_help = "Ignore every user credential file: DOCKER_AUTH_CONFIG, $DOCKER_CONFIG or \
~/.docker/config.json, REGISTRY_AUTH_FILE and the containers auth.json files; only pull \
secrets are used (the init container's mode)."
    )]
    pub no_docker_config: bool,

    /// Target platform os/arch[/variant], or 'any' to skip the check.
    #[arg(
        long,
        value_name = "OS/ARCH[/VARIANT]",
        help_heading = "Registry",
        long_help = "The node's platform; default: the platform this binary runs on (in an init \
container, the node's). When a tag resolves to an index, it must have an entry for this \
platform (containerd's matcher; exact or fallback is reported). 'any' skips the check. An OS \
or architecture outside Go's GOOS/GOARCH lists (and containerd's aliases x86_64, aarch64, armhf, \
i386) is a usage error naming the close match (linux/amd: did you mean linux/amd64?)."
    )]
    pub platform: Option<String>,

    /// Overall deadline in seconds.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60.0,
        allow_negative_numbers = true,
        help_heading = "Registry",
        long_help = "Deadline for the whole run, in seconds. Retries of transient \
failures and Retry-After waits stay within it; images still unresolved at the deadline are \
transient (20). Images whose turn (--concurrency at a time) comes after it are not sent at all: \
transient too, detail \"not checked: …\", JSON not_checked: deadline."
    )]
    pub timeout: f64,

    /// Deadline of one HTTP request in seconds.
    #[arg(
        long = "request-timeout",
        value_name = "SECONDS",
        default_value_t = 10.0,
        allow_negative_numbers = true,
        help_heading = "Registry",
        long_help = "Deadline of one HTTP request (headers and body), in seconds."
    )]
    pub request_timeout: f64,

    /// Images checked at once.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        help_heading = "Registry",
        long_help = "How many images are checked concurrently. Requests to one \
registry share connections (HTTP/2 where the registry speaks it)."
    )]
    pub concurrency: usize,
}

/// Where the Kubernetes API is (`webhook`, `watch`).
#[derive(Debug, Args, Clone)]
pub(crate) struct ApiServerArgs {
    /// Kubernetes API URL (default: in-cluster from KUBERNETES_SERVICE_HOST).
    #[arg(
        long = "apiserver",
        value_name = "URL",
        help_heading = "Kubernetes API",
        long_help = "Base URL of the Kubernetes API, for reading (the webhook: Secrets and ServiceAccounts; the watch: pods). Default: in-cluster (KUBERNETES_SERVICE_HOST/PORT and the ServiceAccount token and CA). Without either, the webhook checks images without namespace pull secrets and the watch can't run."
    )]
    pub apiserver: Option<String>,

    /// Bearer token file for --apiserver.
    #[arg(
        long = "apiserver-token-file",
        value_name = "FILE",
        requires = "apiserver",
        help_heading = "Kubernetes API",
        long_help = "File holding the bearer token for --apiserver; re-read on every request (projected tokens rotate)."
    )]
    pub apiserver_token_file: Option<PathBuf>,

    /// CA file for --apiserver.
    #[arg(
        long = "apiserver-ca-file",
        value_name = "FILE",
        requires = "apiserver",
        help_heading = "Kubernetes API",
        long_help = "PEM CA bundle that signed --apiserver's certificate (default: the Mozilla roots)."
    )]
    pub apiserver_ca_file: Option<PathBuf>,

    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(
        long = "kubeconfig",
        value_name = "FILE",
        conflicts_with = "apiserver",
        help_heading = "Kubernetes API",
        long_help = "Read the API server, its CA and the credentials from this kubeconfig, as kubectl does (this file only; it must exist). Without --apiserver or --kubeconfig: the files of $KUBECONFIG (merged, first wins; missing ones skipped), else ~/.kube/config if it exists, else in-cluster. A kubeconfig that exists but can't be used is an error, never a silent fall-back. Users: token, tokenFile, client certificate, exec plugins (client.authentication.k8s.io/v1 and v1beta1); auth-provider, basic auth, insecure-skip-tls-verify, tls-server-name and proxy-url are refused with the fix (docs/watch.md)."
    )]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context (default: its current-context).
    #[arg(
        long = "context",
        value_name = "NAME",
        conflicts_with = "apiserver",
        help_heading = "Kubernetes API",
        long_help = "The kubeconfig context to use instead of its current-context, as kubectl's --context. Its cluster, user and (for commands that list: watch, audit) namespace are used."
    )]
    pub context: Option<String>,
}

impl ApiServerArgs {
    /// The API server: `--apiserver`, else a kubeconfig (`--kubeconfig`, `$KUBECONFIG`,
    /// `~/.kube/config`; [`crate::apiserver::kubeconfig::select`]), else in-cluster, else
    /// none. A kubeconfig that exists but can't be used is an error naming the file and the
    /// entry.
    pub(crate) fn apiserver(
        &self,
    ) -> Result<Option<crate::apiserver::ApiServer>, crate::apiserver::kubeconfig::KubeconfigError>
    {
        Ok(self.target()?.map(|t| t.api))
    }

    /// [`ApiServerArgs::apiserver`], with the kubeconfig context's namespace (`None` for
    /// `--apiserver` and in-cluster).
    pub(crate) fn target(
        &self,
    ) -> Result<
        Option<crate::apiserver::kubeconfig::Loaded>,
        crate::apiserver::kubeconfig::KubeconfigError,
    > {
        if let Some(url) = &self.apiserver {
            return Ok(Some(crate::apiserver::kubeconfig::Loaded {
                api: crate::apiserver::ApiServer::from_flags(
                    url.clone(),
                    self.apiserver_token_file.clone(),
                    self.apiserver_ca_file.clone(),
                ),
                namespace: None,
            }));
        }
        let env = crate::apiserver::kubeconfig::Environment::from_process(self.kubeconfig.clone());
        if self.context.as_deref() == Some("") {
            return Err(crate::apiserver::kubeconfig::KubeconfigError::EmptyContext);
        }
        match crate::apiserver::kubeconfig::select(&env, self.context.as_deref())? {
            Some(loaded) => Ok(Some(loaded)),
            None => {
                Ok(
                    crate::apiserver::in_cluster().map(|api| {
                        crate::apiserver::kubeconfig::Loaded {
                            api,
                            namespace: None,
                        }
                    }),
                )
            }
        }
    }
}

impl ApiServerArgs {
    /// Why no API server was found ([`ApiServerArgs::target`] gave `None`), with the fix:
    /// one line.
    pub(crate) fn no_api_message(&self) -> String {
        let env = crate::apiserver::kubeconfig::Environment::from_process(self.kubeconfig.clone());
        format!(
            "no Kubernetes API: {}, and not in a cluster (no KUBERNETES_SERVICE_HOST and ServiceAccount token); pass --kubeconfig FILE or --apiserver URL, or set KUBECONFIG",
            crate::apiserver::kubeconfig::why_none(&env)
        )
    }
}

/// What a listing command looks at when neither `-n`, `-A` nor the kubeconfig context
/// names a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unnamed {
    /// The namespace `default`, as kubectl.
    Default,
    /// Every namespace (the watch run as a controller, in-cluster or with `--apiserver`).
    All,
}

/// The namespace a listing command (`watch`, `audit`) looks at, `None` for every one, as
/// kubectl chooses (`k8s.io/cli-runtime`'s `ToRawKubeConfigLoader().Namespace()` and
/// `kubectl get`'s `--all-namespaces`): `-A` wins (kubectl ignores `-n` beside it), then
/// `-n`, then the kubeconfig context's namespace, then `unnamed`.
pub(crate) fn namespace_scope(
    flag: Option<String>,
    all: bool,
    context: Option<String>,
    unnamed: Unnamed,
) -> Option<String> {
    const DEFAULT_NAMESPACE: &str = "default";
    if all {
        return None;
    }
    flag.or(context).or(match unnamed {
        Unnamed::Default => Some(DEFAULT_NAMESPACE.to_string()),
        Unnamed::All => None,
    })
}

/// An RFC 1123 label: what a namespace name must be (lowercase letters, digits and `-`, at
/// most 63, not starting or ending with `-`; kubernetes `IsDNS1123Label`).
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::{Unnamed, namespace_scope};

    #[test]
    fn the_namespace_is_all_with_a_then_the_flag_then_the_contexts_then_unnamed() {
        let s = |flag: Option<&str>, all, ctx: Option<&str>, unnamed| {
            namespace_scope(flag.map(String::from), all, ctx.map(String::from), unnamed)
        };
        // kubectl get -n b -A lists every namespace: -A wins.
        assert_eq!(s(Some("b"), true, Some("team-a"), Unnamed::Default), None);
        assert_eq!(s(None, true, Some("team-a"), Unnamed::Default), None);
        assert_eq!(
            s(Some("b"), false, Some("team-a"), Unnamed::Default),
            Some("b".to_string())
        );
        assert_eq!(
            s(None, false, Some("team-a"), Unnamed::All),
            Some("team-a".to_string())
        );
        assert_eq!(
            s(None, false, None, Unnamed::Default),
            Some("default".to_string())
        );
        assert_eq!(s(None, false, None, Unnamed::All), None);
    }
}
