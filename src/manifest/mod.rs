//! Manifest media types and the part of an index the checker reads.
//!
//! Deliberately minimal serde structs rather than the `oci-spec` crate: the checker needs
//! only a manifest's media type and, for an index, each entry's `mediaType`, `digest`, `size`
//! and `platform`. The same structs must read both an OCI image index and a Docker manifest
//! list (identical shapes for these fields), must ignore unknown fields and tolerate missing
//! or `null` ones the way Go's `encoding/json` does in containerd, and must not reject a body
//! over a field the checker never looks at (oci-spec validates required fields and enum
//! values strictly). Media types: containerd `core/images/mediatypes.go` and the
//! OCI image-spec `media-types.md`.

use serde::{Deserialize, Serialize};

use crate::platform::Platform;

pub mod artifact;
mod select;
pub use select::{Selection, select};

/// OCI image index (multi-platform).
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// OCI image manifest.
pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Docker manifest list (Docker's multi-platform index).
pub(crate) const DOCKER_MANIFEST_LIST: &str =
    "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker image manifest, schema 2.
pub(crate) const DOCKER_MANIFEST_V2: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker image manifest, schema 1, signed (rejected by containerd ≥ 2.0 when fetched).
pub(crate) const DOCKER_MANIFEST_V1_SIGNED: &str =
    "application/vnd.docker.distribution.manifest.v1+prettyjws";
/// Docker image manifest, schema 1, unsigned (rejected by containerd ≥ 2.0 when fetched).
pub(crate) const DOCKER_MANIFEST_V1: &str = "application/vnd.docker.distribution.manifest.v1+json";

/// The `Accept` header value for manifest requests: one header, comma-separated.
///
/// The first four types and the trailing `*/*` are exactly what containerd's resolver sends,
/// in its order (Docker schema 2, Docker list, OCI manifest, OCI index; CD resolver.go
/// `NewResolver`), so a registry answers the checker as it answers the node. Both schema 1
/// types are added before `*/*` so that registries which serve schema 1 only when it is named
/// still answer with a type (the checker then reports it; containerd ≥ 2.0 refuses it).
/// Leaving out the index types would let some registries substitute a single-platform
/// manifest for a multi-platform tag (distribution's `registry/handlers/manifests.go`
/// `GetManifest` answers a client that accepts no list type with the linux/amd64 child).
pub(crate) const ACCEPT: &str = "application/vnd.docker.distribution.manifest.v2+json, \
application/vnd.docker.distribution.manifest.list.v2+json, \
application/vnd.oci.image.manifest.v1+json, \
application/vnd.oci.image.index.v1+json, \
application/vnd.docker.distribution.manifest.v1+prettyjws, \
application/vnd.docker.distribution.manifest.v1+json, \
*/*";

/// True for the two multi-platform types: OCI index and Docker manifest list.
pub(crate) fn is_index(media_type: &str) -> bool {
    matches!(media_type, OCI_INDEX | DOCKER_MANIFEST_LIST)
}

/// True for the four single-image manifest types: OCI manifest, Docker schema 2, and Docker
/// schema 1 signed and unsigned.
pub(crate) fn is_manifest(media_type: &str) -> bool {
    matches!(
        media_type,
        OCI_MANIFEST | DOCKER_MANIFEST_V2 | DOCKER_MANIFEST_V1_SIGNED | DOCKER_MANIFEST_V1
    )
}

/// Why an index body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The body is not JSON, or a field the checker reads has the wrong JSON type.
    /// `reason` is serde_json's one-line message, with line and column.
    #[error("malformed index: {reason}")]
    Malformed {
        /// What the JSON decoder reported.
        reason: String,
    },
}

/// An OCI image index or Docker manifest list, reduced to what the checker reads.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Index {
    /// The body's own `mediaType`, when present (optional in OCI, set by Docker).
    #[serde(rename = "mediaType", default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The child descriptors (`manifests`), in index order; absent or `null` reads as empty.
    #[serde(default, deserialize_with = "crate::platform::null_as_empty")]
    pub manifests: Vec<IndexEntry>,
}

/// One child descriptor of an index.
///
/// Missing fields read as empty or zero, as Go's decoder leaves them; [`select`]
/// skips entries whose `media_type` is not a manifest or index type.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IndexEntry {
    /// `mediaType` of the child, e.g. [`OCI_MANIFEST`].
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    /// `digest` of the child, `algorithm:hex`.
    #[serde(default)]
    pub digest: String,
    /// `size` of the child in bytes.
    #[serde(default)]
    pub size: u64,
    /// `platform`, absent for platform-less children (which containerd always accepts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
}

/// Parses an index body (OCI index or Docker manifest list).
///
/// Unknown fields are ignored; the body's media type is not checked (the caller decides from
/// [`media_type_of`] that it is an index). Size caps are applied by the caller before this.
///
/// # Errors
/// [`ManifestError::Malformed`] when the body is not a JSON object or a read field has the
/// wrong type (e.g. `"size": "12"`).
pub fn parse_index(body: &[u8]) -> Result<Index, ManifestError> {
    // serde would also read a struct from a JSON array; an index is always an object.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ManifestError::Malformed {
            reason: "expected a JSON object".into(),
        });
    }
    serde_json::from_slice(body).map_err(|e| ManifestError::Malformed {
        reason: e.to_string(),
    })
}

/// The media type of a manifest response, e.g. `application/vnd.oci.image.index.v1+json`.
///
/// `content_type` is the `Content-Type` header, whose parameters (`; charset=…`) are dropped
/// and which is lowercased. It wins when it names a manifest or index type. Otherwise the
/// body's top-level `mediaType` string is used when present (registries that answer
/// `application/json` or `application/octet-stream`), and failing that the header as given
/// (so `text/plain`, which containerd treats as schema 1, reaches the caller). `None` when
/// neither says anything.
pub fn media_type_of(content_type: Option<&str>, body: &[u8]) -> Option<String> {
    let header = content_type
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty());
    if let Some(h) = header.as_deref()
        && (is_index(h) || is_manifest(h))
    {
        return header;
    }
    #[derive(Deserialize)]
    struct Probe {
        #[serde(rename = "mediaType")]
        media_type: Option<serde_json::Value>,
    }
    let from_body = serde_json::from_slice::<Probe>(body)
        .ok()
        .and_then(|p| p.media_type)
        .and_then(|v| v.as_str().map(str::to_owned))
        .filter(|v| !v.is_empty());
    from_body.or(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKER_LIST: &str = r#"{
      "schemaVersion": 2,
      "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
      "manifests": [
        {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "size": 528,
         "digest": "sha256:aa", "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "size": 528,
         "digest": "sha256:bb", "platform": {"architecture": "arm", "os": "linux", "variant": "v7",
         "features": ["sse4"]}}
      ]
    }"#;

    const OCI: &str = r#"{
      "schemaVersion": 2,
      "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 7, "digest": "sha256:cc",
         "platform": {"architecture": "amd64", "os": "windows", "os.version": "10.0.17763.1",
         "os.features": ["win32k"]}, "annotations": {"a": "b"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 7, "digest": "sha256:dd",
         "platform": {"architecture": "unknown", "os": "unknown"},
         "annotations": {"vnd.docker.reference.type": "attestation-manifest"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 7, "digest": "sha256:ee"}
      ],
      "annotations": {"x": "y"}
    }"#;

    #[test]
    fn reads_docker_manifest_list() {
        let index = parse_index(DOCKER_LIST.as_bytes()).unwrap();
        assert_eq!(index.media_type.as_deref(), Some(DOCKER_MANIFEST_LIST));
        assert_eq!(index.manifests.len(), 2);
        assert_eq!(index.manifests[1].digest, "sha256:bb");
        assert_eq!(index.manifests[1].size, 528);
        assert_eq!(
            index.manifests[1].platform,
            Some(Platform::new("linux", "arm", "v7"))
        );
    }

    #[test]
    fn reads_oci_index_with_unknown_fields() {
        let index = parse_index(OCI.as_bytes()).unwrap();
        assert_eq!(index.media_type, None);
        let win = index.manifests[0].platform.as_ref().unwrap();
        assert_eq!(win.os_version.as_deref(), Some("10.0.17763.1"));
        assert_eq!(win.os_features, ["win32k"]);
        assert!(index.manifests[1].platform.as_ref().unwrap().is_unknown());
        assert_eq!(index.manifests[2].platform, None);
        assert_eq!(
            parse_index(br#"{"manifests": null}"#).unwrap().manifests,
            vec![]
        );
    }

    #[test]
    fn rejects_malformed() {
        for body in [
            &b"not json"[..],
            br#"{"manifests": [{"size": "7"}]}"#,
            b"[]",
        ] {
            let err = parse_index(body).unwrap_err();
            assert!(err.to_string().starts_with("malformed index: "), "{err}");
            assert!(!err.to_string().contains('\n'));
        }
    }

    #[test]
    fn classifies_media_types() {
        assert!(is_index(OCI_INDEX) && is_index(DOCKER_MANIFEST_LIST));
        assert!(!is_index(OCI_MANIFEST));
        for t in [
            OCI_MANIFEST,
            DOCKER_MANIFEST_V2,
            DOCKER_MANIFEST_V1_SIGNED,
            DOCKER_MANIFEST_V1,
        ] {
            assert!(is_manifest(t) && !is_index(t), "{t}");
        }
        assert!(!is_manifest("application/vnd.in-toto+json"));
        let accepted: Vec<&str> = ACCEPT.split(", ").collect();
        assert_eq!(accepted.len(), 7);
        assert_eq!(
            accepted[..4],
            [
                DOCKER_MANIFEST_V2,
                DOCKER_MANIFEST_LIST,
                OCI_MANIFEST,
                OCI_INDEX
            ]
        );
        assert_eq!(accepted[6], "*/*");
    }

    #[test]
    fn media_type_from_header_or_body() {
        let body = br#"{"mediaType": "application/vnd.oci.image.index.v1+json"}"#;
        assert_eq!(
            media_type_of(
                Some("application/vnd.docker.distribution.manifest.v2+json; charset=utf-8"),
                body
            )
            .as_deref(),
            Some(DOCKER_MANIFEST_V2)
        );
        assert_eq!(media_type_of(None, body).as_deref(), Some(OCI_INDEX));
        assert_eq!(media_type_of(Some(""), body).as_deref(), Some(OCI_INDEX));
        assert_eq!(
            media_type_of(Some("application/json"), body).as_deref(),
            Some(OCI_INDEX)
        );
        assert_eq!(
            media_type_of(Some("text/plain"), b"{}").as_deref(),
            Some("text/plain")
        );
        assert_eq!(media_type_of(None, b"{}"), None);
        assert_eq!(media_type_of(None, b"garbage"), None);
    }
}
