//! `pullcheck watch`: flags → [`crate::watch::Settings`], then run the controller (or, with
//! `--once`, print what it would do and exit).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::args::{ApiServerArgs, Output, Unnamed, is_dns_label, namespace_scope};
use super::plan::seconds;
use super::{CliError, UsageError};
use crate::watch::Settings;

/// Arguments of `pullcheck watch`.
#[derive(Debug, Clone, Args)]
pub(crate) struct WatchArgs {
    #[command(flatten)]
    pub api: ApiServerArgs,

    /// Watch only this namespace (default: the kubeconfig context's, else `default`).
    #[arg(
        long,
        short = 'n',
        value_name = "NAMESPACE",
        help_heading = "Scope",
        long_help = "Watch the pods of this namespace only (a Role is then enough). Default, \
as in kubectl: the kubeconfig context's namespace, else `default`. In-cluster and with \
--apiserver (the controller the chart runs, with no context) every namespace (a ClusterRole)."
    )]
    pub namespace: Option<String>,

    /// Every namespace, also when the kubeconfig context names one.
    #[arg(
        long = "all-namespaces",
        short = 'A',
        help_heading = "Scope",
        long_help = "Watch every namespace, also when the kubeconfig context names one (a \
ClusterRole that lists pods everywhere is then needed). As in kubectl, -n beside it is ignored."
    )]
    pub all_namespaces: bool,

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
and print the result (exit 0, or with --exit-code non-zero when it would act); nothing is \
changed. A one-shot report of a cluster."
    )]
    pub once: bool,

    /// With --once: exit non-zero when the watch would act on a pod.
    #[arg(
        long = "exit-code",
        requires = "once",
        help_heading = "Output",
        long_help = "With --once, exit with the code check gives the verdicts of the pods the \
watch would mark and delete: the lowest of 11-14 among them (20 for a transient failure past \
--transient-grace), 0 when it would act on none. Pods it would only report (no Job owner, \
transient within the grace) don't count. Like git diff --exit-code, for scripts."
    )]
    pub exit_code: bool,

    /// Output format of --once, on stdout.
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT", default_value_t = Output::Text, help_heading = "Output",
        long_help = "text: a table. json: {\"schema_version\":1,\"exit_code\":N,\"pods\":[…]} (schema in docs/watch.md).")]
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
        if let Some(ns) = &self.namespace
            && !is_dns_label(ns)
        {
            return Err(UsageError(format!(
                "--namespace {ns:?}: not a namespace name (lowercase letters, digits and '-', at most 63); use -A to watch every namespace"
            )));
        }
        if let Some((k, v)) = &namespace_label
            && (!is_label_key(k) || !is_label_value(v))
        {
            return Err(UsageError(format!(
                "--namespace-label {}: not a label KEY=VALUE (a qualified name and a value of at most 63 of [A-Za-z0-9._-]), e.g. pullcheck.io/enabled=true",
                self.namespace_label.as_deref().unwrap_or_default()
            )));
        }
        if let Some(d) = &self.hosts_dir {
            if !d.is_dir() {
                return Err(UsageError(format!(
                    "--hosts-dir {}: not a directory; pass the nodes' containerd certs.d root",
                    d.display()
                )));
            }
            // Every hosts.toml must read now: a broken one would silently mean "no mirrors".
            for entry in std::fs::read_dir(d)
                .map_err(|e| UsageError(format!("--hosts-dir {}: {e}", d.display())))?
                .flatten()
            {
                let host = entry.file_name().to_string_lossy().into_owned();
                if entry.path().join("hosts.toml").is_file() {
                    crate::registry::hosts::endpoints(Some(d), &host, &[])
                        .map_err(|e| UsageError(e.to_string()))?;
                }
            }
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

fn is_label_value(v: &str) -> bool {
    v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && (v.is_empty()
            || (v.as_bytes()[0].is_ascii_alphanumeric()
                && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric()))
}

fn is_label_key(k: &str) -> bool {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    !name.is_empty()
        && is_label_value(name)
        && prefix.is_none_or(|p| !p.is_empty() && p.len() <= 253 && p.split('.').all(is_dns_label))
}

/// What a 401 tells the user to fix, by where the token came from.
pub(super) fn refused_hint(api: &crate::apiserver::ApiServer) -> String {
    use crate::apiserver::{Credentials, Source};
    match (&api.credentials, &api.source) {
        (Credentials::Exec(p), _) => format!(
            "; the token of exec plugin {} ({}) was refused, also after running it again; check what it prints and the user it logs in as",
            p.command(),
            p.origin()
        ),
        (Credentials::TokenFile(f), Source::Flags) => format!(
            "; the token in --apiserver-token-file {} was refused",
            f.display()
        ),
        (Credentials::TokenFile(f), source) => {
            format!("; the token in {} ({source}) was refused", f.display())
        }
        (Credentials::Token(_), source) => format!("; the token of {source} was refused"),
        (Credentials::None, Source::Flags) => "; pass --apiserver-token-file".into(),
        (Credentials::None, source) => format!(
            "; {source} gives no token{}",
            if api.identity.is_some() {
                " and its client certificate was refused"
            } else {
                ""
            }
        ),
    }
}

/// One line for an API failure of `--once`, with the fix where the cause is known
/// (`refused`: [`refused_hint`] of the API server used).
fn api_hint(e: &crate::watch::api::ApiError, refused: &str) -> String {
    let text = e.to_string();
    let hint = match e.status() {
        Some(401) => refused.to_string(),
        Some(403) => "; the token lacks a permission listed in docs/watch.md (RBAC)".into(),
        // A TLS failure's message already names the flag that holds the CA.
        _ => String::new(),
    };
    format!("{text}{hint}")
}

/// The exit code of a one-shot command (`watch --once`, `audit`) whose API call failed: a
/// refused token, a missing permission or a CA that doesn't sign the API server's
/// certificate is the caller's to fix (usage); an API server that doesn't answer, or
/// answers "later" (429, 5xx), may answer later (transient).
pub(super) fn api_failure_code(e: &crate::apiserver::ApiError) -> u8 {
    match e {
        crate::apiserver::ApiError::Transport {
            failure: crate::registry::error::Failure::Tls(_),
            ..
        } => crate::verdict::code::USAGE,
        crate::apiserver::ApiError::Status { .. }
        | crate::apiserver::ApiError::Credentials { .. }
            if !e.is_retryable() =>
        {
            crate::verdict::code::USAGE
        }
        _ => crate::verdict::Verdict::Transient.exit_code(),
    }
}

/// Run the watch until SIGTERM, or once.
pub(crate) async fn run(a: WatchArgs) -> Result<u8, CliError> {
    let settings = a.settings()?;
    let target = a.api.target().map_err(|e| UsageError(e.to_string()))?;
    let Some(crate::apiserver::kubeconfig::Loaded {
        api,
        namespace: context_namespace,
    }) = target
    else {
        return Err(UsageError(a.api.no_api_message()).into());
    };
    // Which source, once, on stderr (stdout is --once's report).
    if let Some(line) = api.source.announce() {
        eprintln!("pullcheck: {line}");
    }
    if api.source == crate::apiserver::Source::Flags
        && let Some(f) = api.credentials.token_file()
        && crate::files::read_capped_text(f, crate::apiserver::MAX_TOKEN_FILE_BYTES)
            .is_ok_and(|t| t.trim().is_empty())
    {
        return Err(UsageError(format!(
            "--apiserver-token-file {}: empty; put the ServiceAccount token in it (kubectl create token NAME)",
            f.display()
        ))
        .into());
    }
    let refused = refused_hint(&api);
    let client = crate::apiserver::ApiClient::new(&api).map_err(|e| UsageError(e.to_string()))?;
    // A kubeconfig means a user at kubectl; otherwise the controller, whose cluster is its scope.
    let unnamed = match api.source {
        crate::apiserver::Source::Kubeconfig { .. } => Unnamed::Default,
        crate::apiserver::Source::Flags | crate::apiserver::Source::InCluster => Unnamed::All,
    };
    let namespace = namespace_scope(
        a.namespace.clone(),
        a.all_namespaces,
        context_namespace,
        unnamed,
    );
    let api = crate::watch::api::WatchApi::new(client, namespace);
    if a.once {
        let report = match crate::watch::once(&api, &settings).await {
            Ok(r) => r,
            Err(e) => {
                let line = api_hint(&e, &refused);
                eprintln!("pullcheck: {line}");
                let code = api_failure_code(&e);
                if a.output == Output::Json {
                    return super::print_result(&super::json_error(code, &line), code);
                }
                return Ok(code);
            }
        };
        let code = if a.exit_code {
            crate::watch::once_exit_code(&report)
        } else {
            crate::verdict::code::OK
        };
        let text = match a.output {
            Output::Json => crate::watch::report_json(&report, code)?,
            Output::Text => crate::watch::report_text(&report),
        };
        return super::print_result(&text, code);
    }
    crate::watch::serve(api, settings, a.listen)
        .await
        .map_err(|e| UsageError(format!("--listen {}: {e}", a.listen)))?;
    Ok(crate::verdict::code::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_checked_like_the_api_server_does() {
        for ok in ["team-a", "a", "ns1"] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "Bad_NS", "a/../../x", "-a", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        for ok in ["pullcheck.io/enabled", "team", "a.b-c_d"] {
            assert!(is_label_key(ok), "{ok}");
        }
        for bad in ["a b", "", "/x", "x/", &"k".repeat(64)] {
            assert!(!is_label_key(bad), "{bad}");
        }
        assert!(is_label_value("") && is_label_value("true") && !is_label_value("v\u{1}"));
        assert!(!is_label_value("b=c"));
    }
}
