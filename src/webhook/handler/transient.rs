//! `--transient` as this cluster can carry it out, decided once per process: the state
//! machine behind [`transient_action`] (unknown → decided, or failed → count for
//! [`TRANSIENT_RETRY`] → asked again).

use std::time::{Duration, Instant};

use super::WebhookState;
use crate::k8s::RestartAsk;
use crate::k8s::inject::TransientAction;
use crate::webhook::config::Transient;
use crate::webhook::restart_rules;

/// How long after a failed decision the reviews write count without asking the API again
/// (a hung API server would otherwise cost every review its request timeout).
const TRANSIENT_RETRY: Duration = Duration::from_secs(30);

/// `--transient` as the cluster can carry it out ([`restart_rules`]): decided on
/// the first review that needs it and kept; an API error falls back to count, logged once,
/// and the API is asked again after [`TRANSIENT_RETRY`].
pub(super) async fn transient_action(state: &WebhookState, deadline: Instant) -> TransientAction {
    let cfg = &state.config;
    let ask = match cfg.transient {
        Transient::Count => return TransientAction::Count,
        Transient::Ignore => return TransientAction::Ignore,
        Transient::Auto => RestartAsk::Auto,
        Transient::Restart => RestartAsk::ByName,
    };
    if let Some(action) = state.transient.get() {
        return *action;
    }
    let failed_at = *state
        .transient_failed
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if failed_at.is_some_and(|t| t.elapsed() < TRANSIENT_RETRY) {
        return TransientAction::Count;
    }
    let resolved = state
        .transient
        .get_or_try_init(|| async {
            let r = restart_rules::resolve(
                state.cluster.as_deref(),
                &cfg.inject,
                ask,
                cfg.restart_rules_probe.as_ref(),
                deadline,
            )
            .await?;
            match r.loudness {
                restart_rules::Loudness::Info => tracing::info!("{}", r.message),
                restart_rules::Loudness::Warn => tracing::warn!("{}", r.message),
            }
            Ok::<_, restart_rules::ProbeError>(r.action)
        })
        .await;
    match resolved {
        Ok(action) => *action,
        Err(e) => {
            let flag = ask.flag();
            tracing::warn!(
                "container restart rules unknown ({e}): --transient {flag} writes count until the API server answers (asked again in {}s)",
                TRANSIENT_RETRY.as_secs()
            );
            *state
                .transient_failed
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            TransientAction::Count
        }
    }
}
