//! containerd's registry host configuration (`certs.d` layout, `hosts.toml`): which endpoints
//! to try for a registry, in which order, with which TLS settings.
//!
//! Rules from facts §5.1, restating containerd `core/remotes/docker/config/hosts.go`
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

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

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
    pub fn as_str(self) -> &'static str {
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
    pub const ALL: Capabilities = Capabilities {
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
    pub fn names(&self) -> Vec<&'static str> {
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
    /// Do not verify the server certificate.
    pub skip_verify: bool,
    /// Extra request headers (`header` tables), sorted by name, one pair per value.
    pub headers: Vec<(String, String)>,
    /// The endpoint is not the reference's registry, so requests carry `?ns=<registry>`
    /// (containerd `isProxy`; `docker.io` served by `registry-1.docker.io` is not a mirror).
    pub is_mirror: bool,
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
}

impl HostConfig {
    fn upstream() -> HostConfig {
        HostConfig {
            url: None,
            capabilities: Capabilities::ALL,
            ca_files: Vec::new(),
            skip_verify: None,
            headers: Vec::new(),
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
            skip_verify: skip_verify.unwrap_or(false),
            headers: self.headers,
            is_mirror,
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

fn normalize_insecure(value: &str) -> String {
    let v = value.trim().to_ascii_lowercase();
    let v = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"))
        .unwrap_or(&v);
    v.trim_end_matches('/').to_owned()
}

/// The directory for `host` under `root` (`HostDirFromRoot`, `hostPaths`), if any exists.
fn host_directory(root: &Path, host: &str) -> Result<Option<PathBuf>, HostsError> {
    let mut candidates = Vec::with_capacity(3);
    if let Some(idx) = host.rfind(':').filter(|&i| i > 0) {
        candidates.push(format!("{}_{}_", &host[..idx], &host[idx + 1..]));
    }
    candidates.push(host.to_owned());
    candidates.push(DEFAULT_DIR.to_owned());
    for name in candidates {
        let dir = root.join(name);
        match std::fs::metadata(&dir) {
            Ok(_) => return Ok(Some(dir)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(HostsError::Read { path: dir, source }),
        }
    }
    Ok(None)
}

/// `loadHostDir`: `hosts.toml` if present and non-empty, else the Docker certs layout.
fn load_dir(dir: &Path) -> Result<Vec<HostConfig>, HostsError> {
    let path = dir.join(HOSTS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(source) => return Err(HostsError::Read { path, source }),
    };
    if bytes.is_empty() {
        return load_cert_files(dir);
    }
    let text = String::from_utf8(bytes).map_err(|_| HostsError::Decode {
        path: path.clone(),
        line: 1,
        message: "not UTF-8 text".into(),
    })?;
    parse_hosts_file(dir, &path, &text)
}

/// `loadCertFiles`: `*.crt` are CAs for the default upstream; client pairs are ignored.
fn load_cert_files(dir: &Path) -> Result<Vec<HostConfig>, HostsError> {
    let read_err = |source| HostsError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        if entry.file_type().map_err(read_err)?.is_dir() {
            continue;
        }
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    let mut config = HostConfig::upstream();
    for name in &names {
        if name.ends_with(".crt") {
            config.ca_files.push(dir.join(name));
        } else if let Some(stem) = name.strip_suffix(".cert") {
            let key = format!("{stem}.key");
            let key = if names.contains(&key) {
                key
            } else {
                "(key inside the .cert file)".into()
            };
            tracing::warn!(
                dir = %dir.display(),
                cert = %name,
                key = %key,
                "client certificate ignored: pullcheck does not present client certificates"
            );
        }
    }
    Ok(vec![config])
}

/// Fields shared by the top level and each `[host."…"]` table (`hostFileConfig`).
#[derive(Debug, Default, Deserialize)]
struct HostFields {
    capabilities: Option<Vec<String>>,
    ca: Option<OneOrMany>,
    client: Option<ClientSpec>,
    skip_verify: Option<bool>,
    header: Option<BTreeMap<String, OneOrMany>>,
    #[serde(default)]
    override_path: bool,
    #[allow(dead_code)]
    // Read to type-check it, as containerd does; the checker has its own deadlines.
    dial_timeout: Option<String>,
}

/// The top-level `server` and the `host` tables; other top-level keys go to [`HostFields`].
#[derive(Debug, Default, Deserialize)]
struct Servers {
    server: Option<String>,
    #[serde(default)]
    host: BTreeMap<String, HostFields>,
}

/// A string or an array of strings (`ca`, header values).
#[derive(Debug)]
struct OneOrMany(Vec<String>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany(vec![v.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    out.push(s);
                }
                Ok(OneOrMany(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// `client`: a path, or an array of paths and `[cert, key]` pairs.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "`client` must be a path, or an array of paths and [cert, key] pairs"
)]
enum ClientSpec {
    One(String),
    Many(Vec<ClientItem>),
}

#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "each `client` entry must be a path or a [cert, key] pair"
)]
enum ClientItem {
    Path(String),
    Pair(Vec<String>),
}

/// `parseHostsFile`: mirrors in file order, then the top-level server.
fn parse_hosts_file(dir: &Path, path: &Path, text: &str) -> Result<Vec<HostConfig>, HostsError> {
    let decode = |e: toml::de::Error| HostsError::Decode {
        path: path.to_owned(),
        line: e.span().map_or(1, |s| line_of(text, s.start)),
        message: e.message().trim().replace('\n', " "),
    };
    let root: HostFields = toml::from_str(text).map_err(decode)?;
    let servers: Servers = toml::from_str(text).map_err(decode)?;
    let mut mirrors = servers.host;
    let mut configs = Vec::with_capacity(mirrors.len() + 1);
    for name in hosts_in_file_order(text).map_err(decode)? {
        if let Some(fields) = mirrors.remove(&name) {
            let table = format!("[host.{name:?}]");
            configs.push(parse_host_config(Some(&name), fields, dir, path, &table)?);
        }
    }
    configs.push(parse_host_config(
        servers.server.as_deref(),
        root,
        dir,
        path,
        "top level",
    )?);
    Ok(configs)
}

/// The keys of the `host` table in the order they first appear in the file (containerd
/// `getSortedHosts`). Found from key spans, so it holds whether or not the `toml` crate's
/// `preserve_order` feature is enabled.
fn hosts_in_file_order(text: &str) -> Result<Vec<String>, toml::de::Error> {
    let document = toml::de::DeTable::parse(text)?;
    let Some(host) = document.get_ref().get("host") else {
        return Ok(Vec::new());
    };
    let toml::de::DeValue::Table(table) = host.get_ref() else {
        return Ok(Vec::new());
    };
    let mut keys: Vec<(usize, String)> = table
        .keys()
        .map(|k| (k.span().start, k.get_ref().to_string()))
        .collect();
    keys.sort();
    Ok(keys.into_iter().map(|(_, k)| k).collect())
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |t| t.matches('\n').count() + 1)
}

/// `parseHostConfig`: one table to one configured endpoint.
fn parse_host_config(
    server: Option<&str>,
    fields: HostFields,
    dir: &Path,
    path: &Path,
    table: &str,
) -> Result<HostConfig, HostsError> {
    let key = if table == "top level" {
        "server"
    } else {
        "host"
    };
    let url =
        match server.filter(|s| !s.is_empty()) {
            Some(raw) => Some(parse_url(raw, fields.override_path).map_err(|reason| {
                HostsError::Invalid {
                    path: path.to_owned(),
                    table: table.to_owned(),
                    key,
                    reason,
                }
            })?),
            None => None,
        };
    let mut capabilities = Capabilities::ALL;
    if let Some(list) = fields.capabilities.filter(|l| !l.is_empty()) {
        capabilities = Capabilities::NONE;
        for value in list {
            match value.to_ascii_lowercase().as_str() {
                "pull" => capabilities.pull = true,
                "resolve" => capabilities.resolve = true,
                "push" => capabilities.push = true,
                "referrers" => capabilities.referrers = true,
                _ => {
                    return Err(HostsError::UnknownCapability {
                        path: path.to_owned(),
                        table: table.to_owned(),
                        value,
                    });
                }
            }
        }
    }
    let ca_files = fields
        .ca
        .map(|OneOrMany(files)| files.iter().map(|f| dir.join(f)).collect())
        .unwrap_or_default();
    if let Some(client) = fields.client {
        let items = match client {
            ClientSpec::One(p) => vec![ClientItem::Path(p)],
            ClientSpec::Many(items) => items,
        };
        for item in &items {
            if let ClientItem::Pair(pair) = item
                && pair.len() != 2
            {
                return Err(HostsError::Invalid {
                    path: path.to_owned(),
                    table: table.to_owned(),
                    key: "client",
                    reason: format!(
                        "{pair:?} is not a pair; write [\"client.cert\", \"client.key\"]"
                    ),
                });
            }
        }
        let certs: Vec<String> = items
            .iter()
            .map(|item| match item {
                ClientItem::Path(p) => p.clone(),
                ClientItem::Pair(pair) => pair.join(" + "),
            })
            .collect();
        tracing::warn!(
            file = %path.display(),
            table,
            client = ?certs,
            "client certificates ignored: pullcheck does not present client certificates"
        );
    }
    let headers = fields
        .header
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(name, OneOrMany(values))| values.into_iter().map(move |v| (name.clone(), v)))
        .collect();
    Ok(HostConfig {
        url,
        capabilities,
        ca_files,
        skip_verify: fields.skip_verify,
        headers,
    })
}

/// A server or host URL from `hosts.toml`, resolved.
#[derive(Debug, Clone)]
struct HostUrl {
    scheme: Scheme,
    host: String,
    path: String,
    /// Written with `https://` (so `--insecure-registry` keeps TLS and only skips verify).
    explicit_https: bool,
}

/// Scheme-less → `https://`; the path is cleaned and gets `/v2` unless it ends in `/v2` or
/// `override_path` is set.
fn parse_url(raw: &str, override_path: bool) -> Result<HostUrl, String> {
    let lower = raw.to_ascii_lowercase();
    let (scheme, rest, explicit_https) = if lower.starts_with("https://") {
        (Scheme::Https, &raw[8..], true)
    } else if lower.starts_with("http://") {
        (Scheme::Http, &raw[7..], false)
    } else if let Some((scheme, _)) = raw.split_once("://") {
        return Err(format!(
            "{raw:?} has scheme {scheme:?}; use https://, http:// or no scheme"
        ));
    } else {
        (Scheme::Https, raw, false)
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if host.is_empty() || host.contains('@') || host.contains(char::is_whitespace) {
        return Err(format!(
            "{raw:?} has no usable host; write https://host[:port][/path]"
        ));
    }
    let mut path = clean_path(path);
    if !override_path && !path.ends_with(API_ROOT) {
        path.push_str(API_ROOT);
    }
    Ok(HostUrl {
        scheme,
        host: host.to_owned(),
        path,
        explicit_https,
    })
}

/// Go `path.Clean` for an absolute URL path, with `/` (and "") returned as "".
fn clean_path(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    segments.iter().map(|s| format!("/{s}")).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (name, content) in files {
            let path = root.path().join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        root
    }

    fn urls(endpoints: &[Endpoint]) -> Vec<String> {
        endpoints.iter().map(Endpoint::base_url).collect()
    }

    #[test]
    fn no_hosts_dir_uses_default_upstream() {
        let e = endpoints(None, "docker.io", &[]).unwrap();
        assert_eq!(urls(&e), ["https://registry-1.docker.io/v2"]);
        assert!(!e[0].is_mirror && e[0].can_resolve_tags() && !e[0].skip_verify);
        let e = endpoints(None, "ghcr.io", &[]).unwrap();
        assert_eq!(urls(&e), ["https://ghcr.io/v2"]);
        // A root without a matching directory falls through to the default as well.
        let root = dir_with(&[("other.io/hosts.toml", "server = \"https://x\"")]);
        assert_eq!(
            urls(&endpoints(Some(root.path()), "quay.io", &[]).unwrap()),
            ["https://quay.io/v2"]
        );
    }

    #[test]
    fn localhost_defaults() {
        // Deliberately stricter than containerd: no scheme guessing for loopback hosts.
        let e = endpoints(None, "localhost:5000", &[]).unwrap();
        assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Https, false));
        let e = endpoints(None, "127.0.0.1:80", &[]).unwrap();
        assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Https, false));
        let e = endpoints(None, "localhost:5000", &["localhost:5000".into()]).unwrap();
        assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Http, false));
        let e = endpoints(None, "10.0.0.1:5000", &[]).unwrap();
        assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Https, false));
    }

    #[test]
    fn docker_io_example_from_containerd_docs() {
        let root = dir_with(&[(
            "docker.io/hosts.toml",
            "server = \"https://docker.io\"\n\n[host.\"https://registry-1.docker.io\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        )]);
        let e = endpoints(Some(root.path()), "docker.io", &[]).unwrap();
        assert_eq!(
            urls(&e),
            ["https://registry-1.docker.io/v2", "https://docker.io/v2"]
        );
        assert!(!e[0].is_mirror && !e[1].is_mirror);
        assert_eq!(e[0].capabilities.names(), ["pull", "resolve"]);
        assert_eq!(e[0].scheme.as_str(), "https");
        assert_eq!(
            e[0].capabilities,
            Capabilities {
                pull: true,
                resolve: true,
                push: false,
                referrers: false
            }
        );
        assert_eq!(e[1].capabilities, Capabilities::ALL);
        assert_eq!(
            e[0].manifest_url("library/alpine", "3.20", None),
            "https://registry-1.docker.io/v2/library/alpine/manifests/3.20"
        );
    }

    #[test]
    fn mirrors_keep_file_order_and_server_is_last() {
        let toml = r#"
server = "registry.example.com:5000"

[host."https://z-mirror.example"]
  capabilities = ["pull", "resolve"]
  [host."https://z-mirror.example".header]
    x-custom = ["a", "b"]
    authorization = "Basic Zm9v"

[host."http://a-mirror.example:8080/base/"]
  capabilities = ["pull"]
  skip_verify = true

[host."m-mirror.example"]
"#;
        let root = dir_with(&[("registry.example.com:5000/hosts.toml", toml)]);
        let e = endpoints(Some(root.path()), "registry.example.com:5000", &[]).unwrap();
        assert_eq!(
            urls(&e),
            [
                "https://z-mirror.example/v2",
                "http://a-mirror.example:8080/base/v2",
                "https://m-mirror.example/v2",
                "https://registry.example.com:5000/v2",
            ]
        );
        assert_eq!(
            e.iter().map(|e| e.is_mirror).collect::<Vec<_>>(),
            [true, true, true, false]
        );
        assert_eq!(
            e[0].headers,
            [
                ("authorization".to_owned(), "Basic Zm9v".to_owned()),
                ("x-custom".to_owned(), "a".to_owned()),
                ("x-custom".to_owned(), "b".to_owned()),
            ]
        );
        assert!(e[0].can_resolve_tags());
        assert!(!e[1].can_resolve_tags() && e[1].capabilities.pull && e[1].skip_verify);
        assert_eq!(e[2].capabilities, Capabilities::ALL);
        assert_eq!(
            e[1].manifest_url("team/app", "sha256:abc", Some("registry.example.com:5000")),
            "http://a-mirror.example:8080/base/v2/team/app/manifests/sha256:abc?ns=registry.example.com%3A5000"
        );
    }

    #[test]
    fn no_server_means_default_upstream_last() {
        let toml = "[host.\"https://mirror.gcr.io\"]\ncapabilities = [\"pull\", \"resolve\"]\n";
        let root = dir_with(&[("docker.io/hosts.toml", toml)]);
        let e = endpoints(Some(root.path()), "docker.io", &[]).unwrap();
        assert_eq!(
            urls(&e),
            [
                "https://mirror.gcr.io/v2",
                "https://registry-1.docker.io/v2"
            ]
        );
        assert!(e[0].is_mirror && !e[1].is_mirror);
        assert_eq!(
            e[0].manifest_url("library/alpine", "latest", Some("docker.io")),
            "https://mirror.gcr.io/v2/library/alpine/manifests/latest?ns=docker.io"
        );
    }

    #[test]
    fn port_directory_takes_precedence() {
        let root = dir_with(&[
            ("reg.io_5000_/hosts.toml", "server = \"https://underscore\""),
            ("reg.io:5000/hosts.toml", "server = \"https://colon\""),
            ("_default/hosts.toml", "server = \"https://default\""),
        ]);
        assert_eq!(
            urls(&endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap()),
            ["https://underscore/v2"]
        );
        fs::remove_dir_all(root.path().join("reg.io_5000_")).unwrap();
        assert_eq!(
            urls(&endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap()),
            ["https://colon/v2"]
        );
        fs::remove_dir_all(root.path().join("reg.io:5000")).unwrap();
        assert_eq!(
            urls(&endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap()),
            ["https://default/v2"]
        );
    }

    #[test]
    fn default_directory_applies_to_every_registry() {
        let toml = "[host.\"https://cache.internal\"]\ncapabilities = [\"pull\"]\n";
        let root = dir_with(&[("_default/hosts.toml", toml), ("quay.io/hosts.toml", "")]);
        let e = endpoints(Some(root.path()), "ghcr.io", &[]).unwrap();
        assert_eq!(
            urls(&e),
            ["https://cache.internal/v2", "https://ghcr.io/v2"]
        );
        // A host directory (even one without hosts.toml content) shadows _default.
        let e = endpoints(Some(root.path()), "quay.io", &[]).unwrap();
        assert_eq!(urls(&e), ["https://quay.io/v2"]);
    }

    #[test]
    fn ca_paths_resolve_against_the_directory() {
        let toml = "server = \"https://reg.internal\"\nca = \"certs/ca.pem\"\n[host.\"https://m.internal\"]\nca = [\"/abs/ca.pem\", \"rel.pem\"]\n";
        let root = dir_with(&[("reg.internal/hosts.toml", toml)]);
        let dir = root.path().join("reg.internal");
        let e = endpoints(Some(root.path()), "reg.internal", &[]).unwrap();
        assert_eq!(
            e[0].ca_files,
            [PathBuf::from("/abs/ca.pem"), dir.join("rel.pem")]
        );
        assert_eq!(e[1].ca_files, [dir.join("certs/ca.pem")]);
    }

    #[test]
    fn override_path_and_path_cleaning() {
        let toml = r#"
server = "https://reg.internal/v2/"
[host."https://a.internal/registry/v2/proj"]
  override_path = true
[host."https://b.internal//x/./y/../"]
[host."https://c.internal/"]
[host."https://d.internal"]
  override_path = true
"#;
        let root = dir_with(&[("reg.internal/hosts.toml", toml)]);
        let e = endpoints(Some(root.path()), "reg.internal", &[]).unwrap();
        assert_eq!(
            urls(&e),
            [
                "https://a.internal/registry/v2/proj",
                "https://b.internal/x/v2",
                "https://c.internal/v2",
                "https://d.internal",
                "https://reg.internal/v2",
            ]
        );
        assert_eq!(
            e[0].manifest_url("r", "t", None),
            "https://a.internal/registry/v2/proj/r/manifests/t"
        );
    }

    #[test]
    fn unknown_capability_is_an_error_naming_the_file() {
        let toml = "[host.\"https://m\"]\ncapabilities = [\"pull\", \"fetch\"]\n";
        let root = dir_with(&[("ghcr.io/hosts.toml", toml)]);
        let err = endpoints(Some(root.path()), "ghcr.io", &[]).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, HostsError::UnknownCapability { .. }), "{msg}");
        assert!(
            msg.contains("ghcr.io/hosts.toml")
                && msg.contains("\"fetch\"")
                && msg.contains("pull, resolve"),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
        let root = dir_with(&[(
            "ghcr.io/hosts.toml",
            "capabilities = [\"Pull\", \"REFERRERS\"]\n",
        )]);
        let e = endpoints(Some(root.path()), "ghcr.io", &[]).unwrap();
        // Without a server the upstream gets containerd's default capabilities.
        assert_eq!(e[0].capabilities, Capabilities::ALL);
    }

    #[test]
    fn decode_errors_are_one_line_with_a_line_number() {
        let cases = [
            ("server = \"https://x\"\nskip_verify = \"yes\"\n", 2),
            ("server = \"https://x\"\n[host.\"https://m\"]\nca = 5\n", 3),
            ("server = [\n", 1),
            ("[host.\"https://m\"]\nclient = [[\"only-one\"]]\n", 0),
            ("server = \"ftp://x\"\n", 0),
        ];
        for (toml, line) in cases {
            let root = dir_with(&[("r.io/hosts.toml", toml)]);
            let err = endpoints(Some(root.path()), "r.io", &[]).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("r.io/hosts.toml") && !msg.contains('\n'),
                "{msg}"
            );
            if line > 0 {
                assert!(msg.contains(&format!(": line {line}: ")), "{msg}");
            }
        }
    }

    #[test]
    fn client_and_dial_timeout_are_accepted_and_ignored() {
        let toml = r#"
server = "https://r.io"
client = "client.pem"
dial_timeout = "5s"
[host."https://m.io"]
client = [["c.cert", "c.key"], "both.pem"]
"#;
        let root = dir_with(&[("r.io/hosts.toml", toml)]);
        let e = endpoints(Some(root.path()), "r.io", &[]).unwrap();
        assert_eq!(urls(&e), ["https://m.io/v2", "https://r.io/v2"]);
    }

    #[test]
    fn certs_dir_fallback() {
        let root = dir_with(&[
            ("reg.io:5000/ca.crt", "pem"),
            ("reg.io:5000/another.crt", "pem"),
            ("reg.io:5000/client.cert", "pem"),
            ("reg.io:5000/client.key", "pem"),
            ("reg.io:5000/README", "x"),
        ]);
        let dir = root.path().join("reg.io:5000");
        let e = endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap();
        assert_eq!(urls(&e), ["https://reg.io:5000/v2"]);
        assert_eq!(e[0].ca_files, [dir.join("another.crt"), dir.join("ca.crt")]);
        // An empty hosts.toml means the same.
        fs::write(dir.join("hosts.toml"), "").unwrap();
        assert_eq!(endpoints(Some(root.path()), "reg.io:5000", &[]).unwrap(), e);
    }

    #[test]
    fn insecure_registries() {
        let toml = "server = \"https://reg.io:5000\"\n[host.\"mirror.io\"]\n[host.\"https://secure.io\"]\n";
        let root = dir_with(&[("reg.io:5000/hosts.toml", toml)]);
        let insecure = [
            "mirror.io".to_owned(),
            "http://SECURE.io/".to_owned(),
            "reg.io:5000".to_owned(),
        ];
        let e = endpoints(Some(root.path()), "reg.io:5000", &insecure).unwrap();
        assert_eq!((e[0].scheme, e[0].skip_verify), (Scheme::Http, false));
        assert_eq!((e[1].scheme, e[1].skip_verify), (Scheme::Https, true));
        assert_eq!((e[2].scheme, e[2].skip_verify), (Scheme::Https, true));
        let e = endpoints(None, "reg.io:5000", &insecure).unwrap();
        assert_eq!(urls(&e), ["http://reg.io:5000/v2"]);
        let e = endpoints(None, "docker.io", &["docker.io".to_owned()]).unwrap();
        assert_eq!(urls(&e), ["http://registry-1.docker.io/v2"]);
        let e = endpoints(None, "other.io", &insecure).unwrap();
        assert_eq!(urls(&e), ["https://other.io/v2"]);
    }

    #[test]
    fn registry_host_must_not_escape() {
        for bad in ["", "..", "a/b", "a\\b"] {
            let err = endpoints(None, bad, &[]).unwrap_err();
            assert!(matches!(err, HostsError::RegistryHost { .. }), "{err}");
        }
    }
}
