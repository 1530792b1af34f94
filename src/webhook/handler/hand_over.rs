//! What `/mutate` hands the nodes besides the init container: the bodies of the indexes
//! it holds for images on metered registries, so the node's check spares Docker Hub a GET.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::WebhookState;
use super::resolve::images_to_resolve;
use crate::engine::Engine;
use crate::k8s::inject::IndexBodies;
use crate::reference::Reference;
use crate::webhook::review::{Checked, ImageCheck};

/// How long `/mutate` resolves images only to hand their index bodies to the nodes.
pub(super) const HAND_OVER_BUDGET: Duration = Duration::from_secs(3);

/// True when an image of `obj` is on a metered registry (Docker Hub).
pub(super) fn has_metered_images(state: &WebhookState, obj: &Value) -> bool {
    let (_, images) = images_to_resolve(obj, &state.config.table);
    images
        .iter()
        .any(|i| Reference::parse(&i.image).is_ok_and(|r| state.engine.plan().is_metered(&r)))
}

/// The index bodies to hand over (`k8s::index_bodies`), by image as the injected template
/// will write it (pinned or not): for each image on a metered registry whose index this
/// process holds, that index and the indexes nested in it that it holds too.
/// Single-platform manifests have none: the node's HEAD is enough there.
pub(super) async fn index_bodies(
    state: &WebhookState,
    checks: &[ImageCheck],
    pins: &[(String, String)],
) -> IndexBodies {
    let mut out = IndexBodies::new();
    for c in checks {
        let Checked::Done(o) = &c.result else {
            continue;
        };
        let Some(digest) = &o.digest else {
            continue;
        };
        if !Reference::parse(&c.image).is_ok_and(|r| state.engine.plan().is_metered(&r)) {
            continue;
        }
        let bodies = held_bodies(&state.engine, digest).await;
        if bodies.is_empty() {
            continue;
        }
        if let Some((_, pinned)) = pins.iter().find(|(p, _)| *p == c.pointer) {
            out.insert(pinned.clone(), bodies.clone());
        }
        out.insert(c.image.clone(), bodies);
    }
    out
}

/// The body of the index `digest` and of the indexes nested in it, as far as `engine`
/// holds them (at most 16: the engine walks 4 levels), the top one first.
async fn held_bodies(engine: &Engine, digest: &str) -> Vec<(String, Arc<Vec<u8>>)> {
    let mut out: Vec<(String, Arc<Vec<u8>>)> = Vec::new();
    let mut queue = vec![digest.to_string()];
    while let Some(d) = queue.pop() {
        if out.len() >= 16 || out.iter().any(|(seen, _)| *seen == d) {
            continue;
        }
        let Some(body) = engine.index_body(&d).await else {
            continue;
        };
        if let Ok(index) = crate::manifest::parse_index(&body) {
            queue.extend(
                index
                    .manifests
                    .iter()
                    .filter(|e| crate::manifest::is_index(&e.media_type))
                    .map(|e| e.digest.clone())
                    .rev(),
            );
        }
        out.push((d, body));
    }
    out
}
