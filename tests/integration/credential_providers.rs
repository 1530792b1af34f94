//! `--image-credential-provider-config` end to end: the real registry in TLS + htpasswd
//! mode, reached with the credential a plugin gives. The plugin here is a scripted one (a
//! shell script, named as such) that answers with a configurable credential; the real
//! `ecr-credential-provider` runs in `ecr_provider.rs` and `ecr_e2e.rs`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::process::{Run, check, run};
use crate::support::{ALICE, fixture, temp_dir};

/// A scripted plugin: counts its runs in `$DIR/calls`, then prints a v1 response giving
/// `$USER_NAME`/`$PASSWORD` for `$PATTERN`, cached `$KEY_TYPE` (or exits 1 with `$FAIL` on
/// stderr when that is set).
const PLUGIN: &str = r#"#!/bin/sh
cat > /dev/null
echo run >> "$DIR/calls"
if [ -n "$FAIL" ]; then echo "$FAIL" >&2; exit 1; fi
printf '{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"%s","auth":{"%s":{"username":"%s","password":"%s"}}}' "$KEY_TYPE" "$PATTERN" "$USER_NAME" "$PASSWORD"
"#;

struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
    bin: PathBuf,
    calls: PathBuf,
}

/// A config with one provider, `scripted-provider`, matching `pattern`, whose env is
/// `env` (plus DIR).
fn setup(pattern: &str, env: &[(&str, &str)]) -> Setup {
    let dir = temp_dir();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let plugin = bin.join("scripted-provider");
    std::fs::write(&plugin, PLUGIN).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut env_yaml = format!(
        "      - name: DIR\n        value: {}\n      - name: PATTERN\n        value: \"{pattern}\"\n",
        dir.path().display()
    );
    for (k, v) in env {
        env_yaml.push_str(&format!("      - name: {k}\n        value: \"{v}\"\n"));
    }
    let config = dir.path().join("credential-providers.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: scripted-provider\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n    matchImages: [\"{pattern}\"]\n    defaultCacheDuration: 1h\n    env:\n{env_yaml}"
        ),
    )
    .unwrap();
    let calls = dir.path().join("calls");
    Setup {
        _dir: dir,
        config,
        bin,
        calls,
    }
}

impl Setup {
    fn flags(&self) -> Vec<String> {
        vec![
            "--image-credential-provider-config".into(),
            self.config.display().to_string(),
            "--image-credential-provider-bin-dir".into(),
            self.bin.display().to_string(),
            "--no-docker-config".into(),
        ]
    }

    fn check(&self, images: &[&str]) -> Run {
        let flags = self.flags();
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.extend_from_slice(images);
        check(&args)
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.calls)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }
}

fn alice(key_type: &str) -> Vec<(&'static str, String)> {
    vec![
        ("USER_NAME", ALICE.0.to_string()),
        ("PASSWORD", ALICE.1.to_string()),
        ("KEY_TYPE", key_type.to_string()),
    ]
}

fn env_of<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, s)| (*k, s.as_str())).collect()
}

#[test]
fn a_providers_credential_pulls_and_a_missing_tag_is_not_found() {
    let f = fixture();
    let env = alice("Registry");
    let s = setup(&f.basic.host, &env_of(&env));
    let present = f.images.oci_manifest.reference(&f.basic);
    let missing = format!("{}/oci/app:no-such-tag", f.basic.host);
    let r = s.check(&[&present, &missing]);
    r.assert_code(11);
    assert_eq!(r.image(0)["verdict"], "pullable");
    assert_eq!(r.image(0)["digest"], f.images.oci_manifest.digest.as_str());
    assert_eq!(
        r.image(0)["credential"],
        format!("credential provider scripted-provider key {}", f.basic.host)
    );
    assert_eq!(r.image(1)["verdict"], "not_found");
    assert_eq!(
        r.image(1)["assumed"],
        serde_json::Value::Null,
        "assumed is left out when false"
    );
    // cacheKeyType Registry: one run for both images of the registry.
    assert_eq!(s.runs(), 1);
}

#[test]
fn an_index_without_the_platform_is_platform_missing_with_a_providers_credential() {
    let f = fixture();
    let env = alice("Image");
    let s = setup(&f.basic.host, &env_of(&env));
    let r = s.check(&[
        "--platform",
        "linux/amd64",
        &f.images.arm_only.reference(&f.basic),
    ]);
    r.assert_code(12);
    assert_eq!(
        r.image(0)["credential"],
        format!("credential provider scripted-provider key {}", f.basic.host)
    );
}

#[test]
fn a_refused_providers_credential_is_denied_with_the_callers_identity() {
    let f = fixture();
    let s = setup(
        &f.basic.host,
        &[
            ("USER_NAME", "alice"),
            ("PASSWORD", "wrong"),
            ("KEY_TYPE", "Image"),
        ],
    );
    let r = s.check(&[&f.images.oci_manifest.reference(&f.basic)]);
    r.assert_code(13);
    assert_eq!(r.image(0)["verdict"], "denied");
    assert_eq!(
        r.image(0)["assumed"],
        serde_json::Value::Null,
        "assumed is left out when false"
    );
}

#[test]
fn a_failing_plugin_gives_assumed_pullable_with_its_one_line_reason() {
    let f = fixture();
    let s = setup(
        &f.basic.host,
        &[
            ("FAIL", "NoCredentialProviders: no valid providers in chain"),
            ("KEY_TYPE", "Image"),
        ],
    );
    let r = s.check(&[&f.images.oci_manifest.reference(&f.basic)]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["assumed"], true);
    assert_eq!(
        o["detail"],
        "assumed pullable: a credential provider the kubelet uses gave pullcheck nothing"
    );
    let warning = o["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with(
            "credential provider scripted-provider: failed (exit status: 1): NoCredentialProviders: no valid providers in chain; not verified (missing or private:"
        ),
        "{warning}"
    );
}

#[test]
fn explain_runs_the_matching_provider_and_names_its_cache_key() {
    let f = fixture();
    let env = alice("Registry");
    let s = setup(&f.basic.host, &env_of(&env));
    let flags = s.flags();
    let image = f.images.oci_manifest.reference(&f.basic);
    let mut args = vec!["explain", "--output", "json"];
    args.extend(flags.iter().map(String::as_str));
    args.push(&image);
    let r = run(&args, &[]);
    r.assert_code(0);
    let j = r.json();
    assert_eq!(
        j["credentials"],
        serde_json::json!([format!(
            "credential provider scripted-provider key {}",
            f.basic.host
        )])
    );
    assert_eq!(
        j["credential_providers"],
        serde_json::json!([format!(
            "credential provider scripted-provider (matchImages {0}): answered, cache key Registry {0}",
            f.basic.host
        )])
    );
    // Another registry: the provider is not run, and explain says none matches.
    let other = "ghcr.io/example/app:v1";
    let mut args = vec!["explain", "--output", "json"];
    args.extend(flags.iter().map(String::as_str));
    args.push(other);
    let r = run(&args, &[]);
    r.assert_code(0);
    assert_eq!(
        r.json()["credential_providers"],
        serde_json::json!([
            "none of the 1 configured credential providers matches ghcr.io/example/app"
        ])
    );
    assert_eq!(s.runs(), 1);
}

#[test]
fn bad_provider_flags_are_usage_errors_naming_the_file() {
    let s = setup("r.example", &[]);
    let missing_bin = Path::new("/nonexistent/plugins");
    let r = run(
        &[
            "check",
            "--image-credential-provider-config",
            &s.config.display().to_string(),
            "--image-credential-provider-bin-dir",
            &missing_bin.display().to_string(),
            "r.example/x:v1",
        ],
        &[],
    );
    r.assert_code(2);
    assert_eq!(
        r.stderr.trim(),
        "pullcheck: --image-credential-provider-bin-dir /nonexistent/plugins: not a directory; pass the directory holding the plugins"
    );
    // One flag without the other.
    let r = run(
        &[
            "check",
            "--image-credential-provider-config",
            &s.config.display().to_string(),
            "r.example/x:v1",
        ],
        &[],
    );
    r.assert_code(2);
    assert!(
        r.stderr
            .contains("--image-credential-provider-bin-dir <DIR>"),
        "{}",
        r.stderr
    );
    // A config that does not validate.
    std::fs::write(&s.config, "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: scripted-provider\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n    matchImages: [r.example]\n").unwrap();
    let flags = s.flags();
    let mut args = vec!["check"];
    args.extend(flags.iter().map(String::as_str));
    args.push("r.example/x:v1");
    let r = run(&args, &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr.trim(),
        format!(
            "pullcheck: credential provider config {}: providers[0].defaultCacheDuration: required (e.g. \"12h\")",
            s.config.display()
        )
    );
}
