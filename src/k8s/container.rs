//! What the injected `pullcheck` init container is: its image, resources, security
//! context, arguments, mounts and environment, and the volumes it reads
//! ([`init_container`], [`InjectOptions`]). Where it goes (which templates, the Job's
//! podFailurePolicy, annotations, idempotent replacement) is `k8s/inject.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::index_bodies;
use super::policy;
use super::registry_config::{self, HandOverSource};
use super::{CONTAINER_NAME, TransientAction};

/// The projected volume holding the template's pull secrets.
pub(crate) const VOLUME_NAME: &str = "pullcheck-pull-secrets";
/// Where the pull secrets are mounted: one directory per secret below it.
pub(crate) const SECRETS_MOUNT_PATH: &str = "/var/run/pullcheck/secrets";
/// The downward-API volume holding the template's [`index_bodies::ANNOTATION`].
pub(crate) const INDEX_BODIES_VOLUME: &str = "pullcheck-index-bodies";
/// Where that volume is mounted, and its one file.
pub(crate) const INDEX_BODIES_MOUNT_PATH: &str = "/var/run/pullcheck/index-bodies";
pub(crate) const INDEX_BODIES_FILE: &str = "bodies.json";
/// The variable naming that file to `check` (its `--index-bodies`).
pub(crate) const INDEX_BODIES_ENV: &str = "PULLCHECK_INDEX_BODIES";
/// The pod-template annotation holding the registry configuration handed over.
pub(crate) const REGISTRY_CONFIG_ANNOTATION: &str = registry_config::ANNOTATION;
/// The downward-API volume holding [`REGISTRY_CONFIG_ANNOTATION`].
pub(crate) const REGISTRY_CONFIG_VOLUME: &str = "pullcheck-registry-config";
/// Where that volume is mounted, and its one file.
pub(crate) const REGISTRY_CONFIG_MOUNT_PATH: &str = "/var/run/pullcheck/registry-config";
pub(crate) const REGISTRY_CONFIG_FILE: &str = "config.json";
/// The variable naming that file to `check` (its `--registry-config`).
pub(crate) const REGISTRY_CONFIG_ENV: &str = "PULLCHECK_REGISTRY_CONFIG";

/// Default CPU request and limit: enough for a TLS handshake without throttling.
pub(crate) const DEFAULT_CPU: &str = "100m";
/// Default memory request and limit.
pub(crate) const DEFAULT_MEMORY: &str = "64Mi";
/// UID and GID the container runs as (the image's `USER`).
pub(crate) const RUN_AS: i64 = 65532;
/// The repository of the project's image; the tag is the binary's version.
pub(crate) const IMAGE_REPOSITORY: &str = "ghcr.io/pullcheck/pullcheck";

/// The default `--image`: the project's image at this binary's version.
pub(crate) fn default_image() -> String {
    format!("{IMAGE_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"))
}

/// Index bodies by image as written: `(digest, body)` of the index the tag names, then of
/// the indexes nested in it, as the check on the node reads them.
pub type IndexBodies = BTreeMap<String, Vec<(String, Arc<Vec<u8>>)>>;

/// How to build the init container and the Job policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectOptions {
    /// The checker's image reference.
    pub image: String,
    /// CPU request and limit (a Kubernetes quantity).
    pub cpu: String,
    /// Memory request and limit (a Kubernetes quantity).
    pub memory: String,
    /// Extra `pullcheck check` arguments, placed before the images.
    pub check_args: Vec<String>,
    /// Also set the Job-level podFailurePolicy and warn about restart policies.
    pub fail_fast: bool,
    /// Rule action for the transient code.
    pub transient: TransientAction,
    /// Index bodies already read (the webhook's), by image as written: `(digest, body)`.
    /// A template whose images have some gets them in its [`index_bodies::ANNOTATION`],
    /// and its init container reads them from a downward-API volume. Empty for `inject`.
    pub index_bodies: IndexBodies,
    /// The registry settings handed to the injected check (the webhook's `--insecure-registry`,
    /// `--ca-file`, `--hosts-dir`, metered settings; `inject`'s flags of those names).
    pub registry: HandOverSource,
}

impl Default for InjectOptions {
    fn default() -> Self {
        Self {
            image: default_image(),
            cpu: DEFAULT_CPU.into(),
            memory: DEFAULT_MEMORY.into(),
            check_args: Vec::new(),
            fail_fast: false,
            transient: TransientAction::Count,
            index_bodies: BTreeMap::new(),
            registry: HandOverSource::default(),
        }
    }
}

/// What a template's init container reads from downward-API volumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Handed {
    /// [`index_bodies::ANNOTATION`].
    pub index_bodies: bool,
    /// [`REGISTRY_CONFIG_ANNOTATION`].
    pub registry_config: bool,
}

/// The downward-API volume with the template's index bodies as one file.
/// The API server's defaults (`apiVersion: v1`, `defaultMode: 420`) are written out, so that
/// injecting into the stored object again changes nothing.
pub(super) fn index_bodies_volume() -> Value {
    json!({"name": INDEX_BODIES_VOLUME, "downwardAPI": {"items": [{
        "path": INDEX_BODIES_FILE,
        "fieldRef": {"apiVersion": "v1", "fieldPath": format!("metadata.annotations['{}']", index_bodies::ANNOTATION)},
    }], "defaultMode": 420}})
}

/// The downward-API volume with the template's registry configuration as one file.
pub(super) fn registry_config_volume() -> Value {
    json!({"name": REGISTRY_CONFIG_VOLUME, "downwardAPI": {"items": [{
        "path": REGISTRY_CONFIG_FILE,
        "fieldRef": {"apiVersion": "v1", "fieldPath": format!("metadata.annotations['{REGISTRY_CONFIG_ANNOTATION}']")},
    }], "defaultMode": 420}})
}

/// The init container for a template with these images (`refs`) and pull secrets (names):
/// also what the webhook's restart-rules probe sends (`webhook::restart_rules`).
pub(crate) fn init_container(
    refs: &[String],
    secrets: &[String],
    handed: Handed,
    opts: &InjectOptions,
) -> Value {
    let mut args = vec!["check".to_string()];
    if !secrets.is_empty() {
        args.extend(["--pull-secrets".to_string(), SECRETS_MOUNT_PATH.to_string()]);
    }
    args.push("--no-docker-config".to_string());
    args.extend(opts.check_args.iter().cloned());
    args.extend(refs.iter().cloned());
    let quantities = json!({"cpu": opts.cpu, "memory": opts.memory});
    let mut c = json!({
        "name": CONTAINER_NAME,
        "image": opts.image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "resources": {"requests": quantities.clone(), "limits": quantities},
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    });
    if let Some((restart_policy, rules)) = policy::container_restart(opts.transient) {
        c["restartPolicy"] = restart_policy;
        c["restartPolicyRules"] = rules;
    }
    let mut mounts = Vec::new();
    if !secrets.is_empty() {
        mounts
            .push(json!({"name": VOLUME_NAME, "mountPath": SECRETS_MOUNT_PATH, "readOnly": true}));
    }
    let mut env = Vec::new();
    if handed.index_bodies {
        mounts.push(json!({"name": INDEX_BODIES_VOLUME, "mountPath": INDEX_BODIES_MOUNT_PATH, "readOnly": true}));
        env.push(json!({"name": INDEX_BODIES_ENV, "value": format!("{INDEX_BODIES_MOUNT_PATH}/{INDEX_BODIES_FILE}")}));
    }
    if handed.registry_config {
        mounts.push(json!({"name": REGISTRY_CONFIG_VOLUME, "mountPath": REGISTRY_CONFIG_MOUNT_PATH, "readOnly": true}));
        env.push(json!({"name": REGISTRY_CONFIG_ENV, "value": format!("{REGISTRY_CONFIG_MOUNT_PATH}/{REGISTRY_CONFIG_FILE}")}));
    }
    if !mounts.is_empty() {
        c["volumeMounts"] = Value::Array(mounts);
    }
    if !env.is_empty() {
        // Environment variables, not `--index-bodies`/`--registry-config`: a checker image
        // older than the webhook (a mirror, a pinned digest, a rollback) ignores them
        // instead of exiting 2 on an unknown flag.
        c["env"] = Value::Array(env);
    }
    c
}

/// The projected volume: every pull secret optional, both docker config keys, one directory
/// per secret, so a missing secret or key never blocks the pod in ContainerCreating.
pub(super) fn volume(secrets: &[String]) -> Value {
    let sources: Vec<Value> = secrets
        .iter()
        .map(|s| {
            json!({"secret": {
                "name": s,
                "optional": true,
                "items": [
                    {"key": ".dockerconfigjson", "path": format!("{s}/.dockerconfigjson")},
                    {"key": ".dockercfg", "path": format!("{s}/.dockercfg")},
                ],
            }})
        })
        .collect();
    json!({"name": VOLUME_NAME, "projected": {"sources": sources}})
}
