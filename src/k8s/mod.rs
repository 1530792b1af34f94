//! Kubernetes manifests in; images, injected manifests and lint findings out.
//!
//! - [`yaml`]: multi-document YAML I/O that keeps key order and unknown fields;
//! - [`templates`]: the kind → pod-template table (data, extensible with `--kinds`) and the
//!   image extraction shared by `inject`, `lint`, `scan` and the webhook;
//! - [`inject`]: adds the `pullcheck` init container (and, with fail-fast, [`policy`]'s
//!   podFailurePolicy rules);
//! - [`lint`]: the gaps that keep a broken image from failing a workload fast.
//!
//! The names `inject`, `policy` and `lint` share (the container name, the transient action,
//! warnings, the message limit) are defined here, so none of them imports another for them.
//! Nothing here touches the network; objects are plain [`serde_json::Value`]s.

pub mod inject;
pub mod lint;
pub(crate) mod policy;
pub mod templates;
pub mod yaml;

/// The advised limit for one admission warning, in characters (kube-core
/// `AdmissionResponse::warnings`). Lint findings stay within it too: the webhook returns them
/// as warnings.
pub(crate) const MAX_WARNING_CHARS: usize = 120;

/// `text` cut to `max` characters, the last one `…` when anything was cut.
pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Why a document is not a Kubernetes object, or `None` when it is one: a mapping with a
/// non-empty string `apiVersion` and `kind`, which is all the API server asks of any object.
pub(crate) fn not_an_object(v: &serde_json::Value) -> Option<&'static str> {
    let field = |name: &str| {
        v.get(name)
            .and_then(serde_json::Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    if !v.is_object() {
        return Some("not a Kubernetes object: not a mapping with apiVersion and kind");
    }
    match (field("apiVersion"), field("kind")) {
        (true, true) => None,
        (false, false) => Some("not a Kubernetes object: no apiVersion and no kind"),
        (false, true) => Some("not a Kubernetes object: no apiVersion"),
        (true, false) => Some("not a Kubernetes object: no kind"),
    }
}

/// The init container's name; podFailurePolicy rules refer to it (`onExitCodes.containerName`).
pub const CONTAINER_NAME: &str = "pullcheck";

/// What a podFailurePolicy does with the transient exit code (20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransientAction {
    /// Count the failure toward backoffLimit (a new pod retries the pull check).
    #[default]
    Count,
    /// Don't count it: retries are unbounded unless activeDeadlineSeconds is set.
    Ignore,
}

/// Something the user should know about a document that was (or was not) changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// JSON pointer to what the warning is about (`""` for the whole object).
    pub path: String,
    /// One line, at most 120 characters.
    pub message: String,
}
