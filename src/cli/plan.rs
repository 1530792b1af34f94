//! Flags → [`Plan`] + [`Registry`], built once per run. Every error names the flag or file
//! and says what to do.

use std::path::PathBuf;
use std::time::Duration;

use super::UsageError;
use super::args::{ResolveArgs, concurrency};
use crate::credentials::{Keychain, UserAuth, load_pull_secrets};
use crate::engine::{
    DEFAULT_METERED_REGISTRIES, DEFAULT_NODE_CREDENTIAL_PATTERNS, DeadlineOwner, Plan,
    PlatformPolicy, ProviderIdentity,
};
use crate::platform::Platform;
use crate::registry::client::Registry;
use crate::registry::guard::{Guard, GuardPolicy};

/// A duration flag in seconds: more than 0 and at most `max`.
pub(super) fn seconds(flag: &str, v: f64, max: f64) -> Result<Duration, UsageError> {
    if v.is_finite() && v > 0.0 && v <= max {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(UsageError(format!(
            "{flag} {v}: must be more than 0 and at most {max} seconds"
        )))
    }
}

/// The platform policy from `--platform`.
pub(crate) fn platform_policy(flag: Option<&str>) -> Result<PlatformPolicy, UsageError> {
    match flag {
        Some("any") => Ok(PlatformPolicy::Any),
        Some(p) => Platform::parse_flag(p)
            .map(|p| PlatformPolicy::AnyOf(vec![p]))
            .map_err(|e| UsageError(format!("--platform {p}: {e}"))),
        None => Ok(PlatformPolicy::AnyOf(vec![Platform::host()])),
    }
}

/// A repeatable list flag: the default when not given, empty for `none`.
pub(super) fn list_or_default(given: &[String], default: &[&str]) -> Vec<String> {
    if given.iter().any(|g| g == "none") {
        vec![]
    } else if given.is_empty() {
        default.iter().map(|s| s.to_string()).collect()
    } else {
        given.to_vec()
    }
}

/// Build the keychain from pull secrets, the Docker config and the credential providers.
pub(crate) fn keychain(a: &ResolveArgs) -> Result<Keychain, UsageError> {
    let secrets = load_pull_secrets(&a.pull_secrets).map_err(|e| UsageError(e.to_string()))?;
    // An explicit --docker-config that holds no config.json is a typo, not "no credentials":
    // checking anonymously would report the user's private images as unauthenticated.
    // ($DOCKER_CONFIG and ~/.docker stay optional, as they are for docker.)
    if let Some(dir) = a.docker_config.as_deref().filter(|_| !a.no_docker_config)
        && !dir.join("config.json").exists()
    {
        let why = if dir.is_dir() {
            "it holds no config.json"
        } else {
            "no such directory"
        };
        return Err(UsageError(format!(
            "--docker-config {}: {why}; pass the directory that holds config.json (as docker's --config), or leave the flag out",
            dir.display()
        )));
    }
    let docker = if a.no_docker_config {
        None
    } else {
        UserAuth::load(a.docker_config.as_deref()).map_err(|e| UsageError(e.to_string()))?
    };
    let timeout = seconds("--timeout", a.timeout, 86_400.0)?;
    let providers = a
        .registry
        .credential_providers(timeout)?
        .map(std::sync::Arc::new);
    Ok(Keychain::new(secrets, docker).with_providers(providers, None))
}

/// CA files: `--ca-file` values, then `SSL_CERT_FILE` ([`crate::registry::tls::ca_files`]).
pub(crate) fn ca_files(a: &ResolveArgs) -> Vec<PathBuf> {
    crate::registry::tls::ca_files(&a.registry.ca_file)
}

/// The plan for a run: every flag validated, nothing contacted.
pub(crate) fn plan(a: &ResolveArgs) -> Result<Plan, UsageError> {
    let timeout = seconds("--timeout", a.timeout, 86_400.0)?;
    let concurrency = concurrency(a.concurrency)?;
    let hosts_dir = a.registry.hosts_dir()?;
    Ok(Plan {
        keychain: keychain(a)?,
        hosts_dir,
        insecure: a.registry.insecure_registry.clone(),
        handed_over: Default::default(),
        platform: platform_policy(a.platform.as_deref())?,
        metered: list_or_default(&a.registry.metered_registry, DEFAULT_METERED_REGISTRIES),
        metered_get: a.registry.metered_get(),
        node_credentials: list_or_default(
            &a.registry.node_credentials,
            DEFAULT_NODE_CREDENTIAL_PATTERNS,
        ),
        provider_identity: ProviderIdentity::Caller,
        node_runtime: a.registry.node_runtime,
        concurrency,
        timeout,
        deadline_owner: DeadlineOwner::Timeout,
    })
}

/// The plan and the transport for a run.
pub(crate) fn build(a: &ResolveArgs) -> Result<(Plan, Registry), UsageError> {
    build_handed(a, None)
}

/// [`build`] with the registry configuration the webhook handed over (`check
/// --registry-config`): its endpoints replace `--hosts-dir` and `--insecure-registry` for
/// the registries it lists, its CAs are trusted beside `--ca-file`, its metered settings
/// replace `--metered-registry` and `--metered-get`.
pub(crate) fn build_handed(
    a: &ResolveArgs,
    handed: Option<crate::engine::handover::Received>,
) -> Result<(Plan, Registry), UsageError> {
    let mut plan = plan(a)?;
    let mut ca_pems = Vec::new();
    if let Some(h) = handed {
        plan.handed_over = h.endpoints;
        if let Some(m) = h.metered {
            plan.metered = m.registries;
            plan.metered_get = m.get;
        }
        ca_pems = h.ca_bundles;
    }
    let request_timeout = seconds("--request-timeout", a.request_timeout, 86_400.0)?;
    let registry = Registry::new(
        ca_files(a),
        &ca_pems,
        Guard::new(GuardPolicy::default()),
        request_timeout,
    )
    .map_err(|e| UsageError(e.to_string()))?;
    Ok((plan, registry))
}

/// Check the `--hosts-dir` configuration every image will use before anything is sent, so
/// a broken `hosts.toml` or an unreadable `ca` is a usage error (exit 2) naming the file,
/// not a transient verdict retried like an outage.
pub(crate) fn validate_hosts(a: &ResolveArgs, images: &[String]) -> Result<(), UsageError> {
    let mut seen = std::collections::HashSet::new();
    for image in images {
        let Ok(reference) = crate::reference::Reference::parse(image) else {
            continue;
        };
        if !seen.insert(reference.domain().to_string()) {
            continue;
        }
        let endpoints = crate::registry::hosts::endpoints(
            a.registry.hosts_dir.as_deref(),
            reference.domain(),
            &a.registry.insecure_registry,
        )
        .map_err(|e| UsageError(e.to_string()))?;
        for ca in endpoints.iter().flat_map(|e| e.ca_files.iter()) {
            crate::registry::tls::load_pem(ca).map_err(|e| UsageError(e.to_string()))?;
        }
    }
    Ok(())
}
