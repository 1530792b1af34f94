//! The images of a workload's pod templates, resolved as the kubelet would pull them: each
//! template with its own pull secrets and platforms, through the verdict cache, within the
//! review's budget.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{WebhookState, answer_by, engine_deadline};
use crate::credentials::Keychain;
use crate::credentials::provider::Workload;
use crate::engine::PlatformPolicy;
use crate::k8s::templates::{Table, pod_templates, template_images};
use crate::platform::Platform;
use crate::reference::Reference;
use crate::verdict::Verdict;
use crate::webhook::cache::VerdictKey;
use crate::webhook::cluster::ProblemCause;
use crate::webhook::cluster::TemplateCredentials;
use crate::webhook::config::RefusedSecrets;
use crate::webhook::engines::platforms_key;
use crate::webhook::metrics::Cache;
use crate::webhook::platforms::template_platforms;
use crate::webhook::review::{Checked, ImageCheck, SecretAccess, Unchecked};

/// One image the kubelet would pull, waiting for a verdict; `template` indexes the pod
/// templates whose credentials and platforms apply to it.
#[derive(Debug)]
pub(super) struct ImageToResolve {
    container: String,
    /// The reference as written.
    pub(super) image: String,
    pointer: String,
    template: usize,
}

/// The pod templates of `obj` and, in document order, the images of each that the kubelet
/// would pull ([`crate::k8s::templates::ImageUse::is_pulled`]).
pub(super) fn images_to_resolve<'a>(
    obj: &'a Value,
    table: &Table,
) -> (Vec<&'a Value>, Vec<ImageToResolve>) {
    let found: Vec<(&Value, String)> = pod_templates(obj, table)
        .into_iter()
        .filter_map(|t| Some((obj.pointer(&t.pointer)?, t.pointer)))
        .collect();
    let templates: Vec<(&Value, &str)> = found.iter().map(|(t, p)| (*t, p.as_str())).collect();
    images_of(&templates)
}

/// Resolve every image of `obj` within the budget. Returns the checks (in document order)
/// and notes about credentials.
pub(super) async fn resolve(
    state: &WebhookState,
    obj: &Value,
    namespace: &str,
    started: Instant,
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let cfg = &state.config;
    let (templates, pending) = images_to_resolve(obj, &cfg.table);
    let platforms: Vec<Vec<Platform>> = templates
        .iter()
        .map(|t| template_platforms(t, &cfg.cluster_platforms))
        .collect();
    resolve_templates(
        state, namespace, &templates, &platforms, pending, started, budget,
    )
    .await
}

/// Every pulled image of these pod templates of `namespace` ([`images_of`]), each template
/// for its own platforms (`platforms[i]` for `templates[i]`; the Kueue admission check
/// gives a pod set's assigned flavor's), resolved as [`super::admit`] resolves them: the
/// template's pull secrets, the verdict cache, the budget. The checks in template order.
pub(crate) async fn resolve_pod_templates(
    state: &WebhookState,
    namespace: &str,
    templates: &[(&Value, &str)],
    platforms: &[Vec<Platform>],
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let started = Instant::now();
    let (refs, pending) = images_of(templates);
    resolve_templates(state, namespace, &refs, platforms, pending, started, budget).await
}

/// The templates and their pulled images, as [`images_to_resolve`] gives them for an
/// object's own templates: `(template, its JSON pointer)`.
pub(super) fn images_of<'a>(
    templates: &[(&'a Value, &str)],
) -> (Vec<&'a Value>, Vec<ImageToResolve>) {
    let mut images = Vec::new();
    for (index, (template, pointer)) in templates.iter().enumerate() {
        for u in template_images(template, pointer) {
            if u.is_pulled() {
                images.push(ImageToResolve {
                    container: u.container,
                    image: u.image,
                    pointer: u.pointer,
                    template: index,
                });
            }
        }
    }
    (templates.iter().map(|(t, _)| *t).collect(), images)
}

/// The images `pending` of `templates`, resolved within the budget.
pub(super) async fn resolve_templates(
    state: &WebhookState,
    namespace: &str,
    templates: &[&Value],
    platforms: &[Vec<Platform>],
    pending: Vec<ImageToResolve>,
    started: Instant,
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let cfg = &state.config;
    let by = answer_by(started, budget);
    let engine_by = engine_deadline(started, budget);
    let budget_text = format!(
        "no verdict within the webhook's {}s budget",
        budget.as_secs_f64()
    );
    let mut notes = Vec::new();
    // Credentials, one lookup per template (the API reads are cached and coalesced).
    let creds: Vec<TemplateCredentials> = match &state.cluster {
        None => templates
            .iter()
            .map(|_| TemplateCredentials::anonymous())
            .collect(),
        Some(cluster) => {
            let all = futures_util::future::join_all(
                templates
                    .iter()
                    .map(|t| cluster.credentials(namespace, t, by)),
            );
            match tokio::time::timeout_at(by.into(), all).await {
                Ok(c) => c,
                Err(_) => {
                    let checks = pending
                        .into_iter()
                        .map(|j| ImageCheck {
                            container: j.container,
                            image: j.image,
                            pointer: j.pointer,
                            result: Checked::NotVerified(
                                Unchecked::NoTime,
                                format!("pull secrets not read in time; {budget_text}"),
                            ),
                            secrets: SecretAccess::Read,
                        })
                        .collect();
                    return (checks, notes);
                }
            }
        }
    };
    for c in &creds {
        for p in unusable(c, cfg.refused_secrets) {
            if !notes.contains(p) {
                notes.push(p.clone());
            }
        }
    }
    let mut results: Vec<Option<Checked>> = vec![None; pending.len()];
    {
        let mut futures: Vec<BoxFuture<'_, (usize, Checked)>> = Vec::with_capacity(pending.len());
        for (i, j) in pending.iter().enumerate() {
            let creds = &creds[j.template];
            let platforms = &platforms[j.template];
            futures.push(Box::pin(async move {
                (
                    i,
                    check_image(state, &j.image, namespace, creds, platforms, engine_by).await,
                )
            }));
        }
        let work = futures_util::stream::iter(futures).buffer_unordered(cfg.concurrency.max(1));
        futures_util::pin_mut!(work);
        loop {
            match tokio::time::timeout_at(by.into(), work.next()).await {
                Ok(Some((i, checked))) => results[i] = Some(checked),
                Ok(None) => break,
                Err(_) => break,
            }
        }
    }
    let checks = pending
        .into_iter()
        .zip(results)
        .map(|(j, r)| {
            let result = r.unwrap_or_else(|| {
                state.metrics.budget_exhausted.inc();
                Checked::NotVerified(Unchecked::NoTime, budget_text.clone())
            });
            let refused = creds[j.template]
                .problems
                .iter()
                .any(|p| p.cause == ProblemCause::Refused);
            ImageCheck {
                container: j.container,
                image: j.image,
                pointer: j.pointer,
                result,
                secrets: if refused && cfg.refused_secrets == RefusedSecrets::CheckWithout {
                    SecretAccess::Refused
                } else {
                    SecretAccess::Read
                },
            }
        })
        .collect();
    (checks, notes)
}

/// The problem lines that leave a template's failing images unproven: every one, or with
/// [`RefusedSecrets::CheckWithout`] all but the refused reads (checked without them).
fn unusable(creds: &TemplateCredentials, refused: RefusedSecrets) -> impl Iterator<Item = &String> {
    creds
        .problems
        .iter()
        .filter(move |p| refused == RefusedSecrets::Unproven || p.cause != ProblemCause::Refused)
        .map(|p| &p.line)
}

/// The keychain the kubelet would have for a pod of this template, less the node's
/// docker config: its pull secrets, then the credential providers, run for the template's
/// ServiceAccount when token requests are enabled (`--provider-token-requests`).
fn template_keychain(
    state: &WebhookState,
    namespace: &str,
    creds: &TemplateCredentials,
) -> Keychain {
    let workload = match (&state.cluster, state.config.provider_token_requests) {
        (Some(cluster), true) => Some(Workload {
            namespace: namespace.to_string(),
            service_account: Some(creds.service_account.clone()),
            tokens: cluster.clone(),
        }),
        _ => None,
    };
    Keychain::new(creds.keyring.clone(), None)
        .with_providers(state.config.providers.clone(), workload)
}

/// Resolve one image: through the verdict cache, else the shared engine with these
/// credentials and platforms.
async fn check_image(
    state: &WebhookState,
    image: &str,
    namespace: &str,
    creds: &TemplateCredentials,
    platforms: &[Platform],
    deadline: Instant,
) -> Checked {
    let engine = &state.engine;
    let keychain = template_keychain(state, namespace, creds);
    let policy = PlatformPolicy::AnyOf(platforms.to_vec());
    let reference = match Reference::parse(image) {
        Ok(r) => r,
        // No request is made for an invalid reference: no need to cache it.
        Err(_) => {
            return Checked::Done(Box::new(
                engine
                    .check_one_with(image, deadline, &keychain, &policy)
                    .await,
            ));
        }
    };
    let credentials = keychain
        .identity(&reference.name(), reference.domain())
        .await;
    let key = VerdictKey {
        reference: reference.full(),
        credentials,
        platforms: platforms_key(platforms),
    };
    let metrics = &state.metrics;
    let (found, hit) = state
        .verdicts
        .get_or_check(key, async {
            let t = Instant::now();
            let o = engine
                .check_one_with(image, deadline, &keychain, &policy)
                .await;
            metrics.lookup(o.verdict, t.elapsed().as_secs_f64());
            if let (Some(q), Some(r)) = (&o.quota, &o.registry) {
                metrics.quota(r, q.remaining);
            }
            o
        })
        .await;
    metrics.cache(Cache::Verdict, hit);
    let found = (*found).clone();
    let unusable: Vec<&str> = unusable(creds, state.config.refused_secrets)
        .map(String::as_str)
        .collect();
    if found.verdict != Verdict::Pullable && !unusable.is_empty() {
        return Checked::NotVerified(
            Unchecked::Credentials,
            format!("{}; {}", found.detail, unusable.join("; ")),
        );
    }
    Checked::Done(Box::new(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn images_never_pulled_are_not_resolved_in_any_slot() {
        // An image volume with pullPolicy Never is no more pulled than a container with
        // imagePullPolicy Never: neither is sent to a registry.
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
            "initContainers": [{"name": "i", "image": "r.example/init:v1", "imagePullPolicy": "Never"}],
            "containers": [{"name": "c", "image": "r.example/app:v1"}],
            "volumes": [
                {"name": "local", "image": {"reference": "r.example/local:v1", "pullPolicy": "Never"}},
                {"name": "model", "image": {"reference": "r.example/model:v1", "pullPolicy": "IfNotPresent"}},
            ],
        }}}});
        let (templates, pending) = images_to_resolve(&job, &Table::builtin());
        assert_eq!(templates.len(), 1);
        let images: Vec<&str> = pending.iter().map(|p| p.image.as_str()).collect();
        assert_eq!(images, vec!["r.example/app:v1", "r.example/model:v1"]);
    }
}
