//! Platforms: the node's platform, normalisation, and which index entry the node would pull.
//!
//! This module restates the rules of `github.com/containerd/platforms` at commit `09756f5`
//! (`platforms.go` for [`Platform::parse`] and the matcher, `database.go` for
//! [`Platform::normalize`], `compare.go` for [`Matcher::only`], `cpuinfo_linux.go` for
//! [`Platform::host`]). Which index entry a node pulls is chosen beside
//! the index, in the manifest module, with these matchers. Two matchers matter because the node's containerd version decides which one
//! runs (containerd `internal/cri/server/images/image_pull.go` picks the matcher): containerd 1.6–2.0 pull with [`Matcher::only`] (amd64 also accepts 386,
//! arm64 also accepts arm/v8…v5), containerd ≥ 2.1 with default settings with
//! [`Matcher::only_strict`] (exact normalised match), so an exact match is reported apart from
//! one reached only through a fallback.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

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

/// Accepts `null` where a list is expected, as Go's `encoding/json` does (containerd reads
/// these bodies with it).
pub(crate) fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
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
    pub(crate) fn new(os: &str, architecture: &str, variant: &str) -> Self {
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
    pub(crate) fn host() -> Platform {
        let architecture = host_arch();
        let variant = if matches!(architecture, "arm" | "arm64") {
            host_variant()
        } else {
            String::new()
        };
        Platform::new(host_os(), architecture, &variant)
    }

    /// True for BuildKit attestation entries (`unknown/unknown`), which never match a node.
    pub(crate) fn is_unknown(&self) -> bool {
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

mod flag;
mod matcher;
#[cfg(test)]
mod tests;

pub use matcher::Matcher;
