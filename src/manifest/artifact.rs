//! Telling an OCI artifact from a container image, from the manifest body alone.
//!
//! An artifact is a manifest that says it is one (`artifactType`, OCI image-spec
//! `manifest.md` and `artifacts-guidance.md`) or whose config is not an image config. What
//! a node's runtime then does with it is decided elsewhere (`engine::artifact`): here are
//! only the facts read from the body. The media type names are the OCI image-spec's
//! (`media-types.md`; the oci-spec crate's `MediaType::ImageConfig` and `EmptyJSON`, not
//! linked for these few strings: see the module doc of [`super`]) and containerd's
//! `core/images/mediatypes.go` (`IsConfigType`, `IsLayerType`).

use serde::{Deserialize, Serialize};

/// The OCI image config: what containerd runs and unpacks.
pub const OCI_IMAGE_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
/// Docker's image config (schema 2), which containerd treats as the OCI one.
pub const DOCKER_IMAGE_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
/// The config some old registries stored Docker images under (distribution#1622); containerd
/// converts such a manifest to a Docker schema 2 image before storing it
/// (`core/transfer/local/pull.go`, `hasMediaTypeBug1622`), so it is an image config too.
pub const LEGACY_OCTET_STREAM_CONFIG: &str = "application/octet-stream";
/// The OCI empty descriptor's media type: its content is always `{}` (image-spec
/// `manifest.md`, "Guidance for an Empty Descriptor"), so such a config lists no layers.
pub const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";

/// True for the config media types containerd runs as an image (`images.IsConfigType`:
/// the OCI and Docker image configs), and the legacy type it converts to one.
pub fn is_image_config(media_type: &str) -> bool {
    matches!(
        media_type,
        OCI_IMAGE_CONFIG | DOCKER_IMAGE_CONFIG | LEGACY_OCTET_STREAM_CONFIG
    )
}

/// True for the layer media types containerd unpacks into a snapshot (`images.IsLayerType`:
/// every `application/vnd.oci.image.layer.*`, and Docker's rootfs diff types with any `+`
/// suffix). Other layers are fetched and never unpacked.
pub fn is_image_layer(media_type: &str) -> bool {
    if media_type.starts_with("application/vnd.oci.image.layer.") {
        return true;
    }
    let base = media_type.split('+').next().unwrap_or(media_type);
    matches!(
        base,
        "application/vnd.docker.image.rootfs.diff.tar"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip"
            | "application/vnd.docker.image.rootfs.foreign.diff.tar"
            | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.zstd"
    )
}

/// What a single manifest body says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// An image: its config is an image config and it names no `artifactType`.
    Image,
    /// An OCI artifact ([`Artifact`] holds what it is).
    Artifact(Artifact),
}

/// The facts of an OCI artifact that decide what a runtime does with it. Serialized as the
/// JSON document's `artifact` object (docs/json-schema.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    /// The manifest's `artifactType`, when it sets one (oras, ModelPack); `None` for
    /// artifacts told only by their config (`docker model`).
    pub artifact_type: Option<String>,
    /// The config's `mediaType`, e.g. [`OCI_EMPTY`] or
    /// `application/vnd.docker.ai.model.config.v0.1+json`; empty when the manifest has none.
    pub config_media_type: String,
    /// Each distinct layer media type, in manifest order.
    pub layer_media_types: Vec<String>,
    /// How many layers containerd would unpack ([`is_image_layer`]).
    pub image_layers: usize,
    /// How many layers the manifest lists.
    pub layers: usize,
}

impl Artifact {
    /// True when the config is an image config: only `artifactType` makes it an artifact,
    /// and containerd, which looks at the config alone, runs it as an image.
    pub fn has_image_config(&self) -> bool {
        is_image_config(&self.config_media_type)
    }

    /// The type to name it by: `artifactType`, else the config's media type.
    pub fn type_name(&self) -> &str {
        self.artifact_type
            .as_deref()
            .unwrap_or(&self.config_media_type)
    }
}

#[derive(Deserialize)]
struct Body {
    #[serde(rename = "artifactType", default)]
    artifact_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default, deserialize_with = "crate::platform::null_as_empty")]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
}

/// The shape of a single manifest (OCI image manifest or Docker schema 2) from its body.
///
/// `None` when the body is not a JSON object of that shape, or has no config at all
/// (Docker schema 1): the caller then says nothing about it, as before. An empty
/// `artifactType` counts as absent (Go's decoder leaves an empty string the same as none).
pub fn shape(body: &[u8]) -> Option<Shape> {
    let body: Body = serde_json::from_slice(body).ok()?;
    let config_media_type = body.config?.media_type.unwrap_or_default();
    let artifact_type = body.artifact_type.filter(|t| !t.is_empty());
    if artifact_type.is_none() && is_image_config(&config_media_type) {
        return Some(Shape::Image);
    }
    let mut layer_media_types: Vec<String> = Vec::new();
    let mut image_layers = 0;
    for l in &body.layers {
        let t = l.media_type.clone().unwrap_or_default();
        if is_image_layer(&t) {
            image_layers += 1;
        }
        if !layer_media_types.contains(&t) {
            layer_media_types.push(t);
        }
    }
    Some(Shape::Artifact(Artifact {
        artifact_type,
        config_media_type,
        layer_media_types,
        image_layers,
        layers: body.layers.len(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(body: &str) -> Artifact {
        match shape(body.as_bytes()) {
            Some(Shape::Artifact(a)) => a,
            other => panic!("expected an artifact, got {other:?}"),
        }
    }

    #[test]
    fn images_are_images() {
        for config in [
            OCI_IMAGE_CONFIG,
            DOCKER_IMAGE_CONFIG,
            LEGACY_OCTET_STREAM_CONFIG,
        ] {
            let body = format!(
                r#"{{"schemaVersion":2,"config":{{"mediaType":"{config}"}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip"}}]}}"#
            );
            assert_eq!(shape(body.as_bytes()), Some(Shape::Image), "{config}");
        }
        // An empty artifactType is no artifactType.
        let body =
            format!(r#"{{"artifactType":"","config":{{"mediaType":"{OCI_IMAGE_CONFIG}"}}}}"#);
        assert_eq!(shape(body.as_bytes()), Some(Shape::Image));
    }

    #[test]
    fn oras_style_artifact() {
        let a = artifact(
            r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
            "artifactType":"application/vnd.example.model.v1",
            "config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},
            "layers":[{"mediaType":"application/vnd.example.weights.v1"},{"mediaType":"application/vnd.example.weights.v1"}]}"#,
        );
        assert_eq!(
            a,
            Artifact {
                artifact_type: Some("application/vnd.example.model.v1".into()),
                config_media_type: OCI_EMPTY.into(),
                layer_media_types: vec!["application/vnd.example.weights.v1".into()],
                image_layers: 0,
                layers: 2,
            }
        );
        assert_eq!(a.type_name(), "application/vnd.example.model.v1");
        assert!(!a.has_image_config());
    }

    #[test]
    fn config_alone_makes_an_artifact() {
        let a = artifact(
            r#"{"schemaVersion":2,"config":{"mediaType":"application/vnd.docker.ai.model.config.v0.1+json"},
            "layers":[{"mediaType":"application/vnd.docker.ai.gguf.v3"},{"mediaType":"application/vnd.oci.image.layer.v1.tar"}]}"#,
        );
        assert_eq!(a.artifact_type, None);
        assert_eq!(
            a.type_name(),
            "application/vnd.docker.ai.model.config.v0.1+json"
        );
        assert_eq!((a.image_layers, a.layers), (1, 2));
    }

    #[test]
    fn artifact_type_with_an_image_config() {
        let a = artifact(&format!(
            r#"{{"artifactType":"application/vnd.example.sbom","config":{{"mediaType":"{OCI_IMAGE_CONFIG}"}},"layers":null}}"#
        ));
        assert!(a.has_image_config());
        assert_eq!(a.layers, 0);
    }

    #[test]
    fn unreadable_bodies_say_nothing() {
        for body in [
            &b"not json"[..],
            b"[]",
            br#"{"schemaVersion":1,"fsLayers":[]}"#,
            br#"{"config":{"mediaType":7}}"#,
        ] {
            assert_eq!(shape(body), None, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn layer_types_as_containerd_reads_them() {
        for t in [
            "application/vnd.oci.image.layer.v1.tar",
            "application/vnd.oci.image.layer.v1.tar+zstd",
            "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
            "application/vnd.docker.image.rootfs.diff.tar.gzip+encrypted",
        ] {
            assert!(is_image_layer(t), "{t}");
        }
        for t in [
            "application/vnd.cncf.model.weight.v1.tar",
            "application/vnd.docker.ai.gguf.v3",
            "application/octet-stream",
            "",
        ] {
            assert!(!is_image_layer(t), "{t}");
        }
    }
}
