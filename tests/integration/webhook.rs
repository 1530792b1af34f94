//! `pullcheck webhook` end to end: the real binary on a loopback port with a test-CA
//! certificate, fed the captured reviews in tests/data/admission/ (their registry host
//! replaced by a fixture registry's), against the real registries of the harness.
//!
//! Namespace credentials come from a scripted stand-in for the Kubernetes API (Secrets and
//! ServiceAccounts only); the tests against a real kube-apiserver are in `apiserver.rs`.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::process::check;
use crate::support::scripted_server::Scripted;
use crate::support::{self, ALICE, Mode, fixture, make_cert, start_dedicated};

/// The registry host written in the captured reviews.
const PLACEHOLDER: &str = "registry.pullcheck.test:5000";

fn far() -> SystemTime {
    SystemTime::now() + Duration::from_secs(30 * 86_400)
}

/// A `pullcheck webhook` on a loopback port, with a test-CA certificate of its own.
pub(crate) struct Webhook {
    running: support::webhook::Webhook,
    dir: tempfile::TempDir,
}

/// `base` (`https://127.0.0.1:PORT`) and `log()` of the running process.
impl std::ops::Deref for Webhook {
    type Target = support::webhook::Webhook;
    fn deref(&self) -> &Self::Target {
        &self.running
    }
}

impl Webhook {
    /// Start with the test CA trusted for registries and loopback registries allowed.
    pub(crate) fn start(extra: &[&str]) -> Webhook {
        let ca = fixture().ca_file.to_string_lossy().into_owned();
        let mut args = vec!["--ca-file", ca.as_str(), "--allow-loopback-registries"];
        args.extend_from_slice(extra);
        Webhook::start_raw(&args)
    }

    /// Start with exactly these extra flags (besides listen address and certificate).
    fn start_raw(extra: &[&str]) -> Webhook {
        Webhook::start_raw_with_env(extra, &[])
    }

    /// [`Webhook::start_raw`] with extra environment.
    fn start_raw_with_env(extra: &[&str], env: &[(&str, &str)]) -> Webhook {
        let dir = support::temp_dir();
        let (cert, key) = make_cert(&["127.0.0.1", "localhost"], far());
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        let mut args: Vec<OsString> = [
            "webhook",
            "--listen",
            "127.0.0.1:0",
            "--reload-interval",
            "0.2",
            "--tls-cert",
        ]
        .map(OsString::from)
        .into();
        args.push(cert_path.into());
        args.push("--tls-key".into());
        args.push(key_path.into());
        args.extend(extra.iter().map(OsString::from));
        let running = support::webhook::start_with_env(&args, "pullcheck=info", env);
        Webhook { running, dir }
    }

    fn cert_path(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }

    fn key_path(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }

    fn request(&self, method: &str, path: &str, body: &[u8]) -> support::http::Response {
        support::http::request(
            &self.base,
            Some(&fixture().ca_file),
            method,
            path,
            &[("Content-Type", "application/json")],
            body,
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}\nwebhook stderr:\n{}", self.log()))
    }

    /// POST a review; returns the HTTP status and the parsed answer.
    fn post(&self, path: &str, review: &Value) -> (u16, Value) {
        let r = self.request("POST", path, &serde_json::to_vec(review).unwrap());
        let v = serde_json::from_slice(&r.body)
            .unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {}", r.text()));
        (r.status, v)
    }

    /// POST to /validate and return `response` (asserting HTTP 200 and the uid).
    pub(crate) fn validate(&self, review: &Value) -> Value {
        self.answer("/validate", review)
    }

    pub(crate) fn mutate(&self, review: &Value) -> Value {
        self.answer("/mutate", review)
    }

    fn answer(&self, path: &str, review: &Value) -> Value {
        let (status, v) = self.post(path, review);
        assert_eq!(status, 200, "{v}\nwebhook stderr:\n{}", self.log());
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(v["response"]["uid"], review["request"]["uid"], "{v}");
        v["response"].clone()
    }

    pub(crate) fn metrics(&self) -> String {
        let r = self.request("GET", "/metrics", b"");
        assert_eq!(r.status, 200);
        r.text()
    }

    /// SIGTERM, then wait for the exit status.
    fn terminate(self) -> std::process::ExitStatus {
        self.running.terminate()
    }
}

/// A captured review with its registry host replaced by `host`.
pub(crate) fn review(file: &str, host: &str) -> Value {
    let path = format!("{}/tests/data/admission/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text.replace(PLACEHOLDER, host)).unwrap()
}

/// The `detail` `pullcheck check` gives for one image (same rules as the webhook).
fn check_detail(image: &str, extra: &[&str]) -> String {
    let mut args = extra.to_vec();
    args.extend(["--platform", "linux/amd64", image]);
    let r = check(&args);
    r.image(0)["detail"].as_str().unwrap().to_string()
}

fn warnings(resp: &Value) -> Vec<String> {
    resp["warnings"]
        .as_array()
        .map(|a| a.iter().map(|w| w.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The lint findings of the fixtures' Jobs, as a denial lists them after its verdicts (a
/// denial carries no warnings: kubectl would print them before the reason).
const DENIAL_FINDINGS: &str = "\nalso (not why it was denied):
- no pullcheck init container: run `pullcheck inject` so a missing image fails the pod
- no podFailurePolicy: pullcheck's permanent codes 10-15 don't fail the Job at once
- no activeDeadlineSeconds: nothing bounds a pod stuck pulling an image
- no ttlSecondsAfterFinished: finished Jobs and pods linger";

/// The verdict lines of a denial's `status.message`: what comes before the findings.
fn verdict_lines(resp: &Value) -> &str {
    let msg = resp["status"]["message"].as_str().unwrap();
    msg.split_once("\nalso (not why it was denied):")
        .map_or(msg, |(verdicts, _)| verdicts)
}

/// Each warning within the API server's 256-rune item limit, all within pullcheck's 1 KiB
/// share of its 4 KiB per request (src/webhook/review.rs).
fn assert_short(ws: &[String]) {
    for w in ws {
        assert!(w.chars().count() <= 256, "warning over 256 characters: {w}");
    }
    let total: usize = ws.iter().map(|w| w.chars().count()).sum();
    assert!(total <= 1024, "warnings over 1 KiB: {ws:?}");
}

/// The JSON patch of an answer (sent as a JSON array of bytes, kube-core's encoding).
pub(crate) fn patch_of(resp: &Value) -> Option<json_patch::Patch> {
    // admission.k8s.io/v1 sends the patch as a base64 string.
    use base64::Engine as _;
    let text = resp
        .get("patch")?
        .as_str()
        .expect("patch is a base64 string");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    assert_eq!(resp["patchType"], "JSONPatch");
    Some(serde_json::from_slice(&bytes).unwrap())
}

/// The webhook trusts the CA `SSL_CERT_FILE` names, as check does and as its help says
/// (issue 21: it ignored the variable, so a private-CA registry's answer was "certificate
/// not trusted", transient, and the Job admitted).
#[test]
fn the_webhook_honours_ssl_cert_file() {
    // The basic-auth registry speaks TLS with a certificate from the test CA.
    let basic = &fixture().basic;
    let ca = fixture().ca_file.to_string_lossy().into_owned();
    let wh =
        Webhook::start_raw_with_env(&["--allow-loopback-registries"], &[("SSL_CERT_FILE", &ca)]);
    let resp = wh.validate(&review("job-create-missing-tag.json", &basic.host));
    let image = format!("{}/oci/app:v404", basic.host);
    // check with the CA given by --ca-file: the same answer as the webhook's.
    let detail = check_detail(&image, &[]);
    assert!(detail.starts_with("missing or private: "), "{detail}");
    assert_eq!(resp["allowed"], false, "{resp}");
    let message = resp["status"]["message"].as_str().unwrap();
    assert_eq!(
        message.lines().next().unwrap(),
        format!("main: {image}: unauthenticated ({detail})")
    );
}

/// A registry on a loopback address (kind's `localhost:5001`, a node-local mirror) is one the
/// node's runtime may pull from; the webhook's guard refuses to look, which is no fact about
/// the image: admitted, not verified, with the fix named, never `denied` (a newcomer's Job
/// was rejected in enforce mode).
#[test]
fn a_loopback_registry_the_guard_refuses_is_admitted_not_denied() {
    let anon = &fixture().anon;
    let wh = Webhook::start_raw(&["--insecure-registry", &anon.host]);
    let resp = wh.validate(&review("job-create-missing-tag.json", &anon.host));
    assert_eq!(resp["allowed"], true, "{resp}");
    let image = format!("{}/oci/app:v404", anon.host);
    let ws = warnings(&resp);
    let host = anon.host.rsplit_once(':').unwrap().0;
    let want = format!(
        "not verified, admitted: main: {image} (not checked: the address guard refuses loopback registries ({host} is {host}, a loopback address); allow them with --allow-loopback-registries (chart: registry.allowLoopback))"
    );
    assert!(ws.contains(&want), "{ws:#?}");
}

#[test]
fn missing_tag_is_denied_with_one_line_per_failing_image() {
    let anon = &fixture().anon;
    let wh = Webhook::start(&["--insecure-registry", &anon.host]);
    let resp = wh.validate(&review("job-create-missing-tag.json", &anon.host));
    assert_eq!(resp["allowed"], false, "{resp}");
    let image = format!("{}/oci/app:v404", anon.host);
    let detail = check_detail(&image, &["--insecure-registry", &anon.host]);
    assert!(detail.starts_with("manifest unknown ("), "{detail}");
    // The verdict first, the lint findings after it; no warnings, which kubectl would
    // print ahead of the reason.
    assert_eq!(
        resp["status"]["message"].as_str().unwrap(),
        format!("main: {image}: not_found ({detail}){DENIAL_FINDINGS}")
    );
    assert!(resp.get("warnings").is_none(), "{resp}");
}

#[test]
fn present_images_are_admitted_and_mutate_injects_the_init_container() {
    let f = fixture();
    let anon = &f.anon;
    let checker = f.images.digest_only.digest_reference(anon);
    let wh = Webhook::start(&[
        "--insecure-registry",
        &anon.host,
        "--inject-image",
        &checker,
    ]);
    let rev = review("job-create.json", &anon.host);
    let resp = wh.validate(&rev);
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(resp.get("patch").is_none());

    let resp = wh.mutate(&rev);
    assert_eq!(resp["allowed"], true, "{resp}");
    let patch = patch_of(&resp).expect("a patch");
    let mut obj = rev["request"]["object"].clone();
    json_patch::patch(&mut obj, &patch).unwrap();
    let spec = &obj["spec"]["template"]["spec"];
    let inits = spec["initContainers"].as_array().unwrap();
    assert_eq!(inits.len(), 1);
    assert_eq!(inits[0]["name"], "pullcheck");
    assert_eq!(inits[0]["image"], checker.as_str());
    let a = format!("{}/oci/app:v1", anon.host);
    let b = format!("{}/multi/app:v1", anon.host);
    assert_eq!(
        inits[0]["args"],
        json!(["check", "--no-docker-config", a, b]),
        "{}",
        inits[0]
    );
    // The workload's own containers are unchanged.
    assert_eq!(
        spec["containers"],
        rev["request"]["object"]["spec"]["template"]["spec"]["containers"]
    );

    // Reinvocation (reinvocationPolicy: IfNeeded) on the patched object changes nothing.
    let mut again = rev.clone();
    again["request"]["object"] = obj;
    let resp = wh.mutate(&again);
    assert!(resp.get("patch").is_none(), "{resp}");
}

#[test]
fn pin_digests_uses_the_index_digest() {
    let f = fixture();
    let anon = &f.anon;
    let wh = Webhook::start(&["--insecure-registry", &anon.host, "--pin-digests"]);
    let rev = review("job-create.json", &anon.host);
    let resp = wh.mutate(&rev);
    let mut obj = rev["request"]["object"].clone();
    json_patch::patch(&mut obj, &patch_of(&resp).unwrap()).unwrap();
    let c = &obj["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        c[0]["image"],
        format!("{}/oci/app:v1@{}", anon.host, f.images.oci_manifest.digest)
    );
    // multi/app:v1 is an index: pinned to the index, never to a platform child.
    assert_eq!(
        c[1]["image"],
        format!("{}/multi/app:v1@{}", anon.host, f.images.multi_index.digest)
    );
}

#[test]
fn cronjob_update_is_checked_only_when_the_template_changes() {
    let anon = &fixture().anon;
    let wh = Webhook::start(&["--insecure-registry", &anon.host]);
    let resp = wh.validate(&review("cronjob-update.json", &anon.host));
    assert_eq!(resp["allowed"], false, "{resp}");
    let msg = verdict_lines(&resp);
    assert!(
        msg.starts_with(&format!(
            "report: {}/oci/app:v404: not_found (manifest unknown (",
            anon.host
        )),
        "{msg}"
    );
    assert_eq!(msg.lines().count(), 1);
    // Suspending a CronJob whose image has gone is not blocked.
    let resp = wh.validate(&review("cronjob-update-suspend.json", &anon.host));
    assert_eq!(resp["allowed"], true, "{resp}");
    assert!(resp.get("warnings").is_none(), "{resp}");
}

#[test]
fn pods_controller_owned_and_opted_out_objects_pass_untouched() {
    let reg = start_dedicated(Mode::Anon);
    let wh = Webhook::start(&["--insecure-registry", &reg.host]);
    let mark = reg.mark();
    for file in [
        "pod-create.json",
        "job-owned-by-cronjob.json",
        "job-skip-annotation.json",
        "job-update.json",
        "configmap-create.json",
        "job-delete.json",
    ] {
        let rev = review(file, &reg.host);
        for resp in [wh.validate(&rev), wh.mutate(&rev)] {
            assert_eq!(resp["allowed"], true, "{file}: {resp}");
            assert!(resp.get("patch").is_none(), "{file}: {resp}");
            assert!(resp.get("warnings").is_none(), "{file}: {resp}");
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        reg.requests_since(mark).is_empty(),
        "{:?}",
        reg.requests_since(mark)
    );
}

#[test]
fn warn_mode_admits_with_a_warning_per_failing_image() {
    let anon = &fixture().anon;
    let wh = Webhook::start(&["--insecure-registry", &anon.host, "--mode", "warn"]);
    let resp = wh.validate(&review("job-create-missing-tag.json", &anon.host));
    assert_eq!(resp["allowed"], true, "{resp}");
    let ws = warnings(&resp);
    assert_short(&ws);
    let prefix = format!("main: {}/oci/app:v404: not_found (", anon.host);
    assert_eq!(
        ws.iter().filter(|w| w.starts_with(&prefix)).count(),
        1,
        "{ws:?}"
    );
}

#[test]
fn paused_registry_fails_open_or_closed_within_the_budget() {
    let reg = start_dedicated(Mode::Anon);
    let open = Webhook::start(&["--insecure-registry", &reg.host, "--budget", "2"]);
    let closed = Webhook::start(&[
        "--insecure-registry",
        &reg.host,
        "--budget",
        "2",
        "--fail-closed",
    ]);
    let rev = review("job-create.json", &reg.host);
    reg.pause();
    let started = Instant::now();
    let resp = open.validate(&rev);
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(resp["allowed"], true, "{resp}");
    let ws = warnings(&resp);
    assert_short(&ws);
    for (c, repo) in [("main", "oci/app:v1"), ("uploader", "multi/app:v1")] {
        let prefix = format!("not verified, admitted: {c}: {}/{repo} (", reg.host);
        assert!(
            ws.iter().any(|w| w.starts_with(&prefix)),
            "{prefix} not in {ws:?}"
        );
    }

    let started = Instant::now();
    let resp = closed.validate(&rev);
    let took = started.elapsed();
    reg.resume();
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    assert_eq!(resp["allowed"], false, "{resp}");
    let msg = verdict_lines(&resp);
    let lines: Vec<&str> = msg.lines().collect();
    assert_eq!(lines.len(), 2, "{msg}");
    assert!(
        lines[0].starts_with(&format!("main: {}/oci/app:v1: transient (", reg.host)),
        "{msg}"
    );
    assert!(
        lines[1].starts_with(&format!("uploader: {}/multi/app:v1: transient (", reg.host)),
        "{msg}"
    );
}

#[test]
fn undecodable_input_is_400_and_oversized_input_is_refused_before_it_is_read() {
    let wh = Webhook::start(&[]);
    let r = wh.request("POST", "/validate", b"{not json");
    assert_eq!(r.status, 400, "{}", r.text());
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["response"]["allowed"], false);
    assert!(
        v["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot decode the AdmissionReview: "),
        "{v}"
    );
    // A review without a request: kube-core's `invalid` answer, HTTP 200.
    let (status, v) = wh.post(
        "/validate",
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    );
    assert_eq!(status, 200);
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["reason"], "InvalidRequest");

    // 4 MiB announced, nothing sent: the answer comes without waiting for the body.
    let host = wh.base.trim_start_matches("https://").to_string();
    let tcp = TcpStream::connect(&host).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let config = support::http::client_config(Some(&fixture().ca_file)).unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        4 * 1024 * 1024
    );
    tls.write_all(head.as_bytes()).unwrap();
    tls.flush().unwrap();
    let mut buf = [0u8; 64];
    let n = tls.read(&mut buf).expect("an answer before the body");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
}

#[test]
fn metadata_address_is_refused_before_any_connection() {
    let image = "169.254.169.254/latest/meta-data:v1";
    let want = format!(
        "main: {image}: denied (blocked by pullcheck's address guard: 169.254.169.254 is 169.254.169.254, a cloud metadata address)"
    );
    // The production guard (no loopback opt-out), and the relaxed one used by the tests.
    for wh in [Webhook::start_raw(&[]), Webhook::start(&[])] {
        let resp = wh.validate(&review("job-metadata-address.json", "unused"));
        assert_eq!(resp["allowed"], false, "{resp}");
        assert_eq!(
            resp["status"]["message"],
            format!("{want}{DENIAL_FINDINGS}")
        );
        // Not one HTTP request left the process (the guard runs before the connection).
        let m = wh.metrics();
        assert!(
            m.contains("pullcheck_registry_http_requests_total 0\n"),
            "{m}"
        );
    }
}

/// A stand-in for the Kubernetes API: team-a has `regcred` (alice, for `registry_host`)
/// and a ServiceAccount `builder` whose imagePullSecrets name `sa-regcred`; team-b has
/// neither.
fn fake_apiserver(registry_host: &str) -> Scripted {
    let config = json!({"auths": {registry_host: {
        "auth": base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", ALICE.0, ALICE.1))
    }}});
    let secret = move |name: &str| {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "team-a"},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config.to_string())}
        })
        .to_string()
    };
    let json_headers = || vec![("Content-Type".to_string(), "application/json".to_string())];
    Scripted::start(move |method, path| {
        let not_found = || {
            (
                404,
                json_headers(),
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
                    .to_string(),
            )
        };
        if method != "GET" {
            return (405, vec![], String::new());
        }
        match path {
            "/api/v1/namespaces/team-a/secrets/regcred" => (200, json_headers(), secret("regcred")),
            "/api/v1/namespaces/team-a/secrets/sa-regcred" => {
                (200, json_headers(), secret("sa-regcred"))
            }
            "/api/v1/namespaces/team-a/serviceaccounts/builder" => (
                200,
                json_headers(),
                json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "builder", "namespace": "team-a"},
                       "imagePullSecrets": [{"name": "sa-regcred"}]})
                .to_string(),
            ),
            _ => not_found(),
        }
    })
}

fn in_namespace(mut rev: Value, ns: &str) -> Value {
    rev["request"]["namespace"] = json!(ns);
    rev["request"]["object"]["metadata"]["namespace"] = json!(ns);
    rev
}

#[test]
fn pull_secrets_come_from_the_namespace_and_never_answer_for_another() {
    let f = fixture();
    let token = &f.token;
    let api = fake_apiserver(&token.host);
    let dir = support::temp_dir();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "test-sa-token\n").unwrap();
    let wh = Webhook::start(&[
        "--apiserver",
        &format!("http://{}", api.host),
        "--apiserver-token-file",
        token_file.to_str().unwrap(),
    ]);
    let image = format!("{}/private/app:v1", token.host);
    let denied_prefix = format!("main: {image}: unauthenticated (");
    for file in ["job-private.json", "job-private-sa.json"] {
        let rev = review(file, &token.host);
        let a = wh.validate(&in_namespace(rev.clone(), "team-a"));
        assert_eq!(a["allowed"], true, "{file} team-a: {a}");
        // Right after: same image, same template, another namespace without the secret.
        let b = wh.validate(&in_namespace(rev, "team-b"));
        assert_eq!(b["allowed"], false, "{file} team-b: {b}");
        let msg = verdict_lines(&b);
        assert!(msg.starts_with(&denied_prefix), "{msg}");
        assert_eq!(msg.lines().count(), 1);
    }
    let requests = api.requests();
    // The template's own pull secret: the ServiceAccount is not consulted (the SA
    // admission rule); without one, the ServiceAccount's secrets are used.
    for want in [
        "GET /api/v1/namespaces/team-a/secrets/regcred",
        "GET /api/v1/namespaces/team-b/secrets/regcred",
        "GET /api/v1/namespaces/team-a/serviceaccounts/builder",
        "GET /api/v1/namespaces/team-a/secrets/sa-regcred",
        "GET /api/v1/namespaces/team-b/serviceaccounts/builder",
    ] {
        assert_eq!(
            requests.iter().filter(|r| *r == want).count(),
            1,
            "{want} in {requests:?}"
        );
    }
    assert_eq!(requests.len(), 5, "{requests:?}");
}

#[test]
fn metrics_health_and_readiness() {
    let anon = &fixture().anon;
    let wh = Webhook::start(&["--insecure-registry", &anon.host]);
    assert_eq!(wh.request("GET", "/healthz", b"").status, 200);
    assert_eq!(wh.request("GET", "/readyz", b"").status, 200);
    let rev = review("job-create-missing-tag.json", &anon.host);
    for _ in 0..2 {
        assert_eq!(wh.validate(&rev)["allowed"], false);
    }
    wh.validate(&review("pod-create.json", &anon.host));
    let m = wh.metrics();
    for line in [
        "pullcheck_admissions_total{webhook=\"validate\",kind=\"Job\",verdict=\"denied\"} 2",
        "pullcheck_admissions_total{webhook=\"validate\",kind=\"Pod\",verdict=\"skipped\"} 1",
        "pullcheck_registry_lookups_total{outcome=\"not_found\"} 1",
        "pullcheck_registry_lookups_total{outcome=\"pullable\"} 1",
        "pullcheck_cache_misses_total{cache=\"verdict\"} 2",
        "pullcheck_cache_hits_total{cache=\"verdict\"} 2",
        "pullcheck_admission_duration_seconds_count{webhook=\"validate\"} 3",
        "pullcheck_registry_lookup_duration_seconds_count 2",
    ] {
        assert!(m.lines().any(|l| l == line), "{line} missing from\n{m}");
    }
}

#[test]
fn kubeflow_and_jobset_templates_and_pinned_arch() {
    let anon = &fixture().anon;
    let wh = Webhook::start(&[
        "--insecure-registry",
        &anon.host,
        "--cluster-platform",
        "linux/amd64",
    ]);
    let resp = wh.validate(&review("pytorchjob-create.json", &anon.host));
    assert_eq!(resp["allowed"], false, "{resp}");
    let msg = verdict_lines(&resp);
    assert!(
        msg.starts_with(&format!("pytorch: {}/oci/app:v404: not_found (", anon.host)),
        "{msg}"
    );
    assert_eq!(msg.lines().count(), 1);
    // The worker template pins arm64, the only platform armonly/app offers.
    let rev = review("jobset-create.json", &anon.host);
    let resp = wh.validate(&rev);
    assert_eq!(resp["allowed"], true, "{resp}");
    // Without the pin, the cluster's linux/amd64 is what the index must offer.
    let mut unpinned = rev.clone();
    unpinned["request"]["object"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
        ["spec"]
        .as_object_mut()
        .unwrap()
        .remove("nodeSelector");
    let resp = wh.validate(&unpinned);
    assert_eq!(resp["allowed"], false, "{resp}");
    let msg = resp["status"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!(
            "worker: {}/armonly/app:v1: platform_missing (",
            anon.host
        )),
        "{msg}"
    );
}

fn served_certificate(base: &str) -> Vec<u8> {
    let host = base.trim_start_matches("https://");
    let tcp = TcpStream::connect(host).unwrap();
    let config = support::http::client_config(Some(&fixture().ca_file)).unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut tcp = tcp;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).unwrap();
    }
    conn.peer_certificates().unwrap()[0].as_ref().to_vec()
}

fn first_cert_der(pem: &str) -> Vec<u8> {
    support::tls::pem_blocks(pem, "CERTIFICATE").remove(0)
}

fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn certificate_files_are_reloaded_when_they_change() {
    let wh = Webhook::start(&[]);
    let first = std::fs::read_to_string(wh.cert_path()).unwrap();
    assert_eq!(served_certificate(&wh.base), first_cert_der(&first));
    let (cert, key) = make_cert(&["127.0.0.1", "reloaded.pullcheck.test"], far());
    replace_file(&wh.key_path(), &key);
    replace_file(&wh.cert_path(), &cert);
    let want = first_cert_der(&cert);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if served_certificate(&wh.base) == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "new certificate not served\n{}",
            wh.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        wh.log().contains("serving certificate reloaded"),
        "{}",
        wh.log()
    );
    // A broken pair keeps the current certificate.
    replace_file(&wh.cert_path(), "not a certificate\n");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(served_certificate(&wh.base), want);
}

/// Keep-alive clients that are busy when SIGTERM comes (as the API server is) get an answer
/// to every request they wrote, the last one with `Connection: close`. Regression: the
/// server used to close idle keep-alive connections at once, dropping a request already
/// written to one (a POST the client can't safely retry).
#[test]
fn sigterm_answers_every_request_on_busy_keep_alive_connections() {
    let wh = Webhook::start(&[]);
    let body = serde_json::to_vec(&review("configmap-create.json", "unused")).unwrap();
    let host = wh.base.trim_start_matches("https://").to_string();
    let request = [
        format!(
            "POST /validate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes(),
        body,
    ]
    .concat();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (host, request) = (host.clone(), request.clone());
            std::thread::spawn(move || -> Result<usize, String> {
                let tcp = TcpStream::connect(&host).unwrap();
                tcp.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
                let config = support::http::client_config(Some(&fixture().ca_file)).unwrap();
                let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
                let conn = rustls::ClientConnection::new(config, name).unwrap();
                let mut tls = BufReader::new(rustls::StreamOwned::new(conn, tcp));
                for answered in 0.. {
                    let dropped = |e: String| format!("request {} dropped: {e}", answered + 1);
                    tls.get_mut()
                        .write_all(&request)
                        .map_err(|e| dropped(e.to_string()))?;
                    let (mut length, mut close, mut status) = (0usize, false, String::new());
                    loop {
                        let mut line = String::new();
                        match tls.read_line(&mut line) {
                            Ok(0) => return Err(dropped("connection closed".into())),
                            Err(e) => return Err(dropped(e.to_string())),
                            Ok(_) => {}
                        }
                        let lower = line.trim_end().to_ascii_lowercase();
                        if lower.is_empty() {
                            break;
                        } else if status.is_empty() {
                            status = lower;
                        } else if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        } else if lower == "connection: close" {
                            close = true;
                        }
                    }
                    assert!(status.starts_with("http/1.1 200"), "{status}");
                    let mut answer = vec![0u8; length];
                    tls.read_exact(&mut answer)
                        .map_err(|e| dropped(e.to_string()))?;
                    if close {
                        return Ok(answered + 1);
                    }
                }
                unreachable!()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let status = wh.terminate();
    for c in clients {
        let answered = c.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
        assert!(answered > 1, "{answered}");
    }
    assert!(status.success(), "{status:?}");
}

#[test]
fn sigterm_drains_the_request_in_flight() {
    let reg = start_dedicated(Mode::Anon);
    let wh = Webhook::start(&["--insecure-registry", &reg.host, "--budget", "3"]);
    let rev = review("job-create.json", &reg.host);
    reg.pause();
    let base = wh.base.clone();
    let body = serde_json::to_vec(&rev).unwrap();
    let inflight = std::thread::spawn(move || {
        support::http::request(
            &base,
            Some(&fixture().ca_file),
            "POST",
            "/validate",
            &[("Content-Type", "application/json")],
            &body,
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let status = wh.terminate();
    let r = inflight.join().unwrap().expect("an answer despite SIGTERM");
    reg.resume();
    assert_eq!(r.status, 200);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["response"]["allowed"], true, "{v}");
    assert!(status.success(), "{status:?}");
}

/// Warnings of an answer that say an image was not verified.
fn not_verified(resp: &Value) -> Vec<String> {
    warnings(resp)
        .into_iter()
        .filter(|w| w.starts_with("not verified"))
        .collect()
}

#[test]
fn a_token_request_that_timed_out_is_not_remembered() {
    // The real token-mode registry behind a recording relay that points its challenge at a
    // scripted token endpoint (support/hostile_server.rs): while `hanging` is set, the
    // endpoint accepts each token request and never answers; after, it forwards to the
    // harness's real token server. The first review can't get a token within its budget;
    // the second, sent right after, must fetch one again rather than reuse the failure.
    use crate::support::hostile_server::{Out, Seen, Server, hang};
    use crate::support::relay;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let f = fixture();
    let reg = start_dedicated(Mode::Token);
    let hanging = Arc::new(AtomicBool::new(true));
    let endpoint = {
        let hanging = hanging.clone();
        let real = format!("https://127.0.0.1:{}", f.token_server.port);
        let ca = f.ca_file.clone();
        Server::start(relay::loopback_tls(), move |seen: &Seen, out: &mut Out| {
            if hanging.load(Ordering::SeqCst) {
                return hang(Duration::from_secs(10));
            }
            relay::pass_back(out, &relay::forward(&real, &ca, seen)?)
        })
    };
    let (real_realm, scripted_realm) = (
        f.token_server.realm.clone(),
        format!("{}/token", endpoint.base),
    );
    let front = relay::start(&reg.url(), move |resp| {
        for (k, v) in resp.headers.iter_mut() {
            if k.eq_ignore_ascii_case("www-authenticate") {
                *v = v.replace(&real_realm, &scripted_realm);
            }
        }
    });
    let wh = Webhook::start(&["--request-timeout", "1", "--budget", "3"]);
    let rev = review("job-create.json", &front.host);

    let started = Instant::now();
    let resp = wh.validate(&rev);
    assert!(started.elapsed() < Duration::from_millis(3500));
    assert_eq!(resp["allowed"], true, "fail-open: {resp}");
    let nv = not_verified(&resp);
    assert_eq!(nv.len(), 2, "{resp}");
    for (c, repo) in [("main", "oci/app:v1"), ("uploader", "multi/app:v1")] {
        let prefix = format!("not verified, admitted: {c}: {}/{repo} (", front.host);
        assert!(
            nv.iter().any(|w| w.starts_with(&prefix)),
            "{prefix} not in {nv:?}"
        );
    }
    let hung = endpoint.seen().len();
    assert!(hung >= 2, "each repository's token was asked for: {hung}");
    assert_eq!(reg.token_requests(), 0);

    hanging.store(false, Ordering::SeqCst);
    let resp = wh.validate(&rev);
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(not_verified(&resp), Vec::<String>::new(), "{resp}");
    // One new token request per repository, answered by the real token server.
    let scopes: Vec<String> = endpoint.seen()[hung..]
        .iter()
        .map(|s| s.query("scope").unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        scopes,
        vec!["repository:multi/app:pull", "repository:oci/app:pull"]
    );
    assert_eq!(endpoint.seen().len(), hung + 2);
    assert_eq!(reg.token_requests(), 2);
}

#[test]
fn the_webhooks_guard_trusts_a_proxy_on_localhost_and_leaves_the_name_to_it() {
    // No --allow-loopback-registries: the registry's own address is the proxy's business,
    // so the proxy on localhost is used and the registry's name goes to it in the CONNECT.
    // The token realm, though, is announced as the IP literal 127.0.0.1 (where the harness's
    // token server listens): for the webhook a referral to a loopback literal is refused
    // before anything is sent, proxy or not.
    let f = fixture();
    let name = "registry.proxied.test";
    let (cert, key) = make_cert(&[name], far());
    let reg = support::start_dedicated_with_cert(Mode::Token, &cert, &key);
    let port = reg.host.rsplit_once(':').unwrap().1;
    let registry = format!("{name}:{port}");
    let realm = format!("127.0.0.1:{}", f.token_server.port);
    let proxy = crate::check_options::ConnectProxy::start(vec![
        (registry.clone(), reg.host.clone()),
        (realm.clone(), realm.clone()),
    ]);
    let proxy_url = format!(
        "http://localhost:{}",
        proxy.host.rsplit_once(':').unwrap().1
    );
    let ca = f.ca_file.to_string_lossy().into_owned();
    let wh = Webhook::start_raw_with_env(
        &["--ca-file", &ca, "--fail-closed"],
        &[("HTTPS_PROXY", &proxy_url)],
    );
    let mark = reg.mark();
    let resp = wh.validate(&review("job-create.json", &registry));
    assert_eq!(resp["allowed"], false, "{resp}");
    let guard = "blocked by pullcheck's address guard: 127.0.0.1 is 127.0.0.1, a loopback address";
    assert_eq!(
        resp["status"]["message"],
        format!(
            "main: {registry}/oci/app:v1: denied ({guard})\nuploader: {registry}/multi/app:v1: denied ({guard}){DENIAL_FINDINGS}"
        )
    );
    let mut connects = proxy.connects();
    connects.dedup();
    assert_eq!(connects, vec![format!("CONNECT {registry}")]);
    // One probe for the endpoint (the two images share what it taught: a bearer challenge
    // whose realm the guard refuses), whichever image came first.
    let asked: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {} {}", r.method, r.uri, r.status))
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        [
            "GET /v2/oci/app/manifests/v1 401",
            "GET /v2/multi/app/manifests/v1 401"
        ]
        .contains(&asked[0].as_str()),
        "{asked:?}"
    );
    assert_eq!(reg.token_requests(), 0);
}

/// The pullcheck init container's `restartPolicy` after `/mutate` of job-create.json.
fn mutated_restart_policy(wh: &Webhook) -> Value {
    let rev = review("job-create.json", &fixture().anon.host);
    let resp = wh.mutate(&rev);
    let patch = patch_of(&resp).expect("a patch");
    let mut obj = rev["request"]["object"].clone();
    json_patch::patch(&mut obj, &patch).unwrap();
    let c = &obj["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(c["name"], "pullcheck");
    if c.get("restartPolicy").is_some() {
        assert_eq!(
            c["restartPolicyRules"],
            json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [20]}}])
        );
    } else {
        assert!(c.get("restartPolicyRules").is_none(), "{c}");
    }
    c["restartPolicy"].clone()
}

#[test]
fn transient_restart_follows_the_apiservers_version_asked_once() {
    // A scripted stand-in for the Kubernetes API answering only GET /version.
    let version = |git: &'static str| {
        Scripted::start(move |_, path| match path {
            "/version" => (
                200,
                vec![("Content-Type".into(), "application/json".into())],
                json!({"major": "1", "minor": git.split('.').nth(1).unwrap(), "gitVersion": git})
                    .to_string(),
            ),
            _ => (404, vec![], String::new()),
        })
    };
    for (git, want) in [("v1.35.4", json!("Never")), ("v1.33.7", Value::Null)] {
        let api = version(git);
        let wh = Webhook::start(&[
            "--apiserver",
            &format!("http://{}", api.host),
            "--transient",
            "restart",
        ]);
        for _ in 0..2 {
            assert_eq!(mutated_restart_policy(&wh), want, "{git}");
        }
        let asked: Vec<String> = api
            .requests()
            .into_iter()
            .filter(|r| r.ends_with("/version"))
            .collect();
        assert_eq!(asked, vec!["GET /version".to_string()], "{git}");
        if want.is_null() {
            assert!(
                wh.log().contains("Kubernetes 1.33 has no container restart rules (beta and on by default from 1.35): --transient restart writes count"),
                "{}",
                wh.log()
            );
        }
    }
    // No API server to ask: the one rule (k8s::restart_rules_allowed), as inject has it
    // without --kubernetes-version: restart asked by name is taken at its word, auto writes
    // count; each said once in the log.
    let wh = Webhook::start(&["--transient", "restart"]);
    assert_eq!(mutated_restart_policy(&wh), json!("Never"));
    assert_eq!(mutated_restart_policy(&wh), json!("Never"));
    let log = wh.log();
    assert_eq!(
        log.matches("no Kubernetes API to ask for its version: an unknown Kubernetes version, taken as 1.35 or later since restart was asked by name (no --probe-namespace: a server with the ContainerRestartRules gate off would drop them unseen): --transient restart writes container restart rules")
            .count(),
        1,
        "{log}"
    );
    let wh = Webhook::start(&[]);
    assert_eq!(mutated_restart_policy(&wh), Value::Null);
    let log = wh.log();
    assert_eq!(
        log.matches("no Kubernetes API to ask for its version: the Kubernetes version is unknown: --transient auto writes count")
            .count(),
        1,
        "{log}"
    );
}

#[test]
fn an_unpinned_inject_image_is_warned_about_once_at_startup() {
    // The default image is a placeholder: the warning says so and points at the publish
    // script instead of a digest nobody can look up.
    let wh = Webhook::start(&[]);
    let log = wh.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("a placeholder nobody publishes"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0]
            .starts_with("pullcheck webhook: warning: --inject-image ghcr.io/pullcheck/pullcheck:")
            && warnings[0].contains("scripts/publish-image.sh REGISTRY/REPO:TAG")
            && warnings[0].ends_with("pass the --inject-image IMAGE@sha256:… it prints"),
        "{log}"
    );
    // Another unpinned image: how to get its digest.
    let tagged = Webhook::start(&["--inject-image", "mirror.example/pullcheck:1"]);
    let log = tagged.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("is not pinned by digest"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(
        warnings[0].contains("`crane digest mirror.example/pullcheck:1`")
            && warnings[0].ends_with("and pass --inject-image IMAGE@sha256:…"),
        "{log}"
    );
    let checker = fixture()
        .images
        .digest_only
        .digest_reference(&fixture().anon);
    let pinned = Webhook::start(&["--inject-image", &checker]);
    assert!(!pinned.log().contains("not pinned"), "{}", pinned.log());
}

#[test]
fn a_probe_namespace_without_restart_rules_to_probe_is_said_once_at_startup() {
    let wh = Webhook::start(&["--transient", "count", "--probe-namespace", "pullcheck"]);
    let log = wh.log();
    let line = "pullcheck webhook: warning: --probe-namespace pullcheck has no effect with --transient count: no restart rules are written";
    assert_eq!(log.lines().filter(|l| *l == line).count(), 1, "{log}");
}

/// The probe against a scripted stand-in for the Kubernetes API (the answers a real one
/// gives are tested in tests/integration/apiserver/restart_rules.rs; these are the ones a
/// real one can't be made to give on cue): a 503 writes count, said once, and the API is
/// not asked again within 30 s (the unit tests show it is an error, not a kept answer); a
/// 403 writes count, said once, and is kept.
#[test]
fn the_restart_rules_probe_writes_count_on_a_403_or_a_503_and_asks_once() {
    let api = |post_status: u16| {
        Scripted::start(move |method, path| match (method, path) {
            ("GET", "/version") => (
                200,
                vec![("Content-Type".into(), "application/json".into())],
                json!({"major": "1", "minor": "35", "gitVersion": "v1.35.4"}).to_string(),
            ),
            ("POST", p) if p.starts_with("/api/v1/namespaces/pc/pods") => (
                post_status,
                vec![("Content-Type".into(), "application/json".into())],
                json!({"kind": "Status", "code": post_status, "message": "scripted"}).to_string(),
            ),
            _ => (404, vec![], String::new()),
        })
    };
    for (status, line) in [
        (
            503,
            "container restart rules unknown (the dry-run probe Pod got HTTP 503: scripted): --transient auto writes count until the API server answers (asked again in 30s)",
        ),
        (
            403,
            "Kubernetes 1.35, but the dry-run probe Pod showed nothing about container restart rules (HTTP 403: scripted; grant the webhook create on pods in --probe-namespace (dry runs only: the chart's Role and ValidatingAdmissionPolicy), or leave --probe-namespace out to go by the version alone): --transient auto writes count",
        ),
    ] {
        let stand_in = api(status);
        let wh = Webhook::start(&[
            "--apiserver",
            &format!("http://{}", stand_in.host),
            "--probe-namespace",
            "pc",
            "--probe-service-account",
            "pullcheck",
        ]);
        for _ in 0..3 {
            assert_eq!(mutated_restart_policy(&wh), Value::Null, "{status}");
        }
        let posts: Vec<String> = stand_in
            .requests()
            .into_iter()
            .filter(|r| r.starts_with("POST "))
            .collect();
        assert_eq!(
            posts,
            vec!["POST /api/v1/namespaces/pc/pods?dryRun=All".to_string()],
            "{status}"
        );
        let log = wh.log_containing(line);
        assert_eq!(log.matches(line).count(), 1, "{status}: {log}");
    }
}
