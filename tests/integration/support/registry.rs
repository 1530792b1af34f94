//! One `docker-registry` (CNCF distribution 2.8) process.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::http::{self, Response};
use super::named::Bind;
use super::token::{TokenRequest, TokenServer};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Anonymous, plain HTTP.
    Anon,
    /// TLS + htpasswd (alice / alice-pw).
    Basic,
    /// TLS + bearer tokens from the harness's token server.
    Token,
}

/// One request as the registry logged it (from its combined access log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    pub method: String,
    /// Request URI as sent (path and query), e.g. `/v2/oci/app/manifests/v1`.
    pub uri: String,
    pub status: u16,
    pub user_agent: String,
    /// The client's address as the registry saw it.
    pub remote: String,
}

/// Where the registry's identity and auth come from.
pub(crate) struct Setup {
    pub mode: Mode,
    /// Where it listens (port 0: a free one) and what it is called.
    pub bind: Bind,
    pub dir: PathBuf,
    pub storage: PathBuf,
    pub ca_file: PathBuf,
    /// TLS cert/key files (TLS modes).
    pub tls: Option<(PathBuf, PathBuf)>,
    pub htpasswd: Option<PathBuf>,
    /// (token server, service, rootcertbundle)
    pub token: Option<(Arc<TokenServer>, String, PathBuf)>,
}

pub struct Registry {
    /// `127.0.0.1:PORT` (`NAME:PORT` on a named [`Bind`])
    pub host: String,
    /// `"http"` or `"https"`.
    pub scheme: &'static str,
    /// The test CA (PEM) that signed the server certificate.
    pub ca_file: PathBuf,
    pub pid: u32,
    pub mode: Mode,
    /// Token mode: the `service` the registry expects in the token's `aud`.
    pub service: Option<String>,
    /// Combined access log (the process's stdout): one line per request, all statuses.
    pub access_log: PathBuf,
    child: Mutex<Option<Child>>,
    token_server: Option<Arc<TokenServer>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("host", &self.host)
            .field("scheme", &self.scheme)
            .field("mode", &self.mode)
            .field("pid", &self.pid)
            .finish()
    }
}

pub fn registry_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("PULLCHECK_DOCKER_REGISTRY") {
        return PathBuf::from(p);
    }
    for dir in std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/bin"])
    {
        let p = Path::new(dir).join("docker-registry");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "`docker-registry` not found on PATH or in /usr/bin: install Debian's docker-registry \
         (apt-get install docker-registry), or set PULLCHECK_DOCKER_REGISTRY"
    );
}

fn free_port(addr: std::net::IpAddr) -> u16 {
    super::ports::free_port_on(addr).unwrap_or_else(|e| panic!("a free port on {addr}: {e}"))
}

fn config_yaml(s: &Setup, port: u16) -> String {
    let mut y = format!(
        "version: 0.1\n\
         log:\n  level: info\n  formatter: json\n\
         storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n  \
         maintenance:\n    uploadpurging:\n      enabled: false\n\
         http:\n  addr: {addr}\n  secret: pullcheck-harness-secret\n",
        storage = s.storage.display(),
        addr = std::net::SocketAddr::new(s.bind.addr, port),
    );
    if let Some((cert, key)) = &s.tls {
        y.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            cert.display(),
            key.display()
        ));
    }
    match s.mode {
        Mode::Anon => {}
        Mode::Basic => {
            let path = s.htpasswd.as_ref().expect("htpasswd file");
            y.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: pullcheck-basic-realm\n    path: {}\n",
                path.display()
            ));
        }
        Mode::Token => {
            let (srv, service, bundle) = s.token.as_ref().expect("token setup");
            y.push_str(&format!(
                "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
                srv.realm,
                service,
                super::token::ISSUER,
                bundle.display()
            ));
        }
    }
    y
}

impl Registry {
    pub(crate) fn start(setup: Setup) -> Registry {
        let bin = registry_binary();
        std::fs::create_dir_all(&setup.dir).unwrap();
        std::fs::create_dir_all(&setup.storage).unwrap();
        let scheme = if setup.tls.is_some() { "https" } else { "http" };
        let mut last_err = String::new();
        for attempt in 0..8 {
            let port = match setup.bind.port {
                0 => free_port(setup.bind.addr),
                fixed => fixed,
            };
            let config = setup.dir.join("config.yml");
            std::fs::write(&config, config_yaml(&setup, port)).unwrap();
            let access_log = setup.dir.join(format!("access-{attempt}.log"));
            let app_log = setup.dir.join(format!("app-{attempt}.log"));
            let mut cmd = Command::new(&bin);
            cmd.arg("serve")
                .arg(&config)
                .current_dir(&setup.dir)
                .stdin(Stdio::null())
                .stdout(File::create(&access_log).unwrap())
                .stderr(File::create(&app_log).unwrap())
                .env_remove("REGISTRY_HTTP_ADDR");
            let mut child = super::process::spawn_tied(cmd)
                .unwrap_or_else(|e| panic!("spawning {}: {e}", bin.display()));
            let host = setup.bind.host(port);
            let base = format!("{scheme}://{host}");
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut up = false;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                // Any answer counts, including a TLS failure (custom certificates).
                match http::request(&base, Some(&setup.ca_file), "GET", "/v2/", &[], &[]) {
                    Ok(_) => {
                        up = true;
                        break;
                    }
                    Err(e)
                        if e.kind() != std::io::ErrorKind::ConnectionRefused
                            && setup.tls.is_some() =>
                    {
                        up = true;
                        break;
                    }
                    Err(_) => {}
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            if up {
                let pid = child.id();
                return Registry {
                    host,
                    scheme,
                    ca_file: setup.ca_file.clone(),
                    pid,
                    mode: setup.mode,
                    service: setup.token.as_ref().map(|t| t.1.clone()),
                    access_log,
                    child: Mutex::new(Some(child)),
                    token_server: setup.token.as_ref().map(|t| t.0.clone()),
                };
            }
            let _ = child.kill();
            let _ = child.wait();
            last_err = std::fs::read_to_string(&app_log).unwrap_or_default();
            let port_clash = last_err.contains("address already in use") && setup.bind.port == 0;
            if !port_clash {
                break;
            }
        }
        panic!(
            "docker-registry ({:?}) did not answer GET /v2/ on {}; its log:\n{last_err}",
            setup.mode,
            setup.bind.host(setup.bind.port)
        );
    }

    /// `scheme://host`
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.host)
    }

    /// Raw request without any authentication, trusting only the test CA.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<Response> {
        http::request(&self.url(), Some(&self.ca_file), method, path, headers, &[])
    }

    /// Token requests made for this registry's `service` (token mode), so far.
    pub fn token_requests(&self) -> usize {
        match (&self.token_server, &self.service) {
            (Some(srv), Some(svc)) => srv.count_for_service(svc),
            _ => 0,
        }
    }

    /// Every token request its realm answered for its `service` (token mode), so far.
    pub fn token_log(&self) -> Vec<TokenRequest> {
        match &self.token_server {
            Some(srv) => srv
                .log()
                .into_iter()
                .filter(|t| t.service == self.service)
                .collect(),
            None => vec![],
        }
    }

    /// Every request the registry has logged so far, oldest first. Parsed from
    /// the combined access log, which has one line per request whatever the
    /// status (the JSON log omits 401s: it only says "response completed" for
    /// 2xx/3xx and "response completed with error" for handler errors).
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        let text = std::fs::read_to_string(&self.access_log).unwrap_or_default();
        text.lines().filter_map(parse_combined).collect()
    }

    /// Wait until the access log stops growing (it is written right after the
    /// response, so a client can see the response before the line lands).
    pub fn wait_quiet(&self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut last = usize::MAX;
        let mut stable = 0;
        while Instant::now() < deadline {
            let n = std::fs::metadata(&self.access_log)
                .map(|m| m.len() as usize)
                .unwrap_or(0);
            if n == last {
                stable += 1;
                if stable >= 4 {
                    return;
                }
            } else {
                stable = 0;
                last = n;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Number of requests logged so far (after the log went quiet).
    pub fn mark(&self) -> usize {
        self.wait_quiet();
        self.request_log().len()
    }

    /// Requests logged after `mark` (after the log went quiet). The fixture's
    /// registries are shared by concurrent tests: filter by `uri`, or use
    /// `requests_since_matching`, or a dedicated registry for exact counts.
    pub fn requests_since(&self, mark: usize) -> Vec<LoggedRequest> {
        self.wait_quiet();
        self.request_log().into_iter().skip(mark).collect()
    }

    /// `requests_since` restricted to URIs containing `needle` (e.g. `/v2/oci/app/`).
    pub fn requests_since_matching(&self, mark: usize, needle: &str) -> Vec<LoggedRequest> {
        self.requests_since(mark)
            .into_iter()
            .filter(|r| r.uri.contains(needle))
            .collect()
    }

    /// SIGKILL the process and reap it. Idempotent.
    pub fn stop(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut child) = guard.take() {
            // A stopped process still dies from SIGKILL.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the port stays open (the kernel still completes TCP handshakes
    /// into the backlog) but nothing answers.
    /// Returns once every thread of the process is stopped (signals are
    /// delivered asynchronously; without the wait a request sent right after
    /// `pause()` can still be answered).
    pub fn pause(&self) {
        if self.is_running() {
            super::process::signal(self.pid, libc::SIGSTOP);
            self.wait_stopped(true);
        }
    }

    /// SIGCONT; returns once the process runs again.
    pub fn resume(&self) {
        if self.is_running() {
            super::process::signal(self.pid, libc::SIGCONT);
            self.wait_stopped(false);
        }
    }

    fn wait_stopped(&self, stopped: bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if super::process::all_threads_stopped(self.pid) == stopped {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!(
            "registry pid {} did not become {}",
            self.pid,
            if stopped { "stopped" } else { "running" }
        );
    }

    pub fn is_running(&self) -> bool {
        let mut guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `127.0.0.1 - - [29/Nov/2026:19:28:52 +0000] "HEAD /v2/ HTTP/1.1" 200 2 "" "curl/7.88.1"`
fn parse_combined(line: &str) -> Option<LoggedRequest> {
    let mut head = line.splitn(4, ' ');
    let remote = head.next()?.to_string();
    let _ident = head.next()?;
    let _user = head.next()?; // always "-": distribution does not fill it in
    let rest = head.next()?;
    let q1 = rest.find('"')?;
    let after = &rest[q1 + 1..];
    let q2 = after.find('"')?;
    let request_line = &after[..q2];
    let mut rl = request_line.split(' ');
    let method = rl.next()?.to_string();
    let uri = rl.next()?.to_string();
    let tail = after[q2 + 1..].trim_start();
    let status: u16 = tail.split(' ').next()?.parse().ok()?;
    let user_agent = tail
        .rsplit_once(" \"")
        .map(|(_, ua)| ua.trim_end_matches('"').to_string())
        .unwrap_or_default();
    Some(LoggedRequest {
        method,
        uri,
        status,
        user_agent,
        remote,
    })
}
