//! containerd's registry host configuration (`certs.d` layout, `hosts.toml`): which endpoints
//! to try for a registry, in which order, with which TLS settings.
//!
//! Rules restating containerd `core/remotes/docker/config/hosts.go`
//! (`ConfigureHosts`, `HostDirFromRoot`, `hostDirectory`, `loadHostDir`, `parseHostsFile`,
//! `parseHostConfig`, `loadCertFiles`), `config_unix.go` (`hostPaths`) and `docs/hosts.md`.
//!
//! Deliberate differences from containerd, each one where the checker should be louder or
//! plainer than the node:
//! - A `hosts.toml` that fails to decode (syntax, wrong value type, unknown capability) is an
//!   error naming the file. containerd logs it and falls back to the directory's `*.crt`
//!   files, silently dropping every mirror; the error text says so.
//! - Client certificates (`client`, `*.cert`/`*.key`) are parsed and validated, then ignored
//!   with a log line: the checker does not present client certificates.
//! - `dial_timeout` is read (it must be a string) and ignored: the checker has its own
//!   deadlines.
//! - One root directory, not containerd's colon-separated `config_path` list.
//! - A URL counts as having a scheme only if it contains `://` (containerd tests for an
//!   `http` prefix, so it mangles a scheme-less host named `httpbin.example`), and a server
//!   path of `/` is treated as empty (containerd would produce `//v2`).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The `Docker Hub` registry name in references, and the host that actually serves it.
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_ENDPOINT: &str = "registry-1.docker.io";
/// Directory consulted when no host-specific one exists.
const DEFAULT_DIR: &str = "_default";
/// File name inside a host directory.
const HOSTS_FILE: &str = "hosts.toml";
/// The distribution API root appended to endpoint paths.
const API_ROOT: &str = "/v2";

/// URL scheme used to reach an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP (only from `--insecure-registry` or an `http://` URL in `hosts.toml`).
    Http,
    /// HTTPS.
    Https,
}

impl Scheme {
    /// `"http"` or `"https"`, as written in a URL.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an endpoint may be used for (`capabilities` in `hosts.toml`; absent = all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// Fetch content by digest (`pull`).
    pub pull: bool,
    /// Resolve a tag to a digest (`resolve`). The docs advise never to give it to a public
    /// mirror.
    pub resolve: bool,
    /// Push (`push`); unused by the checker.
    pub push: bool,
    /// Referrers API (`referrers`); unused by the checker.
    pub referrers: bool,
}

impl Capabilities {
    /// Every capability: the default when `capabilities` is absent or empty.
    pub(crate) const ALL: Capabilities = Capabilities {
        pull: true,
        resolve: true,
        push: true,
        referrers: true,
    };
    const NONE: Capabilities = Capabilities {
        pull: false,
        resolve: false,
        push: false,
        referrers: false,
    };

    /// The enabled capabilities as `hosts.toml` spells them, in the order pull, resolve,
    /// push, referrers (e.g. `["pull", "resolve"]`).
    pub(crate) fn names(&self) -> Vec<&'static str> {
        [
            (self.pull, "pull"),
            (self.resolve, "resolve"),
            (self.push, "push"),
            (self.referrers, "referrers"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// One place to send manifest requests, in the order containerd tries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `http` or `https`. containerd additionally tries HTTPS first (falling back to HTTP)
    /// for an `http` endpoint that has TLS settings and a port other than 80; this field
    /// records the configured scheme only.
    pub scheme: Scheme,
    /// `host[:port]` contacted, e.g. `registry-1.docker.io`, `mirror.local:5000`.
    pub host: String,
    /// API root path: `/v2` normally; with `override_path` whatever the URL said (maybe "").
    pub path: String,
    /// What this endpoint may be asked for.
    pub capabilities: Capabilities,
    /// Extra CA certificate files (PEM), absolute or relative to the working directory.
    pub ca_files: Vec<PathBuf>,
    /// Extra CA certificates as PEM text (handed over by the webhook,
    /// `engine::handover`); empty for endpoints read from `hosts.toml`.
    pub ca_pems: Vec<String>,
    /// Do not verify the server certificate.
    pub skip_verify: bool,
    /// Extra request headers (`header` tables), sorted by name, one pair per value.
    pub headers: Vec<(String, String)>,
    /// How many client certificates the node's hosts.toml gives this endpoint (`client`
    /// entries, `*.cert` pairs). pullcheck presents none, so a registry that requires one
    /// answers the node and not the checker: the hand-over refuses such endpoints.
    pub client_certificates: usize,
    /// The endpoint is not the reference's registry, so requests carry `?ns=<registry>`
    /// (containerd `isProxy`; `docker.io` served by `registry-1.docker.io` is not a mirror).
    pub is_mirror: bool,
    /// An `--insecure-registry` value that names this endpoint's host with another port or
    /// none (`127.0.0.1` for `127.0.0.1:5000`), so it does not apply: the port is part of a
    /// registry's name, as in containerd's `certs.d/HOST:PORT` directories. Kept to say so
    /// when the endpoint answers HTTPS with plain HTTP.
    pub insecure_port_mismatch: Option<String>,
}

impl Endpoint {
    /// `scheme://host` followed by [`Self::path`], e.g. `https://registry-1.docker.io/v2`.
    pub fn base_url(&self) -> String {
        format!("{}://{}{}", self.scheme, self.host, self.path)
    }

    /// `<base>/<repository>/manifests/<reference>[?ns=<ns>]`, where `reference` is a tag or
    /// digest and `ns` (pass the registry host when [`Self::is_mirror`]) is query-escaped as
    /// Go's `url.QueryEscape` does, e.g.
    /// `https://mirror.io/v2/library/alpine/manifests/3.20?ns=docker.io`.
    pub fn manifest_url(&self, repository: &str, reference: &str, ns: Option<&str>) -> String {
        let mut url = format!("{}/{repository}/manifests/{reference}", self.base_url());
        if let Some(ns) = ns {
            url.push_str("?ns=");
            url.push_str(&query_escape(ns));
        }
        url
    }

    /// True if a tag may be resolved here (needs both `pull` and `resolve`); a digest needs
    /// only [`Capabilities::pull`].
    pub fn can_resolve_tags(&self) -> bool {
        self.capabilities.pull && self.capabilities.resolve
    }
}

/// Why the host configuration could not be read. Each message is one line naming the file
/// and the fix.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    /// A file or directory under `--hosts-dir` exists but could not be read.
    #[error("{}: {source}; make the --hosts-dir tree readable or point --hosts-dir elsewhere", .path.display())]
    Read {
        /// What was being read.
        path: PathBuf,
        /// The I/O failure.
        source: io::Error,
    },
    /// `hosts.toml` is not valid TOML, not UTF-8, or a value has the wrong type.
    #[error(
        "{}: line {line}: {message}; fix the file (containerd logs this and ignores every mirror in it)",
        .path.display()
    )]
    Decode {
        /// The `hosts.toml` path.
        path: PathBuf,
        /// 1-based line of the problem (1 when unknown).
        line: usize,
        /// The decoder's message.
        message: String,
    },
    /// A `capabilities` entry other than pull, resolve, push or referrers.
    #[error(
        "{}: {table}: unknown capability {value:?}; use pull, resolve, push or referrers (containerd logs this and ignores every mirror in the file)",
        .path.display()
    )]
    UnknownCapability {
        /// The `hosts.toml` path.
        path: PathBuf,
        /// `top level` or `[host."…"]`.
        table: String,
        /// The value as written.
        value: String,
    },
    /// A well-typed but unusable value: a bad server/host URL, a `client` pair that is not
    /// two paths.
    #[error("{}: {table}: {key}: {reason}", .path.display())]
    Invalid {
        /// The `hosts.toml` path.
        path: PathBuf,
        /// `top level` or `[host."…"]`.
        table: String,
        /// The key at fault (`server`, `host`, `client`).
        key: &'static str,
        /// What is wrong and what to write instead.
        reason: String,
    },
    /// The registry host cannot name a directory (empty, or contains `/`, `\` or is `..`).
    #[error(
        "invalid registry host {host:?}: expected host[:port] such as docker.io or 127.0.0.1:5000"
    )]
    RegistryHost {
        /// The host as given.
        host: String,
    },
}

/// The endpoints containerd would try for `registry_host`, in order: `[host."…"]` mirrors in
/// file order, then the server last.
///
/// `hosts_dir` is a containerd `config_path` root such as `/etc/containerd/certs.d`. Inside
/// it the first existing directory of `H_port_` (only when `H` has a port), `H`, `_default`
/// is used. Its `hosts.toml` gives:
/// - root `server` (the default upstream; if absent, see below) and `[host."<url>"]` tables;
///   URLs without `://` get `https://`; the path is cleaned and `/v2` appended unless it
///   already ends in `/v2` or `override_path = true`;
/// - `capabilities` (absent or empty = all), `ca` (string or array, relative to the
///   directory), `skip_verify`, `header` (each value a string or array), `override_path`;
///   `client` and `dial_timeout` are checked and ignored.
///
/// If `hosts.toml` is missing or empty, the directory is a Docker certs dir: `*.crt` files
/// are CAs for the default upstream (`*.cert`/`*.key` client pairs are noted and ignored).
/// With no directory, or no `server`, the default upstream is used: `docker.io` →
/// `https://registry-1.docker.io/v2`; anything else → `https://H/v2` (loopback hosts too:
/// see [`default_upstream`] for this deliberate deviation from containerd).
///
/// `insecure` holds `--insecure-registry HOST[:PORT]` values (a leading `http://` or
/// `https://` is tolerated). A matching endpoint (by its host, or for the upstream also by the
/// registry host) switches to plain HTTP, except one written as `https://` in `hosts.toml`,
/// which keeps HTTPS and gets skip_verify.
///
/// # Errors
/// [`HostsError`] when a directory or file exists but cannot be read, when `hosts.toml` does
/// not decode, names an unknown capability or an unusable URL, or when `registry_host` could
/// escape `hosts_dir`. A missing `hosts_dir` or host directory is not an error.
pub fn endpoints(
    hosts_dir: Option<&Path>,
    registry_host: &str,
    insecure: &[String],
) -> Result<Vec<Endpoint>, HostsError> {
    if registry_host.is_empty()
        || registry_host.contains(['/', '\\'])
        || registry_host == "."
        || registry_host == ".."
    {
        return Err(HostsError::RegistryHost {
            host: registry_host.to_owned(),
        });
    }
    let configs = match hosts_dir {
        Some(root) => match host_directory(root, registry_host)? {
            Some(dir) => load_dir(&dir)?,
            None => vec![HostConfig::upstream()],
        },
        None => vec![HostConfig::upstream()],
    };
    let insecure: Vec<String> = insecure.iter().map(|v| normalize_insecure(v)).collect();
    Ok(configs
        .into_iter()
        .map(|config| config.into_endpoint(registry_host, &insecure))
        .collect())
}

/// One endpoint as configured, before defaults and `--insecure-registry` apply.
#[derive(Debug, Clone)]
struct HostConfig {
    /// `None` for the default upstream (no `server`, or a certs dir).
    url: Option<HostUrl>,
    capabilities: Capabilities,
    ca_files: Vec<PathBuf>,
    skip_verify: Option<bool>,
    headers: Vec<(String, String)>,
    client_certificates: usize,
}

impl HostConfig {
    fn upstream() -> HostConfig {
        HostConfig {
            url: None,
            capabilities: Capabilities::ALL,
            ca_files: Vec::new(),
            skip_verify: None,
            headers: Vec::new(),
            client_certificates: 0,
        }
    }

    fn into_endpoint(self, registry_host: &str, insecure: &[String]) -> Endpoint {
        let mut capabilities = self.capabilities;
        let (scheme, host, path, explicit_https, skip_verify) = match self.url {
            Some(url) => (
                url.scheme,
                url.host,
                url.path,
                url.explicit_https,
                self.skip_verify,
            ),
            None => {
                // containerd gives the filled-in upstream fixed capabilities, whatever the
                // top-level `capabilities` said.
                capabilities = Capabilities::ALL;
                let (scheme, host, skip) = default_upstream(registry_host);
                (
                    scheme,
                    host,
                    API_ROOT.to_owned(),
                    false,
                    skip.or(self.skip_verify),
                )
            }
        };
        let is_mirror =
            host != registry_host && !(registry_host == DOCKER_HUB && host == DOCKER_HUB_ENDPOINT);
        let mut endpoint = Endpoint {
            scheme,
            host,
            path,
            capabilities,
            ca_files: self.ca_files,
            ca_pems: Vec::new(),
            skip_verify: skip_verify.unwrap_or(false),
            headers: self.headers,
            client_certificates: self.client_certificates,
            is_mirror,
            insecure_port_mismatch: None,
        };
        let host_lower = endpoint.host.to_ascii_lowercase();
        let listed = insecure
            .iter()
            .any(|v| *v == host_lower || (!is_mirror && *v == registry_host.to_ascii_lowercase()));
        if listed {
            if explicit_https {
                endpoint.skip_verify = true;
            } else {
                endpoint.scheme = Scheme::Http;
            }
        } else {
            endpoint.insecure_port_mismatch = insecure
                .iter()
                .find(|v| without_port(v) == without_port(&host_lower))
                .cloned();
        }
        endpoint
    }
}

/// Scheme, host and forced skip_verify for the default upstream (`ConfigureHosts`).
///
/// Deliberate deviation: containerd treats a `localhost`/loopback registry as insecure by
/// default (HTTPS without verification, falling back to plain HTTP). pullcheck never guesses
/// the scheme from a host name: a loopback registry is `https` like any other, and plain HTTP
/// or skipped verification come only from `--insecure-registry` or `hosts.toml`, so a probe
/// never downgrades silently.
fn default_upstream(registry_host: &str) -> (Scheme, String, Option<bool>) {
    if registry_host == DOCKER_HUB {
        return (Scheme::Https, DOCKER_HUB_ENDPOINT.to_owned(), None);
    }
    (Scheme::Https, registry_host.to_owned(), None)
}

/// `host` of `host[:port]` (`[v6]` kept in brackets), for telling a value that differs
/// only by its port.
fn without_port(host_port: &str) -> &str {
    if let Some(end) = host_port.strip_prefix('[').and_then(|r| r.find(']')) {
        return &host_port[..end + 2];
    }
    match host_port.split_once(':') {
        Some((host, _)) => host,
        None => host_port,
    }
}

fn normalize_insecure(value: &str) -> String {
    let v = value.trim().to_ascii_lowercase();
    let v = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"))
        .unwrap_or(&v);
    v.trim_end_matches('/').to_owned()
}

/// Go `url.QueryEscape`.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

mod file;
#[cfg(test)]
mod tests;

use file::{HostUrl, host_directory, load_dir};
