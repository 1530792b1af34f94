//! Reading a `certs.d/<host>/` directory: `hosts.toml` (fields, file order of
//! `[host."…"]` tables, URLs) or, without one, Docker-style certificate files.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use super::*;

/// The directory for `host` under `root` (`HostDirFromRoot`, `hostPaths`), if any exists.
pub(super) fn host_directory(root: &Path, host: &str) -> Result<Option<PathBuf>, HostsError> {
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

/// The largest `hosts.toml` read (containerd reads it whole; real ones are a few KiB).
const MAX_HOSTS_FILE_BYTES: u64 = 1024 * 1024;

/// `loadHostDir`: `hosts.toml` if present and non-empty, else the Docker certs layout.
pub(super) fn load_dir(dir: &Path) -> Result<Vec<HostConfig>, HostsError> {
    let path = dir.join(HOSTS_FILE);
    let bytes = match crate::files::read_capped(&path, MAX_HOSTS_FILE_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => Vec::new(),
        Err(crate::files::FileError::Io(source)) => return Err(HostsError::Read { path, source }),
        Err(e) => {
            return Err(HostsError::Read {
                path,
                source: io::Error::other(e),
            });
        }
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
    config.client_certificates = names.iter().filter(|n| n.ends_with(".cert")).count();
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
    let mut client_certificates = 0;
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
        client_certificates = certs.len();
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
        client_certificates,
    })
}

/// A server or host URL from `hosts.toml`, resolved.
#[derive(Debug, Clone)]
pub(super) struct HostUrl {
    pub(super) scheme: Scheme,
    pub(super) host: String,
    pub(super) path: String,
    /// Written with `https://` (so `--insecure-registry` keeps TLS and only skips verify).
    pub(super) explicit_https: bool,
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
