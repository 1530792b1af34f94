//! The user's auth sources beyond pull secrets, through the binary: identity tokens
//! (exchanged at the harness token server with the OAuth2 refresh-token POST).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::process::{Run, run};
use crate::support::{self, ALICE_REFRESH_TOKEN, Mode, Registry, TokenRequest, fixture, temp_dir};

/// `pullcheck check --output json --ca-file <test CA> <args…>` with `env` set.
fn check_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let ca = fixture().ca_file.to_string_lossy().into_owned();
    let mut all = vec!["check", "--output", "json", "--ca-file", ca.as_str()];
    all.extend_from_slice(args);
    run(&all, env)
}

/// Writes `<dir>/config.json` and returns `dir`.
fn docker_config(dir: &Path, json: &str) -> String {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), json).unwrap();
    dir.to_str().unwrap().to_owned()
}

/// The token server's log for `reg`'s own service.
fn token_log(reg: &Registry) -> Vec<TokenRequest> {
    let service = reg.service.clone().expect("a token-mode registry");
    fixture()
        .token_log()
        .into_iter()
        .filter(|t| t.service.as_deref() == Some(service.as_str()))
        .collect()
}

fn form_field<'a>(t: &'a TokenRequest, name: &str) -> Option<&'a str> {
    t.form
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Asserts `t` is the refresh-token POST containerd's `FetchTokenWithOAuth` would send.
fn assert_refresh_post(t: &TokenRequest, reg: &Registry, scope: &str) {
    assert_eq!(t.method, "POST", "{t:?}");
    assert_eq!(form_field(t, "grant_type"), Some("refresh_token"), "{t:?}");
    assert_eq!(form_field(t, "refresh_token"), Some("(redacted)"), "{t:?}");
    assert_eq!(form_field(t, "client_id"), Some("pullcheck"), "{t:?}");
    assert_eq!(form_field(t, "service"), reg.service.as_deref(), "{t:?}");
    assert_eq!(form_field(t, "scope"), Some(scope), "{t:?}");
    assert_eq!(form_field(t, "username"), None, "{t:?}");
}

fn identity_token_config(reg: &Registry, token: &str) -> String {
    format!(
        r#"{{"auths":{{"{}":{{"identitytoken":"{token}"}}}}}}"#,
        reg.host
    )
}

#[test]
fn an_identity_token_in_the_docker_config_is_exchanged_with_a_refresh_token_post() {
    let f = fixture();
    let reg = support::start_dedicated(Mode::Token);
    let dir = temp_dir();
    let cfg = docker_config(
        &dir.path().join("docker"),
        &identity_token_config(&reg, &ALICE_REFRESH_TOKEN),
    );
    let r = check_env(
        &["--docker-config", &cfg, &f.images.private.reference(&reg)],
        &[],
    );
    r.assert_code(0);
    assert_eq!(r.image(0)["digest"], f.images.private.digest.as_str());
    assert_eq!(
        r.image(0)["credential"],
        format!("docker config {cfg}/config.json key {}", reg.host)
    );
    let log = token_log(&reg);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_refresh_post(&log[0], &reg, "repository:private/app:pull");
    assert_eq!(
        (log[0].user.as_deref(), log[0].status),
        (Some("alice"), 200)
    );
    assert_eq!(log[0].granted, ["repository:private/app:pull"]);

    // The same token for a tag that does not exist: the registry answers not found.
    let r = check_env(
        &[
            "--docker-config",
            &cfg,
            &format!("{}/private/app:nope", reg.host),
        ],
        &[],
    );
    r.assert_code(11);
    assert_eq!(r.image(0)["verdict"], "not_found");
}

#[test]
fn an_unknown_identity_token_is_refused_at_the_token_endpoint() {
    let f = fixture();
    let reg = support::start_dedicated(Mode::Token);
    let dir = temp_dir();
    let cfg = docker_config(
        &dir.path().join("docker"),
        &identity_token_config(&reg, "not-a-known-refresh-token"),
    );
    let r = check_env(
        &["--docker-config", &cfg, &f.images.private.reference(&reg)],
        &[],
    );
    r.assert_code(13);
    assert!(
        r.image(0)["detail"]
            .as_str()
            .unwrap()
            .starts_with("token endpoint refused the credentials ("),
        "{}",
        r.stdout
    );
    let log = token_log(&reg);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_refresh_post(&log[0], &reg, "repository:private/app:pull");
    assert_eq!(log[0].status, 401);
    assert!(!r.stdout.contains("not-a-known-refresh-token"));
    assert!(!r.stderr.contains("not-a-known-refresh-token"));
}

#[test]
fn a_credential_helpers_token_answer_is_a_refresh_token() {
    let f = fixture();
    let reg = support::start_dedicated(Mode::Token);
    let dir = temp_dir();
    let script = dir.path().join("docker-credential-pctoken");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat >/dev/null\nprintf '{{\"Username\":\"<token>\",\"Secret\":\"{}\"}}'\n",
            *ALICE_REFRESH_TOKEN
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = docker_config(
        &dir.path().join("docker"),
        &format!(r#"{{"credHelpers":{{"{}":"pctoken"}}}}"#, reg.host),
    );
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    let r = check_env(
        &["--docker-config", &cfg, &f.images.private.reference(&reg)],
        &[("PATH", &path)],
    );
    r.assert_code(0);
    assert_eq!(
        r.image(0)["credential"],
        format!(
            "credential helper docker-credential-pctoken key {}",
            reg.host
        )
    );
    let log = token_log(&reg);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_refresh_post(&log[0], &reg, "repository:private/app:pull");
    assert_eq!(log[0].user.as_deref(), Some("alice"));
}

#[test]
fn a_pull_secrets_identity_token_is_ignored_as_the_kubelet_ignores_it() {
    let f = fixture();
    let reg = support::start_dedicated(Mode::Token);
    let dir = temp_dir();
    let secret = dir.path().join("token.json");
    std::fs::write(&secret, identity_token_config(&reg, &ALICE_REFRESH_TOKEN)).unwrap();
    let r = check_env(
        &[
            "--no-docker-config",
            "--pull-secrets",
            secret.to_str().unwrap(),
            &f.images.private.reference(&reg),
        ],
        &[],
    );
    // The entry decodes to an empty username and password: one anonymous attempt.
    r.assert_code(14);
    let log = token_log(&reg);
    assert!(
        log.iter().all(|t| t.method == "GET" && t.user.is_none()),
        "{log:?}"
    );
}

/// `{"auths":{host:{"auth":base64(user:pass)}}}` with the suite's password rules.
fn auths_json(host: &str, user: &str, pass: &str) -> String {
    let dir = temp_dir();
    let path = support::pull_secret(dir.path(), "a.json", &[(host, user, pass)]);
    std::fs::read_to_string(path).unwrap()
}

fn write_file(path: &Path, body: &str) -> String {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn each_user_auth_source_is_read_and_named() {
    let f = fixture();
    let image = f.images.oci_manifest.reference(&f.basic);
    let good = auths_json(&f.basic.host, support::ALICE.0, support::ALICE.1);
    let dir = temp_dir();
    let d = dir.path().to_str().unwrap().to_owned();
    let named = write_file(&dir.path().join("named.json"), &good);
    write_file(&dir.path().join("run/containers/auth.json"), &good);
    write_file(&dir.path().join("cfg/containers/auth.json"), &good);
    write_file(&dir.path().join("home/.config/containers/auth.json"), &good);
    let (run_dir, cfg_dir, home) = (format!("{d}/run"), format!("{d}/cfg"), format!("{d}/home"));
    let cases: Vec<(Vec<(&str, &str)>, String)> = vec![
        (
            vec![("DOCKER_AUTH_CONFIG", good.as_str())],
            "environment DOCKER_AUTH_CONFIG".to_owned(),
        ),
        (
            vec![("REGISTRY_AUTH_FILE", named.as_str())],
            format!("auth file {named} ($REGISTRY_AUTH_FILE)"),
        ),
        (
            vec![("XDG_RUNTIME_DIR", run_dir.as_str())],
            format!(
                "auth file {run_dir}/containers/auth.json ($XDG_RUNTIME_DIR/containers/auth.json)"
            ),
        ),
        (
            vec![("XDG_CONFIG_HOME", cfg_dir.as_str())],
            format!(
                "auth file {cfg_dir}/containers/auth.json ($XDG_CONFIG_HOME/containers/auth.json)"
            ),
        ),
        (
            vec![("HOME", home.as_str())],
            format!(
                "auth file {home}/.config/containers/auth.json (~/.config/containers/auth.json)"
            ),
        ),
    ];
    for (env, origin) in cases {
        let r = check_env(&[&image], &env);
        r.assert_code(0);
        assert_eq!(
            r.image(0)["credential"],
            format!("{origin} key {}", f.basic.host),
            "{env:?}"
        );
        // explain names the same file, without running anything.
        let e = run(&["explain", "--output", "json", &image], &env);
        e.assert_code(0);
        assert_eq!(
            e.json()["credentials"],
            serde_json::json!([format!("{origin} key {}", f.basic.host)]),
            "{env:?}"
        );
        // --no-docker-config (the init container's mode) turns every one of them off.
        let off = check_env(&["--no-docker-config", &image], &env);
        off.assert_code(14);
    }
}

#[test]
fn the_first_source_with_a_credential_for_the_registry_wins() {
    let f = fixture();
    let image = f.images.oci_manifest.reference(&f.basic);
    let good = auths_json(&f.basic.host, support::ALICE.0, support::ALICE.1);
    let wrong = auths_json(&f.basic.host, "alice", "wrong-password");
    let elsewhere = auths_json("other.example", "alice", "x");
    let dir = temp_dir();
    let cfg = docker_config(&dir.path().join("docker"), &good);
    let wrong_file = write_file(&dir.path().join("wrong.json"), &wrong);
    let cfg_path = format!("{cfg}/config.json");

    // DOCKER_AUTH_CONFIG before the docker config: its wrong password is the one tried.
    let r = check_env(
        &["--docker-config", &cfg, &image],
        &[("DOCKER_AUTH_CONFIG", wrong.as_str())],
    );
    r.assert_code(13);
    assert_eq!(
        r.image(0)["credential"],
        format!("environment DOCKER_AUTH_CONFIG key {}", f.basic.host)
    );
    // One with nothing for this registry does not hide the next.
    let r = check_env(
        &["--docker-config", &cfg, &image],
        &[("DOCKER_AUTH_CONFIG", elsewhere.as_str())],
    );
    r.assert_code(0);
    assert_eq!(
        r.image(0)["credential"],
        format!("docker config {cfg_path} key {}", f.basic.host)
    );
    // The docker config before the containers files.
    let r = check_env(
        &["--docker-config", &cfg, &image],
        &[("REGISTRY_AUTH_FILE", wrong_file.as_str())],
    );
    r.assert_code(0);
    assert_eq!(
        r.image(0)["credential"],
        format!("docker config {cfg_path} key {}", f.basic.host)
    );
    // REGISTRY_AUTH_FILE replaces $XDG_RUNTIME_DIR/containers/auth.json.
    write_file(&dir.path().join("run/containers/auth.json"), &good);
    let run_dir = format!("{}/run", dir.path().display());
    let r = check_env(
        &[&image],
        &[
            ("REGISTRY_AUTH_FILE", wrong_file.as_str()),
            ("XDG_RUNTIME_DIR", run_dir.as_str()),
        ],
    );
    r.assert_code(13);
    let r = check_env(&[&image], &[("XDG_RUNTIME_DIR", run_dir.as_str())]);
    r.assert_code(0);
}

#[test]
fn a_malformed_auth_source_is_a_usage_error_naming_it() {
    let r = check_env(
        &["r.example.com/x:1"],
        &[(
            "DOCKER_AUTH_CONFIG",
            r#"{"auths":{"r.example.com":{"auth":"bm90LWJhc2U2NCE"}}}"#,
        )],
    );
    r.assert_code(2);
    let line = r.stderr.trim_end();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.starts_with("pullcheck: environment DOCKER_AUTH_CONFIG: key \"r.example.com\": ")
            && line.ends_with("; set it to a docker config.json document"),
        "{line}"
    );
}

#[test]
fn secrets_from_the_user_sources_never_appear_in_any_output() {
    let f = fixture();
    let sentinel = "S3ntinel-UserAuth-9c1e";
    let env_json = auths_json(&f.basic.host, "alice", sentinel);
    let dir = temp_dir();
    let file = write_file(
        &dir.path().join("auth.json"),
        &auths_json(&f.token.host, "alice", sentinel),
    );
    let cfg = docker_config(
        &dir.path().join("docker"),
        &format!(
            r#"{{"auths":{{"{}":{{"identitytoken":"{sentinel}"}}}}}}"#,
            f.anon.host
        ),
    );
    let encoded = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(format!("alice:{sentinel}"))
    };
    for v in ["-v", "-vv"] {
        let r = run(
            &[
                "check",
                v,
                "--output",
                "json",
                "--ca-file",
                &fixture().ca_file.to_string_lossy(),
                "--docker-config",
                &cfg,
                &f.images.oci_manifest.reference(&f.basic),
                &f.images.private.reference(&f.token),
            ],
            &[
                ("RUST_LOG", "trace"),
                ("DOCKER_AUTH_CONFIG", env_json.as_str()),
                ("REGISTRY_AUTH_FILE", file.as_str()),
            ],
        );
        r.assert_code(13);
        for (what, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
            assert!(!text.contains(sentinel), "{what} leaks the secret at {v}");
            assert!(
                !text.contains(&encoded),
                "{what} leaks the encoded secret at {v}"
            );
        }
    }
}
