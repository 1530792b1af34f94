//! Platforms written in pullcheck's own flags (`--platform`, `--cluster-platform` and the
//! chart's `clusterPlatforms`): a typo is a usage error naming the close match.
//!
//! This is pullcheck's policy, not containerd's: containerd's `platforms.Parse` accepts any
//! `os/arch` made of valid characters (`linux/amd` parses, and then matches nothing or, for a
//! single-platform image, everything). A flag is the user's statement about their nodes, so
//! an OS or architecture that Go doesn't know is far likelier a typo than a platform. The rule
//! is never applied to platforms read from image indexes, Node labels or admission objects:
//! those go through [`Platform::parse`] and [`Platform::normalize`] unchanged.

use super::{Platform, PlatformError};

/// Go's `knownOS` (`src/go/build/syslist.go`): every `GOOS` value.
const GO_OS: &[&str] = &[
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "hurd",
    "illumos",
    "ios",
    "js",
    "linux",
    "nacl",
    "netbsd",
    "openbsd",
    "plan9",
    "solaris",
    "wasip1",
    "windows",
    "zos",
];

/// Go's `knownArch` (`src/go/build/syslist.go`): every `GOARCH` value.
const GO_ARCH: &[&str] = &[
    "386",
    "amd64",
    "amd64p32",
    "arm",
    "armbe",
    "arm64",
    "arm64be",
    "loong64",
    "mips",
    "mipsle",
    "mips64",
    "mips64le",
    "mips64p32",
    "mips64p32le",
    "ppc",
    "ppc64",
    "ppc64le",
    "riscv",
    "riscv64",
    "s390",
    "s390x",
    "sparc",
    "sparc64",
    "wasm",
];

/// The spellings containerd's `normalizeOS` / `normalizeArch` (`database.go`) turn into a
/// Go value, offered as suggestions too (they are accepted: [`Platform::parse`] normalises
/// them before the check).
const OS_ALIASES: &[&str] = &["macos"];
const ARCH_ALIASES: &[&str] = &["x86_64", "x86-64", "aarch64", "armhf", "armel", "i386"];

impl Platform {
    /// Parses a platform given in one of pullcheck's own flags: [`Platform::parse`], then an
    /// OS outside Go's `GOOS` list or an architecture outside its `GOARCH` list (after
    /// containerd's alias normalisation: `x86_64`, `aarch64`, `armhf`, `i386`, `macos`) is
    /// refused, naming the closest known spelling. Variants are not checked (`v8`, `v8.2`,
    /// `v3` are all in use).
    ///
    /// # Errors
    /// [`PlatformError`] as [`Platform::parse`], and for an unknown OS or architecture.
    pub fn parse_flag(specifier: &str) -> Result<Platform, PlatformError> {
        let fail = |reason: String| PlatformError {
            input: specifier.to_owned(),
            reason,
        };
        let parts: Vec<&str> = specifier.split('/').collect();
        let platform = match Platform::parse(specifier) {
            Ok(p) => p,
            // A lone word that is neither: suggest from both lists.
            Err(e) if parts.len() == 1 && is_plain_word(specifier) => {
                let word = specifier.to_ascii_lowercase();
                return Err(
                    match closest(&word, &[GO_OS, OS_ALIASES, GO_ARCH, ARCH_ALIASES]) {
                        Some(m) => fail(format!("{} (did you mean {m}?)", e.reason)),
                        None => e,
                    },
                );
            }
            Err(e) => return Err(e),
        };
        // The OS name as written, without its `(version+features)` options.
        let written_os = parts[0].split('(').next().unwrap_or_default();
        if !GO_OS.contains(&platform.os.as_str()) {
            let mut reason = format!("unknown operating system {written_os:?}");
            if let Some(m) = closest(&written_os.to_ascii_lowercase(), &[GO_OS, OS_ALIASES]) {
                let fixed = specifier.replacen(written_os, m, 1);
                reason.push_str(&format!(" (did you mean {fixed}?)"));
            }
            return Err(fail(reason));
        }
        if !GO_ARCH.contains(&platform.architecture.as_str()) {
            // A lone known OS gets the host architecture, which is always known: so here
            // the architecture was written, as the second part.
            let written = parts.get(1).copied().unwrap_or_default();
            let mut reason = format!("unknown architecture {written:?}");
            // `armv7`, `arm64v8`: the variant glued to the architecture (Docker Hub's
            // repository prefixes are spelled so); the platform writes it as its own part.
            let lower = written.to_ascii_lowercase();
            let glued = ["arm64", "arm"].iter().find_map(|a| {
                let v = lower.strip_prefix(a)?;
                (v.len() >= 2 && v.starts_with('v') && v[1..].bytes().all(|b| b.is_ascii_digit()))
                    .then(|| format!("{a}/{v}"))
            });
            if let Some(split) = glued {
                let mut fixed: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
                fixed[1] = split;
                reason.push_str(&format!(" (did you mean {}?)", fixed.join("/")));
            } else if let Some(m) = closest(&lower, &[GO_ARCH, ARCH_ALIASES]) {
                let mut fixed: Vec<&str> = parts.clone();
                fixed[1] = m;
                reason.push_str(&format!(" (did you mean {}?)", fixed.join("/")));
            }
            return Err(fail(reason));
        }
        Ok(platform)
    }
}

fn is_plain_word(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The known spelling closest to `word`: the shortest one that `word` begins (`amd` →
/// `amd64`, not `arm`: a cut-off name is the likelier slip), else the first within two edits.
fn closest(word: &str, lists: &[&[&'static str]]) -> Option<&'static str> {
    let all = || lists.iter().flat_map(|l| l.iter().copied());
    if word.len() >= 2
        && let Some(m) = all()
            .filter(|c| c.starts_with(word))
            .min_by_key(|c| c.len())
    {
        return Some(m);
    }
    all()
        .map(|c| (edits(word, c), c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance counting a swap of two neighbours as one edit (optimal string alignment),
/// on bytes: the names are ASCII. `arm46` is one edit from `arm64`, two from `arm`.
fn edits(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        Platform::parse_flag(s).unwrap_err().to_string()
    }

    #[test]
    fn typos_name_the_close_match() {
        assert_eq!(
            err("linux/amd"),
            "invalid platform \"linux/amd\": unknown architecture \"amd\" (did you mean linux/amd64?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
        );
        assert_eq!(
            err("linux/armv7"),
            "invalid platform \"linux/armv7\": unknown architecture \"armv7\" (did you mean linux/arm/v7?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
        );
        assert_eq!(
            err("linux/arm64v8"),
            "invalid platform \"linux/arm64v8\": unknown architecture \"arm64v8\" (did you mean linux/arm64/v8?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
        );
        assert_eq!(
            err("linx/arm64"),
            "invalid platform \"linx/arm64\": unknown operating system \"linx\" (did you mean linux/arm64?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
        );
        assert_eq!(
            err("linux/arm46/v8"),
            "invalid platform \"linux/arm46/v8\": unknown architecture \"arm46\" (did you mean linux/arm64/v8?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
        );
        assert_eq!(
            err("amd"),
            "invalid platform \"amd\": not a known operating system or architecture (did you mean amd64?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
        );
        assert_eq!(
            err("linux/zz9000"),
            "invalid platform \"linux/zz9000\": unknown architecture \"zz9000\"; expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
        );
    }

    #[test]
    fn go_values_and_containerd_aliases_are_accepted() {
        for (flag, want) in [
            ("linux/amd64", "linux/amd64"),
            ("linux/x86_64", "linux/amd64"),
            ("linux/aarch64", "linux/arm64"),
            ("linux/arm64/v8", "linux/arm64/v8"),
            ("linux/armhf", "linux/arm"),
            ("linux/i386", "linux/386"),
            ("windows/amd64", "windows/amd64"),
            ("wasip1/wasm", "wasip1/wasm"),
            ("Linux/AMD64", "linux/amd64"),
            ("linux/riscv64", "linux/riscv64"),
        ] {
            assert_eq!(
                Platform::parse_flag(flag).unwrap().to_string(),
                want,
                "{flag}"
            );
        }
        // A lone known OS keeps the host architecture.
        assert_eq!(Platform::parse_flag("linux").unwrap().os, "linux");
    }

    #[test]
    fn index_platforms_keep_containerd_parsing() {
        // What an index or a Node label says is not pullcheck's to refuse.
        assert_eq!(Platform::parse("linux/amd").unwrap().architecture, "amd");
    }

    #[test]
    fn edit_distance() {
        assert_eq!(edits("arm46", "arm64"), 1);
        assert_eq!(edits("arm46", "arm"), 2);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("linx", "linux"), 1);
    }
}
