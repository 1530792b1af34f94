//! Platforms: the node's platform, normalisation, and which index entry the node would pull.
//!
//! This module restates the rules of `github.com/containerd/platforms` at commit `09756f5`
//! (`platforms.go` for [`Platform::parse`] and the matcher, `database.go` for
//! [`Platform::normalize`], `compare.go` for [`Matcher::only`], `cpuinfo_linux.go` for
//! [`Platform::host`]) and of containerd's `core/images/handlers.go` `FilterPlatforms` for
//! [`select`]. Two matchers matter because the node's containerd version decides which one
//! runs (facts §4.4): containerd 1.6–2.0 pull with [`Matcher::only`] (amd64 also accepts 386,
//! arm64 also accepts arm/v8…v5), containerd ≥ 2.1 with default settings with
//! [`Matcher::only_strict`] (exact normalised match). [`select`] therefore reports an exact
//! match apart from one reached only through a fallback.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::manifest::{self, IndexEntry};

/// One platform, as in an OCI index entry's `platform` object or a `--platform` flag.
///
/// Field names follow the OCI image spec (`image-index.md`); values use Go's `GOOS` and
/// `GOARCH` spellings. An empty `variant` means "no variant". Compare platforms through a
/// [`Matcher`], not with `==`: `linux/arm64` and `linux/aarch64/v8` are the same platform.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Platform {
    /// Operating system, e.g. `linux`, `windows`. Empty normalises to the host's OS.
    #[serde(default)]
    pub os: String,
    /// CPU architecture, e.g. `amd64`, `arm64`, `386`.
    #[serde(default)]
    pub architecture: String,
    /// CPU variant, e.g. `v7` for arm, `v8.2` for arm64, `v3` for amd64; empty if none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub variant: String,
    /// OCI `os.version`, e.g. `10.0.17763.1234`; only Windows matching looks at it.
    #[serde(
        rename = "os.version",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub os_version: Option<String>,
    /// OCI `os.features`, e.g. `win32k`. A candidate's features must be a subset of the node's.
    #[serde(
        rename = "os.features",
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub os_features: Vec<String>,
}

/// Accepts `null` where a list is expected, as Go's JSON decoder does.
fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// Why a platform string was rejected by [`Platform::parse`].
///
/// Displays as one line naming the input and the expected form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid platform {input:?}: {reason}; expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8"
)]
pub struct PlatformError {
    /// The string as the user wrote it.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Go's `runtime.GOOS` for the OS this binary was built for.
fn host_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's `runtime.GOARCH` for the architecture this binary was built for.
fn host_arch() -> &'static str {
    let little = cfg!(target_endian = "little");
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "arm" => "arm",
        "powerpc64" if little => "ppc64le",
        "powerpc64" => "ppc64",
        "powerpc" => "ppc",
        "loongarch64" => "loong64",
        "mips" if little => "mipsle",
        "mips64" if little => "mips64le",
        "wasm32" => "wasm",
        other => other,
    }
}

/// `normalizeOS` (database.go): lowercase, `macos` → `darwin`, empty → the host OS.
fn normalize_os(os: &str) -> String {
    if os.is_empty() {
        return host_os().to_owned();
    }
    let os = os.to_ascii_lowercase();
    if os == "macos" {
        "darwin".to_owned()
    } else {
        os
    }
}

/// `normalizeArch` (database.go): canonical architecture and variant spellings.
fn normalize_arch(arch: &str, variant: &str) -> (String, String) {
    let arch = arch.to_ascii_lowercase();
    let variant = variant.to_ascii_lowercase();
    match arch.as_str() {
        "i386" => ("386".into(), String::new()),
        "x86_64" | "x86-64" | "amd64" => {
            let variant = if variant == "v1" {
                String::new()
            } else {
                variant
            };
            ("amd64".into(), variant)
        }
        "aarch64" | "arm64" => {
            let variant = match variant.as_str() {
                "8" | "v8" | "v8.0" => String::new(),
                "9" | "9.0" | "v9.0" => "v9".into(),
                _ => variant,
            };
            ("arm64".into(), variant)
        }
        "armhf" => ("arm".into(), "v7".into()),
        "armel" => ("arm".into(), "v6".into()),
        "arm" => {
            let variant = match variant.as_str() {
                "" | "7" => "v7".into(),
                "5" | "6" | "8" => format!("v{variant}"),
                _ => variant,
            };
            ("arm".into(), variant)
        }
        _ => (arch, variant),
    }
}

/// Operating systems `Parse` accepts on their own (database.go `isKnownOS`).
fn is_known_os(os: &str) -> bool {
    matches!(
        os,
        "aix"
            | "android"
            | "darwin"
            | "dragonfly"
            | "freebsd"
            | "hurd"
            | "illumos"
            | "ios"
            | "js"
            | "linux"
            | "nacl"
            | "netbsd"
            | "openbsd"
            | "plan9"
            | "solaris"
            | "windows"
            | "zos"
    )
}

/// Architectures `Parse` accepts on their own (database.go `isKnownArch`).
fn is_known_arch(arch: &str) -> bool {
    matches!(
        arch,
        "386"
            | "amd64"
            | "amd64p32"
            | "arm"
            | "armbe"
            | "arm64"
            | "arm64be"
            | "ppc64"
            | "ppc64le"
            | "loong64"
            | "mips"
            | "mipsle"
            | "mips64"
            | "mips64le"
            | "mips64p32"
            | "mips64p32le"
            | "ppc"
            | "riscv"
            | "riscv64"
            | "s390"
            | "s390x"
            | "sparc"
            | "sparc64"
            | "wasm"
    )
}

/// True for `[A-Za-z0-9_.-]+` (the specifier component rule; `%` too inside OS options).
fn is_component(s: &str, allow_percent: bool) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'_' | b'.' | b'-')
                || (allow_percent && b == b'%')
        })
}

/// Percent-decodes an OS option (Go `url.PathUnescape`); `None` on a malformed escape.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The OS component `os[(version[+feature]*)]` split into its parts.
struct OsComponent {
    os: String,
    version: Option<String>,
    features: Vec<String>,
}

fn parse_os_component(part: &str) -> Result<OsComponent, String> {
    let bad = || {
        format!(
            "{part:?} is not a valid OS component (letters, digits, '_' and '-', optionally followed by \"(version[+feature…])\")"
        )
    };
    let (name, options) = match part.split_once('(') {
        None => (part, None),
        Some((name, rest)) => (name, Some(rest.strip_suffix(')').ok_or_else(bad)?)),
    };
    if name.is_empty() || name.contains('.') || !is_component(name, false) {
        return Err(bad());
    }
    let mut component = OsComponent {
        os: normalize_os(name),
        version: None,
        features: Vec::new(),
    };
    if let Some(options) = options {
        let mut pieces = options.split('+');
        let version = pieces.next().unwrap_or_default();
        if !version.is_empty() {
            if !is_component(version, true) {
                return Err(bad());
            }
            let decoded = percent_decode(version)
                .ok_or_else(|| format!("OS version {version:?} has a malformed %-escape"))?;
            component.version = Some(decoded);
        }
        for feature in pieces {
            if !is_component(feature, true) {
                return Err(bad());
            }
            let decoded = percent_decode(feature)
                .ok_or_else(|| format!("OS feature {feature:?} has a malformed %-escape"))?;
            component.features.push(decoded);
        }
    }
    Ok(component)
}

impl Platform {
    /// Builds a platform from its three common parts (no OS version, no OS features).
    pub fn new(os: &str, architecture: &str, variant: &str) -> Self {
        Platform {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant: variant.to_owned(),
            os_version: None,
            os_features: Vec::new(),
        }
    }

    /// Parses a platform specifier the way containerd's `platforms.Parse` does.
    ///
    /// Accepted shapes: `os`, `arch`, `os/arch` and `os/arch/variant`, where `os` may carry
    /// options as `os(version)` or `os(version+feature+…)` (values %-escaped). The OS is
    /// normalised (`macos` → `darwin`) and the architecture spelling too (`aarch64` →
    /// `arm64`, `x86_64` → `amd64`, `armhf` → `arm/v7`, …). As upstream:
    /// - a lone known OS gets the host architecture (and, on 32-bit arm, the host variant
    ///   unless it is `v7`); a lone known architecture gets the host OS;
    /// - `os/arm` keeps variant "" (which normalises to `v7`), and `os/arm64/v8` keeps `v8`
    ///   (which normalises to ""): the result is not fully normalised, see [`Self::normalize`].
    ///
    /// # Errors
    /// [`PlatformError`] for wildcards (`*`), characters outside `[A-Za-z0-9_.-]`, empty
    /// components, a lone word that is neither a known OS nor a known architecture, or more
    /// than three `/`-separated parts.
    pub fn parse(specifier: &str) -> Result<Platform, PlatformError> {
        let fail = |reason: String| PlatformError {
            input: specifier.to_owned(),
            reason,
        };
        if specifier.contains('*') {
            return Err(fail("wildcards are not supported".into()));
        }
        let parts: Vec<&str> = specifier.splitn(4, '/').collect();
        let os = parse_os_component(parts[0]).map_err(fail)?;
        for part in &parts[1..] {
            if !is_component(part, false) {
                return Err(fail(format!(
                    "{part:?} is not a valid component (letters, digits, '_', '.' and '-' only)"
                )));
            }
        }
        let mut p = Platform {
            os: os.os,
            os_version: os.version,
            os_features: os.features,
            ..Platform::default()
        };
        match parts.len() {
            1 => {
                if is_known_os(&p.os) {
                    p.architecture = host_arch().to_owned();
                    if p.architecture == "arm" {
                        let variant = host_variant();
                        if variant != "v7" {
                            p.variant = variant;
                        }
                    }
                    return Ok(p);
                }
                let (arch, variant) = normalize_arch(parts[0], "");
                if !is_known_arch(&arch) {
                    return Err(fail("not a known operating system or architecture".into()));
                }
                p.variant = if arch == "arm" && variant == "v7" {
                    String::new()
                } else {
                    variant
                };
                p.architecture = arch;
                p.os = host_os().to_owned();
                Ok(p)
            }
            2 => {
                let (arch, variant) = normalize_arch(parts[1], "");
                p.variant = if arch == "arm" && variant == "v7" {
                    String::new()
                } else {
                    variant
                };
                p.architecture = arch;
                Ok(p)
            }
            3 => {
                let (arch, variant) = normalize_arch(parts[1], parts[2]);
                p.variant = if arch == "arm64" && variant.is_empty() {
                    "v8".into()
                } else {
                    variant
                };
                p.architecture = arch;
                Ok(p)
            }
            _ => Err(fail("too many '/'-separated parts".into())),
        }
    }

    /// The canonical form used for every comparison (`platforms.Normalize`, database.go).
    ///
    /// OS: lowercase, `macos` → `darwin`, empty → the host OS. Architecture and variant:
    /// lowercase; `i386` → `386` (variant dropped); `x86_64`/`x86-64` → `amd64`, variant `v1`
    /// → ""; `aarch64` → `arm64`, variants `8`/`v8`/`v8.0` → "" and `9`/`9.0`/`v9.0` → `v9`;
    /// `armhf` → `arm/v7`; `armel` → `arm/v6`; `arm` with variant ""/`7` → `v7`, `5`/`6`/`8` →
    /// `v5`/`v6`/`v8`. OS features are sorted and de-duplicated; the OS version is kept.
    pub fn normalize(&self) -> Platform {
        let (architecture, variant) = normalize_arch(&self.architecture, &self.variant);
        let mut os_features = self.os_features.clone();
        os_features.sort();
        os_features.dedup();
        Platform {
            os: normalize_os(&self.os),
            architecture,
            variant,
            os_version: self.os_version.clone(),
            os_features,
        }
    }

    /// The platform this binary runs on, as containerd's `platforms.DefaultSpec()` sees it.
    ///
    /// OS and architecture come from the build target (Go spellings: `linux`, `amd64`,
    /// `arm64`, …). The variant is detected only on arm and arm64 (defaults_unix.go,
    /// cpuinfo_linux.go): the `CPU architecture` line of `/proc/cpuinfo`, else `uname -m`,
    /// mapped `8`/`aarch64` → `v8`, `7`/`7M`/`?(12)`…`?(17)` → `v7` (`v6` on 32-bit arm when
    /// the model name starts `ARMv6-compatible`), `6`/`6TEJ` → `v6`, `5`/`5T`/`5TE`/`5TEJ` →
    /// `v5`, `4`/`4T` → `v4`, `3` → `v3`, anything else → `unknown`; "" if both sources fail.
    /// amd64 gets no variant, like containerd. A node that runs pullcheck as an init container
    /// therefore matches what its containerd would choose.
    pub fn host() -> Platform {
        let architecture = host_arch();
        let variant = if matches!(architecture, "arm" | "arm64") {
            host_variant()
        } else {
            String::new()
        };
        Platform::new(host_os(), architecture, &variant)
    }

    /// True for BuildKit attestation entries (`unknown/unknown`), which never match a node.
    pub fn is_unknown(&self) -> bool {
        self.os == "unknown" && self.architecture == "unknown"
    }
}

/// Formats as `os/arch[/variant]` (containerd's `platforms.Format`, without `os.version`).
impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if !self.variant.is_empty() {
            write!(f, "/{}", self.variant)?;
        }
        Ok(())
    }
}

/// Parses like [`Platform::parse`].
impl std::str::FromStr for Platform {
    type Err = PlatformError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Platform::parse(s)
    }
}

/// The arm/arm64 CPU variant of this machine (containerd `cpuVariant`), or "".
fn host_variant() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let mut fields = line.split(':');
            let key = fields.next()?;
            let value = fields.next()?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let raw = match field("Cpu architecture") {
        Some(raw) => raw,
        None => match machine_variant() {
            Some(raw) => raw,
            None => return String::new(),
        },
    };
    cpu_variant(&raw, field("model name").as_deref(), host_arch() == "arm")
}

/// `uname -m` turned into a cpuinfo-style architecture number (`getCPUVariantFromArch`).
fn machine_variant() -> Option<String> {
    let out = std::process::Command::new("uname")
        .arg("-m")
        .output()
        .ok()?;
    let machine = String::from_utf8(out.stdout)
        .ok()?
        .trim()
        .to_ascii_lowercase();
    if machine == "aarch64" {
        return Some("8".into());
    }
    let rest = machine.strip_prefix("armv")?;
    Some(match rest.chars().next()? {
        c @ '3'..='8' => c.to_string(),
        _ => "unknown".into(),
    })
}

/// The cpuinfo table (`getArmCPUVariant`): raw `CPU architecture` value → variant.
fn cpu_variant(raw: &str, model_name: Option<&str>, arm32: bool) -> String {
    let raw = raw.to_ascii_lowercase();
    let armv6_quirk = arm32
        && raw == "7"
        && model_name.is_some_and(|m| m.to_ascii_lowercase().starts_with("armv6-compatible"));
    let raw = if armv6_quirk { "6" } else { raw.as_str() };
    match raw {
        "8" | "aarch64" => "v8",
        "7" | "7m" | "?(12)" | "?(13)" | "?(14)" | "?(15)" | "?(16)" | "?(17)" => "v7",
        "6" | "6tej" => "v6",
        "5" | "5t" | "5te" | "5tej" => "v5",
        "4" | "4t" => "v4",
        "3" => "v3",
        _ => "unknown",
    }
    .to_owned()
}

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
    pub fn rank(&self, candidate: &Platform) -> Option<usize> {
        self.wanted.iter().position(|w| matches_one(w, candidate))
    }

    /// The acceptable platforms, most preferred first (normalised).
    pub fn platforms(&self) -> &[Platform] {
        &self.wanted
    }
}

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
/// ([`manifest::is_manifest`], [`manifest::is_index`]) are ignored (the OCI spec says unknown
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
        if !manifest::is_manifest(&entry.media_type) && !manifest::is_index(&entry.media_type) {
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
    fn normalization_table() {
        let cases = [
            (("linux", "aarch64", ""), ("linux", "arm64", "")),
            (("linux", "arm64", "v8"), ("linux", "arm64", "")),
            (("linux", "arm64", "8"), ("linux", "arm64", "")),
            (("linux", "arm64", "v8.0"), ("linux", "arm64", "")),
            (("linux", "arm64", "v8.2"), ("linux", "arm64", "v8.2")),
            (("linux", "arm64", "9"), ("linux", "arm64", "v9")),
            (("linux", "arm64", "v9.0"), ("linux", "arm64", "v9")),
            (("linux", "x86_64", ""), ("linux", "amd64", "")),
            (("linux", "x86-64", "v1"), ("linux", "amd64", "")),
            (("linux", "amd64", "v1"), ("linux", "amd64", "")),
            (("linux", "amd64", "v3"), ("linux", "amd64", "v3")),
            (("linux", "i386", "v1"), ("linux", "386", "")),
            (("linux", "armhf", ""), ("linux", "arm", "v7")),
            (("linux", "armel", ""), ("linux", "arm", "v6")),
            (("linux", "arm", ""), ("linux", "arm", "v7")),
            (("linux", "arm", "7"), ("linux", "arm", "v7")),
            (("linux", "arm", "5"), ("linux", "arm", "v5")),
            (("linux", "arm", "8"), ("linux", "arm", "v8")),
            (("linux", "ARM64", "V8"), ("linux", "arm64", "")),
            (("MacOS", "amd64", ""), ("darwin", "amd64", "")),
            (("Linux", "s390x", ""), ("linux", "s390x", "")),
        ];
        for ((os, arch, variant), (n_os, n_arch, n_variant)) in cases {
            let got = Platform::new(os, arch, variant).normalize();
            assert_eq!(
                (
                    got.os.as_str(),
                    got.architecture.as_str(),
                    got.variant.as_str()
                ),
                (n_os, n_arch, n_variant),
                "normalize({os}/{arch}/{variant})"
            );
        }
        let mut features = Platform::new("windows", "amd64", "");
        features.os_features = vec!["b".into(), "a".into(), "b".into()];
        assert_eq!(features.normalize().os_features, ["a", "b"]);
        assert_eq!(Platform::new("", "amd64", "").normalize().os, host_os());
    }

    #[test]
    fn parse_shapes() {
        assert_eq!(p("linux/arm"), Platform::new("linux", "arm", ""));
        assert_eq!(p("linux/arm/7"), Platform::new("linux", "arm", "v7"));
        assert_eq!(p("linux/arm64/v8"), Platform::new("linux", "arm64", "v8"));
        assert_eq!(p("linux/arm64"), Platform::new("linux", "arm64", ""));
        assert_eq!(p("Linux/AArch64"), Platform::new("linux", "arm64", ""));
        assert_eq!(p("linux/x86_64"), Platform::new("linux", "amd64", ""));
        assert_eq!(p("linux/armhf"), Platform::new("linux", "arm", ""));
        assert_eq!(p("linux/armel"), Platform::new("linux", "arm", "v6"));
        assert_eq!(p("arm64"), Platform::new(host_os(), "arm64", ""));
        assert_eq!(p("windows").architecture, host_arch());
        let win = p("windows(10.0.17763+win32k+%2Bx)/amd64");
        assert_eq!(win.os_version.as_deref(), Some("10.0.17763"));
        assert_eq!(win.os_features, ["win32k", "+x"]);
        for bad in [
            "",
            "linux/*",
            "*",
            "linux//amd64",
            "linux/amd64/v8/x",
            "nope",
            "li nux/amd64",
            "linux(1/amd64",
            "linux(%zz)/amd64",
        ] {
            let err = Platform::parse(bad).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("{bad:?}")) && msg.contains("os/arch[/variant]"),
                "{msg}"
            );
            assert!(!msg.contains('\n'));
        }
    }

    #[test]
    fn display() {
        assert_eq!(
            Platform::new("linux", "arm64", "v8").to_string(),
            "linux/arm64/v8"
        );
        assert_eq!(
            Platform::new("linux", "amd64", "").to_string(),
            "linux/amd64"
        );
    }

    #[test]
    fn cpuinfo_table() {
        assert_eq!(cpu_variant("8", None, false), "v8");
        assert_eq!(cpu_variant("AArch64", None, false), "v8");
        assert_eq!(
            cpu_variant("7", Some("ARMv6-compatible processor rev 7 (v6l)"), true),
            "v6"
        );
        assert_eq!(
            cpu_variant("7", Some("ARMv6-compatible processor rev 7 (v6l)"), false),
            "v7"
        );
        assert_eq!(cpu_variant("7M", None, true), "v7");
        assert_eq!(cpu_variant("?(12)", None, true), "v7");
        assert_eq!(cpu_variant("6TEJ", None, true), "v6");
        assert_eq!(cpu_variant("5TE", None, true), "v5");
        assert_eq!(cpu_variant("4T", None, true), "v4");
        assert_eq!(cpu_variant("3", None, true), "v3");
        assert_eq!(cpu_variant("9", None, false), "unknown");
    }

    #[test]
    fn host_is_plausible() {
        let host = Platform::host();
        assert_eq!(host.os, host_os());
        assert_eq!(host.architecture, host_arch());
        if !matches!(host.architecture.as_str(), "arm" | "arm64") {
            assert_eq!(host.variant, "");
        }
        assert_eq!(Matcher::only_strict(&host).rank(&host), Some(0));
    }

    #[test]
    fn vectors_in_preference_order() {
        let names = |m: Matcher| {
            m.platforms()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(Matcher::only(&p("linux/amd64/v3"))),
            [
                "linux/amd64/v3",
                "linux/amd64/v2",
                "linux/amd64",
                "linux/386"
            ]
        );
        assert_eq!(
            names(Matcher::only(&p("linux/arm64"))),
            [
                "linux/arm64",
                "linux/arm/v8",
                "linux/arm/v7",
                "linux/arm/v6",
                "linux/arm/v5"
            ]
        );
        assert_eq!(
            names(Matcher::only(&p("linux/arm64/v9.6"))),
            [
                "linux/arm64/v9.6",
                "linux/arm64/v9.5",
                "linux/arm64/v9.4",
                "linux/arm64/v9.3",
                "linux/arm64/v9.2",
                "linux/arm64/v9.1",
                "linux/arm64/v9",
                "linux/arm64/v8.9",
                "linux/arm64/v8.8",
                "linux/arm64/v8.7",
                "linux/arm64/v8.6",
                "linux/arm64/v8.5",
                "linux/arm64/v8.4",
                "linux/arm64/v8.3",
                "linux/arm64/v8.2",
                "linux/arm64/v8.1",
                "linux/arm64",
                "linux/arm/v8",
                "linux/arm/v7",
                "linux/arm/v6",
                "linux/arm/v5",
            ]
        );
        assert_eq!(names(Matcher::only(&p("linux/arm/v4"))), ["linux/arm/v4"]);
    }

    #[test]
    fn features_and_windows_versions() {
        let mut node = p("windows(10.0.20348)/amd64");
        node.os_features = vec!["win32k".into()];
        let m = Matcher::only_strict(&node);
        assert!(m.matches(&p("windows(10.0.20348)/amd64")));
        assert!(m.matches(&p("windows(10.0.20348+win32k)/amd64")));
        assert!(!m.matches(&p("windows(10.0.20348+other)/amd64")));
        assert!(!m.matches(&p("windows(10.0.17763)/amd64")));
        let ltsc2025 = Matcher::only_strict(&p("windows(10.0.26100)/amd64"));
        assert!(ltsc2025.matches(&p("windows(10.0.20348.1)/amd64")));
        assert!(!ltsc2025.matches(&p("windows(10.0.26200)/amd64")));
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

    #[test]
    fn platform_json_fields() {
        let json = r#"{"architecture":"arm64","os":"linux","variant":"v8","os.version":"1","os.features":null,"x":1}"#;
        let platform: Platform = serde_json::from_str(json).unwrap();
        assert_eq!(platform.variant, "v8");
        assert_eq!(platform.os_version.as_deref(), Some("1"));
        assert!(platform.os_features.is_empty());
    }
}
