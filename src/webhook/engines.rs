//! A pool of engines, one per (pull-secret set, platform set).
//!
//! [`Engine`] takes its keychain and platform policy from its [`Plan`] and owns its
//! [`Registry`], while the webhook's credentials come per namespace and its platforms per
//! pod template. Rather than change the engine, the webhook keeps one engine for each
//! distinct keyring identity and platform set, bounded and dropped when idle. Every engine
//! shares one [`Guard`], so the SSRF rules and what the guard learned about hosts are common.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moka::future::Cache;

use super::config::Config;
use super::metrics::Metrics;
use crate::credentials::{Keychain, Keyring};
use crate::engine::{Engine, Plan, PlatformPolicy};
use crate::platform::Platform;
use crate::registry::client::Registry;
use crate::registry::guard::Guard;

/// Engines kept at most.
const MAX_ENGINES: u64 = 256;
/// An engine unused this long is dropped (its token cache and connections with it).
const IDLE: Duration = Duration::from_secs(900);

/// The platform set as a stable string: `linux/amd64,linux/arm64`.
pub fn platforms_key(platforms: &[Platform]) -> String {
    let mut names: Vec<String> = platforms.iter().map(|p| p.to_string()).collect();
    names.sort();
    names.dedup();
    names.join(",")
}

/// Shared engines.
pub struct EnginePool {
    config: Arc<Config>,
    guard: Guard,
    engines: Cache<String, Arc<Engine>>,
}

impl EnginePool {
    /// A pool whose engines use `config`'s registry settings and `guard`. Checks the CA
    /// files once, so a bad `--ca-file` fails at startup rather than per request.
    pub fn new(
        config: Arc<Config>,
        guard: Guard,
        metrics: Arc<Metrics>,
    ) -> Result<EnginePool, String> {
        Registry::new(
            config.ca_files.clone(),
            guard.clone(),
            config.request_timeout,
        )
        .map_err(|e| e.to_string())?;
        let engines = Cache::builder()
            .name("pullcheck-engines")
            .max_capacity(MAX_ENGINES)
            .time_to_idle(IDLE)
            .eviction_listener(move |_key, engine: Arc<Engine>, _cause| {
                metrics
                    .retired_http_requests
                    .fetch_add(engine.registry().requests_sent(), Ordering::Relaxed);
            })
            .build();
        Ok(EnginePool {
            config,
            guard,
            engines,
        })
    }

    /// The engine for a keyring (`identity` names its contents) and platform set.
    pub async fn engine(
        &self,
        identity: &str,
        keyring: &Keyring,
        platforms: &[Platform],
    ) -> Result<Arc<Engine>, String> {
        let key = format!("{identity}|{}", platforms_key(platforms));
        self.engines
            .try_get_with(key, async {
                let c = &self.config;
                let registry =
                    Registry::new(c.ca_files.clone(), self.guard.clone(), c.request_timeout)
                        .map_err(|e| e.to_string())?;
                let plan = Plan {
                    keychain: Keychain::new(keyring.clone(), None),
                    hosts_dir: c.hosts_dir.clone(),
                    insecure: c.insecure.clone(),
                    platform: PlatformPolicy::AnyOf(platforms.to_vec()),
                    metered: c.metered.clone(),
                    verify_platform_on_metered: c.verify_platform_on_metered,
                    node_credentials: c.node_credentials.clone(),
                    concurrency: c.concurrency,
                    timeout: c.budget,
                };
                Ok::<_, String>(Arc::new(Engine::new(plan, registry)))
            })
            .await
            .map_err(|e| (*e).clone())
    }

    /// Registry requests sent by the engines in the pool now.
    pub fn live_requests(&self) -> u64 {
        self.engines
            .iter()
            .map(|(_, e)| e.registry().requests_sent())
            .sum()
    }
}
