use super::*;
use std::path::Path;

const CA: &str = include_str!("test-ca.pem");

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn settings(hosts_dir: Option<&Path>, insecure: &[&str], ca: &[&str]) -> RegistrySettings {
    RegistrySettings {
        hosts_dir: hosts_dir.map(Path::to_path_buf),
        insecure: insecure.iter().map(|s| s.to_string()).collect(),
        ca_bundles: ca.iter().map(|s| s.to_string()).collect(),
        metered: None,
    }
}

fn regs(r: &[&str]) -> Vec<String> {
    r.iter().map(|s| s.to_string()).collect()
}

#[test]
fn nothing_to_hand_over_without_settings() {
    let h = RegistrySettings::default()
        .hand_over_for(&regs(&["docker.io", "10.0.0.5:5000"]))
        .unwrap();
    assert_eq!(
        h,
        HandOver {
            text: None,
            hosts: vec![],
            notes: vec![]
        }
    );
}

#[test]
fn insecure_registries_only_where_the_template_uses_them() {
    let s = settings(None, &["10.0.0.5:5000", "other:5000"], &[]);
    let h = s
        .hand_over_for(&regs(&["docker.io", "10.0.0.5:5000"]))
        .unwrap();
    assert_eq!(
        h.text.as_deref(),
        Some(r#"{"registries":{"10.0.0.5:5000":[{"url":"http://10.0.0.5:5000/v2"}]}}"#)
    );
    assert_eq!(
        h.hosts,
        [("10.0.0.5:5000".to_string(), "10.0.0.5:5000".to_string())]
    );
    // Read back: the same endpoints the webhook used.
    let r = decode(h.text.as_deref().unwrap()).unwrap().unwrap();
    assert_eq!(
        r.endpoints["10.0.0.5:5000"],
        hosts::endpoints(None, "10.0.0.5:5000", &s.insecure).unwrap()
    );
    assert!(r.ca_bundles.is_empty() && r.metered.is_none());
    // A template without those registries gets nothing.
    assert_eq!(s.hand_over_for(&regs(&["ghcr.io"])).unwrap().text, None);
}

#[test]
fn ca_bundles_go_to_every_template_and_round_trip() {
    let s = settings(None, &[], &[CA]);
    let h = s.hand_over_for(&regs(&["reg.internal"])).unwrap();
    let text = h.text.unwrap();
    assert_eq!(text, serde_json::json!({"caBundles": [CA]}).to_string());
    let r = decode(&text).unwrap().unwrap();
    assert_eq!(r.ca_bundles, [CA]);
    assert!(r.endpoints.is_empty());
}

#[test]
fn mirrors_skip_verify_plain_http_servers_and_their_cas() {
    let toml = "server = \"http://reg.internal:5000\"\n\
        [host.\"https://mirror.internal\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"ca.pem\"\n\
        [host.\"https://fast.internal\"]\n  skip_verify = true\n";
    let dir = dir_with(&[
        ("reg.internal:5000/hosts.toml", toml),
        ("reg.internal:5000/ca.pem", CA),
    ]);
    let s = settings(Some(dir.path()), &[], &[]);
    let h = s.hand_over_for(&regs(&["reg.internal:5000"])).unwrap();
    let text = h.text.unwrap();
    assert_eq!(
        text,
        serde_json::json!({"registries": {"reg.internal:5000": [
            {"url": "https://mirror.internal/v2", "capabilities": ["pull", "resolve"], "ca": [CA], "mirror": true},
            {"url": "https://fast.internal/v2", "skipVerify": true, "mirror": true},
            {"url": "http://reg.internal:5000/v2"},
        ]}})
        .to_string()
    );
    assert_eq!(
        h.hosts
            .iter()
            .map(|(_, host)| host.as_str())
            .collect::<Vec<_>>(),
        ["mirror.internal", "fast.internal", "reg.internal:5000"]
    );
    // Read back, the endpoints are containerd's, with the CA as text instead of a path.
    let got = &decode(&text).unwrap().unwrap().endpoints["reg.internal:5000"];
    let mut want = hosts::endpoints(Some(dir.path()), "reg.internal:5000", &[]).unwrap();
    want[0].ca_files.clear();
    want[0].ca_pems = vec![CA.to_string()];
    assert_eq!(*got, want);
}

#[test]
fn headers_are_never_handed_over_and_client_certificates_never_written() {
    let toml = "server = \"https://reg.internal\"\n\
        [host.\"https://mirror.internal\"]\n  header = {Authorization = \"Basic c2VjcmV0\", X-Team = [\"a\", \"b\"]}\n";
    let dir = dir_with(&[("reg.internal/hosts.toml", toml)]);
    let err = settings(Some(dir.path()), &[], &[])
        .hand_over_for(&regs(&["reg.internal"]))
        .unwrap_err();
    assert_eq!(
        err,
        Refusal::Headers {
            registry: "reg.internal".into(),
            endpoint: "mirror.internal".into(),
            headers: vec!["Authorization".into(), "X-Team".into()],
        }
    );
    let line = err.to_string();
    assert!(!line.contains("c2VjcmV0"), "{line}");
    assert_eq!(
        line,
        "registry reg.internal: hosts.toml sends header Authorization, X-Team to mirror.internal, never copied into workloads"
    );
    // An endpoint the node presents a client certificate to: the check can't, so it would
    // be refused where the node is not (a trial saw exit 20 forever on an mTLS registry):
    // no hand-over, and nothing of the pair is written anywhere.
    let toml = "server = \"https://reg.internal\"\nclient = [[\"c.cert\", \"c.key\"]]\nskip_verify = true\n";
    let dir = dir_with(&[("reg.internal/hosts.toml", toml)]);
    let err = settings(Some(dir.path()), &[], &[])
        .hand_over_for(&regs(&["reg.internal"]))
        .unwrap_err();
    assert_eq!(
        err,
        Refusal::ClientCertificates {
            registry: "reg.internal".into(),
            endpoint: "reg.internal".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "registry reg.internal: hosts.toml gives reg.internal client certificates, which the check can't present"
    );
}

#[test]
fn an_unreadable_hosts_file_or_ca_is_a_refusal_naming_it() {
    let dir = dir_with(&[("reg.internal/hosts.toml", "server = 5\n")]);
    let err = settings(Some(dir.path()), &[], &[])
        .hand_over_for(&regs(&["reg.internal"]))
        .unwrap_err();
    assert!(
        matches!(&err, Refusal::Unreadable { registry, message } if registry == "reg.internal" && message.contains("hosts.toml: line 1")),
        "{err}"
    );
    let dir = dir_with(&[(
        "reg.internal/hosts.toml",
        "server = \"https://reg.internal\"\nca = \"nope.pem\"\n",
    )]);
    let err = settings(Some(dir.path()), &[], &[])
        .hand_over_for(&regs(&["reg.internal"]))
        .unwrap_err();
    assert!(err.to_string().contains("nope.pem"), "{err}");
}

#[test]
fn metered_settings_only_when_not_the_defaults() {
    let default = MeteredGet::IfAffordable { margin: 10 };
    assert_eq!(
        Metered::unless_default(&regs(&["docker.io"]), default),
        None
    );
    let m = Metered::unless_default(&regs(&["docker.io"]), MeteredGet::Never).unwrap();
    let s = RegistrySettings {
        metered: Some(m.clone()),
        ..RegistrySettings::default()
    };
    let text = s
        .hand_over_for(&regs(&["docker.io"]))
        .unwrap()
        .text
        .unwrap();
    assert_eq!(
        text,
        r#"{"metered":{"registries":["docker.io"],"get":"never"}}"#
    );
    assert_eq!(decode(&text).unwrap().unwrap().metered, Some(m));
    let m = Metered::unless_default(&regs(&[]), MeteredGet::IfAffordable { margin: 3 }).unwrap();
    let s = RegistrySettings {
        metered: Some(m.clone()),
        ..RegistrySettings::default()
    };
    let text = s.hand_over_for(&regs(&["ghcr.io"])).unwrap().text.unwrap();
    assert_eq!(
        text,
        r#"{"metered":{"registries":[],"get":"affordable","margin":3}}"#
    );
    assert_eq!(decode(&text).unwrap().unwrap().metered, Some(m));
}

#[test]
fn decoding_is_strict() {
    assert!(decode("").unwrap().is_none());
    assert!(decode(" \n").unwrap().is_none());
    let err = |text: &str| decode(text).unwrap_err().to_string();
    assert!(err(r#"{"insecure":[]}"#).starts_with("unknown field `insecure`"));
    assert_eq!(
        err(r#"{"registries":{"r":[{"url":"ftp://r/v2"}]}}"#),
        r#"registries["r"][0]: url "ftp://r/v2" is not http:// or https://"#
    );
    assert_eq!(
        err(r#"{"registries":{"r":[{"url":"https:///v2"}]}}"#),
        r#"registries["r"][0]: url "https:///v2" has no usable host"#
    );
    assert_eq!(
        err(r#"{"registries":{"r":[{"url":"https://r/v2","capabilities":["pul"]}]}}"#),
        r#"registries["r"][0]: unknown capability "pul""#
    );
    assert_eq!(
        err(r#"{"registries":{"r":[]}}"#),
        r#"registries["r"]: no endpoint"#
    );
    assert_eq!(
        err(r#"{"caBundles":["hello"]}"#),
        "caBundles[0]: no certificates found"
    );
    assert_eq!(
        err(r#"{"metered":{"registries":[],"get":"affordable"}}"#),
        r#"metered: get "affordable" with margin None: write always or never without a margin, or affordable with one"#
    );
    assert_eq!(err("5"), "not a JSON object");
}

#[test]
fn a_hand_over_that_is_not_an_object_or_names_a_bare_host_is_refused() {
    assert_eq!(decode("[]").unwrap_err().to_string(), "not a JSON object");
    assert_eq!(
        decode(r#"[["-----BEGIN CERTIFICATE-----"]]"#)
            .unwrap_err()
            .to_string(),
        "not a JSON object"
    );
    // A bare host would read a present tag as not found (a trial's hand-edited file).
    let text = r#"{"registries":{"127.0.0.1:5000":[{"url":"http://127.0.0.1:5000"}]}}"#;
    assert_eq!(
        decode(text).unwrap_err().to_string(),
        "registries[\"127.0.0.1:5000\"][0]: url \"http://127.0.0.1:5000\" has no path; write the registry API root, e.g. http://127.0.0.1:5000/v2"
    );
}
