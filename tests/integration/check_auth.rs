//! Credentials end to end: the real registry in TLS + htpasswd and TLS + token modes,
//! kubelet keyring order, Docker config with a credential helper, node credentials, and
//! secret hygiene.

use std::os::unix::fs::PermissionsExt;

use crate::support::process::{Run, check, run};
use crate::support::{ALICE, BOB, fixture, pull_secret, temp_dir};

fn with_secret(args: &[&str], secret: &str) -> Run {
    let mut all = vec!["--pull-secrets", secret];
    all.extend_from_slice(args);
    check(&all)
}

#[test]
fn basic_auth_without_credentials_is_unauthenticated() {
    let f = fixture();
    let r = check(&[&f.images.oci_manifest.reference(&f.basic)]);
    r.assert_code(14);
    let o = r.image(0);
    assert_eq!(o["verdict"], "unauthenticated");
    assert_eq!(o["credential"], serde_json::Value::Null);
    assert!(
        o["detail"]
            .as_str()
            .unwrap()
            .starts_with("missing or private: the registry wants credentials and none matched (")
    );
}

#[test]
fn basic_auth_with_the_right_pull_secret_is_pullable() {
    let f = fixture();
    let dir = temp_dir();
    let s = pull_secret(
        dir.path(),
        "regcred.json",
        &[(&f.basic.host, ALICE.0, ALICE.1)],
    );
    let r = with_secret(&[&f.images.oci_manifest.reference(&f.basic)], &s);
    r.assert_code(0);
    assert_eq!(r.image(0)["digest"], f.images.oci_manifest.digest.as_str());
    assert_eq!(
        r.image(0)["credential"],
        format!("pull secret {s} key {}", f.basic.host)
    );
}

#[test]
fn basic_auth_with_a_wrong_password_is_denied() {
    let f = fixture();
    let dir = temp_dir();
    let s = pull_secret(
        dir.path(),
        "regcred.json",
        &[(&f.basic.host, "alice", "wrong")],
    );
    let r = with_secret(&[&f.images.oci_manifest.reference(&f.basic)], &s);
    r.assert_code(13);
    assert_eq!(r.image(0)["verdict"], "denied");
}

#[test]
fn credentials_are_tried_in_keyring_order_until_one_pulls() {
    let f = fixture();
    let dir = temp_dir();
    // Same key in two secrets: the kubelet tries them in secret order.
    let bad = pull_secret(
        dir.path(),
        "1-bad.json",
        &[(&f.basic.host, "alice", "wrong")],
    );
    let good = pull_secret(
        dir.path(),
        "2-good.json",
        &[(&f.basic.host, ALICE.0, ALICE.1)],
    );
    let r = check(&[
        "--pull-secrets",
        &bad,
        "--pull-secrets",
        &good,
        &f.images.oci_manifest.reference(&f.basic),
    ]);
    r.assert_code(0);
    assert_eq!(
        r.image(0)["credential"],
        format!("pull secret {good} key {}", f.basic.host)
    );

    // A more specific key (path prefix) comes first in the kubelet's reverse-sorted index.
    let specific = pull_secret(
        dir.path(),
        "3-specific.json",
        &[
            (&f.basic.host, "alice", "wrong"),
            (&format!("{}/oci", f.basic.host), ALICE.0, ALICE.1),
        ],
    );
    let r = with_secret(&[&f.images.oci_manifest.reference(&f.basic)], &specific);
    r.assert_code(0);
    assert_eq!(
        r.image(0)["credential"],
        format!("pull secret {specific} key {}/oci", f.basic.host)
    );
}

#[test]
fn a_secret_directory_as_kubernetes_mounts_it() {
    let f = fixture();
    let root = temp_dir();
    // Projected volume layout written by `pullcheck inject`: <secret>/.dockerconfigjson.
    let sub = root.path().join("regcred");
    std::fs::create_dir_all(&sub).unwrap();
    pull_secret(
        &sub,
        ".dockerconfigjson",
        &[(&f.basic.host, ALICE.0, ALICE.1)],
    );
    let r = with_secret(
        &[&f.images.oci_manifest.reference(&f.basic)],
        root.path().to_str().unwrap(),
    );
    r.assert_code(0);
}

#[test]
fn legacy_dockercfg_secret_works() {
    use base64::Engine;
    let f = fixture();
    let dir = temp_dir();
    let path = dir.path().join(".dockercfg");
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", ALICE.0, ALICE.1));
    std::fs::write(
        &path,
        format!(
            r#"{{"https://{}":{{"auth":"{auth}","email":"a@example.com"}}}}"#,
            f.basic.host
        ),
    )
    .unwrap();
    let r = with_secret(
        &[&f.images.oci_manifest.reference(&f.basic)],
        path.to_str().unwrap(),
    );
    r.assert_code(0);
}

#[test]
fn token_auth_anonymous_pull_of_a_public_repository() {
    let f = fixture();
    let r = check(&[&f.images.oci_manifest.reference(&f.token)]);
    r.assert_code(0);
    assert_eq!(r.image(0)["digest"], f.images.oci_manifest.digest.as_str());
}

#[test]
fn token_auth_private_repository_verdicts() {
    let f = fixture();
    let img = f.images.private.reference(&f.token);
    let dir = temp_dir();
    // Anonymous: the token carries no pull → 401 → unauthenticated.
    check(&[&img]).assert_code(14);
    // bob authenticates but his token lacks pull on private/* → denied.
    let bob = pull_secret(dir.path(), "bob.json", &[(&f.token.host, BOB.0, BOB.1)]);
    let r = with_secret(&[&img], &bob);
    r.assert_code(13);
    assert!(
        r.image(0)["detail"]
            .as_str()
            .unwrap()
            .starts_with("credentials refused or grant lacks pull (")
    );
    // Wrong password: the token endpoint refuses → denied.
    let wrong = pull_secret(
        dir.path(),
        "wrong.json",
        &[(&f.token.host, "alice", "nope")],
    );
    let r = with_secret(&[&img], &wrong);
    r.assert_code(13);
    assert!(
        r.image(0)["detail"]
            .as_str()
            .unwrap()
            .starts_with("token endpoint refused the credentials (")
    );
    // alice can.
    let alice = pull_secret(
        dir.path(),
        "alice.json",
        &[(&f.token.host, ALICE.0, ALICE.1)],
    );
    let r = with_secret(&[&img], &alice);
    r.assert_code(0);
    assert_eq!(r.image(0)["digest"], f.images.private.digest.as_str());
}

#[test]
fn most_informative_verdict_is_reported_when_every_credential_fails() {
    let f = fixture();
    let dir = temp_dir();
    // bob (denied on private/*) and then a wrong password (denied at the token endpoint)
    // for a missing tag in a public repository: bob's attempt reaches not-found.
    let s = pull_secret(
        dir.path(),
        "two.json",
        &[
            (&f.token.host, BOB.0, BOB.1),
            (&format!("{}/oci", f.token.host), "x", "y"),
        ],
    );
    let r = with_secret(&[&format!("{}/oci/app:nope", f.token.host)], &s);
    r.assert_code(11);
    assert_eq!(r.image(0)["verdict"], "not_found");
    assert_eq!(
        r.image(0)["credential"],
        format!("pull secret {s} key {}", f.token.host)
    );
}

#[test]
fn node_credential_patterns_turn_unauthenticated_into_a_warning() {
    let f = fixture();
    let img = f.images.private.reference(&f.token);
    let r = check(&["--node-credentials", &f.token.host, &img]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(
        o["detail"],
        "assumed pullable: registry uses node credentials (--node-credentials)"
    );
    let w = o["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with(&format!(
            "{} matches node-credential pattern {}: ",
            f.token.host, f.token.host
        )),
        "{w}"
    );
    // A denial is never excused: only "no credentials matched" is.
    let dir = temp_dir();
    let bob = pull_secret(dir.path(), "bob.json", &[(&f.token.host, BOB.0, BOB.1)]);
    check(&[
        "--node-credentials",
        &f.token.host,
        "--pull-secrets",
        &bob,
        &img,
    ])
    .assert_code(13);
}

/// A fake `docker-credential-pctest` helper that answers alice's credentials and records
/// each run in a marker file.
fn fake_helper(dir: &std::path::Path) -> std::path::PathBuf {
    let marker = dir.join("helper-ran");
    let script = dir.join("docker-credential-pctest");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nread server\necho \"$server\" >> {}\nprintf '{{\"ServerURL\":\"%s\",\"Username\":\"alice\",\"Secret\":\"{}\"}}' \"$server\"\n",
            marker.display(),
            ALICE.1
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    marker
}

/// `pullcheck check --output json --ca-file <test CA> <args…>` with the fake helper's
/// directory first on PATH.
fn check_with_helper_on_path(helper_dir: &std::path::Path, args: &[&str]) -> Run {
    let path = format!(
        "{}:{}",
        helper_dir.display(),
        std::env::var("PATH").unwrap()
    );
    let ca = fixture().ca_file.to_string_lossy().into_owned();
    let mut all = vec!["check", "--output", "json", "--ca-file", ca.as_str()];
    all.extend_from_slice(args);
    run(&all, &[("PATH", &path)])
}

#[test]
fn docker_config_cred_helper_is_used_for_the_probe() {
    let f = fixture();
    let dir = temp_dir();
    let marker = fake_helper(dir.path());
    let cfg = dir.path().join("docker");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.json"),
        format!(r#"{{"credHelpers":{{"{}":"pctest"}}}}"#, f.token.host),
    )
    .unwrap();
    let image = f.images.private.reference(&f.token);
    let r = check_with_helper_on_path(
        dir.path(),
        &["--docker-config", cfg.to_str().unwrap(), &image],
    );
    r.assert_code(0);
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("{}\n", f.token.host)
    );
}

#[test]
fn a_pull_secret_never_runs_a_credential_helper() {
    let f = fixture();
    let dir = temp_dir();
    let marker = fake_helper(dir.path());
    let secret = dir.path().join("evil.json");
    std::fs::write(
        &secret,
        format!(
            r#"{{"auths":{{}},"credsStore":"pctest","credHelpers":{{"{}":"pctest"}}}}"#,
            f.token.host
        ),
    )
    .unwrap();
    let image = f.images.private.reference(&f.token);
    let r = check_with_helper_on_path(
        dir.path(),
        &[
            "--no-docker-config",
            "--pull-secrets",
            secret.to_str().unwrap(),
            &image,
        ],
    );
    r.assert_code(14);
    assert!(!marker.exists(), "the helper named by a pull secret ran");
}

#[test]
fn a_malformed_pull_secret_is_a_usage_error_naming_the_file() {
    let dir = temp_dir();
    let s = dir.path().join("broken.json");
    std::fs::write(
        &s,
        r#"{"auths":{"r.example.com":{"auth":"bm90LWJhc2U2NCE"}}}"#,
    )
    .unwrap();
    let r = run(
        &[
            "check",
            "--pull-secrets",
            s.to_str().unwrap(),
            "r.example.com/x:1",
        ],
        &[],
    );
    r.assert_code(2);
    let line = r.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.starts_with(&format!(
            "pullcheck: pull secret {}: key \"r.example.com\": ",
            s.display()
        )),
        "{line}"
    );
}

#[test]
fn secrets_never_appear_in_any_output_at_any_verbosity() {
    let f = fixture();
    let dir = temp_dir();
    let sentinel = "S3ntinel-Pa55word-7f3a";
    let s = pull_secret(
        dir.path(),
        "s.json",
        &[
            (&f.token.host, "alice", sentinel),
            (&f.basic.host, "alice", sentinel),
        ],
    );
    let tl = dir.path().join("term");
    let ca = f.ca_file.to_string_lossy().into_owned();
    for v in ["-v", "-vv"] {
        let r = run(
            &[
                "check",
                v,
                "--output",
                "json",
                "--ca-file",
                &ca,
                "--pull-secrets",
                &s,
                "--termination-log",
                tl.to_str().unwrap(),
                &f.images.private.reference(&f.token),
                &f.images.oci_manifest.reference(&f.basic),
            ],
            &[("RUST_LOG", "trace")],
        );
        r.assert_code(13);
        let encoded = {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(format!("alice:{sentinel}"))
        };
        for (what, text) in [
            ("stdout", &r.stdout),
            ("stderr", &r.stderr),
            ("termination log", &std::fs::read_to_string(&tl).unwrap()),
        ] {
            assert!(!text.contains(sentinel), "{what} leaks the password at {v}");
            assert!(
                !text.contains(&encoded),
                "{what} leaks the encoded credential at {v}"
            );
        }
        assert!(
            r.stderr.contains("request"),
            "trace logging produced request lines"
        );
    }
}
