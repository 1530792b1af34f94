//! What a node's runtime does with an OCI artifact a tag resolved to: the one rule behind
//! the `unusable_artifact` verdict (exit 15).
//!
//! Read from containerd v2.2.7 (the node harness runs 2.2):
//! - **The pull succeeds.** A single manifest's platform is never matched: `images.Manifest`
//!   (`core/images/image.go`) skips the platform check for the root descriptor, and
//!   `images.FilterPlatforms` (`core/images/handlers.go`) filters only an index's children.
//!   The unpacker (`core/unpack/unpacker.go`, `Unpacker.Unpack`) unpacks only under a config
//!   that `images.IsConfigType` accepts (`core/images/mediatypes.go`); under any other config
//!   the layers are fetched and nothing is unpacked, without an error. The CRI then stores
//!   the image under its config digest (`internal/cri/server/images/image_pull.go`,
//!   `CRIImageService.PullImage`). So the kubelet never reports `ErrImagePull` for one.
//! - **As a container image it can't run.** There is no image config to run: an empty
//!   config has no command (`internal/cri/opts/spec_opts.go`, "no command specified") and no
//!   rootfs; a config that lists `rootfs.diff_ids` names snapshots that were never unpacked
//!   (`internal/cri/opts/container.go`, `WithNewSnapshot`, whose retry unpacks nothing for a
//!   non-image config). The kubelet reports `CreateContainerError` and retries it forever.
//! - **As an image volume** (KEP-4639; `internal/cri/server/container_image_mount.go`,
//!   `mutateImageMount`) containerd unpacks the image (`client/image.go`, `Unpack` and
//!   `getLayers`): only layers of image-layer media types count, and their number must
//!   equal the config's `rootfs.diff_ids`. An artifact with no such layer and a config that
//!   lists none (the empty `{}` config of oras, ModelPack's `modelfs`) mounts an **empty**
//!   directory: the container starts without the artifact's files. One whose counts differ
//!   fails with `ImageVolumeMountFailed` ("mismatched image rootfs and manifest layers")
//!   as a `CreateContainerError`. Only an artifact with image layers that its own config
//!   lists in `rootfs.diff_ids` mounts with its content.
//!
//! containerd 1.7 is given the same rule: its pull and container paths are the 2.x ones
//! for this question and it has no image volumes (not read line by line: an assumption).
//! CRI-O keeps OCI artifacts in an artifact store and mounts them as image volumes (issue
//! 22; not read from CRI-O's source nor run here), so there an artifact passes with a
//! warning that it can't be a container's image.

use super::NodeRuntime;
use crate::manifest::artifact::{Artifact, OCI_EMPTY};
use crate::verdict::Verdict;

/// What the node's runtime does with an artifact, as a verdict and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArtifactUse {
    /// [`Verdict::UnusableArtifact`] or [`Verdict::Pullable`].
    pub verdict: Verdict,
    /// One line: what the runtime does with it (the outcome's `detail`).
    pub detail: String,
    /// For a pass: what the pass does not cover (a warning on the outcome).
    pub warning: Option<String>,
}

/// The rule: what `runtime` does with `artifact`, used either as a container's image or as
/// an image volume (`check` does not know which, so an artifact fails only when neither use
/// works).
///
/// On containerd an artifact is [`Verdict::UnusableArtifact`] unless its config is an
/// image config (containerd then runs it as an image) or it has image layers and a config
/// of its own, which may list them (the config blob is not read): those pass with a
/// warning. On CRI-O every artifact passes with a warning.
pub(crate) fn artifact_use(runtime: NodeRuntime, artifact: &Artifact) -> ArtifactUse {
    let what = describe(artifact);
    if artifact.has_image_config() {
        return ArtifactUse {
            verdict: Verdict::Pullable,
            detail: format!("{what}: its config is an image config, so it runs as an image"),
            warning: None,
        };
    }
    match runtime {
        NodeRuntime::CriO => ArtifactUse {
            verdict: Verdict::Pullable,
            detail: format!("{what}: CRI-O mounts artifacts as image volumes"),
            warning: Some(format!(
                "{what}: CRI-O mounts it as an image volume, but can't run it as a container's image"
            )),
        },
        NodeRuntime::Containerd2 | NodeRuntime::Containerd1_7 => {
            let config_lists_none = artifact.config_media_type == OCI_EMPTY;
            if artifact.image_layers > 0 && !config_lists_none {
                return ArtifactUse {
                    verdict: Verdict::Pullable,
                    detail: format!("{what}: containerd can mount it as an image volume"),
                    warning: Some(format!(
                        "{what}: containerd can't run it as a container's image; as an image volume it mounts only if its config's rootfs.diff_ids list its {} image layers (the config is not read)",
                        artifact.image_layers
                    )),
                };
            }
            let volume = if artifact.image_layers == 0 {
                let layers = match artifact.layers {
                    1 => "its 1 layer is not an image layer".to_string(),
                    n => format!("none of its {n} layers is an image layer"),
                };
                format!(
                    "{layers}, so as an image volume containerd mounts an empty directory or fails (ImageVolumeMountFailed)"
                )
            } else {
                "its empty config lists no layer, so as an image volume containerd fails to mount it (ImageVolumeMountFailed: mismatched image rootfs and manifest layers)".to_string()
            };
            ArtifactUse {
                verdict: Verdict::UnusableArtifact,
                detail: format!(
                    "{what}: containerd pulls it but can't run it as a container, and {volume}; CRI-O mounts artifacts (--node-runtime cri-o)"
                ),
                warning: None,
            }
        }
    }
}

/// The rule for an index entry without a platform that is an OCI artifact (`digest`: the
/// entry's). containerd accepts such an entry while pulling, then matches it by its config's
/// `os` and `architecture` (`images.Manifest` with `images.ConfigPlatform`,
/// `core/images/image.go`, through the CRI's `image.Config` after the pull): the empty
/// config `{}` has neither, so the pull fails with "no match for platform in manifest"
/// ([`Verdict::PlatformMissing`], what the kubelet then reports). Any other config is not
/// read: its entry gets [`artifact_use`]'s answer, said to depend on those fields. On CRI-O,
/// [`artifact_use`]'s.
pub(crate) fn indexed_artifact_use(
    runtime: NodeRuntime,
    artifact: &Artifact,
    digest: &str,
) -> ArtifactUse {
    let what = describe(artifact);
    if runtime != NodeRuntime::CriO && artifact.config_media_type == OCI_EMPTY {
        return ArtifactUse {
            verdict: Verdict::PlatformMissing,
            detail: format!(
                "the index's entry without a platform, {digest}, is an {what}: containerd matches such an entry by its config's os and architecture, which the empty config lacks, so the pull fails (no match for platform in manifest)"
            ),
            warning: None,
        };
    }
    let u = artifact_use(runtime, artifact);
    let matched = if runtime == NodeRuntime::CriO {
        String::new()
    } else {
        " (containerd matches it by its config's os and architecture, not read; without them the pull fails with no match for platform in manifest)".to_string()
    };
    ArtifactUse {
        detail: format!(
            "the index's entry without a platform, {digest}{matched}: {}",
            u.detail
        ),
        ..u
    }
}

/// `OCI artifact application/vnd.example.model (config …, layers …)`.
fn describe(a: &Artifact) -> String {
    let layers = if a.layer_media_types.is_empty() {
        "no layers".to_string()
    } else {
        format!("layers {}", a.layer_media_types.join(", "))
    };
    match &a.artifact_type {
        Some(t) => format!(
            "OCI artifact {t} (config {}, {layers})",
            a.config_media_type
        ),
        None => format!(
            "OCI artifact with config {} ({layers})",
            a.config_media_type
        ),
    }
}

/// What `explain` says the runtime does with an artifact, for its plan.
pub(crate) fn plan_line(runtime: NodeRuntime) -> &'static str {
    match runtime {
        NodeRuntime::Containerd2 | NodeRuntime::Containerd1_7 => {
            "an OCI artifact (artifactType, or a config that is not an image config) is unusable_artifact (15): containerd can't run it, and mounts as an image volume only one with image layers its own config lists (those pass with a warning)"
        }
        NodeRuntime::CriO => {
            "an OCI artifact passes with a warning: CRI-O mounts artifacts as image volumes but can't run one as a container"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::artifact::OCI_IMAGE_CONFIG;

    fn oras() -> Artifact {
        Artifact {
            artifact_type: Some("application/vnd.example.model.v1".into()),
            config_media_type: OCI_EMPTY.into(),
            layer_media_types: vec!["application/vnd.example.weights.v1".into()],
            image_layers: 0,
            layers: 1,
        }
    }

    #[test]
    fn containerd_cannot_use_an_artifact_without_image_layers() {
        let u = artifact_use(NodeRuntime::Containerd2, &oras());
        assert_eq!(
            u,
            ArtifactUse {
                verdict: Verdict::UnusableArtifact,
                detail: "OCI artifact application/vnd.example.model.v1 (config application/vnd.oci.empty.v1+json, layers application/vnd.example.weights.v1): containerd pulls it but can't run it as a container, and its 1 layer is not an image layer, so as an image volume containerd mounts an empty directory or fails (ImageVolumeMountFailed); CRI-O mounts artifacts (--node-runtime cri-o)".into(),
                warning: None,
            }
        );
        assert_eq!(
            artifact_use(NodeRuntime::Containerd1_7, &oras()).verdict,
            Verdict::UnusableArtifact
        );
    }

    #[test]
    fn an_empty_config_with_tar_layers_fails_to_mount() {
        let a = Artifact {
            layer_media_types: vec!["application/vnd.oci.image.layer.v1.tar".into()],
            image_layers: 1,
            ..oras()
        };
        let u = artifact_use(NodeRuntime::Containerd2, &a);
        assert_eq!(u.verdict, Verdict::UnusableArtifact);
        assert!(
            u.detail.contains("its empty config lists no layer"),
            "{}",
            u.detail
        );
    }

    #[test]
    fn image_layers_under_a_config_of_its_own_pass_with_a_warning() {
        let a = Artifact {
            artifact_type: None,
            config_media_type: "application/vnd.example.config.v1+json".into(),
            layer_media_types: vec!["application/vnd.oci.image.layer.v1.tar+gzip".into()],
            image_layers: 2,
            layers: 2,
        };
        let u = artifact_use(NodeRuntime::Containerd2, &a);
        assert_eq!(u.verdict, Verdict::Pullable);
        assert_eq!(
            u.warning.as_deref(),
            Some(
                "OCI artifact with config application/vnd.example.config.v1+json (layers application/vnd.oci.image.layer.v1.tar+gzip): containerd can't run it as a container's image; as an image volume it mounts only if its config's rootfs.diff_ids list its 2 image layers (the config is not read)"
            )
        );
    }

    #[test]
    fn cri_o_and_image_configs_pass() {
        let u = artifact_use(NodeRuntime::CriO, &oras());
        assert_eq!(u.verdict, Verdict::Pullable);
        assert!(u.warning.is_some());
        let a = Artifact {
            config_media_type: OCI_IMAGE_CONFIG.into(),
            ..oras()
        };
        let u = artifact_use(NodeRuntime::Containerd2, &a);
        assert_eq!((u.verdict, u.warning), (Verdict::Pullable, None));
    }
}
