//! `pullcheck audit`: flags → the webhook's resolver state and a [`crate::audit::Pass`];
//! run it once and print the table or the JSON document. Exit code as `scan`'s.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::args::{ApiServerArgs, RegistryArgs, is_dns_label};
use super::plan::{list_or_default, seconds};
use super::{CliError, UsageError};
use crate::audit::{Pass, Progress};
use crate::engine::{DEFAULT_METERED_REGISTRIES, DEFAULT_NODE_CREDENTIAL_PATTERNS};
use crate::k8s::container::InjectOptions;
use crate::k8s::templates::Table;
use crate::registry::guard::{Guard, GuardPolicy};
use crate::webhook::config::{self, CacheConfig, Config, Mode, RefusedSecrets};

/// `pullcheck audit --help`'s examples.
pub(crate) const EXAMPLES: &str = "\
Examples:
  pullcheck audit                            # the current context's namespace
  pullcheck audit -A                         # every namespace
  pullcheck audit -n team-a -o json | jq '.workloads[] | select(.images[].exit_code > 0)'
  pullcheck audit -A -o yaml                 # the same document as YAML
  pullcheck audit -o json | jq '.workloads[] | select(.kind == \"CronJob\") | .next_run'
  pullcheck audit --context prod -A --progress
  kubectl pullcheck audit -A                 # the same, as a kubectl plugin";

/// `pullcheck audit -o`: the other commands' formats plus YAML, as `kubectl get -o yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AuditOutput {
    /// The table.
    Text,
    /// The JSON document (docs/audit.md).
    Json,
    /// The same document as YAML.
    Yaml,
}

/// The namespace kubectl uses when the context names none.
const DEFAULT_NAMESPACE: &str = "default";

/// Arguments of `pullcheck audit`.
#[derive(Debug, Clone, Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    pub api: ApiServerArgs,

    /// Audit this namespace (default: the kubeconfig context's, else `default`).
    #[arg(
        long,
        short = 'n',
        value_name = "NAMESPACE",
        help_heading = "Scope",
        long_help = "Audit the workloads of this namespace. Default: the kubeconfig context's \
namespace, else `default`, as kubectl chooses."
    )]
    pub namespace: Option<String>,

    /// Every namespace.
    #[arg(
        long = "all-namespaces",
        short = 'A',
        conflicts_with = "namespace",
        help_heading = "Scope",
        long_help = "Audit every namespace (listing each kind cluster-wide needs a ClusterRole)."
    )]
    pub all_namespaces: bool,

    #[command(flatten)]
    pub registry: RegistryArgs,

    /// Seconds one workload's images may take.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60.0,
        help_heading = "Registry",
        long_help = "The time one workload's images may take, pull secrets included; an image \
with no verdict by then is transient (20)."
    )]
    pub timeout: f64,

    /// Deadline of one registry HTTP request, in seconds.
    #[arg(
        long = "request-timeout",
        value_name = "SECONDS",
        default_value_t = 10.0,
        help_heading = "Registry",
        long_help = "Deadline of one HTTP request to a registry, in seconds."
    )]
    pub request_timeout: f64,

    /// Images of one workload checked at once.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        help_heading = "Registry",
        long_help = "How many images of one workload are checked at once (8 workloads at a \
time); the same image and credentials are asked of the registry once."
    )]
    pub concurrency: usize,

    /// Show progress on stderr also when it is not a terminal.
    #[arg(
        long,
        help_heading = "Output",
        long_help = "How many pod templates and images were found and how many are done, on \
stderr. Shown anyway when stderr is a terminal."
    )]
    pub progress: bool,

    /// Output format, on stdout.
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT", default_value_t = AuditOutput::Text, help_heading = "Output",
        long_help = "text: a table like kubectl get (NAMESPACE, KIND/NAME, CONTAINER, IMAGE, NEXT RUN, VERDICT, REASON) and a summary. json: {\"schema_version\":1,\"exit_code\":N,\"workloads\":[…]} (docs/audit.md). yaml: the same document as YAML.")]
    pub output: AuditOutput,
}

impl AuditArgs {
    /// The resolver's configuration: the webhook's, with no server, the audit's time budget
    /// and caches that last the pass, checking on without secrets the API refuses.
    fn config(&self, api: crate::apiserver::ApiServer) -> Result<Config, UsageError> {
        let budget = seconds("--timeout", self.timeout, 3_600.0)?;
        let concurrency = super::args::concurrency(self.concurrency)?;
        Ok(Config {
            // The server settings are never used: the audit serves nothing.
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls_cert: PathBuf::new(),
            tls_key: PathBuf::new(),
            reload_interval: std::time::Duration::from_secs(30),
            mode: Mode::Warn,
            fail_closed: false,
            budget,
            cluster_platforms: Vec::new(),
            inject: InjectOptions::default(),
            pin_digests: false,
            transient: config::Transient::Ignore,
            restart_rules_probe: None,
            table: Table::builtin().with_workloads(),
            apiserver: Some(api),
            // One pass: a Secret read once serves every workload of its namespace.
            cache: CacheConfig {
                secret_ttl: std::time::Duration::from_secs(3_600),
                ..CacheConfig::DEFAULT
            },
            shutdown_grace: std::time::Duration::ZERO,
            hosts_dir: self.registry.hosts_dir()?,
            node_runtime: self.registry.node_runtime,
            insecure: self.registry.insecure_registry.clone(),
            ca_files: crate::registry::tls::ca_files(&self.registry.ca_file),
            providers: self
                .registry
                .credential_providers(budget)?
                .map(|p| Arc::new(p.logging_failures())),
            provider_token_requests: false,
            node_credentials: list_or_default(
                &self.registry.node_credentials,
                DEFAULT_NODE_CREDENTIAL_PATTERNS,
            ),
            metered: list_or_default(&self.registry.metered_registry, DEFAULT_METERED_REGISTRIES),
            metered_get: self.registry.metered_get(),
            request_timeout: seconds("--request-timeout", self.request_timeout, 600.0)?,
            concurrency,
            refused_secrets: RefusedSecrets::CheckWithout,
        })
    }
}

/// The namespace audited (`None`: every one): `-n`, else every one with `-A`, else the
/// context's, else `default` (kubectl's `ToRawKubeConfigLoader().Namespace()`).
fn scope(flag: Option<String>, all: bool, context: Option<String>) -> Option<String> {
    match (flag, all) {
        (Some(ns), _) => Some(ns),
        (None, true) => None,
        (None, false) => Some(context.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())),
    }
}

/// Run one audit pass and print it.
pub(crate) async fn run(a: AuditArgs) -> Result<u8, CliError> {
    if let Some(ns) = &a.namespace
        && !is_dns_label(ns)
    {
        return Err(UsageError(format!(
            "--namespace {ns:?}: not a namespace name (lowercase letters, digits and '-', at most 63); use -A to audit every namespace"
        ))
        .into());
    }
    let target = a.api.target().map_err(|e| UsageError(e.to_string()))?;
    let Some(crate::apiserver::kubeconfig::Loaded {
        api,
        namespace: context_namespace,
    }) = target
    else {
        return Err(UsageError(a.api.no_api_message()).into());
    };
    if let Some(line) = api.source.announce() {
        eprintln!("pullcheck: {line}");
    }
    let refused = super::watch::refused_hint(&api);
    let client = crate::apiserver::ApiClient::new(&api).map_err(|e| UsageError(e.to_string()))?;
    let config = a.config(api)?;
    let budget = config.budget;
    // The CLI's guard: the user runs this on their own machine, as `scan`.
    let state = Arc::new(
        crate::webhook::handler::WebhookState::new(config, Guard::new(GuardPolicy::default()))
            .map_err(|e| UsageError(e.to_string()))?,
    );
    let namespace = scope(a.namespace.clone(), a.all_namespaces, context_namespace);
    let shown = Shown::new(a.progress);
    let pass = Pass {
        state,
        client: &client,
        namespace: namespace.as_deref(),
        budget,
        now: jiff::Timestamp::now(),
    };
    let result = crate::audit::run(pass, &|p| shown.show(p)).await;
    shown.finish();
    let (report, notes) = match result {
        Ok(r) => r,
        Err(e) => {
            let hint = if e.source.status() == Some(401) {
                refused
            } else {
                String::new()
            };
            let line = format!("{e}{hint}");
            eprintln!("pullcheck: {line}");
            let code = super::watch::api_failure_code(&e.source);
            match a.output {
                AuditOutput::Json => {
                    return super::print_result(&super::json_error(code, &line), code);
                }
                AuditOutput::Yaml => {
                    let doc: serde_json::Value =
                        serde_json::from_str(&super::json_error(code, &line))
                            .map_err(|e| CliError::Internal(e.to_string()))?;
                    let text = crate::k8s::yaml::to_yaml(&doc)
                        .map_err(|e| CliError::Internal(e.to_string()))?;
                    return super::print_result(&text, code);
                }
                AuditOutput::Text => return Ok(code),
            }
        }
    };
    for n in &notes {
        eprintln!("pullcheck: {n}");
    }
    let text = match a.output {
        AuditOutput::Json => crate::audit::report::json(&report)?,
        AuditOutput::Yaml => crate::audit::report::yaml(&report).map_err(CliError::Internal)?,
        AuditOutput::Text => crate::audit::report::text(&report),
    };
    super::print_result(&text, report.exit_code)
}

/// The progress display: a bar on a terminal, plain lines with `--progress` elsewhere, or
/// nothing.
enum Shown {
    Bar(indicatif::ProgressBar),
    Lines(std::sync::atomic::AtomicUsize),
    Nothing,
}

impl Shown {
    fn new(asked: bool) -> Shown {
        if std::io::stderr().is_terminal() {
            let p = indicatif::ProgressBar::new(0);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} images checked {msg}")
            {
                p.set_style(style);
            }
            Shown::Bar(p)
        } else if asked {
            Shown::Lines(std::sync::atomic::AtomicUsize::new(0))
        } else {
            Shown::Nothing
        }
    }

    fn show(&self, p: Progress) {
        match (self, p) {
            (Shown::Nothing, _) => {}
            (
                Shown::Bar(bar),
                Progress::Found {
                    workloads,
                    templates,
                    images,
                },
            ) => bar.set_message(found(workloads, templates, images)),
            (Shown::Bar(bar), Progress::Checked { done, total }) => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            (
                Shown::Lines(_),
                Progress::Found {
                    workloads,
                    templates,
                    images,
                },
            ) => eprintln!("pullcheck: found {}", found(workloads, templates, images)),
            // At most one line per tenth, and the last.
            (Shown::Lines(last), Progress::Checked { done, total }) => {
                let tenth = done * 10 / total.max(1);
                if last.fetch_max(tenth + 1, std::sync::atomic::Ordering::Relaxed) <= tenth {
                    eprintln!("pullcheck: {done}/{total} images checked");
                }
            }
        }
    }

    fn finish(&self) {
        if let Shown::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

fn found(workloads: usize, templates: usize, images: usize) -> String {
    use crate::report::count;
    format!(
        "{}, {}, {}",
        count(workloads, "workload"),
        count(templates, "pod template"),
        count(images, "distinct image")
    )
}

#[cfg(test)]
mod tests {
    use super::scope;

    #[test]
    fn the_namespace_is_the_flag_then_all_then_the_contexts_then_default() {
        let ctx = || Some("team-a".to_string());
        assert_eq!(scope(Some("b".into()), false, ctx()), Some("b".to_string()));
        assert_eq!(scope(None, true, ctx()), None);
        assert_eq!(scope(None, false, ctx()), Some("team-a".to_string()));
        assert_eq!(scope(None, false, None), Some("default".to_string()));
    }
}
