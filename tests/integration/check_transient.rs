//! Transient verdicts (exit 20): a registry stopped, paused or killed mid-run, untrusted,
//! wrong-name and expired certificates, a name that doesn't resolve, and a 429 storm (the
//! one scripted server: a real registry can't be made to answer 429).

use std::time::{Duration, Instant, SystemTime};

use crate::support::process::{Run, check, output, pullcheck_under, run};
use crate::support::scripted_server::Scripted;
use crate::support::{Mode, fixture, make_cert, start_dedicated, start_dedicated_with_cert};

#[test]
fn stopped_registry_is_transient() {
    let reg = start_dedicated(Mode::Anon);
    let image = fixture().images.oci_manifest.reference(&reg);
    reg.stop();
    let r = check(&["--insecure-registry", &reg.host, &image]);
    r.assert_code(20);
    let d = r.image(0)["detail"].as_str().unwrap().to_string();
    assert!(d.contains("cannot connect"), "{d}");
}

#[test]
fn paused_registry_times_out_within_the_deadline() {
    let reg = start_dedicated(Mode::Anon);
    let image = fixture().images.oci_manifest.reference(&reg);
    reg.pause();
    let start = Instant::now();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--timeout",
        "3",
        "--request-timeout",
        "1",
        &image,
    ]);
    let took = start.elapsed();
    reg.resume();
    r.assert_code(20);
    assert!(
        r.image(0)["detail"].as_str().unwrap().contains("timed out"),
        "{}",
        r.stdout
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn registry_killed_mid_run_is_transient() {
    let reg = start_dedicated(Mode::Anon);
    let image = fixture().images.oci_manifest.reference(&reg);
    let host = reg.host.clone();
    reg.pause();
    let started = Instant::now();
    let handle = std::thread::spawn(move || {
        check(&["--insecure-registry", &host, "--timeout", "8", &image])
    });
    std::thread::sleep(Duration::from_millis(800));
    reg.stop(); // the check is waiting on a connection the registry accepted
    let r = handle.join().unwrap();
    r.assert_code(20);
    assert_eq!(r.image(0)["verdict"], "transient");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn untrusted_certificate_is_transient_with_a_hint() {
    let f = fixture();
    let r = run(
        &[
            "check",
            "--output",
            "json",
            &f.images.oci_manifest.reference(&f.basic),
        ],
        &[],
    );
    r.assert_code(20);
    let d = r.image(0)["detail"].as_str().unwrap().to_string();
    assert!(
        d.contains("certificate not trusted (unknown issuer); pass its CA with --ca-file"),
        "{d}"
    );
}

#[test]
fn ssl_cert_file_is_honoured() {
    let f = fixture();
    let ca = f.ca_file.to_string_lossy().into_owned();
    let r = run(
        &[
            "check",
            "--output",
            "json",
            &f.images.oci_manifest.reference(&f.token),
        ],
        &[("SSL_CERT_FILE", &ca)],
    );
    r.assert_code(0);
}

/// `check` of the OCI image on a Basic-mode registry of its own serving a test-CA
/// certificate for `names`, valid until `not_after`.
fn check_with_cert(names: &[&str], not_after: SystemTime) -> Run {
    let (cert, key) = make_cert(names, not_after);
    let reg = start_dedicated_with_cert(Mode::Basic, &cert, &key);
    check(&[&fixture().images.oci_manifest.reference(&reg)])
}

#[test]
fn certificate_for_another_name_and_expired_certificate() {
    let r = check_with_cert(
        &["wrong.example"],
        SystemTime::now() + Duration::from_secs(86_400),
    );
    r.assert_code(20);
    let endpoint = r.image(0)["endpoint"].as_str().unwrap().to_string();
    // The platform check GETs at once on a registry that doesn't meter pulls.
    assert_eq!(
        r.image(0)["detail"].as_str().unwrap(),
        format!(
            "GET https://{endpoint}/v2/oci/app/manifests/v1: TLS: certificate is for another \
name: it names wrong.example, not 127.0.0.1; use one of those names or reissue the certificate \
with 127.0.0.1 in its subjectAltName"
        ),
        "{}",
        r.stdout
    );

    let r = check_with_cert(
        &["127.0.0.1", "localhost"],
        SystemTime::now() - Duration::from_secs(86_400),
    );
    r.assert_code(20);
    assert!(
        r.image(0)["detail"]
            .as_str()
            .unwrap()
            .contains("certificate expired"),
        "{}",
        r.stdout
    );
}

/// An X.509 v1 server certificate (what `openssl x509 -req` makes without `-extfile`): Go's
/// crypto/x509 accepts it, webpki does not. The message says so in words, not as rustls'
/// `Other(OtherError(UnsupportedCertVersion))`.
#[test]
fn an_x509_v1_server_certificate_is_named_with_its_fix() {
    let dir = crate::support::temp_dir();
    let d = dir.path();
    let tls = crate::support::tls::openssl;
    tls(
        &[
            "ecparam",
            "-genkey",
            "-name",
            "prime256v1",
            "-noout",
            "-out",
            "k.pem",
        ],
        d,
    );
    tls(
        &[
            "req",
            "-new",
            "-key",
            "k.pem",
            "-subj",
            "/CN=127.0.0.1",
            "-out",
            "c.csr",
        ],
        d,
    );
    tls(
        &[
            "x509", "-req", "-in", "c.csr", "-signkey", "k.pem", "-days", "10", "-out", "c.crt",
        ],
        d,
    );
    assert!(tls(&["x509", "-in", "c.crt", "-noout", "-text"], d).contains("Version: 1 (0x0)"));
    let cert = std::fs::read_to_string(d.join("c.crt")).unwrap();
    let key = std::fs::read_to_string(d.join("k.pem")).unwrap();
    let reg = start_dedicated_with_cert(Mode::Basic, &cert, &key);
    let ca = d.join("c.crt");
    let r = run(
        &[
            "check",
            "--output",
            "json",
            "--ca-file",
            ca.to_str().unwrap(),
            &fixture().images.oci_manifest.reference(&reg),
        ],
        &[],
    );
    r.assert_code(20);
    let endpoint = r.image(0)["endpoint"].as_str().unwrap().to_string();
    assert_eq!(
        r.image(0)["detail"].as_str().unwrap(),
        format!(
            "GET https://{endpoint}/v2/oci/app/manifests/v1: TLS: certificate is X.509 v1, and only \
v3 certificates are accepted; reissue it with extensions (openssl x509 -req ... -extfile with \
subjectAltName)"
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn name_that_does_not_resolve_is_transient() {
    // In a fresh network namespace nothing but a down loopback exists, so resolution fails
    // locally (no query leaves the machine).
    let r = output(
        pullcheck_under("unshare", &["-n"]).args([
            "check",
            "--output",
            "json",
            "no-such-host.invalid/app:v1",
        ]),
        None,
    );
    assert_eq!(
        r.status.code(),
        Some(20),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let d = doc["images"][0]["detail"].as_str().unwrap();
    assert!(
        d.contains("cannot resolve host: no-such-host.invalid"),
        "{d}"
    );
}

fn rate_limited(retry_after: &'static str) -> Scripted {
    Scripted::start(move |_, path| {
        if path == "/v2/" {
            (200, vec![], "{}".into())
        } else {
            (
                429,
                vec![
                    ("Retry-After".into(), retry_after.into()),
                    ("Content-Type".into(), "application/json".into()),
                ],
                r#"{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}"#.into(),
            )
        }
    })
}

#[test]
fn rate_limit_is_retried_then_transient() {
    let s = rate_limited("1");
    let r = check(&[
        "--insecure-registry",
        &s.host,
        "--platform",
        "any",
        &format!("{}/app:v1", s.host),
    ]);
    r.assert_code(20);
    let d = r.image(0)["detail"].as_str().unwrap().to_string();
    assert!(
        d.contains("HTTP 429") && d.ends_with("after retries"),
        "{d}"
    );
    // 4 attempts (MAX_ATTEMPTS) of the manifest HEAD; never a ping, never a GET.
    assert_eq!(
        s.requests(),
        vec!["HEAD /v2/app/manifests/v1".to_string(); 4]
    );
}

#[test]
fn retry_after_beyond_the_deadline_gives_up_at_once() {
    let s = rate_limited("3600");
    let start = Instant::now();
    let r = check(&[
        "--insecure-registry",
        &s.host,
        "--platform",
        "any",
        "--timeout",
        "30",
        &format!("{}/app:v1", s.host),
    ]);
    r.assert_code(20);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(s.requests(), vec!["HEAD /v2/app/manifests/v1".to_string()]);
}

#[test]
fn a_plain_http_registry_addressed_as_https_names_the_fix_without_retrying() {
    let f = fixture();
    let host = f.anon.host.clone();
    let image = f.images.oci_manifest.reference(&f.anon);
    let start = Instant::now();
    let r = run(&["check", &image], &[]);
    let took = start.elapsed();
    r.assert_code(20);
    assert_eq!(
        // The detail: what follows the line's elapsed time.
        r.stdout
            .split_once("ms: ")
            .map(|(_, d)| d.trim_end())
            .unwrap_or_default(),
        format!(
            "GET https://{host}/v2/oci/app/manifests/v1: {host} answered HTTPS with plain HTTP; \
if it serves plain HTTP, pass --insecure-registry {host} or give it a hosts.toml with \
server = \"http://{host}\""
        ),
        "{}",
        r.stdout
    );
    assert!(took < Duration::from_secs(1), "retried: took {took:?}");
}

/// `--insecure-registry 127.0.0.1` for a registry on `127.0.0.1:PORT` does not apply (the
/// port is part of the name), and the verdict's detail says so.
#[test]
fn an_insecure_registry_without_the_port_is_named_as_the_reason() {
    let f = fixture();
    let host = f.anon.host.clone();
    let bare = host.split(':').next().unwrap().to_string();
    let image = f.images.oci_manifest.reference(&f.anon);
    let r = run(&["check", "--insecure-registry", &bare, &image], &[]);
    r.assert_code(20);
    assert_eq!(
        r.stdout
            .split_once("ms: ")
            .map(|(_, d)| d.trim_end())
            .unwrap_or_default(),
        format!(
            "GET https://{host}/v2/oci/app/manifests/v1: {host} answered HTTPS with plain HTTP; \
if it serves plain HTTP, pass --insecure-registry {host} or give it a hosts.toml with \
server = \"http://{host}\"; --insecure-registry {bare} does not cover {host}: the port is \
part of the registry's name"
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn an_https_registry_addressed_as_plain_http_is_not_a_false_not_found() {
    // distribution's TLS listener answers a plain-HTTP request with Go's bare 400
    // ("Client sent an HTTP request to an HTTPS server"): not the registry refusing the
    // request, and never a permanent code for an image that exists.
    let f = fixture();
    let host = f.basic.host.clone();
    let image = f.images.oci_manifest.reference(&f.basic);
    for method_args in [vec!["--platform", "any"], vec!["--platform", "linux/amd64"]] {
        let start = Instant::now();
        let mut args = vec!["check", "--insecure-registry", &host];
        args.extend(method_args.iter().copied());
        args.push(&image);
        let r = run(&args, &[]);
        let took = start.elapsed();
        r.assert_code(20);
        let detail = r
            .stdout
            .split_once("ms: ")
            .map(|(_, d)| d.trim_end().to_string())
            .unwrap_or_default();
        assert!(
            detail.ends_with(&format!(
                "{host} speaks HTTPS, not plain HTTP; drop --insecure-registry {host} (or the \
http:// server in its hosts.toml) and trust its certificate with --ca-file, or skip_verify in hosts.toml"
            )),
            "{}",
            r.stdout
        );
        assert!(took < Duration::from_secs(1), "retried: took {took:?}");
    }
}
