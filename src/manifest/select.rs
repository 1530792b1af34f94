//! Which index entry a node pulls: containerd's `FilterPlatforms` over an index's entries.
//! It lives beside the index it reads, so `platform` depends on nothing (as
//! go-containerregistry's `v1.Platform` does not know about indexes).

use super::{IndexEntry, is_index, is_manifest};
use crate::platform::{Matcher, Platform};

/// Which index entry the node would pull, and how it was chosen ([`select`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection<'a> {
    /// An entry whose platform equals the node's after normalisation: every containerd
    /// version pulls it.
    Exact(&'a IndexEntry),
    /// An entry reached only through a `platforms.Only` fallback (amd64 → 386, arm64 → arm,
    /// arm/v7 → v6, …): containerd < 2.1 (or ≥ 2.1 with local pull) pulls it, containerd
    /// ≥ 2.1 with default settings does not.
    Fallback(&'a IndexEntry),
    /// No entry matched by platform, but this one has no `platform` field, which containerd
    /// always accepts (`FilterPlatforms`); what it holds is decided by its own config.
    NoPlatformField(&'a IndexEntry),
    /// Nothing usable: `available` lists the declared platforms in index order (duplicates
    /// and `unknown/unknown` attestation entries left out), as written in the index.
    Missing {
        /// The platforms the index offers.
        available: Vec<Platform>,
    },
}

/// Chooses the index entry the node would pull (containerd `images.FilterPlatforms` and the
/// ordering in `images.Manifest`, core/images/handlers.go and image.go).
///
/// Entries whose `mediaType` is not an image manifest or index type
/// ([`is_manifest`], [`is_index`]) are ignored (the OCI spec says unknown
/// media types MUST be ignored), and so are `unknown/unknown` attestation entries. Precedence:
/// [`Selection::Exact`] over [`Selection::Fallback`] over [`Selection::NoPlatformField`];
/// among equals, the lower [`Matcher::only`] rank, then the earlier entry. Nested indexes are
/// not walked here: a chosen child that is itself an index must be fetched and selected again.
pub fn select<'a>(node: &Platform, entries: &'a [IndexEntry]) -> Selection<'a> {
    let only = Matcher::only(node);
    let strict = Matcher::only_strict(node);
    let mut exact: Option<(usize, &IndexEntry)> = None;
    let mut fallback: Option<(usize, &IndexEntry)> = None;
    let mut platformless: Option<&IndexEntry> = None;
    let mut available: Vec<Platform> = Vec::new();
    for entry in entries {
        if !is_manifest(&entry.media_type) && !is_index(&entry.media_type) {
            continue;
        }
        let Some(platform) = &entry.platform else {
            platformless.get_or_insert(entry);
            continue;
        };
        if platform.is_unknown() {
            continue;
        }
        if !available.contains(platform) {
            available.push(platform.clone());
        }
        let Some(rank) = only.rank(platform) else {
            continue;
        };
        let slot = if strict.matches(platform) {
            &mut exact
        } else {
            &mut fallback
        };
        // Strictly lower rank wins, so on a tie the earlier entry stays.
        if slot.is_none_or(|(best, _)| rank < best) {
            *slot = Some((rank, entry));
        }
    }
    match (exact, fallback, platformless) {
        (Some((_, e)), _, _) => Selection::Exact(e),
        (None, Some((_, e)), _) => Selection::Fallback(e),
        (None, None, Some(e)) => Selection::NoPlatformField(e),
        (None, None, None) => Selection::Missing { available },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{DOCKER_MANIFEST_V2, OCI_INDEX, OCI_MANIFEST};

    fn p(s: &str) -> Platform {
        Platform::parse(s).unwrap()
    }

    fn entry(digest: &str, platform: Option<&str>) -> IndexEntry {
        IndexEntry {
            media_type: OCI_MANIFEST.into(),
            digest: digest.into(),
            size: 1,
            platform: platform.map(p),
        }
    }

    #[test]
    fn select_exact_beats_fallback_and_rank_then_order() {
        let entries = [
            entry("sha256:386", Some("linux/386")),
            entry("sha256:a1", Some("linux/amd64")),
            entry("sha256:a2", Some("linux/amd64/v1")),
        ];
        assert_eq!(
            select(&p("linux/amd64"), &entries),
            Selection::Exact(&entries[1])
        );
        let entries = [
            entry("sha256:v2", Some("linux/amd64/v2")),
            entry("sha256:v3", Some("linux/amd64/v3")),
        ];
        // A v3 node: both are fallbacks; v2 ranks above plain amd64, v3 is exact.
        assert_eq!(
            select(&p("linux/amd64/v3"), &entries),
            Selection::Exact(&entries[1])
        );
        let entries = [
            entry("sha256:386", Some("linux/386")),
            entry("sha256:v1", Some("linux/amd64")),
            entry("sha256:v2", Some("linux/amd64/v2")),
        ];
        assert_eq!(
            select(&p("linux/amd64/v4"), &entries),
            Selection::Fallback(&entries[2])
        );
    }

    #[test]
    fn select_fallbacks() {
        let only386 = [
            entry("sha256:386", Some("linux/386")),
            entry("sha256:arm", Some("linux/arm/v7")),
        ];
        assert_eq!(
            select(&p("linux/amd64"), &only386),
            Selection::Fallback(&only386[0])
        );
        let arm = [
            entry("sha256:v6", Some("linux/arm/v6")),
            entry("sha256:v7", Some("linux/arm/v7")),
            entry("sha256:amd", Some("linux/amd64")),
        ];
        assert_eq!(
            select(&p("linux/arm64"), &arm),
            Selection::Fallback(&arm[1])
        );
        assert_eq!(
            select(&p("linux/arm64/v8"), &arm),
            Selection::Fallback(&arm[1])
        );
    }

    #[test]
    fn select_platformless_and_ignored_entries() {
        let mut attestation = entry("sha256:att", Some("unknown/unknown"));
        attestation.platform = Some(Platform::new("unknown", "unknown", ""));
        let mut foreign = entry("sha256:sig", Some("linux/arm64"));
        foreign.media_type = "application/vnd.example.signature+json".into();
        let entries = [
            attestation.clone(),
            foreign.clone(),
            entry("sha256:amd", Some("linux/amd64")),
            entry("sha256:bare", None),
        ];
        assert_eq!(
            select(&p("linux/arm64"), &entries),
            Selection::NoPlatformField(&entries[3])
        );
        // A fallback match still beats a platform-less entry.
        let entries = [
            entry("sha256:bare", None),
            entry("sha256:386", Some("linux/386")),
        ];
        assert_eq!(
            select(&p("linux/amd64"), &entries),
            Selection::Fallback(&entries[1])
        );
        // A nested index counts as a candidate too.
        let mut nested = entry("sha256:idx", Some("linux/arm64"));
        nested.media_type = OCI_INDEX.into();
        let entries = [nested, attestation, foreign];
        assert_eq!(
            select(&p("linux/arm64"), &entries),
            Selection::Exact(&entries[0])
        );
    }

    #[test]
    fn select_missing_lists_available() {
        let mut docker = entry("sha256:ppc", Some("linux/ppc64le"));
        docker.media_type = DOCKER_MANIFEST_V2.into();
        let entries = [
            entry("sha256:amd", Some("linux/amd64")),
            docker,
            entry("sha256:amd2", Some("linux/amd64")),
            entry("sha256:att", Some("unknown/unknown")),
            entry("sha256:v6", Some("linux/arm/v6")),
        ];
        let Selection::Missing { available } = select(&p("linux/s390x"), &entries) else {
            panic!("expected Missing");
        };
        let names: Vec<String> = available.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["linux/amd64", "linux/ppc64le", "linux/arm/v6"]);
        assert_eq!(
            select(&p("linux/amd64"), &[]),
            Selection::Missing { available: vec![] }
        );
    }
}
