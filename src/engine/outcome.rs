//! The result of checking one image: the verdict and the facts behind it.

use crate::verdict::Verdict;

/// How the platform check ended for one image.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlatformReport {
    /// The target(s), e.g. `linux/amd64`.
    pub target: Option<String>,
    /// `exact`, `fallback`, `no_platform_field`, `single_manifest`, `not_checked`, `missing`,
    /// `not_reached` (docs/json-schema.md).
    pub result: String,
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
            result: "not_reached".into(),
            matched: None,
            child_digest: None,
            note: None,
        }
    }
}

/// The verdict for one image, with the facts behind it. This is the JSON schema's `images[]`
/// item (see docs/json-schema.md).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// The image as given.
    pub image: String,
    /// Normalized reference (`docker.io/library/busybox:latest`), if it parsed.
    pub reference: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// Exit code of this verdict alone.
    pub exit_code: u8,
    /// One line: why.
    pub detail: String,
    /// Resolved manifest or index digest.
    pub digest: Option<String>,
    /// Media type of what the reference resolved to.
    pub media_type: Option<String>,
    /// Platform check.
    pub platform: PlatformReport,
    /// The reference's registry (`docker.io`).
    pub registry: Option<String>,
    /// The endpoint host that gave the verdict (a mirror or the upstream).
    pub endpoint: Option<String>,
    /// Which credential gave the verdict (origin and key; never the secret).
    pub credential: Option<String>,
    /// Things a person should know even when the image is pullable.
    pub warnings: Vec<String>,
    /// Wall time for this image, in milliseconds.
    pub elapsed_ms: u64,
}

impl Outcome {
    pub(crate) fn new(image: &str, verdict: Verdict, detail: String) -> Outcome {
        Outcome {
            image: image.to_string(),
            reference: None,
            verdict,
            exit_code: verdict.exit_code(),
            detail,
            digest: None,
            media_type: None,
            platform: PlatformReport::default(),
            registry: None,
            endpoint: None,
            credential: None,
            warnings: vec![],
            elapsed_ms: 0,
        }
    }

    pub(crate) fn set_verdict(&mut self, v: Verdict, detail: String) {
        self.verdict = v;
        self.exit_code = v.exit_code();
        self.detail = detail;
    }
}
