//! Add the `pullcheck` init container to every known pod template, and (with fail-fast) the
//! Job-level `podFailurePolicy` that turns its exit codes into a failed Job.
//!
//! The container is derived from the template alone, so injecting twice gives the same
//! bytes as injecting once: an existing `pullcheck` init container and volume are replaced
//! with freshly derived ones, and pullcheck's own podFailurePolicy rules are recognised by
//! their `containerName` and rewritten in front of the user's.

use serde_json::{Map, Value, json};

use super::policy;
use super::templates::{Table, pod_templates, pull_secret_names, template_images};
pub use super::{CONTAINER_NAME, TransientAction, Warning};

/// The projected volume holding the template's pull secrets.
pub(crate) const VOLUME_NAME: &str = "pullcheck-pull-secrets";
/// Where the pull secrets are mounted: one directory per secret below it.
pub(crate) const SECRETS_MOUNT_PATH: &str = "/var/run/pullcheck/secrets";
/// Workload (or pod template) annotation that opts out when set to `"true"`.
pub(crate) const SKIP_ANNOTATION: &str = "pullcheck.io/skip";
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
        }
    }
}

fn warn(out: &mut Vec<Warning>, path: &str, message: impl Into<String>) {
    out.push(Warning {
        path: path.to_string(),
        message: message.into(),
    });
}

/// True when `metadata.annotations["pullcheck.io/skip"]` is `"true"`.
pub(crate) fn skipped(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(SKIP_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// True for a pod template with `spec.os.name: windows` (the checker's image is Linux-only).
pub(crate) fn is_windows(template: &Value) -> bool {
    template.pointer("/spec/os/name").and_then(Value::as_str) == Some("windows")
}

/// Inject into one object (a `v1 List` is handled item by item). Unknown kinds are left
/// unchanged with a warning. Returns the warnings; the object is changed in place.
pub fn inject_object(obj: &mut Value, opts: &InjectOptions, table: &Table) -> Vec<Warning> {
    let mut out = Vec::new();
    if obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && obj.get("kind").and_then(Value::as_str) == Some("List")
    {
        for (i, item) in obj
            .get_mut("items")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .enumerate()
        {
            for w in inject_object(item, opts, table) {
                warn(&mut out, &format!("/items/{i}{}", w.path), w.message);
            }
        }
        return out;
    }
    if let Some(why) = super::not_an_object(obj) {
        warn(&mut out, "", format!("{why}: left unchanged"));
        return out;
    }
    if table.lookup(obj).is_none() {
        if super::templates::holds_containers(obj) {
            warn(&mut out, "", super::templates::unknown_workload(obj));
        }
        return out;
    }
    if skipped(obj) {
        return out;
    }
    let templates = pod_templates(obj, table);
    let mut injected = Vec::new();
    // Kubeflow v1 operators' CRDs have no restartPolicyRules: strict validation rejects the
    // field, a mutation loses it, and the operator recreates each failed pod under the same
    // name, so its restart count never reaches runPolicy.backoffLimit (measured:
    // docs/fail-fast-results.md 10d). There restart rules are never written.
    let kubeflow_opts = InjectOptions {
        transient: TransientAction::Count,
        ..opts.clone()
    };
    let mut kubeflow_warned = false;
    for t in &templates {
        let Some(template) = obj.pointer_mut(&t.pointer) else {
            continue;
        };
        let kubeflow = t.run_policy.is_some();
        let these = if kubeflow && opts.transient == TransientAction::Restart {
            if !kubeflow_warned {
                kubeflow_warned = true;
                warn(
                    &mut out,
                    &t.pointer,
                    "Kubeflow replicas: the operator's CRD has no restartPolicyRules; transient restart written as count",
                );
            }
            &kubeflow_opts
        } else {
            opts
        };
        if inject_template(template, &t.pointer, these, &mut out) {
            injected.push(t.clone());
        }
    }
    if opts.fail_fast {
        policy::apply(obj, &injected, &templates, opts.transient, &mut out);
    }
    if opts.transient == TransientAction::Restart {
        let with_rules: Vec<_> = injected
            .iter()
            .filter(|t| t.run_policy.is_none())
            .cloned()
            .collect();
        out.extend(policy::unbounded_restarts(obj, &with_rules));
    }
    out
}

/// Inject into one pod template; false when it was left without a checker.
fn inject_template(
    template: &mut Value,
    at: &str,
    opts: &InjectOptions,
    out: &mut Vec<Warning>,
) -> bool {
    if is_windows(template) {
        warn(
            out,
            at,
            "Windows pod template: left unchanged (the pullcheck image is Linux-only)",
        );
        return false;
    }
    if skipped(template) {
        return false;
    }
    let mut refs: Vec<String> = Vec::new();
    for use_ in template_images(template, at) {
        let ours =
            use_.container == CONTAINER_NAME && use_.slot == super::templates::Slot::InitContainer;
        if ours || !use_.is_pulled() || refs.contains(&use_.image) {
            continue;
        }
        refs.push(use_.image);
    }
    let secrets = pull_secret_names(template);
    let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) else {
        warn(out, at, "pod template has no spec: left unchanged");
        return false;
    };
    if refs.is_empty() {
        remove_named(spec, "initContainers", CONTAINER_NAME);
        remove_named(spec, "volumes", VOLUME_NAME);
        warn(
            out,
            at,
            "no image to check (all imagePullPolicy: Never): no pullcheck init container",
        );
        return false;
    }
    let inits = array_entry(spec, "initContainers");
    inits.retain(|c| name_of(c) != Some(CONTAINER_NAME));
    inits.insert(0, init_container(&refs, &secrets, opts));
    if secrets.is_empty() {
        remove_named(spec, "volumes", VOLUME_NAME);
    } else {
        let vol = volume(&secrets);
        let volumes = array_entry(spec, "volumes");
        match volumes.iter().position(|v| name_of(v) == Some(VOLUME_NAME)) {
            Some(i) => volumes[i] = vol,
            None => volumes.push(vol),
        }
    }
    true
}

fn name_of(v: &Value) -> Option<&str> {
    v.get("name").and_then(Value::as_str)
}

/// Remove the entries named `name` from `spec[list]`, and the list itself if it empties.
fn remove_named(spec: &mut Map<String, Value>, list: &str, name: &str) {
    if let Some(Value::Array(a)) = spec.get_mut(list) {
        let before = a.len();
        a.retain(|v| name_of(v) != Some(name));
        if a.is_empty() && before > 0 {
            spec.shift_remove(list);
        }
    }
}

/// `spec[list]` as a mutable array, created (at the end of the map) when absent or null.
fn array_entry<'a>(spec: &'a mut Map<String, Value>, list: &str) -> &'a mut Vec<Value> {
    let slot = spec
        .entry(list.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut().expect("just made an array")
}

/// The init container for a template with these images (`refs`) and pull secrets (names):
/// also what the webhook's restart-rules probe sends (`webhook::restart_rules`).
pub(crate) fn init_container(refs: &[String], secrets: &[String], opts: &InjectOptions) -> Value {
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
    if !secrets.is_empty() {
        c["volumeMounts"] =
            json!([{"name": VOLUME_NAME, "mountPath": SECRETS_MOUNT_PATH, "readOnly": true}]);
    }
    c
}

/// The projected volume: every pull secret optional, both docker config keys, one directory
/// per secret, so a missing secret or key never blocks the pod in ContainerCreating.
fn volume(secrets: &[String]) -> Value {
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

/// Parse a YAML stream, inject into every document, and write it back. Warnings come back
/// with the 1-based document number.
pub fn inject_stream(
    text: &str,
    opts: &InjectOptions,
    table: &Table,
) -> Result<(String, Vec<(usize, Warning)>), super::yaml::YamlError> {
    let mut docs = super::yaml::parse_documents(text)?;
    let warnings = inject_documents(&mut docs, opts, table);
    let out = super::yaml::to_yaml_stream(docs.iter().map(|d| &d.value))?;
    Ok((out, warnings))
}

/// Inject into parsed documents in place; warnings with their document number.
pub(crate) fn inject_documents(
    docs: &mut [super::yaml::Document],
    opts: &InjectOptions,
    table: &Table,
) -> Vec<(usize, Warning)> {
    let mut warnings = Vec::new();
    for d in docs {
        warnings.extend(
            inject_object(&mut d.value, opts, table)
                .into_iter()
                .map(|w| (d.number, w)),
        );
    }
    warnings
}
