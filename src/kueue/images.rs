//! [`Images`] as the webhook resolves them: the same engine, verdict cache (keyed by
//! credential), pull secrets, credential providers and mirrors
//! ([`crate::webhook::handler::resolve_pod_templates`]), with its own time budget: no API
//! server waits on the answer, so it is [`BUDGET`], not the admission webhook's seconds.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::controller::Images;
use super::{Found, Resolved};
use crate::platform::Platform;
use crate::webhook::handler::{WebhookState, resolve_pod_templates};
use crate::webhook::review::{Checked, Unchecked};

/// The time one Workload's images may take, pull secrets included. A registry slower
/// than this is answered Retry.
pub(crate) const BUDGET: Duration = Duration::from_secs(30);

/// The webhook's resolver.
#[derive(Clone)]
pub(crate) struct WebhookImages {
    state: Arc<WebhookState>,
}

impl WebhookImages {
    /// Resolve with `state`'s engine, caches and cluster access.
    pub(crate) fn new(state: Arc<WebhookState>) -> WebhookImages {
        WebhookImages { state }
    }
}

impl Images for WebhookImages {
    async fn resolve(
        &self,
        namespace: &str,
        templates: &[(&Value, &str)],
        platforms: &[Vec<Platform>],
    ) -> Vec<Resolved> {
        let (checks, notes) =
            resolve_pod_templates(&self.state, namespace, templates, platforms, BUDGET).await;
        // A pull secret that can't be read or decoded (the notes) leaves every image
        // unproven, pullable ones too: the kubelet may fail the pull on that secret. Its
        // line is one more resolved entry, weighed as unreadable credentials.
        let unreadable = notes.into_iter().map(|n| Resolved {
            line: n,
            found: Found::Credentials,
        });
        checks
            .iter()
            .map(|c| Resolved {
                line: c.line(),
                found: match &c.result {
                    Checked::Done(o) => Found::Verdict(o.verdict),
                    Checked::NotVerified(Unchecked::NoTime, _) => Found::NoTime,
                    Checked::NotVerified(Unchecked::Credentials, _) => Found::Credentials,
                    // Only a TrainJob's admission gives it, never a Kueue pod set; were it
                    // given, the runtime may be readable next time: ask again.
                    Checked::NotVerified(Unchecked::Runtime, _) => Found::NoTime,
                },
            })
            .chain(unreadable)
            .collect()
    }

    fn default_platforms(&self, template: &Value) -> Vec<Platform> {
        crate::webhook::platforms::template_platforms(
            template,
            &self.state.config.cluster_platforms,
        )
    }
}
