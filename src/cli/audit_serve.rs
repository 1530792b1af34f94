//! `pullcheck audit --serve`: the exporter's flags ([`ServeArgs`], flattened into
//! `pullcheck audit`'s) → [`crate::audit::serve::Settings`], then serve until SIGTERM.
//! The loop and the metrics are in `src/audit/serve.rs` and `src/audit/metrics.rs`.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::{Args, ValueEnum};

use super::{CliError, UsageError};
use crate::apiserver::ApiClient;
use crate::audit::metrics::{DEFAULT_MAX_SERIES, MetricNames};
use crate::audit::serve::{NewState, Settings};
use crate::credentials::provider::duration::parse_go_duration;
use crate::registry::guard::{Guard, GuardPolicy};
use crate::webhook::config::Config;
use crate::webhook::handler::WebhookState;

/// The shortest and the longest `--interval`, in seconds.
const INTERVAL_RANGE: (f64, f64) = (1.0, 86_400.0);

/// `--metric-names`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MetricNamesArg {
    /// pullcheck's own names only.
    Pullcheck,
    /// pullcheck's own and deckhouse k8s-image-availability-exporter's.
    Deckhouse,
}

/// The exporter's flags.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// Run as an exporter: a pass now and every --interval, serving /metrics.
    #[arg(
        long,
        help_heading = "Exporter",
        long_help = "Run as a Prometheus exporter: one audit pass at start, then one every \
--interval, serving /metrics, /healthz and /readyz (ready once the first pass ended) until \
SIGTERM. Nothing is printed on stdout; -o and --progress don't apply. docs/audit.md, \"Exporter\"."
    )]
    pub serve: bool,

    /// Address of /metrics, /healthz and /readyz (plain HTTP).
    #[arg(
        long,
        value_name = "ADDR:PORT",
        default_value = "0.0.0.0:8080",
        requires = "serve",
        help_heading = "Exporter",
        long_help = "Where /metrics (OpenMetrics), /healthz and /readyz are served, plain HTTP."
    )]
    pub listen: SocketAddr,

    /// Time from the start of one pass to the next (Go duration: 90s, 10m, 1h).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10m",
        requires = "serve",
        help_heading = "Exporter",
        long_help = "From the start of one pass to the start of the next, in Go's duration \
syntax (90s, 10m, 1h30m), 1s to 24h. A pass that has not ended within one interval is \
abandoned and counted (outcome timed_out); passes never overlap."
    )]
    pub interval: String,

    /// Also export deckhouse k8s-image-availability-exporter's metric names.
    #[arg(
        long = "metric-names",
        value_enum,
        value_name = "NAMES",
        default_value_t = MetricNamesArg::Pullcheck,
        requires = "serve",
        help_heading = "Exporter",
        long_help = "pullcheck: pullcheck_audit_* only. deckhouse: also the per-image gauges \
k8s_image_availability_exporter_{available,absent,…} and …_completed_rechecks_total, so that \
dashboards and alerts written for that exporter keep working (the mapping: docs/audit.md)."
    )]
    pub metric_names: MetricNamesArg,

    /// Per-image series exported at most (failing images first).
    #[arg(
        long = "max-series",
        value_name = "N",
        default_value_t = DEFAULT_MAX_SERIES,
        requires = "serve",
        help_heading = "Exporter",
        long_help = "At most N per-image rows are exported (failing ones first, then \
pullable ones); the rest are counted in pullcheck_audit_image_series_dropped. The counts by \
verdict always cover every image."
    )]
    pub max_series: usize,

    /// Registries on loopback addresses may be contacted (tests, kind).
    #[arg(
        long = "allow-loopback-registries",
        requires = "serve",
        help_heading = "Exporter",
        long_help = "The exporter reads images any tenant wrote, so it refuses registries on \
loopback, link-local and metadata addresses as the webhook does; this allows loopback ones \
(tests, kind clusters)."
    )]
    pub allow_loopback_registries: bool,
}

impl ServeArgs {
    /// The loop's settings; a bad flag is a usage error naming it.
    fn settings(
        &self,
        namespace: Option<String>,
        budget: std::time::Duration,
    ) -> Result<Settings, UsageError> {
        let (min, max) = INTERVAL_RANGE;
        let interval = parse_go_duration(&self.interval)
            .filter(|s| (min..=max).contains(s))
            .ok_or_else(|| {
                UsageError(format!(
                    "--interval {:?}: not a duration from 1s to 24h (Go syntax: 90s, 10m, 1h30m)",
                    self.interval
                ))
            })?;
        if self.max_series == 0 {
            return Err(UsageError(
                "--max-series 0: must be at least 1 (it bounds the per-image series)".into(),
            ));
        }
        Ok(Settings {
            listen: self.listen,
            interval: std::time::Duration::from_secs_f64(interval),
            names: match self.metric_names {
                MetricNamesArg::Pullcheck => MetricNames::Pullcheck,
                MetricNamesArg::Deckhouse => MetricNames::Deckhouse,
            },
            max_series: self.max_series,
            namespace,
            budget,
        })
    }

    /// The webhook's address guard: the images are any tenant's.
    fn guard_policy(&self) -> GuardPolicy {
        GuardPolicy::webhook(
            self.allow_loopback_registries,
            Vec::new(),
            Vec::new(),
            std::env::var("KUBERNETES_SERVICE_HOST").ok().as_deref(),
        )
    }
}

/// Serve until SIGTERM or SIGINT (exit 0). Bad flags, a CA file that can't be read or an
/// address that can't be bound are usage errors (2), said before serving.
/// `config` is the one-pass audit's resolver configuration (`pullcheck audit`'s flags).
pub(super) async fn run(
    serve: &ServeArgs,
    document: bool,
    config: Config,
    client: ApiClient,
    namespace: Option<String>,
) -> Result<u8, CliError> {
    if document {
        return Err(UsageError(
            "-o json|yaml: --serve prints no document (its results are on /metrics); drop -o"
                .into(),
        )
        .into());
    }
    let settings = serve.settings(namespace, config.budget)?;
    let policy = serve.guard_policy();
    let new_state: NewState = Box::new(move || {
        WebhookState::new(config.clone(), Guard::new(policy.clone()))
            .map(Arc::new)
            .map_err(|e| e.to_string())
    });
    // What would fail every pass fails now, once, with the usage code.
    new_state().map_err(UsageError)?;
    let listen = settings.listen;
    crate::audit::serve::serve(client, settings, new_state)
        .await
        .map_err(|e| UsageError(format!("--listen {listen}: {e}")))?;
    Ok(super::code::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn settings(args: &[&str]) -> Result<Settings, String> {
        let mut all = vec!["pullcheck", "--serve"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all)
            .map_err(|e| e.to_string())?
            .serve
            .settings(None, std::time::Duration::from_secs(60))
            .map_err(|e| e.0)
    }

    #[test]
    fn the_interval_is_a_go_duration_from_one_second_to_a_day() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.interval, std::time::Duration::from_secs(600));
        assert_eq!(s.names, MetricNames::Pullcheck);
        assert_eq!(s.max_series, DEFAULT_MAX_SERIES);
        assert_eq!(s.listen, "0.0.0.0:8080".parse::<SocketAddr>().unwrap());
        assert_eq!(
            settings(&["--interval", "1h30m"]).unwrap().interval,
            std::time::Duration::from_secs(5_400)
        );
        for bad in ["10x", "10 minutes", "500ms", "25h", "-1m"] {
            let flag = format!("--interval={bad}");
            assert_eq!(
                settings(&[&flag]).err(),
                Some(format!(
                    "--interval {bad:?}: not a duration from 1s to 24h (Go syntax: 90s, 10m, 1h30m)"
                )),
                "{bad}"
            );
        }
    }

    #[test]
    fn max_series_zero_and_deckhouse_names() {
        assert_eq!(
            settings(&["--max-series", "0"]).err(),
            Some("--max-series 0: must be at least 1 (it bounds the per-image series)".into())
        );
        assert_eq!(
            settings(&["--metric-names", "deckhouse"]).unwrap().names,
            MetricNames::Deckhouse
        );
    }
}
