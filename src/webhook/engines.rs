//! The webhook's one engine: built once from the configuration, shared by every admission.
//!
//! Credentials (per namespace) and platforms (per pod template) are passed per call with
//! [`Engine::check_one_with`]; the transport — its connection pools, per-endpoint
//! challenges and the token cache keyed by credential fingerprint — is shared, so one
//! namespace's credential never answers for another's while connections are reused.

use crate::credentials::Keychain;
use crate::engine::{DeadlineOwner, Engine, Plan, PlatformPolicy, ProviderIdentity};
use crate::platform::Platform;
use crate::registry::client::Registry;
use crate::registry::guard::Guard;
use crate::registry::tls::TlsError;

use super::config::Config;

/// The platform set as a stable string: `linux/amd64,linux/arm64`.
pub(crate) fn platforms_key(platforms: &[Platform]) -> String {
    let mut names: Vec<String> = platforms.iter().map(|p| p.to_string()).collect();
    names.sort();
    names.dedup();
    names.join(",")
}

/// Build the shared engine. Checks the CA files once, so a bad `--ca-file` fails at
/// startup rather than per request.
pub(crate) fn build(config: &Config, guard: Guard) -> Result<Engine, TlsError> {
    let registry = Registry::new(config.ca_files.clone(), &[], guard, config.request_timeout)?;
    let plan = Plan {
        // Per call: see `check_one_with`.
        keychain: Keychain::empty(),
        platform: PlatformPolicy::Any,
        hosts_dir: config.hosts_dir.clone(),
        insecure: config.insecure.clone(),
        handed_over: Default::default(),
        metered: config.metered.clone(),
        metered_get: config.metered_get,
        node_credentials: config.node_credentials.clone(),
        // The webhook's cloud identity (IRSA, Workload Identity) is not the nodes'.
        provider_identity: ProviderIdentity::NotTheNodes,
        node_runtime: config.node_runtime,
        concurrency: config.concurrency,
        timeout: config.budget,
        deadline_owner: DeadlineOwner::WebhookBudget,
    };
    Ok(Engine::new(plan, registry))
}
