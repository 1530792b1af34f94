//! Matching a node platform against candidates (containerd/platforms `compare.go`).

use super::Platform;

/// A Windows `os.version` reduced to what compatibility checks use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct WindowsVersion {
    major: u8,
    minor: u8,
    build: u16,
}

/// Windows Server 2022 (ltsc2022) build: from here on, older ltsc2022+ images run too.
const WINDOWS_SERVER_2022_BUILD: u16 = 20348;

impl WindowsVersion {
    /// `major.minor.build[.rev]`; anything else is the zero (unknown) version.
    fn parse(v: &str) -> WindowsVersion {
        let mut parts = v.split('.');
        let parsed = (|| {
            let major = parts.next()?.parse().ok()?;
            let minor = parts.next()?.parse().ok()?;
            let build = parts.next()?.parse().ok()?;
            Some(WindowsVersion {
                major,
                minor,
                build,
            })
        })();
        parsed.unwrap_or_default()
    }

    /// `checkWindowsHostAndContainerCompat` (platform_windows_compat.go).
    fn runs(self, image: WindowsVersion) -> bool {
        if self.major != image.major || self.minor != image.minor {
            return false;
        }
        if self.build < WINDOWS_SERVER_2022_BUILD {
            return self.build == image.build;
        }
        image.build >= WINDOWS_SERVER_2022_BUILD && image.build <= self.build
    }
}

/// Compares one wanted (already normalised) platform with a candidate (`matcher.Match`).
fn matches_one(wanted: &Platform, candidate: &Platform) -> bool {
    let c = candidate.normalize();
    if wanted.os != c.os || wanted.architecture != c.architecture || wanted.variant != c.variant {
        return false;
    }
    if wanted.os == "windows" {
        let node = WindowsVersion::parse(wanted.os_version.as_deref().unwrap_or(""));
        let image = candidate.os_version.as_deref().unwrap_or("");
        if node != WindowsVersion::default()
            && !image.is_empty()
            && !node.runs(WindowsVersion::parse(image))
        {
            return false;
        }
    }
    c.os_features
        .iter()
        .all(|f| wanted.os_features.binary_search(f).is_ok())
}

/// An ordered list of acceptable platforms (containerd's `Ordered` comparer).
///
/// [`Matcher::matches`] is true when any entry matches; [`Matcher::rank`] is the position of
/// the first entry that matches, so lower is preferred. Entries match on normalised OS,
/// architecture and variant; the candidate's OS features must be a subset of the node's; on
/// Windows the OS versions must be compatible when both are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    wanted: Vec<Platform>,
}

impl Matcher {
    /// containerd's `platforms.Only(node)` (compare.go `platformVector`): the node, then
    /// what it can also run, most preferred first.
    ///
    /// - amd64/vN: vN, vN-1, …, v1 (plain `amd64`), then `386`.
    /// - arm/vN with N > 5: vN, …, v5. Other arm variants match only themselves.
    /// - arm64 (variant "" counts as v8): v8.x → v8.x, …, v8.1, v8; v9.x → v9.x, …, v9, then
    ///   v8.min(x+5, 9), …, v8; then every arm64 node adds arm/v8, v7, v6, v5.
    pub fn only(node: &Platform) -> Matcher {
        let node = node.normalize();
        let mut wanted = vec![node.clone()];
        let with_variant = |arch: &str, variant: String| Platform {
            architecture: arch.to_owned(),
            variant,
            ..node.clone()
        };
        let number = |v: &str| v.strip_prefix('v').unwrap_or(v).parse::<u32>().ok();
        match node.architecture.as_str() {
            "amd64" => {
                if let Some(level) = number(&node.variant).filter(|&n| n > 1) {
                    for n in (1..level).rev() {
                        let variant = if n == 1 {
                            String::new()
                        } else {
                            format!("v{n}")
                        };
                        wanted.push(with_variant("amd64", variant));
                    }
                }
                wanted.push(with_variant("386", String::new()));
            }
            "arm" => {
                if let Some(level) = number(&node.variant).filter(|&n| n > 5) {
                    for n in (5..level).rev() {
                        wanted.push(with_variant("arm", format!("v{n}")));
                    }
                }
            }
            "arm64" => {
                let variant = if node.variant.is_empty() {
                    "v8"
                } else {
                    node.variant.as_str()
                };
                let (major, minor) = match variant.split_once('.') {
                    Some((major, minor)) => (major, Some(minor)),
                    None => (variant, None),
                };
                if let Some(mut major) = number(major).filter(|&n| n >= 8) {
                    // Upstream reads a minor only from four-character variants (`v8.1`).
                    let mut minor = match minor {
                        Some(m) if variant.len() == 4 => m.parse::<u32>().unwrap_or(0),
                        _ => 0,
                    };
                    let arm64 = |major: u32, minor: u32| {
                        let v = if minor == 0 {
                            format!("v{major}")
                        } else {
                            format!("v{major}.{minor}")
                        };
                        with_variant("arm64", v)
                    };
                    if major == 9 {
                        for m in (0..minor).rev() {
                            wanted.push(arm64(9, m));
                        }
                        // v9.0 forked from v8.5: v9.x runs v8.(x+5), capped at v8.9.
                        minor = (minor + 5).min(9);
                        major = 8;
                        wanted.push(with_variant("arm64", format!("v8.{minor}")));
                    }
                    for m in (0..minor).rev() {
                        wanted.push(arm64(major, m));
                    }
                }
                let arm_variant = if variant.starts_with("v8.") || variant.starts_with("v9.") {
                    "v8"
                } else {
                    variant
                };
                let arm_node = with_variant("arm", arm_variant.to_owned());
                wanted.extend(Matcher::only(&arm_node).wanted);
            }
            _ => {}
        }
        // Each entry is normalised as upstream's NewMatcher does (e.g. amd64/v1 → amd64).
        Matcher {
            wanted: wanted.iter().map(Platform::normalize).collect(),
        }
    }

    /// containerd's `platforms.OnlyStrict(node)`: the normalised node platform only, so
    /// `arm64` ≡ `arm64/v8` and `amd64` ≡ `amd64/v1`, but no 386 and no arm fallback.
    pub fn only_strict(node: &Platform) -> Matcher {
        Matcher {
            wanted: vec![node.normalize()],
        }
    }

    /// True when the node could run an image built for `candidate`.
    pub fn matches(&self, candidate: &Platform) -> bool {
        self.rank(candidate).is_some()
    }

    /// The preference of `candidate`: `Some(0)` for the node itself, larger for fallbacks,
    /// `None` if it does not match at all.
    pub(crate) fn rank(&self, candidate: &Platform) -> Option<usize> {
        self.wanted.iter().position(|w| matches_one(w, candidate))
    }

    #[cfg(test)]
    /// The acceptable platforms, most preferred first (normalised).
    pub(crate) fn platforms(&self) -> &[Platform] {
        &self.wanted
    }
}
