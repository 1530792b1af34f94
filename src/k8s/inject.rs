//! Add the `pullcheck` init container to every known pod template, and (with fail-fast) the
//! Job-level `podFailurePolicy` that turns its exit codes into a failed Job.
//!
//! The container is derived from the template alone, so injecting twice gives the same
//! bytes as injecting once: an existing `pullcheck` init container and volume are replaced
//! with freshly derived ones, and pullcheck's own podFailurePolicy rules are recognised by
//! their `containerName` and rewritten in front of the user's.

use serde_json::{Map, Value};

use super::annotation_budget::{self, ObjectBudget};
use super::container::{
    Handed, INDEX_BODIES_VOLUME, REGISTRY_CONFIG_ANNOTATION, REGISTRY_CONFIG_VOLUME, VOLUME_NAME,
    index_bodies_volume, init_container, registry_config_volume, volume,
};
pub use super::container::{IndexBodies, InjectOptions};
use super::index_bodies;
use super::policy;
use super::registry_config;
use super::templates::{Table, pod_templates, pull_secret_names, template_images};
pub use super::{CONTAINER_NAME, TransientAction, Warning};

/// Every pod-template volume pullcheck writes: what `inject --remove` (`k8s/remove.rs`)
/// takes out with the init container. A new one is added here, in one line.
pub(crate) const OWNED_VOLUMES: &[&str] =
    &[VOLUME_NAME, INDEX_BODIES_VOLUME, REGISTRY_CONFIG_VOLUME];
/// Every pod-template annotation pullcheck writes (removed like [`OWNED_VOLUMES`]).
pub(crate) const OWNED_ANNOTATIONS: &[&str] =
    &[REGISTRY_CONFIG_ANNOTATION, index_bodies::ANNOTATION];
/// Workload (or pod template) annotation that opts out when set to `"true"`.
pub(crate) const SKIP_ANNOTATION: &str = "pullcheck.io/skip";
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
    super::each_object_mut(obj, &mut |o| inject_one(o, opts, table))
}

/// [`inject_object`] for one object (not a List).
fn inject_one(obj: &mut Value, opts: &InjectOptions, table: &Table) -> Vec<Warning> {
    let mut out = Vec::new();
    if let Some(why) = super::not_an_object(obj) {
        warn(&mut out, "", format!("{why}: left unchanged"));
        return out;
    }
    if table.lookup(obj).is_none() {
        if let Some(what) = super::templates::unknown_workload(obj, table) {
            warn(
                &mut out,
                "",
                format!("{what}: left unchanged (add it with --kinds)"),
            );
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
    // pullcheck's annotations share one budget for the whole object (annotation_budget).
    let mut budget = ObjectBudget::new();
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
        if inject_template(template, &t.pointer, these, &mut budget, &mut out) {
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

/// The bytes the template's annotations other than pullcheck's take (keys and values).
fn other_annotations_bytes(template: &Value) -> usize {
    template
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .filter(|(k, _)| !OWNED_ANNOTATIONS.contains(&k.as_str()))
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0)
}

/// Take out everything an earlier injection put into the template.
fn remove_ours(template: &mut Value) {
    for key in OWNED_ANNOTATIONS {
        set_annotation(template, key, None);
    }
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        remove_named(spec, "initContainers", CONTAINER_NAME);
        for v in OWNED_VOLUMES {
            remove_named(spec, "volumes", v);
        }
    }
}

/// The registry hosts of `refs`, each once, in order (an unparsable reference has none: the
/// check reports it).
fn registries_of(refs: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in refs {
        if let Ok(r) = crate::reference::Reference::parse(r)
            && !out.iter().any(|d| d == r.domain())
        {
            out.push(r.domain().to_string());
        }
    }
    out
}

/// Inject into one pod template, spending from the object's annotation `budget`; true when
/// the template has the checker now.
fn inject_template(
    template: &mut Value,
    at: &str,
    opts: &InjectOptions,
    budget: &mut ObjectBudget,
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
    if template.get("spec").and_then(Value::as_object).is_none() {
        warn(out, at, "pod template has no spec: left unchanged");
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
    if refs.is_empty() {
        remove_ours(template);
        warn(
            out,
            at,
            "no image to check (all imagePullPolicy: Never): no pullcheck init container",
        );
        return false;
    }
    let registries = registries_of(&refs);
    // The registry configuration first: a check without it fails differently from the
    // webhook's own, so where it can't be written no check is injected.
    let config = match opts.registry.hand_over(&registries) {
        Ok(c) => c,
        Err(refusal) => {
            remove_ours(template);
            // The consequence first: admission warnings are cut at 120 characters.
            warn(out, at, format!("no pullcheck init container: {refusal}"));
            return false;
        }
    };
    for note in &config.notes {
        warn(out, at, note.clone());
    }
    let room = budget.room(other_annotations_bytes(template));
    let config_cost = config.text.as_deref().map_or(0, |t| {
        annotation_budget::cost(REGISTRY_CONFIG_ANNOTATION, t)
    });
    if config_cost > room {
        remove_ours(template);
        warn(
            out,
            at,
            format!(
                "no pullcheck init container: registry config for {} ({config_cost} bytes) exceeds the {room} left for annotations",
                registries.join(", ")
            ),
        );
        return false;
    }
    if config.text.is_some() && template.pointer("/spec/hostNetwork") != Some(&Value::Bool(true)) {
        // What the check will contact: the endpoints handed over, and the other registries
        // as they are (a CA bundle alone names none).
        let mut hosts = config.hosts.clone();
        for r in &registries {
            if !hosts.iter().any(|(reg, _)| reg == r) {
                hosts.push((r.clone(), r.clone()));
            }
        }
        address_warnings(&hosts, at, out);
    }
    let bodies = index_bodies::encode(
        refs.iter()
            .filter_map(|r| opts.index_bodies.get(r))
            .flatten()
            .map(|(digest, body)| (digest.as_str(), body.as_slice())),
        (room - config_cost).saturating_sub(index_bodies::ANNOTATION.len()),
    );
    budget.spend(
        config_cost
            + bodies
                .as_deref()
                .map_or(0, |b| annotation_budget::cost(index_bodies::ANNOTATION, b)),
    );
    set_annotation(template, REGISTRY_CONFIG_ANNOTATION, config.text.as_deref());
    set_annotation(template, index_bodies::ANNOTATION, bodies.as_deref());
    let secrets = pull_secret_names(template);
    let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) else {
        return false;
    };
    let handed = Handed {
        index_bodies: bodies.is_some(),
        registry_config: config.text.is_some(),
    };
    let inits = array_entry(spec, "initContainers");
    inits.retain(|c| name_of(c) != Some(CONTAINER_NAME));
    inits.insert(0, init_container(&refs, &secrets, handed, opts));
    if secrets.is_empty() {
        remove_named(spec, "volumes", VOLUME_NAME);
    } else {
        put_volume(spec, volume(&secrets));
    }
    for (on, name, vol) in [
        (
            handed.index_bodies,
            INDEX_BODIES_VOLUME,
            index_bodies_volume as fn() -> Value,
        ),
        (
            handed.registry_config,
            REGISTRY_CONFIG_VOLUME,
            registry_config_volume,
        ),
    ] {
        if on {
            put_volume(spec, vol());
        } else {
            remove_named(spec, "volumes", name);
        }
    }
    true
}

/// One warning per registry whose handed-over endpoints include an address only the node
/// reaches: the init container runs in the pod's network namespace (unless hostNetwork),
/// while the node's runtime pulls from the node's.
fn address_warnings(hosts: &[(String, String)], at: &str, out: &mut Vec<Warning>) {
    let mut warned: Vec<&str> = Vec::new();
    for (registry, host) in hosts {
        if warned.contains(&registry.as_str()) {
            continue;
        }
        if let Some(why) = registry_config::node_only_address(host) {
            warned.push(registry);
            // Short (admission warnings are cut at 120 characters); docs/webhook.md says
            // why and what to do.
            let subject = if host == registry {
                format!("registry {registry}")
            } else {
                format!("registry {registry}: mirror {host}")
            };
            warn(
                out,
                at,
                format!(
                    "{subject} is {why}: the init container can't reach it from the pod network"
                ),
            );
        }
    }
}

/// Put `vol` in `spec.volumes`, in place of the one of its name.
fn put_volume(spec: &mut Map<String, Value>, vol: Value) {
    let name = name_of(&vol).map(str::to_string);
    let volumes = array_entry(spec, "volumes");
    match volumes.iter().position(|v| name_of(v) == name.as_deref()) {
        Some(i) => volumes[i] = vol,
        None => volumes.push(vol),
    }
}

/// Set `metadata.annotations[key]` of `obj` to `value`, or remove it (and an annotations
/// map it leaves empty) for `None`.
pub(super) fn set_annotation(obj: &mut Value, key: &str, value: Option<&str>) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    match value {
        Some(v) => {
            if !o.contains_key("metadata") {
                // Where it usually stands: before the spec.
                o.shift_insert(0, "metadata".to_string(), Value::Object(Map::new()));
            }
            object_entry(object_entry(o, "metadata"), "annotations")
                .insert(key.to_string(), Value::String(v.to_string()));
        }
        None => {
            let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) else {
                return;
            };
            let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) else {
                return;
            };
            if ann.shift_remove(key).is_some() && ann.is_empty() {
                meta.shift_remove("annotations");
                if meta.is_empty() {
                    o.shift_remove("metadata");
                }
            }
        }
    }
}

fn name_of(v: &Value) -> Option<&str> {
    v.get("name").and_then(Value::as_str)
}

/// Remove the entries named `name` from `spec[list]`, and the list itself if it empties.
pub(super) fn remove_named(spec: &mut Map<String, Value>, list: &str, name: &str) {
    if let Some(Value::Array(a)) = spec.get_mut(list) {
        let before = a.len();
        a.retain(|v| name_of(v) != Some(name));
        if a.is_empty() && before > 0 {
            spec.shift_remove(list);
        }
    }
}

/// `map[key]` as a mutable object, created (at the end of the map) when absent or not an
/// object.
fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("just made an object")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::registry_config::HandOverSource;
    use serde_json::json;
    use std::sync::Arc;

    /// A JobSet of `n` replicated Jobs whose one container runs `image`.
    fn jobset(n: usize, image: &str) -> Value {
        let rj: Vec<Value> = (0..n)
            .map(|i| {
                json!({"name": format!("r{i}"), "template": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": image}]}}}}})
            })
            .collect();
        json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js"}, "spec": {"replicatedJobs": rj}})
    }
    use crate::engine::handover::RegistrySettings;

    fn source(s: RegistrySettings) -> HandOverSource {
        HandOverSource(Some(Arc::new(s)))
    }

    fn job(images: &[&str]) -> Value {
        let containers: Vec<Value> = images
            .iter()
            .enumerate()
            .map(|(i, im)| json!({"name": format!("c{i}"), "image": im}))
            .collect();
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": containers}}}})
    }

    fn with_bodies(pairs: &[(&str, &str, &[u8])]) -> InjectOptions {
        InjectOptions {
            index_bodies: pairs
                .iter()
                .map(|(image, digest, body)| {
                    (
                        image.to_string(),
                        vec![(digest.to_string(), Arc::new(body.to_vec()))],
                    )
                })
                .collect(),
            ..InjectOptions::default()
        }
    }

    /// The annotation, the downward-API volume, the mount and the flag come together, for the
    /// template's own images only, each digest once; a pass without bodies removes them all.
    #[test]
    fn index_bodies_are_handed_over_and_taken_back() {
        let table = Table::builtin();
        let mut obj = job(&["docker.io/library/a:1", "b:1", "a:1"]);
        let opts = with_bodies(&[
            ("docker.io/library/a:1", "sha256:aa", b"{\"a\":1}"),
            ("a:1", "sha256:aa", b"{\"a\":1}"),
            ("elsewhere:1", "sha256:ee", b"{}"),
        ]);
        assert!(inject_object(&mut obj, &opts, &table).is_empty());
        let t = &obj["spec"]["template"];
        assert_eq!(
            t["metadata"]["annotations"][index_bodies::ANNOTATION],
            r#"{"sha256:aa":"{\"a\":1}"}"#
        );
        assert_eq!(
            t["spec"]["volumes"],
            json!([{"name": "pullcheck-index-bodies", "downwardAPI": {"items": [{"path": "bodies.json",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['pullcheck.io/index-bodies']"}}],
                "defaultMode": 420}}])
        );
        let c = &t["spec"]["initContainers"][0];
        assert_eq!(
            c["args"],
            json!([
                "check",
                "--no-docker-config",
                "docker.io/library/a:1",
                "b:1",
                "a:1"
            ])
        );
        assert_eq!(
            c["env"],
            json!([{"name": "PULLCHECK_INDEX_BODIES", "value": "/var/run/pullcheck/index-bodies/bodies.json"}])
        );
        assert_eq!(
            c["volumeMounts"],
            json!([{"name": "pullcheck-index-bodies", "mountPath": "/var/run/pullcheck/index-bodies", "readOnly": true}])
        );
        // Twice gives the same bytes.
        let once = obj.clone();
        inject_object(&mut obj, &opts, &table);
        assert_eq!(obj, once);
        // Without bodies (plain `inject`), everything of theirs goes, nothing else.
        inject_object(&mut obj, &InjectOptions::default(), &table);
        let mut plain = job(&["docker.io/library/a:1", "b:1", "a:1"]);
        inject_object(&mut plain, &InjectOptions::default(), &table);
        assert_eq!(obj, plain);
        assert!(obj["spec"]["template"].get("metadata").is_none());
    }

    /// Other annotations stay; pull-secret mounts and the bodies' mount sit side by side.
    #[test]
    fn index_bodies_keep_other_annotations_and_the_pull_secrets() {
        let table = Table::builtin();
        let mut obj = job(&["a:1"]);
        obj["spec"]["template"]["metadata"] = json!({"annotations": {"team": "ml"}});
        obj["spec"]["template"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
        inject_object(
            &mut obj,
            &with_bodies(&[("a:1", "sha256:aa", b"{}")]),
            &table,
        );
        let t = &obj["spec"]["template"];
        assert_eq!(
            t["metadata"]["annotations"],
            json!({"team": "ml", "pullcheck.io/index-bodies": "{\"sha256:aa\":\"{}\"}"})
        );
        let names: Vec<&str> = t["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["pullcheck-pull-secrets", "pullcheck-index-bodies"]);
        let mounts: Vec<&str> = t["spec"]["initContainers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["mountPath"].as_str().unwrap())
            .collect();
        assert_eq!(
            mounts,
            [
                "/var/run/pullcheck/secrets",
                "/var/run/pullcheck/index-bodies"
            ]
        );
        inject_object(&mut obj, &InjectOptions::default(), &table);
        assert_eq!(
            obj["spec"]["template"]["metadata"],
            json!({"annotations": {"team": "ml"}})
        );
    }

    /// The API server defaults podReplacementPolicy to TerminatingOrFailed before a
    /// mutating webhook sees the Job; with a podFailurePolicy only Failed is valid.
    #[test]
    fn fail_fast_makes_a_defaulted_pod_replacement_policy_failed() {
        let table = Table::builtin();
        let defaulted = || {
            let mut j = job(&["a:1"]);
            j["spec"]["podReplacementPolicy"] = json!("TerminatingOrFailed");
            j
        };
        let mut obj = defaulted();
        let opts = InjectOptions {
            fail_fast: true,
            ..InjectOptions::default()
        };
        inject_object(&mut obj, &opts, &table);
        assert_eq!(obj["spec"]["podReplacementPolicy"], "Failed");
        assert!(obj["spec"]["podFailurePolicy"]["rules"].is_array());
        // Without a podFailurePolicy the user's (or the default) value stays.
        let mut obj = defaulted();
        inject_object(&mut obj, &InjectOptions::default(), &table);
        assert_eq!(obj["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
    }

    /// One budget for the whole object: a JobSet-like object with many templates repeating
    /// the same images gets bodies until 64 KiB are used, the rest none.
    #[test]
    fn index_bodies_share_one_budget_per_object_and_leave_room_for_other_annotations() {
        let table = Table::builtin();
        let body = vec![b'x'; 20 * 1024];
        let opts = with_bodies(&[("a:1", "sha256:aa", body.as_slice())]);
        let list: Vec<Value> = (0..5).map(|_| job(&["a:1"])).collect();
        let mut obj = json!({"apiVersion": "v1", "kind": "List", "items": list});
        inject_object(&mut obj, &opts, &table);
        // A v1 List is item by item: each Job has its own budget.
        for i in 0..5 {
            assert!(
                obj["items"][i]["spec"]["template"]["metadata"]["annotations"]
                    [index_bodies::ANNOTATION]
                    .is_string()
            );
        }
        // A JobSet's replicated Jobs are templates of one object.
        let mut js = jobset(5, "a:1");
        inject_object(&mut js, &opts, &table);
        let with: Vec<bool> = (0..5)
            .map(|i| js["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["metadata"]["annotations"][index_bodies::ANNOTATION].is_string())
            .collect();
        assert_eq!(with, [true, true, true, false, false]);
        // Beside 250 KiB of other annotations there is no room for 20 KiB.
        let mut crowded = job(&["a:1"]);
        crowded["spec"]["template"]["metadata"] =
            json!({"annotations": {"example.com/notes": "n".repeat(250 * 1024)}});
        inject_object(&mut crowded, &opts, &table);
        let t = &crowded["spec"]["template"];
        assert!(
            t["metadata"]["annotations"]
                .get(index_bodies::ANNOTATION)
                .is_none()
        );
        assert!(t["spec"].get("volumes").is_none(), "{}", t["spec"]);
        assert!(t["spec"]["initContainers"][0].get("env").is_none());
    }

    fn insecure(hosts: &[&str]) -> InjectOptions {
        InjectOptions {
            registry: source(RegistrySettings {
                insecure: hosts.iter().map(|h| h.to_string()).collect(),
                ..RegistrySettings::default()
            }),
            ..InjectOptions::default()
        }
    }

    /// The registry configuration comes as annotation, downward-API volume, mount and
    /// variable, beside the index bodies; injecting again is a fixed point, and a pass
    /// without settings takes all of it back.
    #[test]
    fn registry_config_is_handed_over_idempotently() {
        let table = Table::builtin();
        let mut obj = job(&["10.0.0.5:5000/ml/trainer:v1", "busybox"]);
        let mut opts = insecure(&["10.0.0.5:5000"]);
        opts.index_bodies = with_bodies(&[("busybox", "sha256:bb", b"{}")]).index_bodies;
        assert!(inject_object(&mut obj, &opts, &table).is_empty());
        let t = &obj["spec"]["template"];
        assert_eq!(
            t["metadata"]["annotations"],
            json!({
                "pullcheck.io/registry-config": r#"{"registries":{"10.0.0.5:5000":[{"url":"http://10.0.0.5:5000/v2"}]}}"#,
                "pullcheck.io/index-bodies": r#"{"sha256:bb":"{}"}"#,
            })
        );
        assert_eq!(
            t["spec"]["volumes"],
            json!([
                {"name": "pullcheck-index-bodies", "downwardAPI": {"items": [{"path": "bodies.json",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['pullcheck.io/index-bodies']"}}],
                    "defaultMode": 420}},
                {"name": "pullcheck-registry-config", "downwardAPI": {"items": [{"path": "config.json",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['pullcheck.io/registry-config']"}}],
                    "defaultMode": 420}},
            ])
        );
        let c = &t["spec"]["initContainers"][0];
        assert_eq!(
            c["args"],
            json!([
                "check",
                "--no-docker-config",
                "10.0.0.5:5000/ml/trainer:v1",
                "busybox"
            ])
        );
        assert_eq!(
            c["env"],
            json!([
                {"name": "PULLCHECK_INDEX_BODIES", "value": "/var/run/pullcheck/index-bodies/bodies.json"},
                {"name": "PULLCHECK_REGISTRY_CONFIG", "value": "/var/run/pullcheck/registry-config/config.json"},
            ])
        );
        assert_eq!(
            c["volumeMounts"],
            json!([
                {"name": "pullcheck-index-bodies", "mountPath": "/var/run/pullcheck/index-bodies", "readOnly": true},
                {"name": "pullcheck-registry-config", "mountPath": "/var/run/pullcheck/registry-config", "readOnly": true},
            ])
        );
        let once = obj.clone();
        assert!(inject_object(&mut obj, &opts, &table).is_empty());
        assert_eq!(obj, once);
        // Settings that don't concern this template's registries write nothing.
        let mut other = job(&["10.0.0.5:5000/ml/trainer:v1", "busybox"]);
        inject_object(&mut other, &insecure(&["10.9.9.9:5000"]), &table);
        inject_object(&mut obj, &InjectOptions::default(), &table);
        let mut plain = job(&["10.0.0.5:5000/ml/trainer:v1", "busybox"]);
        inject_object(&mut plain, &InjectOptions::default(), &table);
        assert_eq!(obj, plain);
        assert_eq!(other, plain);
    }

    /// A registry on the node's loopback is warned about once, naming it, in a pod-network
    /// template; a hostNetwork template shares the node's loopback and gets no warning.
    #[test]
    fn node_only_addresses_are_warned_about_unless_host_network() {
        let table = Table::builtin();
        let opts = insecure(&["127.0.0.1:5000"]);
        let mut obj = job(&["127.0.0.1:5000/ml/trainer:v1", "127.0.0.1:5000/ml/data:v2"]);
        let w = inject_object(&mut obj, &opts, &table);
        assert_eq!(
            w,
            [Warning {
                path: "/spec/template".into(),
                message: "registry 127.0.0.1:5000 is a loopback address: the init container can't reach it from the pod network".into(),
            }]
        );
        assert!(obj["spec"]["template"]["spec"]["initContainers"][0].is_object());
        let mut host = job(&["127.0.0.1:5000/ml/trainer:v1"]);
        host["spec"]["template"]["spec"]["hostNetwork"] = json!(true);
        assert!(inject_object(&mut host, &opts, &table).is_empty());
        assert!(host["spec"]["template"]["spec"]["initContainers"][0].is_object());
    }

    /// The hand-over is served before the index bodies and counted per object: a JobSet
    /// whose replicated Jobs each repeat a large CA bundle gets the check only in the
    /// templates the budget covers, with a warning naming the registry for the others, and
    /// an earlier injection there is taken back.
    #[test]
    fn the_hand_over_shares_the_object_budget_and_a_template_it_misses_gets_no_check() {
        let table = Table::builtin();
        let pem = include_str!("../engine/handover/test-ca.pem");
        let big = pem.repeat(20); // ~13 KiB of certificates as JSON
        let opts = InjectOptions {
            registry: source(RegistrySettings {
                ca_bundles: vec![big],
                ..RegistrySettings::default()
            }),
            ..with_bodies(&[(
                "reg.internal/a:1",
                "sha256:aa",
                vec![b'x'; 10 * 1024].as_slice(),
            )])
        };
        let mut js = jobset(5, "reg.internal/a:1");
        // A first pass without the bodies' budget pressure: every template checked.
        inject_object(&mut js, &InjectOptions::default(), &table);
        let w = inject_object(&mut js, &opts, &table);
        let tmpl = |i: usize| &js["spec"]["replicatedJobs"][i]["template"]["spec"]["template"];
        let got: Vec<(bool, bool, bool)> = (0..5)
            .map(|i| {
                let a = &tmpl(i)["metadata"]["annotations"];
                (
                    a[REGISTRY_CONFIG_ANNOTATION].is_string(),
                    a[index_bodies::ANNOTATION].is_string(),
                    tmpl(i)["spec"].get("initContainers").is_some(),
                )
            })
            .collect();
        // 13 KiB + 10 KiB twice, then the hand-over alone (the bodies don't fit beside
        // it), then nothing: 64 KiB.
        assert_eq!(
            got,
            [
                (true, true, true),
                (true, true, true),
                (true, false, true),
                (false, false, false),
                (false, false, false)
            ]
        );
        assert_eq!(w.len(), 2, "{w:?}");
        for (i, w) in w.iter().enumerate() {
            assert_eq!(
                w.path,
                format!("/spec/replicatedJobs/{}/template/spec/template", i + 3)
            );
            assert!(
                w.message
                    .starts_with("no pullcheck init container: registry config for reg.internal (")
                    && w.message.ends_with(" left for annotations"),
                "{}",
                w.message
            );
        }
        assert!(tmpl(3).get("metadata").is_none());
        assert!(tmpl(3)["spec"].get("volumes").is_none());
        let once = js.clone();
        inject_object(&mut js, &opts, &table);
        assert_eq!(js, once);
    }

    /// A registry whose hosts.toml sends headers gets no check: the header is never copied
    /// into the workload, and a check without it could be refused.
    #[test]
    fn a_registry_needing_headers_gets_no_check() {
        let table = Table::builtin();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("reg.internal")).unwrap();
        std::fs::write(
            dir.path().join("reg.internal/hosts.toml"),
            "server = \"https://reg.internal\"\n[header]\nAuthorization = \"Bearer s3cret\"\n",
        )
        .unwrap();
        let opts = InjectOptions {
            registry: source(RegistrySettings {
                hosts_dir: Some(dir.path().to_path_buf()),
                ..RegistrySettings::default()
            }),
            ..InjectOptions::default()
        };
        let mut obj = job(&["reg.internal/a:1"]);
        let w = inject_object(&mut obj, &opts, &table);
        assert_eq!(w.len(), 1);
        assert_eq!(
            w[0].message,
            "no pullcheck init container: registry reg.internal: hosts.toml sends header Authorization to reg.internal, never copied into workloads"
        );
        assert_eq!(obj, job(&["reg.internal/a:1"]));
    }

    /// `inject --remove` takes the hand-over out with the container.
    #[test]
    fn remove_takes_the_registry_config_out() {
        let table = Table::builtin();
        let mut obj = job(&["10.0.0.5:5000/ml/trainer:v1"]);
        obj["spec"]["template"]["metadata"] = json!({"annotations": {"team": "ml"}});
        let before = obj.clone();
        inject_object(&mut obj, &insecure(&["10.0.0.5:5000"]), &table);
        assert!(
            obj["spec"]["template"]["metadata"]["annotations"][REGISTRY_CONFIG_ANNOTATION]
                .is_string()
        );
        super::super::remove::remove_object(&mut obj, &table);
        assert_eq!(obj, before);
    }
}
