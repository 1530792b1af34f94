//! Proves the harness is real, using independent clients (skopeo, curl).

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{self, Registry, images::sha256_digest};

/// Run `skopeo inspect --raw` against `reference` with `extra` flags, isolated
/// from any host credentials or configuration.
fn skopeo_inspect(reference: &str, extra: &[&str]) -> Output {
    let home = support::temp_dir();
    let authfile = home.path().join("auth.json");
    std::fs::write(&authfile, "{}").unwrap();
    Command::new("skopeo")
        .arg("inspect")
        .arg("--raw")
        .arg("--authfile")
        .arg(&authfile)
        .args(extra)
        .arg(format!("docker://{reference}"))
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .env_remove("REGISTRY_AUTH_FILE")
        .env_remove("DOCKER_CONFIG")
        .output()
        .expect("run skopeo (install skopeo)")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn cert_dir() -> &'static Path {
    &support::fixture().ca_dir
}

/// `(method, uri, status)` of what `reg` logged after `mark` for URIs containing `needle`.
fn method_uri_status(reg: &Registry, mark: usize, needle: &str) -> Vec<(String, String, u16)> {
    reg.requests_since_matching(mark, needle)
        .into_iter()
        .map(|l| (l.method, l.uri, l.status))
        .collect()
}

fn tls_inspect(reg: &Registry, reference: &str, creds: Option<(&str, &str)>) -> Output {
    let dir = cert_dir().to_str().unwrap().to_string();
    let creds = creds.map(|(u, p)| format!("{u}:{p}"));
    let mut args = vec!["--cert-dir", dir.as_str()];
    match &creds {
        Some(c) => args.extend(["--creds", c.as_str()]),
        None => args.push("--no-creds"),
    }
    assert_eq!(reg.scheme, "https");
    skopeo_inspect(reference, &args)
}

#[test]
fn anon_manifest_digest_matches_exactly() {
    let fx = support::fixture();
    for image in fx.images.all() {
        let out = skopeo_inspect(&image.reference(&fx.anon), &["--tls-verify=false"]);
        assert!(out.status.success(), "{}: {}", image.repo, stderr(&out));
        assert_eq!(sha256_digest(&out.stdout), image.digest, "{}", image.repo);
        assert_eq!(out.stdout, image.manifest, "{}", image.repo);
    }
    let oci = &fx.images.oci_manifest;
    assert_eq!(
        oci.reference(&fx.anon),
        format!("{}/oci/app:v1", fx.anon.host)
    );
    assert_eq!(
        fx.images.digest_only.reference(&fx.anon),
        format!(
            "{}/bydigest/app@{}",
            fx.anon.host, fx.images.digest_only.digest
        )
    );
}

#[test]
fn children_by_digest_and_the_dangling_child() {
    let fx = support::fixture();
    let multi = &fx.images.multi_index;
    assert_eq!(multi.children.len(), 2);
    for child in &multi.children {
        let r = format!("{}/{}@{}", fx.anon.host, multi.repo, child.digest);
        let out = skopeo_inspect(&r, &["--tls-verify=false"]);
        assert!(out.status.success(), "{r}: {}", stderr(&out));
        assert_eq!(sha256_digest(&out.stdout), child.digest);
    }
    let dangling = &fx.images.index_missing_child;
    let (gone, kept) = (&dangling.children[0], &dangling.children[1]);
    assert_eq!((gone.platform.architecture, gone.present), ("amd64", false));
    assert_eq!((kept.platform.architecture, kept.present), ("arm64", true));
    let r = fx
        .anon
        .request(
            "GET",
            &format!("/v2/dangling/app/manifests/{}", gone.digest),
            &[],
        )
        .unwrap();
    assert_eq!(r.status, 404);
    assert!(r.text().contains("MANIFEST_UNKNOWN"), "{}", r.text());
    let r = fx
        .anon
        .request(
            "HEAD",
            &format!("/v2/dangling/app/manifests/{}", kept.digest),
            &[("Accept", support::images::OCI_MANIFEST)],
        )
        .unwrap();
    assert_eq!(r.status, 200);
    // distribution 2.8 hides OCI content from clients that do not Accept it.
    let r = fx
        .anon
        .request(
            "GET",
            &format!("/v2/dangling/app/manifests/{}", kept.digest),
            &[("Accept", "*/*")],
        )
        .unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(
        r.text().trim(),
        r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"OCI manifest found, but accept header does not support OCI manifests"}]}"#
    );
    let accept = support::images::OCI_INDEX;
    let r = fx
        .anon
        .request(
            "HEAD",
            "/v2/dangling/app/manifests/v1",
            &[("Accept", accept)],
        )
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Docker-Content-Digest"),
        Some(dangling.digest.as_str())
    );
}

#[test]
fn basic_mode_with_skopeo() {
    let fx = support::fixture();
    let r = fx.images.oci_manifest.reference(&fx.basic);
    let ok = tls_inspect(&fx.basic, &r, Some(*support::ALICE));
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert_eq!(sha256_digest(&ok.stdout), fx.images.oci_manifest.digest);

    let bad = tls_inspect(&fx.basic, &r, Some(("alice", "wrong")));
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("unauthorized: authentication required"),
        "{}",
        stderr(&bad)
    );
    let anon = tls_inspect(&fx.basic, &r, None);
    assert!(!anon.status.success());
    assert!(
        stderr(&anon).contains("unauthorized: authentication required"),
        "{}",
        stderr(&anon)
    );

    // Exactly what the registry saw, on a registry of our own.
    let reg = support::start_dedicated(support::Mode::Basic);
    let r = fx.images.oci_manifest.reference(&reg);
    let mark = reg.mark();
    let bad = tls_inspect(&reg, &r, Some(("alice", "wrong")));
    assert!(!bad.status.success());
    let seen = method_uri_status(&reg, mark, "/oci/app/");
    assert_eq!(
        seen,
        vec![(
            "GET".to_string(),
            "/v2/oci/app/manifests/v1".to_string(),
            401
        )]
    );
    let mark = reg.mark();
    let ok = tls_inspect(&reg, &r, Some(*support::ALICE));
    assert!(ok.status.success(), "{}", stderr(&ok));
    let seen = method_uri_status(&reg, mark, "/oci/app/");
    assert_eq!(
        seen,
        vec![(
            "GET".to_string(),
            "/v2/oci/app/manifests/v1".to_string(),
            200
        )]
    );

    // Without the CA, verification fails.
    let no_ca = skopeo_inspect(&r, &["--creds", &format!("alice:{}", support::ALICE.1)]);
    assert!(!no_ca.status.success());
    assert!(stderr(&no_ca).contains("certificate"), "{}", stderr(&no_ca));
}

#[test]
fn token_mode_with_skopeo() {
    let fx = support::fixture();
    let reg = &fx.token;
    let private = fx.images.private.reference(reg);
    let public = fx.images.oci_manifest.reference(reg);
    let before = fx.token_requests();
    let before_reg = reg.token_requests();

    let alice = tls_inspect(reg, &private, Some(*support::ALICE));
    assert!(alice.status.success(), "{}", stderr(&alice));
    assert_eq!(sha256_digest(&alice.stdout), fx.images.private.digest);

    let bob = tls_inspect(reg, &private, Some(*support::BOB));
    assert!(!bob.status.success());
    let bob_public = tls_inspect(reg, &public, Some(*support::BOB));
    assert!(bob_public.status.success(), "{}", stderr(&bob_public));

    let anon_public = tls_inspect(reg, &public, None);
    assert!(anon_public.status.success(), "{}", stderr(&anon_public));
    assert_eq!(
        sha256_digest(&anon_public.stdout),
        fx.images.oci_manifest.digest
    );
    let anon_private = tls_inspect(reg, &private, None);
    assert!(!anon_private.status.success());

    let wrong = tls_inspect(reg, &public, Some(("alice", "nope")));
    assert!(!wrong.status.success());

    assert!(fx.token_requests() > before);
    assert!(
        reg.token_requests() >= before_reg + 6,
        "{:?}",
        fx.token_log()
    );
    let log = fx.token_log();
    assert!(log.iter().any(|t| t.user.as_deref() == Some("alice")
        && t.status == 200
        && t.granted == vec!["repository:private/app:pull".to_string()]));
    assert!(log.iter().any(|t| t.user.as_deref() == Some("bob")
        && t.status == 200
        && t.scopes == vec!["repository:private/app:pull".to_string()]
        && t.granted.is_empty()));
    assert!(
        log.iter()
            .any(|t| t.user.as_deref() == Some("alice") && t.status == 401)
    );
}

#[test]
fn token_requests_are_counted_exactly() {
    // A dedicated registry has a `service` of its own, so concurrent tests
    // using the shared token registry do not disturb the counts.
    let fx = support::fixture();
    let reg = support::start_dedicated(support::Mode::Token);
    let service = reg.service.clone().unwrap();
    let ours = || -> Vec<support::TokenRequest> {
        fx.token_log()
            .into_iter()
            .filter(|t| t.service.as_deref() == Some(service.as_str()))
            .collect()
    };
    assert_eq!(reg.token_requests(), 0);

    let out = tls_inspect(&reg, &fx.images.oci_manifest.reference(&reg), None);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = ours();
    assert_eq!(reg.token_requests(), 1, "{log:?}");
    assert_eq!(log[0].method, "GET");
    assert_eq!(log[0].user, None);
    assert_eq!(log[0].scopes, vec!["repository:oci/app:pull".to_string()]);
    assert_eq!(log[0].granted, vec!["repository:oci/app:pull".to_string()]);
    assert_eq!(log[0].status, 200);

    let out = tls_inspect(
        &reg,
        &fx.images.private.reference(&reg),
        Some(*support::BOB),
    );
    assert!(!out.status.success());
    // skopeo 1.9 asks twice: after the registry's insufficient_scope 401 it
    // retries with the challenge's scope appended (so the scope is repeated).
    let log = ours();
    assert_eq!(log.len(), 3, "{log:?}");
    let private_pull = "repository:private/app:pull".to_string();
    assert_eq!(log[1].scopes, vec![private_pull.clone()]);
    assert_eq!(
        log[2].scopes,
        vec![private_pull.clone(), private_pull.clone()]
    );
    for t in &log[1..3] {
        assert_eq!((t.user.as_deref(), t.status), (Some("bob"), 200));
        assert_eq!(t.granted, Vec::<String>::new());
    }

    let out = tls_inspect(
        &reg,
        &fx.images.private.reference(&reg),
        Some(("alice", "wrong")),
    );
    assert!(!out.status.success());
    let log = ours();
    assert_eq!(log.len(), 4, "{log:?}");
    assert_eq!(
        (log[3].user.as_deref(), log[3].status),
        (Some("alice"), 401)
    );
    assert!(
        stderr(&out).contains("unable to retrieve auth token: invalid username/password"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn token_mode_raw_flow() {
    // The exact protocol a client sees, checked by hand.
    let fx = support::fixture();
    let reg = support::start_dedicated(support::Mode::Token);
    let path = "/v2/private/app/manifests/v1";
    let r = reg.request("HEAD", path, &[]).unwrap();
    assert_eq!(r.status, 401);
    let challenge = r.header("WWW-Authenticate").unwrap().to_string();
    let service = reg.service.clone().unwrap();
    assert_eq!(
        challenge,
        format!(
            "Bearer realm=\"{}\",service=\"{service}\",scope=\"repository:private/app:pull\"",
            fx.token_server.realm
        )
    );
    let token_for =
        |creds: Option<(&str, &str)>| fx.token_request(&reg, creds, "repository:private/app:pull");
    assert_eq!(reg.token_requests(), 0);
    let bob = token_for(Some(("bob", support::BOB.1)));
    assert_eq!(bob.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&bob.body).unwrap();
    assert_eq!(v["expires_in"], 300);
    assert_eq!(v["token"], v["access_token"]);
    let bearer = format!("Bearer {}", v["token"].as_str().unwrap());
    let r = reg
        .request("HEAD", path, &[("Authorization", &bearer)])
        .unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("WWW-Authenticate").unwrap(),
        format!("{},error=\"insufficient_scope\"", challenge)
    );

    let bearer = format!(
        "Bearer {}",
        fx.bearer_token(&reg, Some(*support::ALICE), "repository:private/app:pull")
    );
    let r = reg
        .request(
            "HEAD",
            path,
            &[
                ("Authorization", &bearer),
                ("Accept", support::images::OCI_MANIFEST),
            ],
        )
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Docker-Content-Digest"),
        Some(fx.images.private.digest.as_str())
    );

    let wrong = token_for(Some(("alice", "bad")));
    assert_eq!(wrong.status, 401);
    assert_eq!(reg.token_requests(), 3);
}

#[test]
fn request_log_counts_one_head_exactly() {
    let reg = support::start_dedicated(support::Mode::Anon);
    let fx = support::fixture();
    let mark = reg.mark();
    let url = format!("http://{}/v2/oci/app/manifests/v1", reg.host);
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-I"])
        .args(["-H", &format!("Accept: {}", support::images::OCI_MANIFEST)])
        .arg(&url)
        .output()
        .expect("run curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    let reqs = reg.requests_since(mark);
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].method, "HEAD");
    assert_eq!(reqs[0].uri, "/v2/oci/app/manifests/v1");
    assert_eq!(reqs[0].status, 200);
    assert!(reqs[0].user_agent.starts_with("curl/"), "{:?}", reqs[0]);
    // Same content as the shared fixture.
    let r = reg
        .request(
            "GET",
            "/v2/oci/app/manifests/v1",
            &[("Accept", support::images::OCI_MANIFEST)],
        )
        .unwrap();
    assert_eq!(r.body, fx.images.oci_manifest.manifest);

    // And on the shared registry, filtered by repository.
    let mark = fx.anon.mark();
    let r = fx
        .anon
        .request("HEAD", "/v2/oci/app/manifests/nope", &[])
        .unwrap();
    assert_eq!(r.status, 404);
    let reqs = fx
        .anon
        .requests_since_matching(mark, "/v2/oci/app/manifests/nope");
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!((reqs[0].method.as_str(), reqs[0].status), ("HEAD", 404));
}

#[test]
fn dedicated_registry_stop_pause_resume() {
    let reg = support::start_dedicated(support::Mode::Basic);
    assert!(reg.is_running());
    let r = reg.request("GET", "/v2/", &[]).unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("WWW-Authenticate"),
        Some("Basic realm=\"pullcheck-basic-realm\"")
    );
    let auth = support::http::basic_auth("alice", support::ALICE.1);
    assert_eq!(
        reg.request("GET", "/v2/", &[("Authorization", &auth)])
            .unwrap()
            .status,
        200
    );

    reg.pause();
    let t = std::time::Instant::now();
    let host = reg.host.clone();
    let stalled = std::thread::spawn(move || {
        let s = std::net::TcpStream::connect(&host).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(300)))
            .unwrap();
        use std::io::{Read, Write};
        let mut s = s;
        s.write_all(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 16];
        s.read(&mut buf)
    })
    .join()
    .unwrap();
    assert!(stalled.is_err(), "a paused registry must not answer");
    assert!(t.elapsed() >= std::time::Duration::from_millis(300));
    reg.resume();
    assert_eq!(
        reg.request("GET", "/v2/", &[("Authorization", &auth)])
            .unwrap()
            .status,
        200
    );

    let pid = reg.pid;
    reg.stop();
    assert!(!reg.is_running());
    assert!(!support::process::pid_alive(pid));
    assert!(reg.request("GET", "/v2/", &[]).is_err());
}

#[test]
fn certificates_for_hostile_tests() {
    use std::time::{Duration, SystemTime};
    let fx = support::fixture();
    let (cert, key) = support::make_cert(
        &["wrong.example"],
        SystemTime::now() + Duration::from_secs(3600),
    );
    let reg = support::start_dedicated_with_cert(support::Mode::Basic, &cert, &key);
    let err = reg.request("GET", "/v2/", &[]).unwrap_err().to_string();
    assert!(err.contains("not valid for name \"127.0.0.1\""), "{err}");

    let (cert, key) = support::make_cert(
        &["127.0.0.1"],
        SystemTime::now() - Duration::from_secs(3600),
    );
    let reg = support::start_dedicated_with_cert(support::Mode::Token, &cert, &key);
    let err = reg.request("GET", "/v2/", &[]).unwrap_err().to_string();
    assert!(err.contains("expired"), "{err}");

    // The shared registries' certificate is valid for 127.0.0.1.
    assert_eq!(fx.basic.request("GET", "/v2/", &[]).unwrap().status, 401);

    let dir = support::temp_dir();
    let p = support::write_dockerconfigjson(
        dir.path(),
        &[(fx.basic.host.as_str(), "alice", "alice-pw")],
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    use base64::Engine as _;
    let want = base64::engine::general_purpose::STANDARD
        .encode(format!("alice:{}", support::secret("alice-pw")));
    if support::sentinel().is_none() {
        assert_eq!(want, "YWxpY2U6YWxpY2UtcHc=");
    }
    assert_eq!(v["auths"][fx.basic.host.as_str()]["auth"], want.as_str());
}

/// Every run of the binary starts from the same environment: nothing the developer's shell
/// or CI exports reaches it, except the variables `scripts/secret-hygiene.sh`'s wrapper needs.
#[test]
fn binary_runs_get_a_clean_environment() {
    use std::ffi::OsStr;
    let cmd = support::process::pullcheck();
    let envs: std::collections::HashMap<&OsStr, Option<&OsStr>> = cmd.get_envs().collect();
    for key in [
        "DOCKER_CONFIG",
        "SSL_CERT_FILE",
        "RUST_LOG",
        "KUBERNETES_SERVICE_HOST",
        "HTTPS_PROXY",
        "https_proxy",
        "NO_PROXY",
    ] {
        assert_eq!(
            envs.get(OsStr::new(key)),
            Some(&None),
            "{key} is not removed"
        );
    }
    assert_eq!(
        envs.get(OsStr::new("HOME")),
        Some(&Some(OsStr::new("/nonexistent-pullcheck-home")))
    );
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("PULLCHECK_") {
            let removed = envs.get(key.as_os_str()) == Some(&None);
            assert_eq!(removed, !name.starts_with("PULLCHECK_HYGIENE_"), "{name}");
        }
    }
}
