//! The recorded pull failures of tests/data/watch (see its README.md), for the tests.

use serde_json::Value;

/// kubelet v1.35.4 with containerd v2.2.9, by scenario name.
pub(super) const KUBELET_1_35_CONTAINERD_2_2: &[(&str, &str)] = &[
    (
        "auth-missing-tag",
        include_str!(
            "../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/auth-missing-tag.json"
        ),
    ),
    (
        "auth-no-secret",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/auth-no-secret.json"),
    ),
    (
        "auth-wrong-password",
        include_str!(
            "../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/auth-wrong-password.json"
        ),
    ),
    (
        "dns",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/dns.json"),
    ),
    (
        "invalid-name",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/invalid-name.json"),
    ),
    (
        "mirror-401-upstream-down",
        include_str!(
            "../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/mirror-401-upstream-down.json"
        ),
    ),
    (
        "mirror-404-upstream-down",
        include_str!(
            "../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/mirror-404-upstream-down.json"
        ),
    ),
    (
        "missing-repository",
        include_str!(
            "../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/missing-repository.json"
        ),
    ),
    (
        "missing-tag",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/missing-tag.json"),
    ),
    (
        "never-pull",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/never-pull.json"),
    ),
    (
        "platform-missing",
        include_str!(
            "../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/platform-missing.json"
        ),
    ),
    (
        "registry-down",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/registry-down.json"),
    ),
    (
        "status-429",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/status-429.json"),
    ),
    (
        "status-503",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/status-503.json"),
    ),
    (
        "x509",
        include_str!("../../tests/data/watch/kubelet-1.35.4-containerd-2.2.9/x509.json"),
    ),
];

/// One recorded scenario: its waiting states and its `Failed to pull image` Events.
pub(super) struct Recording {
    /// (reason, message), in the order the pod went through them.
    pub(super) waiting: Vec<(String, String)>,
    /// The messages of the kubelet's `Failed` Events that carry the pull error.
    pub(super) failed_events: Vec<String>,
}

/// The recording of `name`; panics if there is none (a test typo).
pub(super) fn recording(name: &str) -> Recording {
    let (_, text) = KUBELET_1_35_CONTAINERD_2_2
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no recording {name}"));
    let v: Value = serde_json::from_str(text).expect("recording is JSON");
    let s = |x: &Value| x.as_str().expect("a string").to_string();
    Recording {
        waiting: v["waiting"]
            .as_array()
            .expect("waiting")
            .iter()
            .map(|w| (s(&w["reason"]), s(&w["message"])))
            .collect(),
        failed_events: v["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| {
                e["reason"] == "Failed" && s(&e["message"]).starts_with("Failed to pull image ")
            })
            .map(|e| s(&e["message"]))
            .collect(),
    }
}
