//! The result of checking one image: the verdict and the facts behind it.

use crate::manifest::artifact::Artifact;
use crate::registry::quota::Quota;
use crate::verdict::Verdict;

/// How the platform step ended, as the JSON schema's `platform.result` (docs/json-schema.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PlatformResult {
    /// An index entry equals the target after normalisation: every containerd pulls it.
    Exact,
    /// Only a containerd < 2.1 fallback matches (amd64 → 386, arm64 → arm…).
    Fallback,
    /// No entry matched, but one has no `platform` field, which containerd accepts.
    NoPlatformField,
    /// A single-platform manifest: containerd does not filter it by platform.
    SingleManifest,
    /// An OCI artifact (the outcome's `artifact` says which): it has no platform, and
    /// containerd matches none for a single manifest.
    Artifact,
    /// The check was skipped on purpose (`--platform any`, a metered registry).
    NotChecked,
    /// The index has no entry for the target.
    Missing,
    /// The check ended before the platform step (the manifest was not reached).
    NotReached,
}

/// How the platform check ended for one image.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct PlatformReport {
    /// The target(s), e.g. `linux/amd64`.
    pub target: Option<String>,
    /// How the step ended.
    pub result: PlatformResult,
    /// The index entry chosen.
    pub matched: Option<String>,
    /// Digest of the chosen child manifest.
    pub child_digest: Option<String>,
    /// Why the check was skipped, or what fallback means.
    pub note: Option<String>,
}

impl Default for PlatformReport {
    /// `not_reached`: the check ended before the platform step.
    fn default() -> Self {
        PlatformReport {
            target: None,
            result: PlatformResult::NotReached,
            matched: None,
            child_digest: None,
            note: None,
        }
    }
}

/// Why an image got no registry check at all, as the JSON schema's `not_checked`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NotChecked {
    /// The run's deadline (`--timeout`, the webhook's budget) passed before the image's turn
    /// came (`--concurrency` at a time): no request was sent for it. Its verdict is
    /// `transient` (exit 20): a retry with more time would check it, and nothing is known
    /// against the image.
    Deadline,
}

/// The verdict for one image, with the facts behind it. This is the JSON schema's `images[]`
/// item (see docs/json-schema.md).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Outcome {
    /// The image as given.
    pub image: String,
    /// Normalized reference (`docker.io/library/busybox:latest`), if it parsed.
    pub reference: Option<String>,
    /// The verdict ([`Verdict`] documents each).
    pub verdict: Verdict,
    /// Exit code of this verdict alone.
    pub exit_code: u8,
    /// One line: why.
    pub detail: String,
    /// True when the verdict is a pass that nothing verified: the registry matched a
    /// `--node-credentials` pattern and answered 14 to the pod's credentials.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub assumed: bool,
    /// Resolved manifest or index digest.
    pub digest: Option<String>,
    /// Media type of what the reference resolved to.
    pub media_type: Option<String>,
    /// Platform check.
    pub platform: PlatformReport,
    /// What the tag resolved to when it is an OCI artifact, not an image (the chosen index
    /// entry's, for an index).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// The reference's registry (`docker.io`).
    pub registry: Option<String>,
    /// The endpoint host that gave the verdict (a mirror or the upstream).
    pub endpoint: Option<String>,
    /// Which credential gave the verdict (origin and key; never the secret).
    pub credential: Option<String>,
    /// Things a person should know even when the image is pullable.
    pub warnings: Vec<String>,
    /// The pull quota the registry stated (Docker Hub's `ratelimit-*` headers), when it
    /// stated one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// Set when nothing was sent for this image (see [`NotChecked`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<NotChecked>,
    /// Wall time for this image, in milliseconds.
    pub elapsed_ms: u64,
}

impl Outcome {
    /// An outcome with only the verdict and its detail (everything else empty): for
    /// verdicts reached before any registry work, such as an invalid reference.
    pub(crate) fn new(image: &str, verdict: Verdict, detail: String) -> Outcome {
        Outcome {
            image: image.to_string(),
            reference: None,
            verdict,
            exit_code: verdict.exit_code(),
            detail,
            assumed: false,
            digest: None,
            media_type: None,
            platform: PlatformReport::default(),
            artifact: None,
            registry: None,
            endpoint: None,
            credential: None,
            warnings: vec![],
            quota: None,
            not_checked: None,
            elapsed_ms: 0,
        }
    }
}
