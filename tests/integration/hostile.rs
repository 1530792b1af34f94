//! The hostile-registry suite (its threat model and bounds: `docs/hardening.md`): the real
//! `pullcheck check` binary against scripted peers that misbehave in ways a real registry
//! can't be made to (see `support/hostile_server.rs`).
//!
//! Every scenario asserts
//! - the exact verdict and exit code;
//! - a correctness deadline on wall time (generous: these are bounds, not performance
//!   targets; the child is killed when it passes [`KILL_AFTER`]);
//! - a cap on the child's peak memory (its `VmHWM`, polled from `/proc`; see
//!   [`run_measured`] for why not `wait4`'s `ru_maxrss`);
//! - that no credential leaves for the wrong host: the check gets a pull secret for the
//!   hostile registry with a sentinel password, every `Authorization` header each server
//!   receives is recorded, only the registry itself (Basic, or the bearer token its realm
//!   issued) and its validated realm (Basic) ever see one, and neither the password nor the
//!   token shows up in the child's stdout or stderr.
//!
//! Each scenario's measured wall time and peak RSS are printed and collected in
//! `$CARGO_TARGET_TMPDIR/hostile-bounds.md` (`cargo test --test integration hostile --
//! --nocapture` shows the rows as they finish).
//!
//! Not covered here: a realm on loopback announced by a registry that is *not* on a special
//! address. Every test server is on 127.0.0.1, so the registry always is special and may
//! use a loopback realm; the guard's unit tests (`src/registry/guard.rs`) cover that rule.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use sha2::Digest as _;

use crate::support::hostile_server::{Flow, Out, Seen, Server, Transport, hang};
use crate::support::process::Run;
use crate::support::tls::Ca;

/// Wall-time bound of every scenario.
const MAX_WALL: Duration = Duration::from_secs(15);
/// The child is killed (and the scenario fails) after this long.
const KILL_AFTER: Duration = Duration::from_secs(45);
/// Peak-RSS bound of every scenario, in KiB.
const MAX_RSS_KIB: u64 = 64 * 1024;

const USER: &str = "hostile-user";
/// The pull secret's password: must never reach any host but the registry and its realm,
/// and never appear in output.
const SENTINEL: &str = "S3NTINEL-pw-do-not-leak-4f1c";
/// The bearer token the scripted realms issue.
const TOKEN: &str = "hostile-bearer-token-9d2e";
const REPO: &str = "app";
const TAG: &str = "v1";

// ---------------------------------------------------------------------------------------
// PKI, images, credentials
// ---------------------------------------------------------------------------------------

struct Pki {
    _dir: tempfile::TempDir,
    ca: Ca,
    loopback: (String, String),
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let dir = crate::support::temp_dir();
        let ca = Ca::create(&dir.path().join("ca"), "pullcheck hostile-suite CA");
        let loopback = ca.issue(&["127.0.0.1", "localhost"], in_days(30));
        Pki {
            _dir: dir,
            ca,
            loopback,
        }
    })
}

fn in_days(days: i64) -> SystemTime {
    if days >= 0 {
        SystemTime::now() + Duration::from_secs(days as u64 * 86_400)
    } else {
        SystemTime::now() - Duration::from_secs((-days) as u64 * 86_400)
    }
}

fn tls() -> Transport {
    let (cert_pem, key_pem) = pki().loopback.clone();
    Transport::Tls { cert_pem, key_pem }
}

fn basic_value() -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{SENTINEL}"))
    )
}

fn bearer_value() -> String {
    format!("Bearer {TOKEN}")
}

/// A small single-platform OCI image manifest, its digest and media type.
#[derive(Clone)]
struct Manifest {
    body: Vec<u8>,
    digest: String,
    media_type: &'static str,
}

fn sha256(bytes: &[u8]) -> String {
    let d = sha2::Sha256::digest(bytes);
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn manifest() -> Manifest {
    let config =
        br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
    let body = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": sha256(config),
            "size": config.len(),
        },
        "layers": [],
    }))
    .unwrap();
    Manifest {
        digest: sha256(&body),
        body,
        media_type: "application/vnd.oci.image.manifest.v1+json",
    }
}

/// Answer a manifest request with `m` (headers only for HEAD).
fn serve_manifest(out: &mut Out, m: &Manifest) -> io::Result<Flow> {
    out.reply(
        200,
        &[
            ("Content-Type", m.media_type),
            ("Docker-Content-Digest", &m.digest),
        ],
        &m.body,
    )?;
    Ok(Flow::KeepAlive)
}

fn manifest_unknown(out: &mut Out) -> io::Result<Flow> {
    out.reply(
        404,
        &[("Content-Type", "application/json")],
        br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
    )?;
    Ok(Flow::KeepAlive)
}

// ---------------------------------------------------------------------------------------
// Scripted registries and realms
// ---------------------------------------------------------------------------------------

/// How a scripted registry authenticates.
#[derive(Clone)]
enum Auth {
    /// `Basic`: the manifest request must carry the pull secret.
    Basic,
    /// `Bearer`: these `WWW-Authenticate` lines; the manifest request must carry [`TOKEN`].
    Bearer(Vec<String>),
}

fn bearer(realm: &str) -> Auth {
    Auth::Bearer(vec![format!(
        r#"Bearer realm="{realm}",service="hostile",scope="repository:{REPO}:pull""#
    )])
}

/// A registry that authenticates as `auth` demands, then lets `manifests` answer every
/// `/v2/<repo>/manifests/<ref>` request; anything else is a 404.
fn registry(
    auth: Auth,
    manifests: impl Fn(&Seen, &mut Out) -> io::Result<Flow> + Send + Sync + 'static,
) -> impl Fn(&Seen, &mut Out) -> io::Result<Flow> + Send + Sync + 'static {
    move |req, out| {
        let authorized = match &auth {
            Auth::Basic => req.authorization.as_deref() == Some(basic_value().as_str()),
            Auth::Bearer(_) => req.authorization.as_deref() == Some(bearer_value().as_str()),
        };
        if !authorized {
            let lines: Vec<String> = match &auth {
                Auth::Basic => vec![r#"Basic realm="hostile""#.to_string()],
                Auth::Bearer(lines) => lines.clone(),
            };
            let mut headers: Vec<(&str, &str)> = vec![("Content-Type", "application/json")];
            headers.extend(lines.iter().map(|l| ("WWW-Authenticate", l.as_str())));
            out.reply(
                401,
                &headers,
                br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
            )?;
            return Ok(Flow::KeepAlive);
        }
        if req.path() == "/v2/" {
            out.reply(200, &[("Content-Type", "application/json")], b"{}")?;
            return Ok(Flow::KeepAlive);
        }
        if req.path().starts_with(&format!("/v2/{REPO}/manifests/")) {
            return manifests(req, out);
        }
        out.reply(404, &[], b"")?;
        Ok(Flow::KeepAlive)
    }
}

/// A realm that hands out [`TOKEN`] to anyone.
fn token_realm() -> impl Fn(&Seen, &mut Out) -> io::Result<Flow> + Send + Sync + 'static {
    |_, out| {
        out.reply(
            200,
            &[("Content-Type", "application/json")],
            format!(r#"{{"token":"{TOKEN}","expires_in":300}}"#).as_bytes(),
        )?;
        Ok(Flow::KeepAlive)
    }
}

// ---------------------------------------------------------------------------------------
// Running the binary with bounds
// ---------------------------------------------------------------------------------------

/// One finished run with its measured bounds.
struct Measured {
    run: Run,
    wall: Duration,
    max_rss_kib: u64,
    killed: bool,
}

/// The peak resident set size (`VmHWM`, KiB) of a live process, if it is still there.
fn vm_hwm_kib(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Run the binary and measure its peak memory; kill it after `kill_after`.
///
/// Peak RSS is `VmHWM` from `/proc/<pid>/status`, polled every millisecond while the child
/// runs (a high-water mark, so a poll after the peak sees it). `wait4`'s `ru_maxrss` can't
/// be used: at `exec` the kernel folds the *old* address space's high-water mark into the
/// child's, and a child spawned with vfork/`posix_spawn` from this big multi-threaded
/// test process inherits ours (~190 MiB), whatever pullcheck itself uses.
fn run_measured(args: &[String], kill_after: Duration) -> Measured {
    let mut cmd = crate::support::process::pullcheck();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn pullcheck");
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = io::Read::read_to_end(&mut stdout, &mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = io::Read::read_to_end(&mut stderr, &mut s);
        s
    });
    let mut status: libc::c_int = 0;
    let mut peak_kib = 0;
    let mut killed = false;
    loop {
        if let Some(hwm) = vm_hwm_kib(pid) {
            peak_kib = peak_kib.max(hwm);
        }
        // SAFETY: pid is our own unreaped child; status is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        assert!(r == 0, "waitpid: {}", io::Error::last_os_error());
        if start.elapsed() > kill_after && !killed {
            // Not reaped yet, so the pid is still our child's.
            crate::support::process::signal(pid as u32, libc::SIGKILL);
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let wall = start.elapsed();
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
    // std never waits on a Child on drop; it was reaped above.
    drop(child);
    Measured {
        run: Run {
            code,
            stdout,
            stderr,
        },
        wall,
        max_rss_kib: peak_kib,
        killed,
    }
}

struct Row {
    name: String,
    verdict: String,
    code: i32,
    wall: Duration,
    rss_kib: u64,
}

static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

fn table_path() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hostile-bounds.md")
}

/// Record one scenario's bounds, print its row and rewrite the table file.
fn record(row: Row) {
    println!(
        "hostile | {:<44} | {:<16} | {:>2} | {:>7.2} s | {:>6.1} MiB",
        row.name,
        row.verdict,
        row.code,
        row.wall.as_secs_f64(),
        row.rss_kib as f64 / 1024.0
    );
    let mut rows = ROWS.lock().unwrap_or_else(|e| e.into_inner());
    rows.retain(|r| r.name != row.name);
    rows.push(row);
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text =
        "| scenario | verdict | exit | wall (s) | peak RSS (MiB) |\n|---|---|---|---|---|\n"
            .to_string();
    for r in rows.iter() {
        text.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.1} |\n",
            r.name,
            r.verdict,
            r.code,
            r.wall.as_secs_f64(),
            r.rss_kib as f64 / 1024.0
        ));
    }
    let _ = std::fs::write(table_path(), text);
}

/// What a server may receive in `Authorization`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    /// The registry the pull secret is for: Basic with the secret, or the issued token.
    Registry,
    /// Its validated token realm: Basic with the secret.
    Realm,
    /// Anything else: nothing at all.
    Stranger,
}

/// One scenario. A builder: nothing runs until [`Case::run`], so one left unrun is a bug.
#[must_use = "a Case does nothing until .run()"]
struct Case<'a> {
    name: &'a str,
    /// The registry the image and the pull secret name.
    registry: &'a Server,
    /// Other servers and what they may receive.
    others: Vec<(&'a Server, Role)>,
    /// Reference after `host/`, e.g. `app:v1`.
    image: String,
    /// Extra flags (platform, deadlines).
    args: Vec<&'a str>,
    want_code: i32,
    want_verdict: &'a str,
    /// Text the verdict's detail must contain.
    want_detail: &'a str,
}

fn run_case(c: Case) -> Run {
    let dir = crate::support::temp_dir();
    let secret = crate::support::pull_secret(
        dir.path(),
        "secret.json",
        &[(&c.registry.host, USER, SENTINEL)],
    );
    let ca = pki().ca.cert_file.to_string_lossy().into_owned();
    let mut args: Vec<String> = [
        "check",
        "--output",
        "json",
        "--no-docker-config",
        "--node-credentials",
        "none",
        "--ca-file",
        &ca,
        "--pull-secrets",
        &secret,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if c.registry.base.starts_with("http://") {
        args.extend(["--insecure-registry".to_string(), c.registry.host.clone()]);
    }
    args.extend(c.args.iter().map(|s| s.to_string()));
    args.push(format!("{}/{}", c.registry.host, c.image));
    let m = run_measured(&args, KILL_AFTER);
    let r = &m.run;
    let verdict = serde_json::from_str::<serde_json::Value>(&r.stdout)
        .ok()
        .and_then(|v| v["images"][0]["verdict"].as_str().map(str::to_string))
        .unwrap_or_else(|| "(no JSON)".into());
    record(Row {
        name: c.name.to_string(),
        verdict: verdict.clone(),
        code: r.code,
        wall: m.wall,
        rss_kib: m.max_rss_kib,
    });
    assert!(
        !m.killed,
        "{}: still running after {KILL_AFTER:?}, killed\nstderr:\n{}",
        c.name, r.stderr
    );
    r.assert_code(c.want_code);
    assert_eq!(verdict, c.want_verdict, "{}: {}", c.name, r.stdout);
    let detail = r.image(0)["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        detail.contains(c.want_detail),
        "{}: detail {detail:?} lacks {:?}",
        c.name,
        c.want_detail
    );
    assert!(
        m.wall < MAX_WALL,
        "{}: took {:?} (bound {MAX_WALL:?})",
        c.name,
        m.wall
    );
    assert!(
        m.max_rss_kib < MAX_RSS_KIB,
        "{}: peak RSS {} KiB (bound {MAX_RSS_KIB} KiB)",
        c.name,
        m.max_rss_kib
    );
    // Credentials: only to the registry and its realm, and never in output.
    let mut all = vec![(c.registry, Role::Registry)];
    all.extend(c.others.iter().copied());
    for (server, role) in all {
        for a in server.authorizations() {
            let ok = match role {
                Role::Registry => a == basic_value() || a == bearer_value(),
                Role::Realm => a == basic_value(),
                Role::Stranger => false,
            };
            assert!(
                ok,
                "{}: {} ({role:?}) received Authorization {a:?}; requests: {:?}",
                c.name,
                server.host,
                server.lines()
            );
        }
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{SENTINEL}"));
    for (stream, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        for secret in [SENTINEL, b64.as_str(), TOKEN] {
            assert!(
                !text.contains(secret),
                "{}: a secret appears on {stream}:\n{text}",
                c.name
            );
        }
    }
    Run {
        code: r.code,
        stdout: r.stdout.clone(),
        stderr: r.stderr.clone(),
    }
}

/// A case with the usual defaults: image `app:v1`, no other servers.
fn case<'a>(name: &'a str, registry: &'a Server) -> Case<'a> {
    Case {
        name,
        registry,
        others: vec![],
        image: format!("{REPO}:{TAG}"),
        args: vec![],
        want_code: 0,
        want_verdict: "pullable",
        want_detail: "",
    }
}

impl<'a> Case<'a> {
    fn args(mut self, a: &[&'a str]) -> Self {
        self.args.extend_from_slice(a);
        self
    }
    fn image(mut self, i: String) -> Self {
        self.image = i;
        self
    }
    fn with(mut self, s: &'a Server, role: Role) -> Self {
        self.others.push((s, role));
        self
    }
    fn expect(mut self, code: i32, verdict: &'a str, detail: &'a str) -> Self {
        self.want_code = code;
        self.want_verdict = verdict;
        self.want_detail = detail;
        self
    }
    fn run(self) -> Run {
        run_case(self)
    }
}

/// HEAD first (no platform check).
const HEAD_FIRST: &[&str] = &["--platform", "any"];
/// GET first (the platform check needs the body).
const GET_FIRST: &[&str] = &["--platform", "linux/amd64"];
/// Short deadlines for peers that hang.
const SHORT: &[&str] = &["--timeout", "8", "--request-timeout", "2"];

fn manifest_requests(s: &Server) -> Vec<String> {
    s.lines()
        .into_iter()
        .filter(|l| l.contains("/manifests/"))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Slow and endless peers
// ---------------------------------------------------------------------------------------

#[test]
fn headers_trickled_byte_by_byte_but_complete() {
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |_, out| {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nDocker-Content-Digest: {}\r\nContent-Length: {}\r\n\r\n",
                m.media_type,
                m.digest,
                m.body.len()
            );
            out.trickle(head.as_bytes(), Duration::from_millis(3))?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("headers trickled byte by byte (complete)", &reg)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
}

#[test]
fn headers_trickled_forever_hit_the_request_deadline() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, |_, out| {
            out.raw(b"HTTP/1.1 200 OK\r\n")?;
            // One header byte every 50 ms, never ending (until the peer leaves).
            for _ in 0..1200 {
                out.trickle(b"X", Duration::from_millis(50))?;
            }
            Ok(Flow::Close)
        }),
    );
    case("headers trickled forever", &reg)
        .args(HEAD_FIRST)
        .args(SHORT)
        .expect(20, "transient", "timed out")
        .run();
}

#[test]
fn endless_headers_at_full_speed_are_refused() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, |_, out| {
            out.raw(b"HTTP/1.1 200 OK\r\n")?;
            let line = format!("X-Junk: {}\r\n", "j".repeat(1000));
            out.repeat(line.as_bytes(), 100 << 20)?;
            Ok(Flow::Close)
        }),
    );
    let before = reg.bytes_written();
    case("endless headers at full speed", &reg)
        .args(HEAD_FIRST)
        .expect(20, "transient", "")
        .run();
    assert!(reg.bytes_written() - before < 100 << 20);
}

#[test]
fn endless_manifest_body_is_cut_at_the_manifest_cap() {
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |_, out| {
            out.raw(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nDocker-Content-Digest: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
                    m.media_type, m.digest
                )
                .as_bytes(),
            )?;
            let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
            out.repeat(chunk.as_bytes(), 1 << 40)?;
            Ok(Flow::Close)
        }),
    );
    case("endless manifest body (GET)", &reg)
        .args(GET_FIRST)
        .expect(11, "not_found", "larger than")
        .run();
    assert!(
        reg.bytes_written() < 50 << 20,
        "{} bytes written",
        reg.bytes_written()
    );
}

#[test]
fn endless_error_body_is_cut_and_the_status_kept() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, |_, out| {
            out.raw(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")?;
            let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
            out.repeat(chunk.as_bytes(), 1 << 40)?;
            Ok(Flow::Close)
        }),
    );
    case("endless 404 error body (GET)", &reg)
        .args(GET_FIRST)
        .expect(11, "not_found", "HTTP 404")
        .run();
    assert!(reg.bytes_written() < 50 << 20);
}

#[test]
fn endless_body_on_the_ping_does_not_matter() {
    let m = manifest();
    let reg = Server::start(tls(), move |req, out| {
        if req.path() == "/v2/" {
            out.raw(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")?;
            let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
            out.repeat(chunk.as_bytes(), 1 << 40)?;
            return Ok(Flow::Close);
        }
        serve_manifest(out, &m)
    });
    case("endless body on GET /v2/", &reg)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
    assert!(reg.bytes_written() < 50 << 20);
}

fn fifty_megabytes(with_length: bool) -> Server {
    let m = manifest();
    Server::start(
        tls(),
        registry(Auth::Basic, move |_, out| {
            const SIZE: u64 = 50 << 20;
            let framing = if with_length {
                format!("Content-Length: {SIZE}")
            } else {
                "Transfer-Encoding: chunked".to_string()
            };
            out.raw(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nDocker-Content-Digest: {}\r\n{framing}\r\n\r\n",
                    m.media_type, m.digest
                )
                .as_bytes(),
            )?;
            if out.is_head() {
                return Ok(Flow::KeepAlive);
            }
            let piece = vec![b' '; 0x10000];
            if with_length {
                out.repeat(&piece, SIZE)?;
            } else {
                let mut chunk = b"10000\r\n".to_vec();
                chunk.extend_from_slice(&piece);
                chunk.extend_from_slice(b"\r\n");
                out.repeat(&chunk, SIZE)?;
                out.raw(b"0\r\n\r\n")?;
            }
            Ok(Flow::Close)
        }),
    )
}

#[test]
fn fifty_megabyte_manifest_with_length_is_not_found_unread() {
    let reg = fifty_megabytes(true);
    case("50 MB manifest, Content-Length", &reg)
        .args(GET_FIRST)
        .expect(11, "not_found", "larger than 4393216 bytes")
        .run();
    assert!(reg.bytes_written() < 50 << 20, "{}", reg.bytes_written());
}

#[test]
fn fifty_megabyte_manifest_chunked_is_not_found_unread() {
    let reg = fifty_megabytes(false);
    case("50 MB manifest, chunked", &reg)
        .args(GET_FIRST)
        .expect(11, "not_found", "larger than 4393216 bytes")
        .run();
    assert!(reg.bytes_written() < 50 << 20, "{}", reg.bytes_written());
}

// ---------------------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------------------

#[test]
fn redirect_loop_is_cut() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, |req, out| {
            let next = if req.target.ends_with("/a") {
                format!("/v2/{REPO}/manifests/b")
            } else {
                format!("/v2/{REPO}/manifests/a")
            };
            out.reply(307, &[("Location", &next)], b"")?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("redirect loop", &reg)
        .args(HEAD_FIRST)
        .expect(20, "transient", "too many redirects")
        .run();
    // The unauthenticated probe (401), then at most MAX_REDIRECTS (10) requests in one
    // chain, like Go's client (containerd): the first and 9 hops; the 10th hop is refused.
    // Never retried.
    assert_eq!(manifest_requests(&reg).len(), 11, "{:?}", reg.lines());
}

#[test]
fn redirect_to_the_metadata_address_is_blocked() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, |_, out| {
            out.reply(
                307,
                &[("Location", "https://169.254.169.254/latest/meta-data/")],
                b"",
            )?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("redirect to 169.254.169.254", &reg)
        .args(HEAD_FIRST)
        .expect(13, "denied", "blocked by pullcheck's address guard")
        .run();
}

#[test]
fn redirect_to_another_host_carries_no_authorization() {
    let m = manifest();
    let elsewhere = Server::start(tls(), move |_, out| serve_manifest(out, &m));
    let target = elsewhere.base.clone();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |req, out| {
            out.reply(
                307,
                &[("Location", &format!("{target}{}", req.target))],
                b"",
            )?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("redirect to another host (Basic auth)", &reg)
        .with(&elsewhere, Role::Stranger)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
    assert!(
        !elsewhere.seen().is_empty(),
        "the redirect target was never asked"
    );
    assert!(reg.authorizations().contains(&basic_value()));
}

#[test]
fn redirect_from_https_to_plain_http_is_blocked() {
    let m = manifest();
    let plain = Server::start(Transport::Plain, move |_, out| serve_manifest(out, &m));
    let target = plain.base.clone();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |req, out| {
            out.reply(
                307,
                &[("Location", &format!("{target}{}", req.target))],
                b"",
            )?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("redirect https -> http", &reg)
        .with(&plain, Role::Stranger)
        .args(HEAD_FIRST)
        .expect(13, "denied", "redirect from https to")
        .run();
    assert!(plain.seen().is_empty(), "{:?}", plain.lines());
}

// ---------------------------------------------------------------------------------------
// Token realms
// ---------------------------------------------------------------------------------------

fn bearer_registry(realm: &str) -> Server {
    let m = manifest();
    Server::start(
        tls(),
        registry(bearer(realm), move |_, out| serve_manifest(out, &m)),
    )
}

#[test]
fn bearer_baseline_works() {
    let realm = Server::start(tls(), token_realm());
    let reg = bearer_registry(&format!("{}/token", realm.base));
    case("bearer baseline (control)", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
    assert_eq!(realm.authorizations(), vec![basic_value()]);
}

#[test]
fn realm_on_the_metadata_address_is_blocked() {
    let reg = bearer_registry("https://169.254.169.254/latest/api/token");
    case("realm on 169.254.169.254", &reg)
        .args(HEAD_FIRST)
        .expect(13, "denied", "blocked by pullcheck's address guard")
        .run();
}

#[test]
fn realm_over_plain_http_for_an_https_registry_is_blocked() {
    let realm = Server::start(Transport::Plain, token_realm());
    let reg = bearer_registry(&format!("{}/token", realm.base));
    case("realm plain http, registry https", &reg)
        .with(&realm, Role::Stranger)
        .args(HEAD_FIRST)
        .expect(13, "denied", "plain http")
        .run();
    assert!(realm.seen().is_empty());
}

#[test]
fn realm_with_userinfo_is_blocked() {
    let realm = Server::start(tls(), token_realm());
    let reg = bearer_registry(&format!("https://admin:hunter2@{}/token", realm.host));
    let r = case("realm with userinfo", &reg)
        .with(&realm, Role::Stranger)
        .args(HEAD_FIRST)
        .expect(13, "denied", "userinfo")
        .run();
    assert!(realm.seen().is_empty());
    assert!(!r.stdout.contains("hunter2") && !r.stderr.contains("hunter2"));
}

#[test]
fn realm_with_an_unsupported_scheme_is_blocked() {
    let reg = bearer_registry("file:///etc/shadow");
    case("realm with scheme file:", &reg)
        .args(HEAD_FIRST)
        .expect(13, "denied", "scheme")
        .run();
    let reg = bearer_registry("gopher://127.0.0.1:70/token");
    case("realm with scheme gopher:", &reg)
        .args(HEAD_FIRST)
        .expect(13, "denied", "scheme")
        .run();
}

#[test]
fn token_endpoint_that_hangs_hits_the_deadline() {
    let realm = Server::start(tls(), |_, _| hang(Duration::from_secs(30)));
    let reg = bearer_registry(&format!("{}/token", realm.base));
    case("token endpoint hangs", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .args(SHORT)
        .expect(20, "transient", "timed out")
        .run();
}

#[test]
fn token_endpoint_returning_garbage_is_transient() {
    let realm = Server::start(tls(), |_, out| {
        out.reply(
            200,
            &[("Content-Type", "text/html")],
            b"<html>\x00\xff{token:",
        )?;
        Ok(Flow::KeepAlive)
    });
    let reg = bearer_registry(&format!("{}/token", realm.base));
    case("token endpoint returns garbage", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .expect(20, "transient", "token response is not JSON")
        .run();
}

#[test]
fn token_endpoint_returning_a_ten_megabyte_token_is_transient() {
    let realm = Server::start(tls(), |_, out| {
        let mut body = br#"{"token":""#.to_vec();
        body.extend(std::iter::repeat_n(b'A', 10 << 20));
        body.extend_from_slice(br#""}"#);
        out.reply(200, &[("Content-Type", "application/json")], &body)?;
        Ok(Flow::KeepAlive)
    });
    let reg = bearer_registry(&format!("{}/token", realm.base));
    case("token endpoint returns a 10 MB token", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .expect(20, "transient", "token response larger than")
        .run();
    assert_eq!(
        manifest_requests(&reg).len(),
        1,
        "only the unauthenticated probe: no token, so no authenticated request: {:?}",
        reg.lines()
    );
}

#[test]
fn token_endpoint_answering_401_forever_is_denied() {
    let realm = Server::start(tls(), |_, out| {
        out.reply(
            401,
            &[
                ("Content-Type", "application/json"),
                ("WWW-Authenticate", r#"Basic realm="token""#),
            ],
            br#"{"errors":[{"code":"UNAUTHORIZED","message":"nope"}]}"#,
        )?;
        Ok(Flow::KeepAlive)
    });
    let reg = bearer_registry(&format!("{}/token", realm.base));
    case("token endpoint 401 forever", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .expect(13, "denied", "token endpoint refused the credentials")
        .run();
    assert_eq!(realm.seen().len(), 1, "a 401 is not retried");
}

#[test]
fn registry_answering_401_to_a_valid_token_forever_is_denied() {
    let realm = Server::start(tls(), token_realm());
    let realm_url = format!("{}/token", realm.base);
    let reg = Server::start(tls(), move |_, out| {
        let ch = format!(r#"Bearer realm="{realm_url}",service="hostile",error="invalid_token""#);
        out.reply(401, &[("WWW-Authenticate", &ch)], b"")?;
        Ok(Flow::KeepAlive)
    });
    case("registry 401 even with a token", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .expect(13, "denied", "credentials refused")
        .run();
    assert!(manifest_requests(&reg).len() <= 2, "{:?}", reg.lines());
}

#[test]
fn challenges_with_several_schemes_and_odd_quoting() {
    let realm = Server::start(tls(), token_realm());
    let lines = vec![
        r#"Newauth realm="apps", type=1, title="Login to \"apps\"""#.to_string(),
        r#"Digest realm="d", nonce="n,with,commas", qop="auth""#.to_string(),
        r#"Basic realm="simple""#.to_string(),
        format!(
            "bEaReR   ReAlM=\"{}/tok\\en\" ,\tservice=\"svc \\\"quoted\\\" \\\\ x\",scope=\"repository:{REPO}:pull\"",
            realm.base
        ),
    ];
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Bearer(lines), move |_, out| serve_manifest(out, &m)),
    );
    case("several schemes, odd quoting", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
    let asked = realm.seen();
    assert_eq!(asked.len(), 1, "{:?}", realm.lines());
    assert_eq!(
        asked[0].path(),
        "/token",
        "the escaped realm path is unescaped"
    );
    assert_eq!(
        asked[0].query("service").as_deref(),
        Some(r#"svc "quoted" \ x"#)
    );
    assert_eq!(
        asked[0].query("scope").as_deref(),
        Some(format!("repository:{REPO}:pull").as_str())
    );
}

#[test]
fn challenges_packed_into_one_line_are_not_split() {
    // containerd reads one challenge per header line: in a packed line only the first
    // scheme counts, so this registry gets Basic and its realm is never asked.
    let realm = Server::start(tls(), token_realm());
    let packed = format!(
        r#"Basic realm="registry", Bearer realm="{}/token",service="hostile""#,
        realm.base
    );
    let m = manifest();
    let reg = Server::start(tls(), move |req, out| {
        let ok = req.authorization.as_deref() == Some(basic_value().as_str())
            || req.authorization.as_deref() == Some(bearer_value().as_str());
        if !ok {
            out.reply(401, &[("WWW-Authenticate", &packed)], b"")?;
            return Ok(Flow::KeepAlive);
        }
        if req.path() == "/v2/" {
            out.reply(200, &[], b"{}")?;
            return Ok(Flow::KeepAlive);
        }
        serve_manifest(out, &m)
    });
    case("two schemes packed in one header line", &reg)
        .with(&realm, Role::Realm)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
    assert!(realm.seen().is_empty(), "{:?}", realm.lines());
    assert!(reg.authorizations().iter().all(|a| *a == basic_value()));
}

// ---------------------------------------------------------------------------------------
// Status storms
// ---------------------------------------------------------------------------------------

#[test]
fn retry_after_an_hour_gives_up_at_once() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, |_, out| {
            out.reply(
                429,
                &[
                    ("Retry-After", "3600"),
                    ("Content-Type", "application/json"),
                ],
                br#"{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}"#,
            )?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("429 with Retry-After: 3600", &reg)
        .args(HEAD_FIRST)
        .expect(20, "transient", "HTTP 429")
        .run();
    // The unauthenticated probe (401), then one HEAD answered 429: no waiting an hour.
    assert_eq!(manifest_requests(&reg).len(), 2, "{:?}", reg.lines());
}

#[test]
fn server_error_storm_is_retried_a_bounded_number_of_times() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, |_, out| {
            out.reply(500, &[], b"internal error")?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("500 storm", &reg)
        .args(HEAD_FIRST)
        .expect(20, "transient", "HTTP 500")
        .run();
    assert_eq!(
        manifest_requests(&reg).len(),
        5,
        "the probe (401), then MAX_ATTEMPTS HEADs: {:?}",
        reg.lines()
    );
}

// ---------------------------------------------------------------------------------------
// Lying about content
// ---------------------------------------------------------------------------------------

#[test]
fn wrong_digest_header_for_a_digest_reference_is_not_found() {
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |_, out| {
            let other = sha256(b"something else entirely");
            out.reply(
                200,
                &[
                    ("Content-Type", m.media_type),
                    ("Docker-Content-Digest", &other),
                ],
                &m.body,
            )?;
            Ok(Flow::KeepAlive)
        }),
    );
    let digest = manifest().digest;
    case("wrong Docker-Content-Digest (digest ref, HEAD)", &reg)
        .image(format!("{REPO}@{digest}"))
        .args(HEAD_FIRST)
        .expect(11, "not_found", "for requested")
        .run();
}

#[test]
fn get_body_not_matching_its_digest_header_is_not_found() {
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |_, out| {
            let other = sha256(b"not this body");
            out.reply(
                200,
                &[
                    ("Content-Type", m.media_type),
                    ("Docker-Content-Digest", &other),
                ],
                &m.body,
            )?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("wrong Docker-Content-Digest (tag, GET body)", &reg)
        .args(GET_FIRST)
        .expect(11, "not_found", "does not match its Docker-Content-Digest")
        .run();
}

/// A server that refuses HEAD and GET alike (405) says nothing about the image: transient,
/// never not_found (every containerd retries the HEAD as a GET and then reports the status;
/// `Verdict::METHOD_NOT_ALLOWED`). Another 4xx (400) is the same answer on every retry:
/// not_found, the one rule the watch uses too (`Verdict::OTHER_CLIENT_ERROR`).
#[test]
fn method_not_allowed_on_get_too_is_transient_and_a_400_is_not_found() {
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |_req, out| {
            out.reply(405, &[], b"")?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("HEAD 405 and GET 405", &reg)
        .args(HEAD_FIRST)
        .expect(20, "transient", "the registry refuses HEAD and GET (")
        .run();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |_req, out| {
            out.reply(400, &[], b"")?;
            Ok(Flow::KeepAlive)
        }),
    );
    case("HEAD 400", &reg)
        .args(HEAD_FIRST)
        .expect(11, "not_found", "registry refused the request (")
        .run();
}

#[test]
fn head_405_falls_back_to_get() {
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |req, out| {
            if req.method == "HEAD" {
                out.reply(405, &[], b"")?;
                return Ok(Flow::KeepAlive);
            }
            serve_manifest(out, &m)
        }),
    );
    case("HEAD 405 then GET", &reg)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
    assert_eq!(
        manifest_requests(&reg),
        vec![
            // The unauthenticated probe that learns the challenge (401), then with Basic.
            format!("HEAD /v2/{REPO}/manifests/{TAG}"),
            format!("HEAD /v2/{REPO}/manifests/{TAG}"),
            format!("GET /v2/{REPO}/manifests/{TAG}")
        ]
    );
}

#[test]
fn head_without_digest_falls_back_to_get() {
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |req, out| {
            if req.method == "HEAD" {
                out.reply(
                    200,
                    &[
                        ("Content-Type", m.media_type),
                        ("Content-Length", &m.body.len().to_string()),
                    ],
                    b"",
                )?;
                return Ok(Flow::KeepAlive);
            }
            serve_manifest(out, &m)
        }),
    );
    let r = case("HEAD 200 without digest then GET", &reg)
        .args(HEAD_FIRST)
        .expect(0, "pullable", "manifest found")
        .run();
    assert_eq!(r.image(0)["digest"], manifest().digest);
    assert_eq!(
        manifest_requests(&reg),
        vec![
            // The unauthenticated probe that learns the challenge (401), then with Basic.
            format!("HEAD /v2/{REPO}/manifests/{TAG}"),
            format!("HEAD /v2/{REPO}/manifests/{TAG}"),
            format!("GET /v2/{REPO}/manifests/{TAG}")
        ]
    );
}

#[test]
fn head_404_is_final_even_if_get_would_succeed() {
    let m = manifest();
    let reg = Server::start(
        tls(),
        registry(Auth::Basic, move |req, out| {
            if req.method == "HEAD" {
                return manifest_unknown(out);
            }
            serve_manifest(out, &m)
        }),
    );
    case("HEAD 404 while GET would succeed", &reg)
        .args(HEAD_FIRST)
        .expect(11, "not_found", "HTTP 404")
        .run();
    assert_eq!(
        manifest_requests(&reg),
        // The unauthenticated probe (401), then the HEAD with Basic (404); no GET.
        vec![format!("HEAD /v2/{REPO}/manifests/{TAG}"); 2]
    );
}

// ---------------------------------------------------------------------------------------
// TLS
// ---------------------------------------------------------------------------------------

fn tls_with(names: &[&str], not_after: SystemTime) -> Transport {
    let (cert_pem, key_pem) = pki().ca.issue(names, not_after);
    Transport::Tls { cert_pem, key_pem }
}

#[test]
fn certificate_for_another_name_is_transient() {
    let m = manifest();
    let reg = Server::start(
        tls_with(&["registry.other.example"], in_days(30)),
        registry(Auth::Basic, move |_, out| serve_manifest(out, &m)),
    );
    case("TLS certificate for another name", &reg)
        .args(HEAD_FIRST)
        .expect(
            20,
            "transient",
            "TLS: certificate is for another name: it names registry.other.example, not \
127.0.0.1; use one of those names or reissue the certificate with 127.0.0.1 in its \
subjectAltName",
        )
        .run();
    assert!(
        reg.seen().is_empty(),
        "nothing is sent over a bad handshake"
    );
}

#[test]
fn expired_certificate_is_transient() {
    let m = manifest();
    let reg = Server::start(
        tls_with(&["127.0.0.1"], in_days(-2)),
        registry(Auth::Basic, move |_, out| serve_manifest(out, &m)),
    );
    case("TLS certificate expired", &reg)
        .args(HEAD_FIRST)
        .expect(20, "transient", "certificate expired")
        .run();
    assert!(reg.seen().is_empty());
}

#[test]
fn stalled_tls_handshake_hits_the_deadline() {
    let reg = Server::start(Transport::Stall, |_, _| Ok(Flow::Close));
    case("TLS handshake stalls", &reg)
        .args(HEAD_FIRST)
        .args(SHORT)
        .expect(20, "transient", "timed out")
        .run();
    assert!(reg.connections() >= 1);
}
