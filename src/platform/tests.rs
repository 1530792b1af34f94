//! Unit tests for the platform module (the upstream vectors are in
//! tests/integration/conformance_platform.rs).

use super::matcher::*;
use super::*;

fn p(s: &str) -> Platform {
    Platform::parse(s).unwrap()
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
fn platform_json_fields() {
    let json = r#"{"architecture":"arm64","os":"linux","variant":"v8","os.version":"1","os.features":null,"x":1}"#;
    let platform: Platform = serde_json::from_str(json).unwrap();
    assert_eq!(platform.variant, "v8");
    assert_eq!(platform.os_version.as_deref(), Some("1"));
    assert!(platform.os_features.is_empty());
}
