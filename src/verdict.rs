//! Verdicts and exit codes: the contract that Job `podFailurePolicy` rules, the examples and
//! the Helm chart rely on.
//!
//! The exit-code table exists once, here ([`EXIT_CODES`]); `--help` and the README are
//! generated from or checked against it.

use std::fmt;

/// What pullcheck concluded about one image, in the kubelet's terms.
///
/// Serialized as a snake_case string in JSON output; renaming a variant is a schema change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    /// The kubelet could pull the image on this node (exit 0).
    Pullable,
    /// The reference does not parse the way the kubelet parses it (exit 10).
    InvalidReference,
    /// The registry answered 404: manifest unknown or repository unknown (exit 11).
    NotFound,
    /// The tag is an index without an entry for the target platform (exit 12).
    PlatformMissing,
    /// Credentials were sent and refused, or the token grant lacks `pull` (exit 13).
    Denied,
    /// The registry wants credentials and none matched (exit 14). Docker Hub, ECR and Harbor
    /// answer this for missing repositories too, so it reads "missing or private".
    Unauthenticated,
    /// Unreachable, timeout, TLS failure, 5xx or 429 after retries (exit 20).
    Transient,
    /// An OCI artifact (`artifactType`, or a config that is not an image config) that the
    /// node's runtime pulls but can neither run as a container nor mount with its content
    /// as an image volume (exit 15). The rule per runtime is `engine::artifact`.
    UnusableArtifact,
}

/// Process exit codes other than verdicts.
pub mod code {
    /// Every image is pullable.
    pub(crate) const OK: u8 = 0;
    /// A bug or an unexpected local failure.
    pub(crate) const INTERNAL: u8 = 1;
    /// Bad flags or unreadable input (files, pull secrets, hosts dir).
    pub(crate) const USAGE: u8 = 2;
    /// `lint --strict` found gaps.
    pub const LINT_FINDINGS: u8 = 30;
}

/// One row of the exit-code table: code, verdict name (or role), meaning.
pub(crate) struct ExitCodeRow {
    /// The process exit status.
    pub code: u8,
    /// The JSON verdict string, or a role for non-verdict codes.
    pub name: &'static str,
    /// One-line meaning for people.
    pub meaning: &'static str,
}

/// The documented exit-code table, in code order.
pub(crate) const EXIT_CODES: &[ExitCodeRow] = &[
    ExitCodeRow {
        code: 0,
        name: "pullable",
        meaning: "all images pullable",
    },
    ExitCodeRow {
        code: 1,
        name: "internal",
        meaning: "internal error",
    },
    ExitCodeRow {
        code: 2,
        name: "usage",
        meaning: "usage error (flags, unreadable input)",
    },
    ExitCodeRow {
        code: 10,
        name: "invalid_reference",
        meaning: "invalid reference",
    },
    ExitCodeRow {
        code: 11,
        name: "not_found",
        meaning: "not found (manifest unknown / name unknown / 404)",
    },
    ExitCodeRow {
        code: 12,
        name: "platform_missing",
        meaning: "platform missing from the index",
    },
    ExitCodeRow {
        code: 13,
        name: "denied",
        meaning: "denied: credentials were sent and refused, or grant lacks pull",
    },
    ExitCodeRow {
        code: 14,
        name: "unauthenticated",
        meaning: "unauthenticated: no credentials matched (missing or private)",
    },
    ExitCodeRow {
        code: 15,
        name: "unusable_artifact",
        meaning: "an OCI artifact, not an image: the runtime can't run or mount it",
    },
    ExitCodeRow {
        code: 20,
        name: "transient",
        meaning: "transient: unreachable, timeout, TLS, 5xx, 429 after retries",
    },
    ExitCodeRow {
        code: 30,
        name: "lint_findings",
        meaning: "lint --strict found gaps",
    },
];

impl Verdict {
    /// Every verdict, in exit-code order.
    pub(crate) const ALL: [Verdict; 8] = [
        Verdict::Pullable,
        Verdict::InvalidReference,
        Verdict::NotFound,
        Verdict::PlatformMissing,
        Verdict::Denied,
        Verdict::Unauthenticated,
        Verdict::UnusableArtifact,
        Verdict::Transient,
    ];

    /// The process exit code for this verdict alone.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Verdict::Pullable => 0,
            Verdict::InvalidReference => 10,
            Verdict::NotFound => 11,
            Verdict::PlatformMissing => 12,
            Verdict::Denied => 13,
            Verdict::Unauthenticated => 14,
            Verdict::UnusableArtifact => 15,
            Verdict::Transient => 20,
        }
    }

    /// The JSON name (`not_found`, …).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Pullable => "pullable",
            Verdict::InvalidReference => "invalid_reference",
            Verdict::NotFound => "not_found",
            Verdict::PlatformMissing => "platform_missing",
            Verdict::Denied => "denied",
            Verdict::Unauthenticated => "unauthenticated",
            Verdict::UnusableArtifact => "unusable_artifact",
            Verdict::Transient => "transient",
        }
    }

    /// The verdict for a registry's answer of another 4xx than 401, 403, 404, 405, 408 and
    /// 429 (400, 409, 410, 422, …), the one rule for `check`, the webhook and the watch: the
    /// node's runtime keeps getting the same answer on every retry (containerd reports it
    /// as an unexpected status and the kubelet backs off forever), so it is as permanent as a
    /// 404 for the Job. A 405 is not one of these: every containerd retries a HEAD that got
    /// 405 as a GET (`core/remotes/docker/resolver.go`, `retryRequest`), and pullcheck does
    /// too; a GET that still gets 405 is [`Verdict::METHOD_NOT_ALLOWED`].
    pub(crate) const OTHER_CLIENT_ERROR: Verdict = Verdict::NotFound;

    /// The verdict for a 405 on a GET (after the HEAD's 405 was retried as a GET): a
    /// registry or proxy that refuses the method says nothing about the image, so never
    /// `not_found`.
    pub(crate) const METHOD_NOT_ALLOWED: Verdict = Verdict::Transient;

    /// True for the codes a podFailurePolicy should send to `FailJob` (10–15).
    pub(crate) fn is_permanent(self) -> bool {
        matches!(
            self,
            Verdict::InvalidReference
                | Verdict::NotFound
                | Verdict::PlatformMissing
                | Verdict::Denied
                | Verdict::Unauthenticated
                | Verdict::UnusableArtifact
        )
    }

    /// True for the failures no other credential can change (invalid reference, not found,
    /// platform missing, an unusable artifact): what the Kueue admission check rejects on.
    /// Denied and unauthenticated are permanent for a pod, but the nodes may hold
    /// credentials pullcheck lacks.
    pub(crate) fn is_permanent_failure(self) -> bool {
        matches!(
            self,
            Verdict::InvalidReference
                | Verdict::NotFound
                | Verdict::PlatformMissing
                | Verdict::UnusableArtifact
        )
    }

    /// How informative a failed attempt is, when several credentials were tried for one
    /// image (higher wins). The rule: not-found or platform-missing over denied over
    /// unauthenticated. A transient attempt ranks above denied and unauthenticated because
    /// that credential might have worked: the honest answer is "try again".
    fn informativeness(self) -> u8 {
        match self {
            Verdict::Pullable => 6,
            Verdict::InvalidReference => 5,
            Verdict::NotFound | Verdict::PlatformMissing | Verdict::UnusableArtifact => 4,
            Verdict::Transient => 3,
            Verdict::Denied => 2,
            Verdict::Unauthenticated => 1,
        }
    }

    /// Of two attempts for the same image, the one to report.
    pub(crate) fn more_informative(self, other: Verdict) -> Verdict {
        if other.informativeness() > self.informativeness() {
            other
        } else {
            self
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The exit code for a run over several images: the lowest permanent code among them
/// (10–15), else 20 if any was transient, else 0.
pub(crate) fn combined_exit_code(verdicts: impl IntoIterator<Item = Verdict>) -> u8 {
    let mut lowest_permanent: Option<u8> = None;
    let mut transient = false;
    for v in verdicts {
        if v.is_permanent() {
            let c = v.exit_code();
            lowest_permanent = Some(lowest_permanent.map_or(c, |l| l.min(c)));
        } else if v == Verdict::Transient {
            transient = true;
        }
    }
    match (lowest_permanent, transient) {
        (Some(c), _) => c,
        (None, true) => Verdict::Transient.exit_code(),
        (None, false) => code::OK,
    }
}

/// The exit-code table as Markdown (README) or plain text (`--help`).
pub fn exit_code_table(markdown: bool) -> String {
    let mut out = String::new();
    if markdown {
        out.push_str("| code | verdict | meaning |\n|---|---|---|\n");
        for r in EXIT_CODES {
            out.push_str(&format!("| {} | `{}` | {} |\n", r.code, r.name, r.meaning));
        }
    } else {
        for r in EXIT_CODES {
            out.push_str(&format!("  {:>2}  {:<18} {}\n", r.code, r.name, r.meaning));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_prefers_lowest_permanent_then_transient() {
        use Verdict::*;
        assert_eq!(combined_exit_code([Pullable, Pullable]), 0);
        assert_eq!(combined_exit_code([Transient, Pullable]), 20);
        assert_eq!(
            combined_exit_code([Transient, Unauthenticated, NotFound]),
            11
        );
        assert_eq!(combined_exit_code([Denied, PlatformMissing]), 12);
        assert_eq!(combined_exit_code([InvalidReference, Transient]), 10);
        assert_eq!(combined_exit_code([Transient, UnusableArtifact]), 15);
        assert_eq!(combined_exit_code([UnusableArtifact, NotFound]), 11);
        assert_eq!(combined_exit_code(std::iter::empty()), 0);
    }

    #[test]
    fn attempts_rank_not_found_over_denied_over_unauthenticated() {
        use Verdict::*;
        assert_eq!(Unauthenticated.more_informative(Denied), Denied);
        assert_eq!(Denied.more_informative(NotFound), NotFound);
        assert_eq!(NotFound.more_informative(Denied), NotFound);
        assert_eq!(
            PlatformMissing.more_informative(Unauthenticated),
            PlatformMissing
        );
        assert_eq!(Denied.more_informative(Transient), Transient);
        assert_eq!(NotFound.more_informative(Transient), NotFound);
        assert_eq!(NotFound.more_informative(Pullable), Pullable);
    }

    #[test]
    fn table_matches_verdict_codes() {
        for v in Verdict::ALL {
            let row = EXIT_CODES.iter().find(|r| r.name == v.as_str()).unwrap();
            assert_eq!(row.code, v.exit_code(), "{v}");
        }
        assert_eq!(EXIT_CODES.len(), 11);
    }
}
