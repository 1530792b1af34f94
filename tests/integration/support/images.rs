//! Seed images: real blobs and manifests pushed through the registry HTTP API.

use sha2::{Digest as _, Sha256};

use super::http;
use super::registry::Registry;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    pub os: &'static str,
    pub architecture: &'static str,
    pub variant: Option<&'static str>,
}

pub const LINUX_AMD64: Platform = Platform {
    os: "linux",
    architecture: "amd64",
    variant: None,
};
pub const LINUX_ARM64_V8: Platform = Platform {
    os: "linux",
    architecture: "arm64",
    variant: Some("v8"),
};
pub const LINUX_ARM64: Platform = Platform {
    os: "linux",
    architecture: "arm64",
    variant: None,
};

impl Platform {
    fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"os": self.os, "architecture": self.architecture});
        if let Some(variant) = self.variant {
            v["variant"] = variant.into();
        }
        v
    }
}

/// A child manifest referenced by an index / manifest list.
#[derive(Debug, Clone)]
pub struct ImageChild {
    pub digest: String,
    pub media_type: &'static str,
    pub size: usize,
    pub platform: Platform,
    /// False when the child was deleted from the registry (dangling index).
    pub present: bool,
}

/// One seeded image. `digest` is the sha256 of `manifest` (exact bytes pushed).
#[derive(Debug, Clone)]
pub struct Image {
    /// Repository path without host, e.g. `oci/app`.
    pub repo: &'static str,
    /// Tag, or None for `digest_only`.
    pub tag: Option<&'static str>,
    /// `sha256:<hex>` of the top-level manifest / index.
    pub digest: String,
    pub manifest: Vec<u8>,
    /// Index / list children, in manifest order.
    pub children: Vec<ImageChild>,
}

impl Image {
    /// `127.0.0.1:PORT/repo:tag`, or `127.0.0.1:PORT/repo@digest` for untagged images.
    pub fn reference(&self, reg: &Registry) -> String {
        match self.tag {
            Some(tag) => format!("{}/{}:{tag}", reg.host, self.repo),
            None => self.digest_reference(reg),
        }
    }

    /// `127.0.0.1:PORT/repo@sha256:...`
    pub fn digest_reference(&self, reg: &Registry) -> String {
        format!("{}/{}@{}", reg.host, self.repo, self.digest)
    }

    /// Digest of the child for `architecture` (first match). Panics if absent.
    pub fn child_digest(&self, architecture: &str) -> &str {
        &self
            .children
            .iter()
            .find(|c| c.platform.architecture == architecture)
            .unwrap_or_else(|| panic!("{} has no {architecture} child", self.repo))
            .digest
    }
}

/// Every seeded image. See `support` module docs for the exact shapes.
#[derive(Debug, Clone)]
pub struct Images {
    /// `oci/app:v1`: OCI image manifest, config linux/amd64.
    pub oci_manifest: Image,
    /// `docker/app:v1`: Docker schema 2 manifest, linux/amd64.
    pub docker_schema2: Image,
    /// `multi/app:v1`: OCI index: linux/amd64, linux/arm64/v8.
    pub multi_index: Image,
    /// `armonly/app:v1`: OCI index with only linux/arm64 (no variant).
    pub arm_only: Image,
    /// `dockerlist/app:v1`: Docker manifest list: linux/amd64, linux/arm64/v8.
    pub docker_list: Image,
    /// `org/sub/project/img:v1`: OCI manifest, linux/amd64.
    pub deep: Image,
    /// `bydigest/app@sha256:…`: OCI manifest pushed by digest only (no tag).
    pub digest_only: Image,
    /// `private/app:v1`: OCI manifest (token mode: only alice may pull).
    pub private: Image,
    /// `dangling/app:v1`: OCI index with linux/amd64 (deleted: MANIFEST_UNKNOWN)
    /// and linux/arm64/v8 (present).
    pub index_missing_child: Image,
    /// `nested/app:v1`: OCI index whose one entry (linux/amd64) is itself an OCI index,
    /// [`Images::nested_inner`], holding the real linux/amd64 and linux/arm64/v8 manifests.
    pub nested: Image,
    /// The inner index of `nested`, pushed by digest only.
    pub nested_inner: Image,
    /// `nestedarm/app:v1`: OCI index whose linux/amd64 entry is an OCI index,
    /// [`Images::nested_arm_inner`], holding only a linux/arm64 manifest.
    pub nested_arm: Image,
    /// The inner index of `nested_arm`, pushed by digest only.
    pub nested_arm_inner: Image,
}

impl Images {
    pub fn all(&self) -> Vec<&Image> {
        vec![
            &self.oci_manifest,
            &self.docker_schema2,
            &self.multi_index,
            &self.arm_only,
            &self.docker_list,
            &self.deep,
            &self.digest_only,
            &self.private,
            &self.index_missing_child,
            &self.nested,
            &self.nested_inner,
            &self.nested_arm,
            &self.nested_arm_inner,
        ]
    }
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// Pushes through a plain-HTTP anonymous registry.
pub struct Pusher {
    base: String,
}

impl Pusher {
    pub fn new(reg: &Registry) -> Pusher {
        assert_eq!(
            reg.scheme, "http",
            "seeding goes through the anonymous plain-HTTP registry"
        );
        Pusher { base: reg.url() }
    }

    fn req(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> http::Response {
        http::request(&self.base, None, method, path, headers, body)
            .unwrap_or_else(|e| panic!("seeding: {method} {path}: {e}"))
    }

    /// Upload a blob (POST + monolithic PUT). Returns (digest, size).
    pub fn blob(&self, repo: &str, bytes: &[u8]) -> (String, usize) {
        let digest = sha256_digest(bytes);
        let r = self.req("POST", &format!("/v2/{repo}/blobs/uploads/"), &[], &[]);
        assert_eq!(
            r.status,
            202,
            "seeding: start upload in {repo}: {}",
            r.text()
        );
        let location = r.header("Location").expect("upload Location").to_string();
        let sep = if location.contains('?') { '&' } else { '?' };
        let target = format!("{location}{sep}digest={digest}");
        let r = self.req(
            "PUT",
            &target,
            &[("Content-Type", "application/octet-stream")],
            bytes,
        );
        assert_eq!(
            r.status,
            201,
            "seeding: finish upload of {digest} in {repo}: {}",
            r.text()
        );
        (digest, bytes.len())
    }

    /// PUT a manifest under a tag or digest; checks the registry's digest.
    pub fn manifest(&self, repo: &str, reference: &str, media_type: &str, bytes: &[u8]) -> String {
        let digest = sha256_digest(bytes);
        let r = self.req(
            "PUT",
            &format!("/v2/{repo}/manifests/{reference}"),
            &[("Content-Type", media_type)],
            bytes,
        );
        assert_eq!(
            r.status,
            201,
            "seeding: PUT manifest {repo}:{reference}: {}",
            r.text()
        );
        assert_eq!(
            r.header("Docker-Content-Digest"),
            Some(digest.as_str()),
            "seeding: registry computed another digest for {repo}:{reference}"
        );
        digest
    }

    pub fn delete_manifest(&self, repo: &str, digest: &str) {
        let r = self.req(
            "DELETE",
            &format!("/v2/{repo}/manifests/{digest}"),
            &[],
            &[],
        );
        assert_eq!(
            r.status,
            202,
            "seeding: DELETE {repo}@{digest}: {}",
            r.text()
        );
    }
}

fn random_bytes(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut v).unwrap();
    v
}

struct Built {
    bytes: Vec<u8>,
    media_type: &'static str,
}

/// Push config + one random layer and build (not push) a single-platform manifest.
fn build_single(p: &Pusher, repo: &str, docker: bool, platform: Platform) -> Built {
    let layer = random_bytes(1024 + (random_bytes(1)[0] as usize) * 4);
    let (layer_digest, layer_size) = p.blob(repo, &layer);
    let mut config = serde_json::json!({
        "architecture": platform.architecture,
        "os": platform.os,
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "config": {"Cmd": ["/bin/true"]},
        "created": "2024-01-01T00:00:00Z",
    });
    if let Some(v) = platform.variant {
        config["variant"] = v.into();
    }
    let config_bytes = serde_json::to_vec(&config).unwrap();
    let (config_digest, config_size) = p.blob(repo, &config_bytes);
    let (mt, cmt, lmt) = if docker {
        (DOCKER_MANIFEST, DOCKER_CONFIG, DOCKER_LAYER)
    } else {
        (OCI_MANIFEST, OCI_CONFIG, OCI_LAYER)
    };
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": mt,
        "config": {"mediaType": cmt, "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": lmt, "digest": layer_digest, "size": layer_size}],
    });
    Built {
        bytes: serde_json::to_vec_pretty(&manifest).unwrap(),
        media_type: mt,
    }
}

fn single(p: &Pusher, repo: &'static str, tag: Option<&'static str>, docker: bool) -> Image {
    let b = build_single(p, repo, docker, LINUX_AMD64);
    let reference = tag
        .map(str::to_string)
        .unwrap_or_else(|| sha256_digest(&b.bytes));
    let digest = p.manifest(repo, &reference, b.media_type, &b.bytes);
    Image {
        repo,
        tag,
        digest,
        manifest: b.bytes,
        children: vec![],
    }
}

/// Push single-platform manifests for `platforms` into `repo` and an index of them under
/// `tag` (or by digest only when `tag` is None).
fn index_of(
    p: &Pusher,
    repo: &'static str,
    tag: Option<&'static str>,
    docker: bool,
    platforms: &[Platform],
) -> Image {
    let mut children = Vec::new();
    for platform in platforms {
        let b = build_single(p, repo, docker, *platform);
        let digest = p.manifest(repo, &sha256_digest(&b.bytes), b.media_type, &b.bytes);
        children.push(ImageChild {
            digest,
            media_type: b.media_type,
            size: b.bytes.len(),
            platform: *platform,
            present: true,
        });
    }
    let mt = if docker { DOCKER_LIST } else { OCI_INDEX };
    let list = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": mt,
        "manifests": children.iter().map(|c| serde_json::json!({
            "mediaType": c.media_type,
            "digest": c.digest,
            "size": c.size,
            "platform": c.platform.json(),
        })).collect::<Vec<_>>(),
    });
    let bytes = serde_json::to_vec_pretty(&list).unwrap();
    let reference = tag.map_or_else(|| sha256_digest(&bytes), str::to_string);
    let digest = p.manifest(repo, &reference, mt, &bytes);
    Image {
        repo,
        tag,
        digest,
        manifest: bytes,
        children,
    }
}

fn index(
    p: &Pusher,
    repo: &'static str,
    tag: &'static str,
    docker: bool,
    platforms: &[Platform],
) -> Image {
    index_of(p, repo, Some(tag), docker, platforms)
}

/// An OCI index under `tag` with one linux/amd64 entry that is itself an OCI index of
/// `inner_platforms` (pushed first, by digest). Returns (outer, inner).
fn nested_index(
    p: &Pusher,
    repo: &'static str,
    tag: &'static str,
    inner_platforms: &[Platform],
) -> (Image, Image) {
    let inner = index_of(p, repo, None, false, inner_platforms);
    let entry = ImageChild {
        digest: inner.digest.clone(),
        media_type: OCI_INDEX,
        size: inner.manifest.len(),
        platform: LINUX_AMD64,
        present: true,
    };
    let list = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{
            "mediaType": entry.media_type,
            "digest": entry.digest,
            "size": entry.size,
            "platform": entry.platform.json(),
        }],
    });
    let bytes = serde_json::to_vec_pretty(&list).unwrap();
    let digest = p.manifest(repo, tag, OCI_INDEX, &bytes);
    let outer = Image {
        repo,
        tag: Some(tag),
        digest,
        manifest: bytes,
        children: vec![entry],
    };
    (outer, inner)
}

/// Build and push every seed image through `anon` (plain HTTP).
pub fn seed(anon: &Registry) -> Images {
    let p = Pusher::new(anon);
    let oci_manifest = single(&p, "oci/app", Some("v1"), false);
    let docker_schema2 = single(&p, "docker/app", Some("v1"), true);
    let multi_index = index(&p, "multi/app", "v1", false, &[LINUX_AMD64, LINUX_ARM64_V8]);
    let arm_only = index(&p, "armonly/app", "v1", false, &[LINUX_ARM64]);
    let docker_list = index(
        &p,
        "dockerlist/app",
        "v1",
        true,
        &[LINUX_AMD64, LINUX_ARM64_V8],
    );
    let deep = single(&p, "org/sub/project/img", Some("v1"), false);
    let digest_only = single(&p, "bydigest/app", None, false);
    let private = single(&p, "private/app", Some("v1"), false);
    // distribution 2.8 refuses to PUT an index whose children are unknown
    // (MANIFEST_BLOB_UNKNOWN), so push everything, then delete the amd64 child.
    let mut index_missing_child = index(
        &p,
        "dangling/app",
        "v1",
        false,
        &[LINUX_AMD64, LINUX_ARM64_V8],
    );
    p.delete_manifest("dangling/app", &index_missing_child.children[0].digest);
    index_missing_child.children[0].present = false;
    let (nested, nested_inner) =
        nested_index(&p, "nested/app", "v1", &[LINUX_AMD64, LINUX_ARM64_V8]);
    let (nested_arm, nested_arm_inner) = nested_index(&p, "nestedarm/app", "v1", &[LINUX_ARM64]);
    Images {
        oci_manifest,
        docker_schema2,
        multi_index,
        arm_only,
        docker_list,
        deep,
        digest_only,
        private,
        index_missing_child,
        nested,
        nested_inner,
        nested_arm,
        nested_arm_inner,
    }
}
