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
