//! OCI artifacts (issue 22, item 6) end to end against the real anonymous registry (Debian's
//! docker-registry): the three shapes model weights ship in, built and pushed by the test
//! itself, checked as containerd 2.x would use them (`src/engine/artifact.rs`), with a plain
//! image beside them as the control.
//!
//! - oras-style: `artifactType`, the empty config `application/vnd.oci.empty.v1+json`, a
//!   layer that is no tar;
//! - `docker model`: no `artifactType`, a non-empty `application/vnd.docker.ai.model.config.v0.1+json`
//!   config (docker/model-spec `config.md`), a `application/vnd.docker.ai.gguf.v3` layer;
//! - CNCF ModelPack: `artifactType application/vnd.cncf.model.manifest.v1+json`, config
//!   `application/vnd.cncf.model.config.v1+json` with `modelfs`, raw weight layers
//!   (modelpack/model-spec `docs/spec.md`, `docs/config.md`).
//!
//! CNCF distribution v3 is not in the harness (only Debian's 2.8), so these run against 2.8
//! alone.

use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::support::images::{OCI_INDEX, OCI_MANIFEST, Pusher, sha256_digest};
use crate::support::process::{Run, check, run};
use crate::support::{Registry, fixture};

fn anon() -> &'static Registry {
    &fixture().anon
}

const ORAS_TYPE: &str = "application/vnd.example.model.v1";
const ORAS_LAYER: &str = "application/vnd.example.weights.v1";
const EMPTY: &str = "application/vnd.oci.empty.v1+json";
const DOCKER_MODEL_CONFIG: &str = "application/vnd.docker.ai.model.config.v0.1+json";
const GGUF: &str = "application/vnd.docker.ai.gguf.v3";
const DOCKER_LICENSE: &str = "application/vnd.docker.ai.license";
const MODELPACK_TYPE: &str = "application/vnd.cncf.model.manifest.v1+json";
const MODELPACK_CONFIG: &str = "application/vnd.cncf.model.config.v1+json";
const MODELPACK_WEIGHT: &str = "application/vnd.cncf.model.weight.v1.raw";
const MODELPACK_WEIGHT_CONFIG: &str = "application/vnd.cncf.model.weight.config.v1.raw";

/// One pushed artifact: its reference and manifest digest.
struct Pushed {
    reference: String,
    digest: String,
}

struct Seeded {
    oras: Pushed,
    docker_model: Pushed,
    modelpack: Pushed,
    /// An OCI index whose one entry, without a platform, is the oras-style artifact.
    oras_index: Pushed,
    /// The manifest digest of the oras artifact inside `oras_index`.
    oras_index_entry: String,
}

/// Pushes config + layers (each `(media type, bytes)`) and a manifest under `tag`.
fn push_artifact(
    p: &Pusher,
    repo: &str,
    tag: &str,
    artifact_type: Option<&str>,
    config: (&str, &[u8]),
    layers: &[(&str, &[u8])],
) -> (Pushed, Vec<u8>) {
    let (config_digest, config_size) = p.blob(repo, config.1);
    let layers: Vec<Value> = layers
        .iter()
        .map(|(mt, bytes)| {
            let (digest, size) = p.blob(repo, bytes);
            json!({"mediaType": mt, "digest": digest, "size": size})
        })
        .collect();
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": config.0, "digest": config_digest, "size": config_size},
        "layers": layers,
    });
    if let Some(t) = artifact_type {
        manifest["artifactType"] = t.into();
    }
    let bytes = serde_json::to_vec(&manifest).unwrap();
    let digest = p.manifest(repo, tag, OCI_MANIFEST, &bytes);
    (
        Pushed {
            reference: format!("{}/{repo}:{tag}", anon().host),
            digest,
        },
        bytes,
    )
}

fn seeded() -> &'static Seeded {
    static S: OnceLock<Seeded> = OnceLock::new();
    S.get_or_init(|| {
        let p = Pusher::new(anon());
        let (oras, oras_bytes) = push_artifact(
            &p,
            "artifacts/oras",
            "v1",
            Some(ORAS_TYPE),
            (EMPTY, b"{}"),
            &[(ORAS_LAYER, b"not a tar: model weights")],
        );
        let model_config = json!({
            "descriptor": {"createdAt": "2026-01-01T00:00:00Z"},
            "config": {"format": "gguf", "format_version": "3", "size": "8"},
            "files": [{"diffID": sha256_digest(b"GGUFdata"), "type": GGUF}],
        });
        let (docker_model, _) = push_artifact(
            &p,
            "artifacts/docker-model",
            "v1",
            None,
            (
                DOCKER_MODEL_CONFIG,
                &serde_json::to_vec(&model_config).unwrap(),
            ),
            &[(GGUF, b"GGUFdata"), (DOCKER_LICENSE, b"Apache-2.0")],
        );
        let pack_config = json!({
            "descriptor": {"name": "tiny", "family": "test"},
            "modelfs": {"type": "layers", "diffIds": [sha256_digest(b"weights")]},
            "config": {"format": "safetensors"},
        });
        let (modelpack, _) = push_artifact(
            &p,
            "artifacts/modelpack",
            "v1",
            Some(MODELPACK_TYPE),
            (MODELPACK_CONFIG, &serde_json::to_vec(&pack_config).unwrap()),
            &[
                (MODELPACK_WEIGHT, b"weights"),
                (MODELPACK_WEIGHT_CONFIG, b"{\"hidden\":2}"),
            ],
        );
        // The same artifact by digest in another repository, under an index with no platform.
        // Its blobs first: distribution refuses a manifest whose blobs it lacks.
        p.blob("artifacts/oras-index", b"{}");
        p.blob("artifacts/oras-index", b"not a tar: model weights");
        let entry = p.manifest(
            "artifacts/oras-index",
            &sha256_digest(&oras_bytes),
            OCI_MANIFEST,
            &oras_bytes,
        );
        let index = json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "artifactType": ORAS_TYPE,
            "manifests": [{"mediaType": OCI_MANIFEST, "digest": entry, "size": oras_bytes.len(), "artifactType": ORAS_TYPE}],
        });
        let index_bytes = serde_json::to_vec(&index).unwrap();
        let index_digest = p.manifest("artifacts/oras-index", "v1", OCI_INDEX, &index_bytes);
        Seeded {
            oras,
            docker_model,
            modelpack,
            oras_index: Pushed {
                reference: format!("{}/artifacts/oras-index:v1", anon().host),
                digest: index_digest,
            },
            oras_index_entry: entry,
        }
    })
}

/// `check -o json --insecure-registry <anon> --platform linux/amd64 <args…>`.
fn check_json(args: &[&str]) -> Run {
    let host = anon().host.clone();
    let mut all = vec!["--insecure-registry", &host, "--platform", "linux/amd64"];
    all.extend_from_slice(args);
    check(&all)
}

/// `check` in text, the elapsed milliseconds written `Nms`.
fn check_text(args: &[&str]) -> Run {
    let host = anon().host.clone();
    let mut all = vec![
        "check",
        "--insecure-registry",
        &host,
        "--platform",
        "linux/amd64",
    ];
    all.extend_from_slice(args);
    let mut r = run(&all, &[]);
    r.stdout = r
        .stdout
        .lines()
        .map(|l| {
            l.split(' ')
                .map(|w| {
                    let digits = w.trim_end_matches("ms:").trim_end_matches("ms");
                    if !digits.is_empty()
                        && digits.len() < w.len()
                        && digits.bytes().all(|b| b.is_ascii_digit())
                    {
                        w.replacen(digits, "N", 1)
                    } else {
                        w.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n");
    r
}

const ORAS_DETAIL: &str = "OCI artifact application/vnd.example.model.v1 (config application/vnd.oci.empty.v1+json, layers application/vnd.example.weights.v1): containerd pulls it but can't run it as a container, and its 1 layer is not an image layer, so as an image volume containerd mounts an empty directory or fails (ImageVolumeMountFailed); CRI-O mounts artifacts (--node-runtime cri-o)";

const SINGLE_NOTE: &str =
    "an OCI artifact has no platform; containerd matches none for a single manifest";

#[test]
fn oras_style_artifact_is_unusable_on_containerd() {
    let s = seeded();
    let r = check_json(&[&s.oras.reference]);
    r.assert_code(15);
    let mut o = r.image(0);
    assert!(o["elapsed_ms"].is_u64());
    o.as_object_mut().unwrap().remove("elapsed_ms");
    assert_eq!(
        o,
        json!({
            "image": s.oras.reference,
            "reference": s.oras.reference,
            "verdict": "unusable_artifact",
            "exit_code": 15,
            "detail": ORAS_DETAIL,
            "digest": s.oras.digest,
            "media_type": OCI_MANIFEST,
            "platform": {"target": "linux/amd64", "result": "artifact", "matched": null, "child_digest": null, "note": SINGLE_NOTE},
            "artifact": {
                "artifact_type": ORAS_TYPE,
                "config_media_type": EMPTY,
                "layer_media_types": [ORAS_LAYER],
                "image_layers": 0,
                "layers": 1,
            },
            "registry": anon().host,
            "endpoint": anon().host,
            "credential": null,
            "warnings": [],
        })
    );
    assert_eq!(r.json()["exit_code"], 15);
}

#[test]
fn docker_model_artifact_is_told_by_its_config() {
    let s = seeded();
    let r = check_json(&[&s.docker_model.reference]);
    r.assert_code(15);
    let o = r.image(0);
    assert_eq!(o["verdict"], "unusable_artifact");
    assert_eq!(o["digest"], s.docker_model.digest.as_str());
    assert_eq!(
        o["detail"],
        "OCI artifact with config application/vnd.docker.ai.model.config.v0.1+json (layers application/vnd.docker.ai.gguf.v3, application/vnd.docker.ai.license): containerd pulls it but can't run it as a container, and none of its 2 layers is an image layer, so as an image volume containerd mounts an empty directory or fails (ImageVolumeMountFailed); CRI-O mounts artifacts (--node-runtime cri-o)"
    );
    assert_eq!(
        o["artifact"],
        json!({
            "artifact_type": null,
            "config_media_type": DOCKER_MODEL_CONFIG,
            "layer_media_types": [GGUF, DOCKER_LICENSE],
            "image_layers": 0,
            "layers": 2,
        })
    );
    assert_eq!(o["platform"]["result"], "artifact");
}

#[test]
fn modelpack_artifact_is_unusable_on_containerd() {
    let s = seeded();
    let r = check_json(&[&s.modelpack.reference]);
    r.assert_code(15);
    let o = r.image(0);
    assert_eq!(
        o["detail"],
        "OCI artifact application/vnd.cncf.model.manifest.v1+json (config application/vnd.cncf.model.config.v1+json, layers application/vnd.cncf.model.weight.v1.raw, application/vnd.cncf.model.weight.config.v1.raw): containerd pulls it but can't run it as a container, and none of its 2 layers is an image layer, so as an image volume containerd mounts an empty directory or fails (ImageVolumeMountFailed); CRI-O mounts artifacts (--node-runtime cri-o)"
    );
    assert_eq!(
        o["artifact"],
        json!({
            "artifact_type": MODELPACK_TYPE,
            "config_media_type": MODELPACK_CONFIG,
            "layer_media_types": [MODELPACK_WEIGHT, MODELPACK_WEIGHT_CONFIG],
            "image_layers": 0,
            "layers": 2,
        })
    );
}

#[test]
fn text_lines_name_the_artifact_and_never_a_platform() {
    let s = seeded();
    let image = fixture().images.oci_manifest.reference(anon());
    let host = &anon().host;
    let r = check_text(&[&image, &s.oras.reference, &s.modelpack.reference]);
    r.assert_code(15);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "pullable          {image} {} platform linux/amd64 (single-platform image) registry={host} Nms",
                fixture().images.oci_manifest.digest
            ),
            format!(
                "unusable_artifact {} {} artifact {ORAS_TYPE} (no platform) registry={host} Nms: {ORAS_DETAIL}",
                s.oras.reference, s.oras.digest
            ),
            format!(
                "unusable_artifact {} {} artifact {MODELPACK_TYPE} (no platform) registry={host} Nms: {}",
                s.modelpack.reference,
                s.modelpack.digest,
                check_json(&[&s.modelpack.reference]).image(0)["detail"]
                    .as_str()
                    .unwrap()
            ),
        ]
    );
    assert_eq!(r.stderr, "");
}

#[test]
fn the_plain_image_control_has_no_artifact() {
    let img = &fixture().images.oci_manifest;
    let r = check_json(&[&img.reference(anon())]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["platform"]["result"], "single_manifest");
    assert_eq!(o.get("artifact"), None);
}

#[test]
fn exit_code_is_the_lowest_permanent_one() {
    let s = seeded();
    let missing = format!("{}/artifacts/oras:nope", anon().host);
    let r = check_json(&[&s.oras.reference, &missing]);
    r.assert_code(11);
    assert_eq!(r.image(0)["exit_code"], 15);
    assert_eq!(r.image(1)["verdict"], "not_found");
}

#[test]
fn cri_o_passes_an_artifact_with_a_warning() {
    let s = seeded();
    let r = check_json(&["--node-runtime", "cri-o", &s.oras.reference]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(
        o["detail"],
        "OCI artifact application/vnd.example.model.v1 (config application/vnd.oci.empty.v1+json, layers application/vnd.example.weights.v1): CRI-O mounts artifacts as image volumes"
    );
    assert_eq!(
        o["warnings"],
        json!([
            "OCI artifact application/vnd.example.model.v1 (config application/vnd.oci.empty.v1+json, layers application/vnd.example.weights.v1): CRI-O mounts it as an image volume, but can't run it as a container's image"
        ])
    );
    assert_eq!(o["platform"]["result"], "artifact");
}

#[test]
fn index_of_artifacts_matches_the_platformless_entry_by_its_config() {
    let s = seeded();
    let r = check_json(&[&s.oras_index.reference]);
    r.assert_code(12);
    let o = r.image(0);
    assert_eq!(o["verdict"], "platform_missing");
    assert_eq!(o["digest"], s.oras_index.digest.as_str());
    assert_eq!(o["media_type"], OCI_INDEX);
    assert_eq!(
        o["detail"],
        format!(
            "the index's entry without a platform, {}, is an OCI artifact {ORAS_TYPE} (config {EMPTY}, layers {ORAS_LAYER}): containerd matches such an entry by its config's os and architecture, which the empty config lacks, so the pull fails (no match for platform in manifest)",
            s.oras_index_entry
        )
    );
    assert_eq!(
        o["platform"],
        json!({
            "target": "linux/amd64",
            "result": "artifact",
            "matched": null,
            "child_digest": s.oras_index_entry,
            "note": "an index entry without a platform is matched by its config, and an OCI artifact's config has no platform",
        })
    );
    assert_eq!(o["warnings"], json!([]));
    assert_eq!(o["artifact"]["artifact_type"], ORAS_TYPE);
}

#[test]
fn explain_says_what_the_runtime_does_with_an_artifact() {
    let s = seeded();
    let host = anon().host.clone();
    let r = run(
        &["explain", "--insecure-registry", &host, &s.oras.reference],
        &[],
    );
    r.assert_code(0);
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("artifacts:"))
        .unwrap_or_else(|| panic!("no artifacts line:\n{}", r.stdout));
    assert_eq!(
        line,
        "artifacts:    an OCI artifact (artifactType, or a config that is not an image config) is unusable_artifact (15): containerd can't run it, and mounts as an image volume only one with image layers its own config lists (those pass with a warning)"
    );
    let r = run(
        &[
            "explain",
            "-o",
            "json",
            "--node-runtime",
            "cri-o",
            &s.oras.reference,
        ],
        &[],
    );
    r.assert_code(0);
    assert_eq!(
        r.json()["artifacts"],
        "an OCI artifact passes with a warning: CRI-O mounts artifacts as image volumes but can't run one as a container"
    );
}

/// A Job injected before exit code 15 existed (FailJob on 10–14): `lint --strict` says the
/// rule misses a permanent code, and `inject --fail-fast` rewrites it to 10–15.
#[test]
fn rules_injected_before_code_15_are_flagged_and_rewritten() {
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/job-pod-failure-policy.injected.yaml"),
    )
    .unwrap();
    let old: String = example
        .lines()
        .filter(|l| l.trim() != "- 15")
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(old.lines().count() + 1, example.lines().count());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.yaml");
    std::fs::write(&file, &old).unwrap();
    let path = file.to_str().unwrap();
    let r = run(&["lint", "--strict", "-o", "json", "-f", path], &[]);
    r.assert_code(30);
    assert_eq!(
        r.json()["findings"],
        json!([{
            "file": path,
            "rule": "pod-failure-policy-without-pullcheck",
            "kind": "Job",
            "namespace": "media",
            "name": "render",
            "document": 1,
            "path": "/spec/podFailurePolicy/rules",
            "message": "podFailurePolicy lacks a FailJob rule for container pullcheck, codes 10-15",
        }])
    );
    let r = run(
        &[
            "inject",
            "--fail-fast",
            "--image",
            crate::support::CHECKER_IMAGE,
            "-f",
            path,
        ],
        &[],
    );
    r.assert_code(0);
    let body: String = example
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(r.stdout, body);
}
