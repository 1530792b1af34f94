//! `pullcheck webhook`: flags → [`crate::webhook::Config`], then serve until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::args::is_dns_label;
use super::init_container::{Transient, validate_options};
use super::input::load_table;
use super::plan::{list_or_default, seconds};
use super::{CliError, UsageError};
use crate::engine::{DEFAULT_METERED_REGISTRIES, DEFAULT_NODE_CREDENTIAL_PATTERNS};
use crate::k8s::TransientAction;
use crate::k8s::container::{DEFAULT_CPU, DEFAULT_MEMORY, InjectOptions, default_image};
use crate::platform::Platform;
use crate::registry::guard::{Guard, GuardPolicy};
use crate::verdict::code;
use crate::webhook::config::{self, CacheConfig, Config, DEFAULT_CLUSTER_PLATFORMS, Mode};

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ModeArg {
    /// Deny workloads whose images can't be pulled.
    Enforce,
    /// Admit them with a warning per image (the safe first rollout).
    Warn,
}

/// Arguments of `pullcheck webhook`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WebhookArgs {
    /// Address to listen on (port 0: pick one; the address is printed on stderr).
    #[arg(
        long,
        value_name = "ADDR:PORT",
        default_value = "0.0.0.0:8443",
        help_heading = "Server",
        long_help = "Address and port to serve HTTPS on. Port 0 picks a free port; the address actually bound is printed on stderr as `pullcheck webhook: listening on https://ADDR`."
    )]
    pub listen: SocketAddr,

    /// Serving certificate chain (PEM), reloaded when the file changes.
    #[arg(
        long = "tls-cert",
        value_name = "FILE",
        env = "PULLCHECK_TLS_CERT",
        hide_env_values = true,
        help_heading = "Server",
        long_help = "PEM certificate chain served to the API server (cert-manager's tls.crt). Re-read every --reload-interval and swapped in when its contents change. Env: PULLCHECK_TLS_CERT."
    )]
    pub tls_cert: PathBuf,

    /// Serving private key (PEM), reloaded when the file changes.
    #[arg(
        long = "tls-key",
        value_name = "FILE",
        env = "PULLCHECK_TLS_KEY",
        hide_env_values = true,
        help_heading = "Server",
        long_help = "PEM private key of --tls-cert (cert-manager's tls.key), reloaded with it. A pair that does not load keeps the current one serving. Env: PULLCHECK_TLS_KEY."
    )]
    pub tls_key: PathBuf,

    /// Seconds between checks of the certificate files.
    #[arg(
        long = "reload-interval",
        value_name = "SECONDS",
        default_value_t = 30.0,
        help_heading = "Server",
        long_help = "How often, in seconds, the certificate and key files are read and compared with what is served. Polling contents is robust to Kubernetes' symlink swaps."
    )]
    pub reload_interval: f64,

    /// Seconds in-flight requests may take to finish after SIGTERM.
    #[arg(
        long = "shutdown-grace",
        value_name = "SECONDS",
        default_value_t = 10.0,
        help_heading = "Server",
        long_help = "After SIGTERM, /readyz answers 503 and requests are still served for a quarter of this time (at most 2 s), each answer with Connection: close so keep-alive clients move off without losing a request; then the listener closes and requests in flight get the rest of this time to finish (keep it below terminationGracePeriodSeconds)."
    )]
    pub shutdown_grace: f64,

    /// enforce: deny workloads with unpullable images; warn: admit with warnings.
    #[arg(long, value_enum, default_value_t = ModeArg::Enforce, help_heading = "Policy",
        long_help = "enforce: deny a workload with one line per image that can't be pulled (container, reference, verdict, detail). warn: admit it with one admission warning per such image.")]
    pub mode: ModeArg,

    /// Deny when an image could not be verified in time (default: admit with a warning).
    #[arg(
        long = "fail-closed",
        help_heading = "Policy",
        long_help = "Deny a workload when an image could not be verified within the budget \
(registry down, slow, unreadable pull secrets). The default is fail-open: admit, with a \
warning naming each image that was not verified."
    )]
    pub fail_closed: bool,

    /// Mint ServiceAccount tokens for token-mode credential providers.
    #[arg(
        long = "provider-token-requests",
        help_heading = "Credentials",
        long_help = "For credential providers with tokenAttributes (KEP-4412), request a token \
for the workload's ServiceAccount with the provider's audience (TokenRequest API) and pass it \
to the plugin, as the kubelet passes the pod's. This needs create on serviceaccounts/token in \
each namespace checked: the power to act as those ServiceAccounts towards that audience. \
Off by default: token-mode providers then give \"assumed, not verified\"."
    )]
    pub provider_token_requests: bool,

    /// Seconds to answer within; keep it below the webhook's timeoutSeconds (10).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 8.0,
        help_heading = "Policy",
        long_help = "Seconds from receiving a review to answering it. Images without a verdict by then are 'not verified': admitted with a warning, or denied with --fail-closed. Keep it below the webhook configuration's timeoutSeconds, whose default is 10."
    )]
    pub budget: f64,

    /// Platform the cluster's nodes run (repeatable); an index must offer one of them.
    #[arg(
        long = "cluster-platform",
        value_name = "OS/ARCH[/VARIANT]",
        help_heading = "Policy",
        default_values_t = DEFAULT_CLUSTER_PLATFORMS.iter().map(|p| p.to_string()),
        long_help = "A platform of the cluster's nodes (repeatable). The node is unknown at admission, so an index passes when it has an entry for \
at least one of them; a pod template pinning kubernetes.io/arch (nodeSelector or required node \
affinity) or kubernetes.io/os narrows the list. An OS or architecture outside Go's GOOS/GOARCH \
lists (and containerd's aliases x86_64, aarch64, armhf, i386) is a usage error naming the close \
match."
    )]
    pub cluster_platform: Vec<String>,

    /// Kind → pod-template paths file extending the built-in table.
    #[arg(
        long = "kinds",
        value_name = "FILE",
        help_heading = "Policy",
        long_help = "A YAML list of {apiVersion, kind, podTemplatePaths, jobSpecPath, runPolicyPath} rows for workload kinds pullcheck doesn't know; the same file `inject --kinds` takes."
    )]
    pub kinds: Option<PathBuf>,

    /// The init container image /mutate injects (required; pin it by digest).
    #[arg(
        long = "inject-image",
        value_name = "IMAGE",
        help_heading = "Mutation",
        long_help = "Required. The pullcheck image of the injected init container, pulled with IfNotPresent. Mirror it next to your workloads and pin it by digest. There is no default: the project publishes no image, and a default nobody can pull would strand every mutated pod in Init:ImagePullBackOff."
    )]
    pub inject_image: Option<String>,

    /// CPU request and limit of the injected init container.
    #[arg(long = "inject-cpu", value_name = "QUANTITY", default_value = DEFAULT_CPU, help_heading = "Mutation",
        long_help = "CPU request and limit of the injected init container, as a Kubernetes quantity.")]
    pub inject_cpu: String,

    /// Memory request and limit of the injected init container.
    #[arg(long = "inject-memory", value_name = "QUANTITY", default_value = DEFAULT_MEMORY, help_heading = "Mutation",
        long_help = "Memory request and limit of the injected init container, as a Kubernetes quantity.")]
    pub inject_memory: String,

    /// Extra `pullcheck check` argument for the injected container (repeatable).
    #[arg(
        long = "inject-check-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Mutation",
        long_help = "Appended to the injected container's `check` arguments, before the images (repeatable), e.g. --inject-check-arg=--hosts-dir=/etc/containerd/certs.d."
    )]
    pub inject_check_args: Vec<String>,

    /// Also set the Job-level podFailurePolicy (as `inject --fail-fast`).
    #[arg(
        long = "fail-fast",
        help_heading = "Mutation",
        long_help = "Also put pullcheck's rules first in the Job-level podFailurePolicy (codes 10-15 fail the Job), as `pullcheck inject --fail-fast` does."
    )]
    pub fail_fast: bool,

    /// podFailurePolicy action for pullcheck's transient code 20.
    #[arg(long = "transient", value_enum, value_name = "ACTION", default_value_t = Transient::Auto, help_heading = "Mutation",
        long_help = "What pullcheck's transient code 20 does in mutated workloads: auto (default: restart where the API server is 1.35 or later, else count, without a warning), count (the podFailurePolicy rule uses a backoffLimit retry), ignore (it doesn't), or restart (Kubernetes >= 1.35 container restart rules: the init container retries in place; the webhook asks the API server's version once and falls back to count below 1.35, with a warning). With --probe-namespace, auto and restart also dry-run a Pod carrying the rules and write count, with a warning, where the server drops them (the ContainerRestartRules feature gate off).")]
    pub transient: Transient,

    /// Namespace of the dry-run Pod that shows whether container restart rules are kept.
    #[arg(
        long = "probe-namespace",
        value_name = "NAMESPACE",
        help_heading = "Mutation",
        long_help = "Where --transient auto|restart would write container restart rules on a 1.35 or later API server, first create a Pod carrying them in NAMESPACE with dryRun=All (nothing is stored or run) and read back what the server would store: a server with the ContainerRestartRules feature gate off drops them silently, and then count is written, with a warning. Needs create on pods in NAMESPACE (the chart grants it there, dry runs only). Empty (default): the version alone decides."
    )]
    pub probe_namespace: Option<String>,

    /// ServiceAccount of the dry-run Pod (it must exist in --probe-namespace).
    #[arg(
        long = "probe-service-account",
        value_name = "NAME",
        default_value = "default",
        help_heading = "Mutation",
        long_help = "ServiceAccount named by the --probe-namespace dry-run Pod; it must exist there (the ServiceAccount admission plugin refuses the Pod otherwise). The chart passes the webhook's own."
    )]
    pub probe_service_account: String,

    /// Rewrite tags to the digest they resolved to (the index digest, never a platform child).
    #[arg(
        long = "pin-digests",
        help_heading = "Mutation",
        long_help = "In /mutate, rewrite each pullable image written without a digest to image@digest, the digest the tag resolved to just now (an index stays an index: never a platform child). Off by default."
    )]
    pub pin_digests: bool,

    /// Also answer Kueue AdmissionChecks whose controllerName is pullcheck.io/image-check.
    #[arg(
        long = "kueue-admission-check",
        help_heading = "Kueue",
        long_help = "Run the Kueue admission-check controller in this process (docs/kueue.md): keep the Active condition of every AdmissionCheck whose spec.controllerName is pullcheck.io/image-check, and answer those checks on Workloads that hold quota: Rejected for an image that is not found, has no manifest for the pod set's platform (its assigned ResourceFlavor's kubernetes.io/arch) or is invalid; Retry for a registry that doesn't answer; Ready otherwise (denied or unauthenticated: Ready, not verified, unless --kueue-reject-unproven). Needs the Kubernetes API and the RBAC in docs/kueue.md."
    )]
    pub kueue_admission_check: bool,

    /// Reject, not admit, a Kueue workload whose image is denied or unauthenticated.
    #[arg(
        long = "kueue-reject-unproven",
        requires = "kueue_admission_check",
        help_heading = "Kueue",
        long_help = "Answer Rejected for an image pullcheck is denied or not authenticated for (and for unreadable pull secrets). Only for clusters whose nodes hold no credentials pullcheck lacks (no kubelet credential provider, no node-wide config.json): otherwise a healthy workload is deactivated on a guess. Off by default: such images are answered Ready, not verified."
    )]
    pub kueue_reject_unproven: bool,

    /// Answer only while holding this Lease (NAMESPACE/NAME): one replica answers at a time.
    #[arg(
        long = "kueue-lease",
        value_name = "NAMESPACE/NAME",
        requires = "kueue_admission_check",
        help_heading = "Kueue",
        long_help = "Leader election for the admission check: only the replica holding this coordination.k8s.io Lease answers (15 s lease, renewed every 2 s, as client-go's controllers); the others take over within 15 s of the holder stopping. Without it every replica answers (the same answers, forced applies; the registry requests double). The chart sets it with admissionCheck.enabled (RBAC: leases get, create, patch in its namespace)."
    )]
    pub kueue_lease: Option<String>,

    /// Only these registry hosts may be contacted (repeatable; `host` or `*.domain`).
    #[arg(
        long = "allow-registry",
        value_name = "GLOB",
        help_heading = "Address guard",
        long_help = "When given, only these registry hosts may be contacted (repeatable): exact host, or *.domain for its subdomains; no port."
    )]
    pub allow_registry: Vec<String>,

    /// Never contact these registry hosts (repeatable; `host` or `*.domain`).
    #[arg(
        long = "deny-registry",
        value_name = "GLOB",
        help_heading = "Address guard",
        long_help = "Registry hosts never contacted (repeatable): exact host, or *.domain for its subdomains; no port. Images there get the denied verdict."
    )]
    pub deny_registry: Vec<String>,

    /// Let registries on loopback addresses through (tests, kind clusters).
    #[arg(
        long = "allow-loopback-registries",
        help_heading = "Address guard",
        long_help = "By default registries on loopback, link-local, cloud-metadata and \
unspecified addresses and the API server's address are refused, because image names come from \
whoever writes a Job. This lets loopback registries through (for tests); metadata addresses, \
link-local literals and the API server stay refused."
    )]
    pub allow_loopback_registries: bool,

    #[command(flatten)]
    pub api: super::args::ApiServerArgs,

    #[command(flatten)]
    pub registry: super::args::RegistryArgs,

    /// Deadline of one registry HTTP request, in seconds.
    #[arg(
        long = "request-timeout",
        value_name = "SECONDS",
        default_value_t = 5.0,
        help_heading = "Registry",
        long_help = "Deadline of one HTTP request to a registry, in seconds; the budget cuts it shorter when needed."
    )]
    pub request_timeout: f64,

    /// Images of one review resolved at once.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        help_heading = "Registry",
        long_help = "How many images of one review are resolved at once."
    )]
    pub concurrency: usize,

    /// Seconds a pullable verdict is reused.
    #[arg(
        long = "cache-positive-ttl",
        value_name = "SECONDS",
        default_value_t = CacheConfig::DEFAULT.positive_ttl.as_secs_f64(),
        help_heading = "Cache",
        long_help = "Seconds a pullable verdict is reused for the same reference, credentials and platforms."
    )]
    pub cache_positive_ttl: f64,

    /// Seconds a failing verdict is reused (transient ones never are).
    #[arg(
        long = "cache-negative-ttl",
        value_name = "SECONDS",
        default_value_t = CacheConfig::DEFAULT.negative_ttl.as_secs_f64(),
        help_heading = "Cache",
        long_help = "Seconds a failing verdict (not found, denied, ...) is reused. Transient verdicts are never cached."
    )]
    pub cache_negative_ttl: f64,

    /// Memory bound of the verdict cache, in MiB.
    #[arg(
        long = "cache-max-mib",
        value_name = "MIB",
        default_value_t = CacheConfig::DEFAULT.max_bytes / (1024 * 1024),
        help_heading = "Cache",
        long_help = "Upper bound of the verdict cache's memory estimate, in MiB; the least used entries go first."
    )]
    pub cache_max_mib: u64,

    /// Seconds a Secret or ServiceAccount read from the API is reused.
    #[arg(
        long = "secret-cache-ttl",
        value_name = "SECONDS",
        default_value_t = CacheConfig::DEFAULT.secret_ttl.as_secs_f64(),
        help_heading = "Cache",
        long_help = "Seconds a Secret or ServiceAccount read from the API is reused."
    )]
    pub secret_cache_ttl: f64,
}

impl WebhookArgs {
    /// The validated configuration.
    pub(crate) fn config(&self) -> Result<Config, UsageError> {
        let budget = seconds("--budget", self.budget, 30.0)?;
        let cluster_platforms = self
            .cluster_platform
            .iter()
            .map(|p| {
                Platform::parse_flag(p)
                    .map_err(|e| UsageError(format!("--cluster-platform {p}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let concurrency = super::args::concurrency(self.concurrency)?;
        let hosts_dir = self.registry.hosts_dir()?;
        let table = load_table(self.kinds.as_deref())?;
        // No default, as for `inject --image`: a placeholder nobody publishes, injected into
        // every mutated pod, would hold each one in Init:ImagePullBackOff.
        let Some(image) = self.inject_image.clone() else {
            return Err(UsageError(format!(
                "webhook needs --inject-image: the pullcheck image your nodes pull for the init \
container /mutate injects; publish it with scripts/publish-image.sh REGISTRY/REPO:TAG and pass \
the --inject-image IMAGE@sha256:… it prints ({} is a placeholder nobody publishes)",
                default_image()
            )));
        };
        let inject = InjectOptions {
            image,
            cpu: self.inject_cpu.clone(),
            memory: self.inject_memory.clone(),
            check_args: self.inject_check_args.clone(),
            fail_fast: self.fail_fast,
            // Filled per review from Config::transient (handler/transient.rs).
            transient: TransientAction::Count,
            // Filled per review with the bodies just read (handler.rs).
            index_bodies: Default::default(),
            // The webhook's own registry settings, so the check reaches what it reached.
            registry: super::init_container::registry_settings(
                hosts_dir.clone(),
                &self.registry.insecure_registry,
                &self.registry.ca_file,
                crate::engine::handover::Metered::unless_default(
                    &list_or_default(&self.registry.metered_registry, DEFAULT_METERED_REGISTRIES),
                    self.registry.metered_get(),
                ),
            )?,
        };
        validate_options(&inject, "inject-")?;
        let probe_namespace = self.probe_namespace.as_deref().unwrap_or_default();
        if !probe_namespace.is_empty() && !is_dns_label(probe_namespace) {
            return Err(UsageError(format!(
                "--probe-namespace {probe_namespace:?}: not a namespace name (lowercase letters, digits and '-', at most 63); give the webhook's own namespace, or leave it out"
            )));
        }
        if !self.probe_service_account.split('.').all(is_dns_label)
            || self.probe_service_account.len() > 253
        {
            return Err(UsageError(format!(
                "--probe-service-account {:?}: not a ServiceAccount name (lowercase DNS subdomain); give the webhook's own ServiceAccount",
                self.probe_service_account
            )));
        }
        Ok(Config {
            listen: self.listen,
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            reload_interval: seconds("--reload-interval", self.reload_interval, 86_400.0)?,
            mode: match self.mode {
                ModeArg::Enforce => Mode::Enforce,
                ModeArg::Warn => Mode::Warn,
            },
            fail_closed: self.fail_closed,
            budget,
            cluster_platforms,
            inject,
            pin_digests: self.pin_digests,
            transient: match self.transient {
                Transient::Auto => config::Transient::Auto,
                Transient::Restart => config::Transient::Restart,
                Transient::Count => config::Transient::Count,
                Transient::Ignore => config::Transient::Ignore,
            },
            restart_rules_probe: (!probe_namespace.is_empty()).then(|| {
                crate::webhook::ProbeTarget {
                    namespace: probe_namespace.to_string(),
                    service_account: self.probe_service_account.clone(),
                }
            }),
            table,
            apiserver: self
                .api
                .apiserver()
                .map_err(|e| UsageError(e.to_string()))?,
            cache: CacheConfig {
                positive_ttl: seconds("--cache-positive-ttl", self.cache_positive_ttl, 86_400.0)?,
                negative_ttl: seconds("--cache-negative-ttl", self.cache_negative_ttl, 86_400.0)?,
                max_bytes: self.cache_max_mib.max(1) * 1024 * 1024,
                secret_ttl: seconds("--secret-cache-ttl", self.secret_cache_ttl, 3_600.0)?,
            },
            shutdown_grace: seconds("--shutdown-grace", self.shutdown_grace, 3_600.0)?,
            hosts_dir,
            node_runtime: self.registry.node_runtime,
            insecure: self.registry.insecure_registry.clone(),
            ca_files: crate::registry::tls::ca_files(&self.registry.ca_file),
            providers: self
                .registry
                .credential_providers(budget)?
                .map(|p| std::sync::Arc::new(p.logging_failures())),
            provider_token_requests: self.provider_token_requests,
            node_credentials: list_or_default(
                &self.registry.node_credentials,
                DEFAULT_NODE_CREDENTIAL_PATTERNS,
            ),
            metered: list_or_default(&self.registry.metered_registry, DEFAULT_METERED_REGISTRIES),
            metered_get: self.registry.metered_get(),
            request_timeout: seconds("--request-timeout", self.request_timeout, 600.0)?,
            concurrency,
            refused_secrets: config::RefusedSecrets::Unproven,
        })
    }

    /// The address guard ([`GuardPolicy::webhook`]).
    pub(crate) fn guard_policy(&self) -> GuardPolicy {
        GuardPolicy::webhook(
            self.allow_loopback_registries,
            self.deny_registry.clone(),
            self.allow_registry.clone(),
            std::env::var("KUBERNETES_SERVICE_HOST").ok().as_deref(),
        )
    }
}

impl WebhookArgs {
    /// `--probe-namespace` where it can't do anything: said once at startup.
    fn unused_probe_warning(&self) -> Option<String> {
        let ns = self.probe_namespace.as_deref().filter(|n| !n.is_empty())?;
        if matches!(self.transient, Transient::Count | Transient::Ignore) {
            return Some(format!(
                "--probe-namespace {ns} has no effect with --transient {}: no restart rules are written",
                if self.transient == Transient::Count {
                    "count"
                } else {
                    "ignore"
                }
            ));
        }
        None
    }
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Run the webhook until SIGTERM. Exit 0 after a clean drain; configuration problems are
/// usage errors (exit 2).
pub(crate) async fn run(a: WebhookArgs) -> Result<u8, CliError> {
    let config = a.config()?;
    if let Some(w) = a.unused_probe_warning() {
        eprintln!("pullcheck webhook: warning: {w}");
    }
    // Once at startup, before the listening line: every pod /mutate touches gets this image.
    if let Some(w) =
        super::init_container::unpinned_image_warning("--inject-image", &config.inject.image)
    {
        eprintln!("pullcheck webhook: warning: {w}");
    }
    let guard = Guard::new(a.guard_policy());
    let kueue = match (a.kueue_admission_check, &config.apiserver) {
        (false, _) => None,
        (true, None) => {
            return Err(UsageError(
                "--kueue-admission-check needs the Kubernetes API: run in a cluster, or pass --kubeconfig FILE or --apiserver URL".into(),
            )
            .into());
        }
        (true, Some(api)) => {
            Some(crate::apiserver::ApiClient::new(api).map_err(|e| UsageError(e.to_string()))?)
        }
    };
    let unproven = if a.kueue_reject_unproven {
        crate::kueue::UnprovenPolicy::Reject
    } else {
        crate::kueue::UnprovenPolicy::AssumeReady
    };
    let state = std::sync::Arc::new(
        crate::webhook::handler::WebhookState::new(config, guard)
            .map_err(|e| UsageError(e.to_string()))?,
    );
    // The admission check runs beside the server and ends with it (aborted on drop).
    let lease = match &a.kueue_lease {
        None => None,
        Some(l) => match l.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Some((ns.to_string(), name.to_string()))
            }
            _ => {
                return Err(UsageError(format!(
                    "--kueue-lease {l:?}: not NAMESPACE/NAME, e.g. pullcheck-system/pullcheck-kueue-admission-check"
                ))
                .into());
            }
        },
    };
    let _check = kueue.map(|client| {
        // The gauge in every replica, leading or not: a standby shows a stopped leader.
        let stalled = AbortOnDrop(tokio::spawn(crate::kueue::stalled::export(
            client.clone(),
            state.metrics.clone(),
        )));
        let check = AbortOnDrop(tokio::spawn(crate::kueue::run_leading(
            state.clone(),
            client,
            unproven,
            lease,
        )));
        (stalled, check)
    });
    crate::webhook::server::serve(state)
        .await
        .map_err(|e| UsageError(e.to_string()))?;
    Ok(code::OK)
}
