//! `pullcheck watch`: flags → [`crate::watch::Settings`], then run the controller (or, with
//! `--once`, print what it would do and exit).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::args::{ApiServerArgs, Output};
use super::plan::seconds;
use super::{CliError, UsageError};
use crate::watch::Settings;

/// Arguments of `pullcheck watch`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WatchArgs {
    #[command(flatten)]
    pub api: ApiServerArgs,

    /// Watch only this namespace (default: all namespaces).
    #[arg(
        long,
        short = 'n',
        value_name = "NAMESPACE",
        help_heading = "Scope",
        long_help = "Watch the pods of this namespace only (a Role is then enough). Default: \
every namespace (a ClusterRole)."
    )]
    pub namespace: Option<String>,

    /// Act only in namespaces with this label (KEY=VALUE).
    #[arg(
        long = "namespace-label",
        value_name = "KEY=VALUE",
        help_heading = "Scope",
        long_help = "Only pods in namespaces carrying this label are looked at, e.g. \
pullcheck.io/enabled=true (the webhook's opt-in label). Pods annotated pullcheck.io/skip: \"true\" \
are always left alone."
    )]
    pub namespace_label: Option<String>,

    /// Report what would be done; change nothing.
    #[arg(
        long = "dry-run",
        help_heading = "Policy",
        long_help = "Log and count (metric pullcheck_watch_actions_total{action=\"dry_run\"}) each \
pod that would be marked and deleted; write nothing to the API, not even Events."
    )]
    pub dry_run: bool,

    /// Act on transient pull failures after this many seconds (default: never).
    #[arg(
        long = "transient-grace",
        value_name = "SECONDS",
        help_heading = "Policy",
        long_help = "A transient failure (registry down, 5xx, 429, DNS, TLS) is only reported \
by default: the kubelet keeps retrying and the image may come back. With this, a pod still \
failing that way this long after the watch first saw it is acted on too."
    )]
    pub transient_grace: Option<f64>,

    /// At most this many pods deleted per minute.
    #[arg(
        long = "max-deletions-per-minute",
        value_name = "N",
        default_value_t = 30,
        help_heading = "Policy",
        long_help = "A token bucket over marking and deleting pods: a burst of N, refilled at N \
per minute. Pods over the limit wait (metric action=\"rate_limited\")."
    )]
    pub max_deletions_per_minute: u32,

    /// containerd certs.d root, as on the nodes (which registries have mirrors).
    #[arg(
        long = "hosts-dir",
        value_name = "DIR",
        help_heading = "Policy",
        long_help = "The nodes' containerd certs.d root. containerd reports the highest-priority \
error across mirror and upstream, so a mirror's 404 can hide an unreachable upstream: for \
registries with mirrors here, not_found, denied and unauthenticated are only reported."
    )]
    pub hosts_dir: Option<PathBuf>,

    /// Address for /healthz, /readyz and /metrics (plain HTTP).
    #[arg(
        long,
        value_name = "ADDR:PORT",
        default_value = "0.0.0.0:8080",
        help_heading = "Server",
        long_help = "Where /healthz, /readyz (ready once the first pod list succeeded) and \
/metrics (OpenMetrics) are served, plain HTTP."
    )]
    pub listen: SocketAddr,

    /// Print what the watch would do now, and exit.
    #[arg(
        long,
        help_heading = "Output",
        long_help = "List the Pending pods once, apply the decision table to each failing pull \
and print the result (exit 0); nothing is changed. A one-shot report of a cluster."
    )]
    pub once: bool,

    /// Output format of --once, on stdout.
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT", default_value_t = Output::Text, help_heading = "Output",
        long_help = "text: a table. json: {\"schema_version\":1,\"pods\":[…]} (docs/watch.md).")]
    pub output: Output,
}

impl WatchArgs {
    fn settings(&self) -> Result<Settings, UsageError> {
        let namespace_label = match &self.namespace_label {
            None => None,
            Some(l) => match l.split_once('=') {
                Some((k, v)) if !k.is_empty() => Some((k.to_string(), v.to_string())),
                _ => {
                    return Err(UsageError(format!(
                        "--namespace-label {l}: must be KEY=VALUE, e.g. pullcheck.io/enabled=true"
                    )));
                }
            },
        };
        if self.max_deletions_per_minute == 0 {
            return Err(UsageError(
                "--max-deletions-per-minute 0: must be at least 1 (use --dry-run to act on nothing)"
                    .into(),
            ));
        }
        if let Some(d) = &self.hosts_dir
            && !d.is_dir()
        {
            return Err(UsageError(format!(
                "--hosts-dir {}: not a directory; pass the nodes' containerd certs.d root",
                d.display()
            )));
        }
        Ok(Settings {
            dry_run: self.dry_run,
            transient_grace: self
                .transient_grace
                .map(|s| seconds("--transient-grace", s, 86_400.0))
                .transpose()?,
            deletions_per_minute: self.max_deletions_per_minute,
            namespace_label,
            hosts_dir: self.hosts_dir.clone(),
        })
    }
}

/// Run the watch until SIGTERM, or once.
pub(crate) async fn run(a: WatchArgs) -> Result<u8, CliError> {
    let settings = a.settings()?;
    let Some(api) = a.api.apiserver() else {
        return Err(UsageError(
            "no Kubernetes API: run in a cluster (KUBERNETES_SERVICE_HOST and a ServiceAccount token) or pass --apiserver URL"
                .into(),
        )
        .into());
    };
    let client = crate::apiserver::ApiClient::new(&api).map_err(|e| UsageError(e.to_string()))?;
    let api = crate::watch::api::WatchApi::new(client, a.namespace.clone());
    if a.once {
        let report = crate::watch::once(&api, &settings)
            .await
            .map_err(|e| UsageError(e.to_string()))?;
        let text = match a.output {
            Output::Json => crate::watch::report_json(&report),
            Output::Text => crate::watch::report_text(&report),
        };
        super::print(&text)?;
        return Ok(crate::verdict::code::OK);
    }
    crate::watch::serve(api, settings, a.listen)
        .await
        .map_err(|e| UsageError(format!("--listen {}: {e}", a.listen)))?;
    Ok(crate::verdict::code::OK)
}
