//! Unit tests.

use super::*;
use std::fs;

fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = root.path().join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    root
}

fn urls(endpoints: &[Endpoint]) -> Vec<String> {
    endpoints.iter().map(Endpoint::base_url).collect()
}

#[test]
fn no_hosts_dir_uses_default_upstream() {
    let e = endpoints(None, "docker.io", &[]).unwrap();
    assert_eq!(urls(&e), ["https://registry-1.docker.io/v2"]);
    assert!(!e[0].is_mirror && e[0].can_resolve_tags() && !e[0].skip_verify);
    let e = endpoints(None, "ghcr.io", &[]).unwrap();
    assert_eq!(urls(&e), ["https://ghcr.io/v2"]);
    // A root without a matching directory falls through to the default as well.
    let root = dir_with(&[("other.io/hosts.toml", "server = \"https://x\"")]);
    assert_eq!(
        urls(&endpoints(Some(root.path()), "quay.io", &[]).unwrap()),
        ["https://quay.io/v2"]
    );
}

#[test]
fn localhost_defaults() {
    // Deliberately stricter than containerd: no scheme guessing for loopback hosts.
    let e = endpoints(None, "localhost:5000", &[]).unwrap();
    assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Https, false));
    let e = endpoints(None, "127.0.0.1:80", &[]).unwrap();
    assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Https, false));
    let e = endpoints(None, "localhost:5000", &["localhost:5000".into()]).unwrap();
    assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Http, false));
    let e = endpoints(None, "10.0.0.1:5000", &[]).unwrap();
    assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Https, false));
}

#[test]
fn docker_io_example_from_containerd_docs() {
    let root = dir_with(&[(
        "docker.io/hosts.toml",
        "server = \"https://docker.io\"\n\n[host.\"https://registry-1.docker.io\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
    )]);
    let e = endpoints(Some(root.path()), "docker.io", &[]).unwrap();
    assert_eq!(
        urls(&e),
        ["https://registry-1.docker.io/v2", "https://docker.io/v2"]
    );
    assert!(!e[0].is_mirror && !e[1].is_mirror);
    assert_eq!(e[0].capabilities.names(), ["pull", "resolve"]);
    assert_eq!(e[0].scheme.as_str(), "https");
    assert_eq!(
        e[0].capabilities,
        Capabilities {
            pull: true,
            resolve: true,
            push: false,
            referrers: false
        }
    );
    assert_eq!(e[1].capabilities, Capabilities::ALL);
    assert_eq!(
        e[0].manifest_url("library/alpine", "3.20", None),
        "https://registry-1.docker.io/v2/library/alpine/manifests/3.20"
    );
}

#[test]
fn mirrors_keep_file_order_and_server_is_last() {
    let toml = r#"
server = "registry.example.com:5000"

[host."https://z-mirror.example"]
  capabilities = ["pull", "resolve"]
  [host."https://z-mirror.example".header]
x-custom = ["a", "b"]
authorization = "Basic Zm9v"

[host."http://a-mirror.example:8080/base/"]
  capabilities = ["pull"]
  skip_verify = true

[host."m-mirror.example"]
"#;
    let root = dir_with(&[("registry.example.com:5000/hosts.toml", toml)]);
    let e = endpoints(Some(root.path()), "registry.example.com:5000", &[]).unwrap();
    assert_eq!(
        urls(&e),
        [
            "https://z-mirror.example/v2",
            "http://a-mirror.example:8080/base/v2",
            "https://m-mirror.example/v2",
            "https://registry.example.com:5000/v2",
        ]
    );
    assert_eq!(
        e.iter().map(|e| e.is_mirror).collect::<Vec<_>>(),
        [true, true, true, false]
    );
    assert_eq!(
        e[0].headers,
        [
            ("authorization".to_owned(), "Basic Zm9v".to_owned()),
            ("x-custom".to_owned(), "a".to_owned()),
            ("x-custom".to_owned(), "b".to_owned()),
        ]
    );
    assert!(e[0].can_resolve_tags());
    assert!(!e[1].can_resolve_tags() && e[1].capabilities.pull && e[1].skip_verify);
    assert_eq!(e[2].capabilities, Capabilities::ALL);
    assert_eq!(
        e[1].manifest_url("team/app", "sha256:abc", Some("registry.example.com:5000")),
        "http://a-mirror.example:8080/base/v2/team/app/manifests/sha256:abc?ns=registry.example.com%3A5000"
    );
}

#[test]
fn no_server_means_default_upstream_last() {
    let toml = "[host.\"https://mirror.gcr.io\"]\ncapabilities = [\"pull\", \"resolve\"]\n";
    let root = dir_with(&[("docker.io/hosts.toml", toml)]);
    let e = endpoints(Some(root.path()), "docker.io", &[]).unwrap();
    assert_eq!(
        urls(&e),
        [
            "https://mirror.gcr.io/v2",
            "https://registry-1.docker.io/v2"
        ]
    );
    assert!(e[0].is_mirror && !e[1].is_mirror);
    assert_eq!(
        e[0].manifest_url("library/alpine", "latest", Some("docker.io")),
        "https://mirror.gcr.io/v2/library/alpine/manifests/latest?ns=docker.io"
    );
}

#[test]
fn port_directory_takes_precedence() {
    let root = dir_with(&[
        ("reg.io_5000_/hosts.toml", "server = \"https://underscore\""),
        ("reg.io:5000/hosts.toml", "server = \"https://colon\""),
        ("_default/hosts.toml", "server = \"https://default\""),
    ]);
    assert_eq!(
        urls(&endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap()),
        ["https://underscore/v2"]
    );
    fs::remove_dir_all(root.path().join("reg.io_5000_")).unwrap();
    assert_eq!(
        urls(&endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap()),
        ["https://colon/v2"]
    );
    fs::remove_dir_all(root.path().join("reg.io:5000")).unwrap();
    assert_eq!(
        urls(&endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap()),
        ["https://default/v2"]
    );
}

#[test]
fn default_directory_applies_to_every_registry() {
    let toml = "[host.\"https://cache.internal\"]\ncapabilities = [\"pull\"]\n";
    let root = dir_with(&[("_default/hosts.toml", toml), ("quay.io/hosts.toml", "")]);
    let e = endpoints(Some(root.path()), "ghcr.io", &[]).unwrap();
    assert_eq!(
        urls(&e),
        ["https://cache.internal/v2", "https://ghcr.io/v2"]
    );
    // A host directory (even one without hosts.toml content) shadows _default.
    let e = endpoints(Some(root.path()), "quay.io", &[]).unwrap();
    assert_eq!(urls(&e), ["https://quay.io/v2"]);
}

#[test]
fn ca_paths_resolve_against_the_directory() {
    let toml = "server = \"https://reg.internal\"\nca = \"certs/ca.pem\"\n[host.\"https://m.internal\"]\nca = [\"/abs/ca.pem\", \"rel.pem\"]\n";
    let root = dir_with(&[("reg.internal/hosts.toml", toml)]);
    let dir = root.path().join("reg.internal");
    let e = endpoints(Some(root.path()), "reg.internal", &[]).unwrap();
    assert_eq!(
        e[0].ca_files,
        [PathBuf::from("/abs/ca.pem"), dir.join("rel.pem")]
    );
    assert_eq!(e[1].ca_files, [dir.join("certs/ca.pem")]);
}

#[test]
fn override_path_and_path_cleaning() {
    let toml = r#"
server = "https://reg.internal/v2/"
[host."https://a.internal/registry/v2/proj"]
  override_path = true
[host."https://b.internal//x/./y/../"]
[host."https://c.internal/"]
[host."https://d.internal"]
  override_path = true
"#;
    let root = dir_with(&[("reg.internal/hosts.toml", toml)]);
    let e = endpoints(Some(root.path()), "reg.internal", &[]).unwrap();
    assert_eq!(
        urls(&e),
        [
            "https://a.internal/registry/v2/proj",
            "https://b.internal/x/v2",
            "https://c.internal/v2",
            "https://d.internal",
            "https://reg.internal/v2",
        ]
    );
    assert_eq!(
        e[0].manifest_url("r", "t", None),
        "https://a.internal/registry/v2/proj/r/manifests/t"
    );
}

#[test]
fn unknown_capability_is_an_error_naming_the_file() {
    let toml = "[host.\"https://m\"]\ncapabilities = [\"pull\", \"fetch\"]\n";
    let root = dir_with(&[("ghcr.io/hosts.toml", toml)]);
    let err = endpoints(Some(root.path()), "ghcr.io", &[]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, HostsError::UnknownCapability { .. }), "{msg}");
    assert!(
        msg.contains("ghcr.io/hosts.toml")
            && msg.contains("\"fetch\"")
            && msg.contains("pull, resolve"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
    let root = dir_with(&[(
        "ghcr.io/hosts.toml",
        "capabilities = [\"Pull\", \"REFERRERS\"]\n",
    )]);
    let e = endpoints(Some(root.path()), "ghcr.io", &[]).unwrap();
    // Without a server the upstream gets containerd's default capabilities.
    assert_eq!(e[0].capabilities, Capabilities::ALL);
}

#[test]
fn decode_errors_are_one_line_with_a_line_number() {
    let cases = [
        ("server = \"https://x\"\nskip_verify = \"yes\"\n", 2),
        ("server = \"https://x\"\n[host.\"https://m\"]\nca = 5\n", 3),
        ("server = [\n", 1),
        ("[host.\"https://m\"]\nclient = [[\"only-one\"]]\n", 0),
        ("server = \"ftp://x\"\n", 0),
    ];
    for (toml, line) in cases {
        let root = dir_with(&[("r.io/hosts.toml", toml)]);
        let err = endpoints(Some(root.path()), "r.io", &[]).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("r.io/hosts.toml") && !msg.contains('\n'),
            "{msg}"
        );
        if line > 0 {
            assert!(msg.contains(&format!(": line {line}: ")), "{msg}");
        }
    }
}

#[test]
fn client_and_dial_timeout_are_accepted_and_ignored() {
    let toml = r#"
server = "https://r.io"
client = "client.pem"
dial_timeout = "5s"
[host."https://m.io"]
client = [["c.cert", "c.key"], "both.pem"]
"#;
    let root = dir_with(&[("r.io/hosts.toml", toml)]);
    let e = endpoints(Some(root.path()), "r.io", &[]).unwrap();
    assert_eq!(urls(&e), ["https://m.io/v2", "https://r.io/v2"]);
}

#[test]
fn certs_dir_fallback() {
    let root = dir_with(&[
        ("reg.io:5000/ca.crt", "pem"),
        ("reg.io:5000/another.crt", "pem"),
        ("reg.io:5000/client.cert", "pem"),
        ("reg.io:5000/client.key", "pem"),
        ("reg.io:5000/README", "x"),
    ]);
    let dir = root.path().join("reg.io:5000");
    let e = endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap();
    assert_eq!(urls(&e), ["https://reg.io:5000/v2"]);
    assert_eq!(e[0].ca_files, [dir.join("another.crt"), dir.join("ca.crt")]);
    // An empty hosts.toml means the same.
    fs::write(dir.join("hosts.toml"), "").unwrap();
    assert_eq!(endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap(), e);
}

#[test]
fn insecure_registries() {
    let toml =
        "server = \"https://reg.io:5000\"\n[host.\"mirror.io\"]\n[host.\"https://secure.io\"]\n";
    let root = dir_with(&[("reg.io:5000/hosts.toml", toml)]);
    let insecure = [
        "mirror.io".to_owned(),
        "http://SECURE.io/".to_owned(),
        "reg.io:5000".to_owned(),
    ];
    let e = endpoints(Some(root.path()), "reg.io:5000", &insecure).unwrap();
    assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Http, false));
    assert_eq!((e[1].scheme, e[1].skip_verify), (Scheme::Https, true));
    assert_eq!((e[2].scheme, e[2].skip_verify), (Scheme::Https, true));
    let e = endpoints(None, "reg.io:5000", &insecure).unwrap();
    assert_eq!(urls(&e), ["http://reg.io:5000/v2"]);
    let e = endpoints(None, "docker.io", &["docker.io".to_owned()]).unwrap();
    assert_eq!(urls(&e), ["http://registry-1.docker.io/v2"]);
    let e = endpoints(None, "other.io", &insecure).unwrap();
    assert_eq!(urls(&e), ["https://other.io/v2"]);
    assert_eq!(e[0].insecure_port_mismatch, None);
}

/// `--insecure-registry 127.0.0.1` does not cover `127.0.0.1:5000` (nor the other way
/// round); the endpoint keeps HTTPS and remembers the value, so the failure can say why.
#[test]
fn insecure_registry_without_the_port_is_named_not_applied() {
    let e = endpoints(None, "127.0.0.1:5000", &["127.0.0.1".to_owned()]).unwrap();
    assert_eq!(urls(&e), ["https://127.0.0.1:5000/v2"]);
    assert_eq!(e[0].insecure_port_mismatch.as_deref(), Some("127.0.0.1"));
    let e = endpoints(None, "reg.io", &["http://reg.io:5000".to_owned()]).unwrap();
    assert_eq!(urls(&e), ["https://reg.io/v2"]);
    assert_eq!(e[0].insecure_port_mismatch.as_deref(), Some("reg.io:5000"));
    let e = endpoints(None, "[fd00::1]:5000", &["[fd00::1]".to_owned()]).unwrap();
    assert_eq!(e[0].insecure_port_mismatch.as_deref(), Some("[fd00::1]"));
    let e = endpoints(None, "127.0.0.1:5000", &["127.0.0.1:5000".to_owned()]).unwrap();
    assert_eq!(
        (urls(&e), e[0].insecure_port_mismatch.clone()),
        (vec!["http://127.0.0.1:5000/v2".to_string()], None)
    );
}

#[test]
fn registry_host_must_not_escape() {
    for bad in ["", "..", "a/b", "a\\b"] {
        let err = endpoints(None, bad, &[]).unwrap_err();
        assert!(matches!(err, HostsError::RegistryHost { .. }), "{err}");
    }
}
