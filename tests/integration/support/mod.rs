//! Test harness: real `docker-registry` (CNCF distribution 2.8) processes on
//! loopback, a token server, a test PKI and seeded images.
//!
//! ```ignore
//! let fx = support::fixture();
//! let r = &fx.token;                       // or fx.anon / fx.basic
//! let image = fx.images.oci_manifest.reference(r); // "127.0.0.1:PORT/oci/app:v1"
//! let mark = r.mark();
//! // ... run the check ...
//! let reqs = r.requests_since_matching(mark, "/v2/oci/app/");
//! ```
//!
//! * `fixture()` starts once per test process: `anon` (plain HTTP, no auth),
//!   `basic` (TLS + htpasswd, alice/alice-pw) and `token` (TLS + bearer tokens)
//!   all serve ONE storage root seeded once through `anon`.
//! * Token server policy: anonymous → pull on everything but `private/*`;
//!   alice/alice-pw → pull on everything; bob/bob-pw → everything but
//!   `private/*` (the registry then answers 401 `insufficient_scope`);
//!   wrong password → 401 from the token server.
//! * `start_dedicated(mode)` gives a private registry (own copy of the storage)
//!   that a test may `stop()`, `pause()` or `resume()`; it is killed on Drop.
//! * Every child process gets `PR_SET_PDEATHSIG=SIGKILL`.
//! * Everything listens on 127.0.0.1; `named.rs` puts servers on other addresses and host
//!   names inside the network namespace of `scripts/netns-test.sh`.

pub mod ecr_api;
pub mod hostile_server;
pub mod http;
pub mod images;
pub mod named;
pub mod ports;
pub mod process;
pub mod registry;
pub mod relay;
pub mod scripted_server;
pub mod time;
pub mod tls;
pub mod token;
pub mod webhook;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::SystemTime;

use base64::Engine as _;

pub use images::Images;
pub use registry::{Mode, Registry};
pub use token::{TokenRequest, TokenServer};

/// The `--image` the tests pass to `inject` (it has no default): pinned, so it draws no
/// warning, with the placeholder digest the examples use (see tests/integration/k8s_examples.rs).
pub const CHECKER_IMAGE: &str = "registry.example.com/mirror/pullcheck:0.1.0@sha256:d567c976667703decd261c22c94eed5e4ddbbcb07cf71cb9b06261c277e5849d";

/// `alice` / `alice-pw` (with the sentinel appended under `PULLCHECK_TEST_SENTINEL`).
pub static ALICE: LazyLock<(&str, &str)> = LazyLock::new(|| ("alice", leak(secret("alice-pw"))));
/// `bob` / `bob-pw` (with the sentinel appended under `PULLCHECK_TEST_SENTINEL`).
pub static BOB: LazyLock<(&str, &str)> = LazyLock::new(|| ("bob", leak(secret("bob-pw"))));

/// alice's OAuth2 refresh token (docker's "identity token") at the harness token server,
/// `alice-refresh-token` (with the sentinel appended under `PULLCHECK_TEST_SENTINEL`).
pub static ALICE_REFRESH_TOKEN: LazyLock<&str> =
    LazyLock::new(|| leak(secret("alice-refresh-token")));

/// `PULLCHECK_TEST_SENTINEL`, set by `scripts/secret-hygiene.sh`: a marker every password
/// the suite creates then carries, so the script can assert it never shows up in any
/// output. Unset (the normal suite): passwords are exactly as written.
pub fn sentinel() -> Option<&'static str> {
    static S: OnceLock<Option<String>> = OnceLock::new();
    S.get_or_init(|| {
        std::env::var("PULLCHECK_TEST_SENTINEL")
            .ok()
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

/// A password as the tests write it into a pull secret: the harness's own `alice-pw` and
/// `bob-pw` become `<pw>-<sentinel>` under the sentinel (what the registries and the token
/// server then accept); any other password (a wrong one, a test's own marker) is kept as
/// written, since tests may assert it byte for byte on the wire.
pub fn secret(pass: &str) -> String {
    match sentinel() {
        Some(s) if pass == "alice-pw" || pass == "bob-pw" => format!("{pass}-{s}"),
        _ => pass.to_string(),
    }
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The `service` of the shared token-mode registry.
pub const TOKEN_SERVICE: &str = "pullcheck-test-registry";

pub struct Fixture {
    pub anon: Registry,
    pub basic: Registry,
    pub token: Registry,
    /// Test CA certificate (PEM file). Signs every registry's server cert.
    pub ca_file: PathBuf,
    /// A directory holding only `ca.crt` (for `skopeo --cert-dir`, docker certs.d).
    pub ca_dir: PathBuf,
    pub images: Images,
    pub token_server: Arc<TokenServer>,
    /// The shared storage root.
    pub storage: PathBuf,
    /// Root of all harness files for this process.
    pub dir: PathBuf,
    /// The JWT signing certificate (the registries' `rootcertbundle`).
    pub signing_cert: PathBuf,
    /// Its key (PKCS#8 PEM), for another token server with the same trust.
    pub signing_key: PathBuf,
    /// htpasswd file (alice only).
    pub htpasswd: PathBuf,
    /// Server certificate + key for 127.0.0.1, ::1, localhost.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

impl Fixture {
    /// Total requests the token server has answered (all registries, all outcomes).
    pub fn token_requests(&self) -> usize {
        self.token_server.count()
    }

    /// Every token request answered so far.
    pub fn token_log(&self) -> Vec<TokenRequest> {
        self.token_server.log()
    }

    /// One GET to the token server (HTTP Basic if `creds`) for `reg`'s service and one
    /// `scope` (e.g. `repository:oci/app:pull`), whatever it answers. The request is counted
    /// like any other.
    pub fn token_request(
        &self,
        reg: &Registry,
        creds: Option<(&str, &str)>,
        scope: &str,
    ) -> http::Response {
        let service = reg.service.as_deref().expect("a token-mode registry");
        let auth = creds.map(|(u, p)| http::basic_auth(u, p));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        http::request(
            &format!("https://127.0.0.1:{}", self.token_server.port),
            Some(&self.ca_file),
            "GET",
            &format!("/token?service={service}&scope={scope}"),
            &headers,
            &[],
        )
        .expect("token request")
    }

    /// A bearer token from [`Fixture::token_request`]. Panics unless 200.
    pub fn bearer_token(&self, reg: &Registry, creds: Option<(&str, &str)>, scope: &str) -> String {
        let r = self.token_request(reg, creds, scope);
        assert_eq!(r.status, 200, "token request: {}", r.text());
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("token JSON");
        v["token"].as_str().expect("token field").to_string()
    }
}

struct Pki {
    dir: PathBuf,
    ca: tls::Ca,
}

static BASE: OnceLock<PathBuf> = OnceLock::new();
static PKI: OnceLock<Pki> = OnceLock::new();
static FIXTURE: OnceLock<Result<Fixture, String>> = OnceLock::new();
static SEQ: AtomicUsize = AtomicUsize::new(0);

/// `$TMPDIR/pullcheck-harness-<pid>`; directories of dead test processes are removed.
fn base_dir() -> &'static PathBuf {
    BASE.get_or_init(|| {
        let tmp = std::env::temp_dir();
        if let Ok(entries) = std::fs::read_dir(&tmp) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name
                    .strip_prefix("pullcheck-harness-")
                    .and_then(|p| p.parse::<u32>().ok())
                    && !process::pid_alive(pid)
                {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = tmp.join(format!("pullcheck-harness-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create harness dir");
        dir
    })
}

fn pki() -> &'static Pki {
    PKI.get_or_init(|| {
        let dir = base_dir().join("pki");
        let ca = tls::Ca::create(&dir, "pullcheck test CA");
        Pki { dir, ca }
    })
}

/// A certificate signed by the test CA (which `fixture().ca_file` trusts), for
/// `names` (IP literals become IP SANs), valid until `not_after` (may be in the
/// past: then it is expired). Returns (cert PEM, PKCS#8 key PEM).
pub fn make_cert(names: &[&str], not_after: SystemTime) -> (String, String) {
    pki().ca.issue(names, not_after)
}

/// A fresh temporary directory (removed when dropped; kept under the sentinel, for
/// `scripts/secret-hygiene.sh` to scan what the tests wrote).
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("test-")
        .disable_cleanup(sentinel().is_some())
        .tempdir_in(base_dir())
        .expect("create temp dir")
}

/// Write a Docker config / kubelet pull-secret file (`{"auths":{KEY:{username,password,auth}}}`)
/// as `dir/config.json` and return its path.
pub fn write_dockerconfigjson(dir: &Path, entries: &[(&str, &str, &str)]) -> PathBuf {
    let mut auths = serde_json::Map::new();
    for (key, user, pass) in entries {
        let pass = secret(pass);
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        auths.insert(
            key.to_string(),
            serde_json::json!({"username": user, "password": pass, "auth": auth}),
        );
    }
    let path = dir.join("config.json");
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&serde_json::json!({"auths": auths})).unwrap(),
    )
    .expect("write config.json");
    path
}

/// Write a `.dockerconfigjson` pull secret into `dir/<name>` with one `auths` entry per
/// `(key, user, password)`, each with only `auth` (through [`secret`]: under
/// `PULLCHECK_TEST_SENTINEL` the harness's own passwords carry the sentinel); returns its
/// path as a String.
pub fn pull_secret(dir: &Path, name: &str, entries: &[(&str, &str, &str)]) -> String {
    let mut auths = serde_json::Map::new();
    for (key, user, pass) in entries {
        let pass = secret(pass);
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        auths.insert(key.to_string(), serde_json::json!({ "auth": auth }));
    }
    let path = dir.join(name);
    std::fs::write(&path, serde_json::json!({ "auths": auths }).to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// The shared fixture, started on first use.
pub fn fixture() -> &'static Fixture {
    let r = FIXTURE.get_or_init(|| {
        std::panic::catch_unwind(start_fixture).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into())
        })
    });
    match r {
        Ok(f) => f,
        Err(msg) => panic!("test fixture failed to start: {msg}"),
    }
}

fn write_pem(path: &Path, pem: &str) {
    std::fs::write(path, pem).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn start_fixture() -> Fixture {
    registry::registry_binary(); // readable panic first if missing
    let base = base_dir().clone();
    let pki = pki();
    let ca_file = pki.ca.cert_file.clone();
    let ca_dir = base.join("certs.d");
    std::fs::create_dir_all(&ca_dir).unwrap();
    std::fs::copy(&ca_file, ca_dir.join("ca.crt")).unwrap();

    let far = SystemTime::now() + std::time::Duration::from_secs(30 * 86_400);
    let (cert, key) = make_cert(&["127.0.0.1", "::1", "localhost"], far);
    let server_cert = pki.dir.join("server.crt");
    let server_key = pki.dir.join("server.key");
    write_pem(&server_cert, &cert);
    write_pem(&server_key, &key);

    let (signing_cert, signing_key) =
        tls::self_signed(&pki.dir, "token-signer", "pullcheck token signer", false);
    let token_server = TokenServer::start(
        &cert,
        &key,
        &std::fs::read_to_string(&signing_cert).unwrap(),
        &std::fs::read_to_string(&signing_key).unwrap(),
    );

    let htpasswd = base.join("htpasswd");
    let out = Command::new("htpasswd")
        .args(["-Bbn", ALICE.0, ALICE.1])
        .output()
        .unwrap_or_else(|e| panic!("running htpasswd (install apache2-utils): {e}"));
    assert!(
        out.status.success(),
        "htpasswd failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&htpasswd, &out.stdout).unwrap();

    let storage = base.join("storage");
    let setup = |mode: Mode, name: &str| registry::Setup {
        mode,
        bind: named::Bind::loopback(),
        dir: base.join(name),
        storage: storage.clone(),
        ca_file: ca_file.clone(),
        tls: (mode != Mode::Anon).then(|| (server_cert.clone(), server_key.clone())),
        htpasswd: (mode == Mode::Basic).then(|| htpasswd.clone()),
        token: (mode == Mode::Token).then(|| {
            (
                token_server.clone(),
                TOKEN_SERVICE.to_string(),
                signing_cert.clone(),
            )
        }),
    };

    // Seed through the anonymous registry before the others start, so no
    // process holds stale state about the storage.
    let anon = Registry::start(setup(Mode::Anon, "anon"));
    let images = images::seed(&anon);
    let basic = Registry::start(setup(Mode::Basic, "basic"));
    let token = Registry::start(setup(Mode::Token, "token"));

    Fixture {
        anon,
        basic,
        token,
        ca_file,
        ca_dir,
        images,
        token_server,
        storage,
        dir: base,
        signing_cert,
        signing_key,
        htpasswd,
        server_cert,
        server_key,
    }
}

/// A registry of its own (copy of the seeded storage, same images and digests)
/// that the test may stop / pause. Token mode uses the shared token server with
/// a service name of its own (`Registry::token_requests` counts per service).
pub fn start_dedicated(mode: Mode) -> Registry {
    let fx = fixture();
    start_dedicated_inner(mode, (fx.server_cert.clone(), fx.server_key.clone()))
}

/// Like `start_dedicated` (Basic or Token mode) but serving the given TLS
/// certificate and key (PEM), e.g. from `make_cert(&["wrong.example"], ..)`.
pub fn start_dedicated_with_cert(mode: Mode, cert_pem: &str, key_pem: &str) -> Registry {
    assert_ne!(mode, Mode::Anon, "the anonymous registry speaks plain HTTP");
    fixture();
    start_dedicated_inner(mode, cert_files(cert_pem, key_pem))
}

/// `cert_pem` and `key_pem` written to a directory of their own, as
/// (`server.crt`, `server.key`).
fn cert_files(cert_pem: &str, key_pem: &str) -> (PathBuf, PathBuf) {
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let dir = base_dir().join(format!("custom-cert-{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    write_pem(&cert, cert_pem);
    write_pem(&key, key_pem);
    (cert, key)
}

fn start_dedicated_inner(mode: Mode, tls: (PathBuf, PathBuf)) -> Registry {
    let fx = fixture();
    start_dedicated_on(
        mode,
        (mode != Mode::Anon).then_some(tls),
        named::Bind::loopback(),
        fx.token_server.clone(),
    )
}

/// A dedicated registry on `bind` serving `tls` (cert, key files; `None`: plain HTTP), in
/// token mode with `token_server` as its realm.
fn start_dedicated_on(
    mode: Mode,
    tls: Option<(PathBuf, PathBuf)>,
    bind: named::Bind,
    token_server: Arc<TokenServer>,
) -> Registry {
    let fx = fixture();
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let dir = fx.dir.join(format!("dedicated-{n}"));
    let storage = dir.join("storage");
    std::fs::create_dir_all(&storage).unwrap();
    let out = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fx.storage.display()))
        .arg(&storage)
        .output()
        .expect("run cp");
    assert!(
        out.status.success(),
        "copy storage: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Registry::start(registry::Setup {
        mode,
        bind,
        dir: dir.join("registry"),
        storage,
        ca_file: fx.ca_file.clone(),
        tls,
        htpasswd: (mode == Mode::Basic).then(|| fx.htpasswd.clone()),
        token: (mode == Mode::Token).then(|| {
            (
                token_server,
                format!("pullcheck-dedicated-{n}"),
                fx.signing_cert.clone(),
            )
        }),
    })
}
