//! The registry configuration the webhook (or `inject`) hands to the check it injects, so
//! that the init container reaches a registry the way the webhook did: plain HTTP where
//! `--insecure-registry` said so, the private CAs of `--ca-file`, the mirrors, `skip_verify`
//! and plain-HTTP servers of a containerd `certs.d` tree, and the metered-registry settings.
//!
//! The webhook's settings live in files of its own namespace, which pods of other
//! namespaces can't mount; so the configuration travels inside the workload, as JSON in a
//! pod-template annotation (`k8s::inject` writes it and its downward-API volume), and
//! `check --registry-config FILE` reads it back. It holds resolved endpoints, not files:
//!
//! ```json
//! {"caBundles": ["-----BEGIN CERTIFICATE-----…"],
//!  "registries": {"10.0.0.5:5000": [{"url": "http://10.0.0.5:5000/v2"}],
//!                 "docker.io": [{"url": "https://mirror.corp/v2", "capabilities": ["pull", "resolve"],
//!                                "ca": ["-----BEGIN CERTIFICATE-----…"], "mirror": true},
//!                               {"url": "https://registry-1.docker.io/v2"}]},
//!  "metered": {"registries": ["docker.io"], "get": "affordable", "margin": 10}}
//! ```
//!
//! A registry is listed only when its endpoints differ from what a check without flags
//! would use (containerd `ConfigureHosts` defaults, [`hosts::endpoints`] without a hosts
//! directory); `metered` only when it differs from the defaults.
//!
//! Never handed over: `header` entries (they may carry `Authorization`: in an annotation
//! they would be readable by anyone who can `get` the Job), and client certificates (the
//! checker never presents them, the webhook neither). A template whose registry needs
//! headers gets no check at all ([`Refusal::Headers`]): a check sent without them could
//! be refused where the node is not, and fail a healthy Job.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::plan::{DEFAULT_METERED_MARGIN, DEFAULT_METERED_REGISTRIES, MeteredGet};
pub use crate::k8s::registry_config::Refusal;
use crate::k8s::registry_config::{HandOver, RegistryHandOver};
use crate::registry::hosts::{self, Capabilities, Endpoint, Scheme};

/// The registry settings of whoever injects the check (the webhook's flags, or `inject`'s).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegistrySettings {
    /// containerd `certs.d` root (`--hosts-dir`).
    pub hosts_dir: Option<PathBuf>,
    /// `--insecure-registry` values.
    pub insecure: Vec<String>,
    /// The PEM text of each `--ca-file`, read once at start.
    pub ca_bundles: Vec<String>,
    /// The metered-registry settings, when they differ from the check's defaults.
    pub metered: Option<Metered>,
}

/// `--metered-registry` and `--metered-get` as handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metered {
    /// Registries whose manifest GETs count as pulls.
    pub registries: Vec<String>,
    /// When an index is fetched there.
    pub get: MeteredGet,
}

impl Metered {
    /// `Some` only when `registries` and `get` are not the check's defaults.
    pub(crate) fn unless_default(registries: &[String], get: MeteredGet) -> Option<Metered> {
        let default = registries
            .iter()
            .map(String::as_str)
            .eq(DEFAULT_METERED_REGISTRIES.iter().copied())
            && get
                == MeteredGet::IfAffordable {
                    margin: DEFAULT_METERED_MARGIN,
                };
        (!default).then(|| Metered {
            registries: registries.to_vec(),
            get,
        })
    }
}

impl RegistryHandOver for RegistrySettings {
    fn hand_over(&self, registries: &[String]) -> Result<HandOver, Refusal> {
        self.hand_over_for(registries)
    }
}

impl RegistrySettings {
    /// The hand-over for a template whose images are on `registries` (reference domains,
    /// each once).
    pub fn hand_over_for(&self, registries: &[String]) -> Result<HandOver, Refusal> {
        let mut wire = Wire {
            ca_bundles: self.ca_bundles.clone(),
            registries: BTreeMap::new(),
            metered: self.metered.as_ref().map(WireMetered::from),
        };
        let mut hosts_out = Vec::new();
        let mut notes = Vec::new();
        for registry in registries {
            let unreadable = |message: String| Refusal::Unreadable {
                registry: registry.clone(),
                message,
            };
            let mut configured =
                hosts::endpoints(self.hosts_dir.as_deref(), registry, &self.insecure)
                    .map_err(|e| unreadable(e.to_string()))?;
            // Only a hint for the injector's own messages (`--insecure-registry` given
            // without the port): said to whoever injects, not a setting to hand over.
            for e in &mut configured {
                if let Some(value) = e.insecure_port_mismatch.take() {
                    notes.push(format!(
                        "--insecure-registry {value} does not cover {}: the port is part of the registry's name",
                        e.host
                    ));
                }
            }
            let plain =
                hosts::endpoints(None, registry, &[]).map_err(|e| unreadable(e.to_string()))?;
            if configured == plain {
                continue;
            }
            let mut list = Vec::new();
            for e in &configured {
                if e.client_certificates > 0 {
                    return Err(Refusal::ClientCertificates {
                        registry: registry.clone(),
                        endpoint: e.host.clone(),
                    });
                }
                if !e.headers.is_empty() {
                    let mut headers: Vec<String> =
                        e.headers.iter().map(|(name, _)| name.clone()).collect();
                    headers.dedup();
                    return Err(Refusal::Headers {
                        registry: registry.clone(),
                        endpoint: e.host.clone(),
                        headers,
                    });
                }
                let ca = e
                    .ca_files
                    .iter()
                    .map(|f| {
                        crate::registry::tls::ca_text(f).map_err(|e| unreadable(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                hosts_out.push((registry.clone(), e.host.clone()));
                list.push(WireEndpoint {
                    url: e.base_url(),
                    capabilities: (e.capabilities != Capabilities::ALL).then(|| {
                        e.capabilities
                            .names()
                            .iter()
                            .map(|s| s.to_string())
                            .collect()
                    }),
                    skip_verify: e.skip_verify,
                    ca,
                    mirror: e.is_mirror,
                });
            }
            wire.registries.insert(registry.clone(), list);
        }
        let empty =
            wire.ca_bundles.is_empty() && wire.registries.is_empty() && wire.metered.is_none();
        Ok(HandOver {
            text: (!empty).then(|| serde_json::to_string(&wire).expect("plain data serializes")),
            hosts: hosts_out,
            notes,
        })
    }
}

/// What `check --registry-config` read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Received {
    /// CAs trusted for every registry (the webhook's `--ca-file`).
    pub ca_bundles: Vec<String>,
    /// Endpoints by registry host, used instead of `--hosts-dir` and `--insecure-registry`.
    pub endpoints: BTreeMap<String, Vec<Endpoint>>,
    /// The metered-registry settings, replacing `--metered-registry` and `--metered-get`.
    pub metered: Option<Metered>,
}

/// Why a `--registry-config` file can't be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct DecodeError(String);

/// Parse the annotation's text. Strict: an unknown key, a bad URL or a CA without a
/// certificate is an error (a check that dropped what it can't read would report a false
/// transient or a false pass). Empty text gives `None` (the downward API writes an empty
/// file for an annotation that isn't there).
pub(crate) fn decode(text: &str) -> Result<Option<Received>, DecodeError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    // An object, not anything serde can read as the struct (a JSON array is one, field by
    // field): the annotation is always an object.
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| DecodeError(e.to_string()))?;
    if !value.is_object() {
        return Err(DecodeError("not a JSON object".into()));
    }
    let wire: Wire = serde_json::from_value(value).map_err(|e| DecodeError(e.to_string()))?;
    let pem = |what: &str, text: &str| -> Result<String, DecodeError> {
        crate::registry::tls::pem_text(text)
            .map(|_| text.to_string())
            .map_err(|e| DecodeError(format!("{what}: {e}")))
    };
    let ca_bundles = wire
        .ca_bundles
        .iter()
        .enumerate()
        .map(|(i, b)| pem(&format!("caBundles[{i}]"), b))
        .collect::<Result<_, _>>()?;
    let mut endpoints = BTreeMap::new();
    for (registry, list) in wire.registries {
        let mut out = Vec::new();
        for (i, w) in list.into_iter().enumerate() {
            let at = format!("registries[{registry:?}][{i}]");
            let (scheme, rest) = match w.url.split_once("://") {
                Some(("http", rest)) => (Scheme::Http, rest),
                Some(("https", rest)) => (Scheme::Https, rest),
                _ => {
                    return Err(DecodeError(format!(
                        "{at}: url {:?} is not http:// or https://",
                        w.url
                    )));
                }
            };
            let (host, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            };
            // The webhook writes each endpoint's API root (`…/v2` as containerd's hosts.toml
            // resolves it, or an `override_path` server's own path), never a bare host: a
            // hand-edited URL without a path would send every request past the API and
            // read a present tag as not found. Refused, naming the fix.
            if path.trim_end_matches('/').is_empty() {
                return Err(DecodeError(format!(
                    "{at}: url {:?} has no path; write the registry API root, e.g. {}/v2",
                    w.url,
                    w.url.trim_end_matches('/')
                )));
            }
            if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '@') {
                return Err(DecodeError(format!(
                    "{at}: url {:?} has no usable host",
                    w.url
                )));
            }
            let capabilities = match &w.capabilities {
                None => Capabilities::ALL,
                Some(names) => capabilities(names)
                    .map_err(|c| DecodeError(format!("{at}: unknown capability {c:?}")))?,
            };
            let ca =
                w.ca.iter()
                    .enumerate()
                    .map(|(j, b)| pem(&format!("{at}.ca[{j}]"), b))
                    .collect::<Result<_, _>>()?;
            out.push(Endpoint {
                scheme,
                host: host.to_string(),
                path: path.to_string(),
                capabilities,
                ca_files: Vec::new(),
                ca_pems: ca,
                skip_verify: w.skip_verify,
                headers: Vec::new(),
                client_certificates: 0,
                is_mirror: w.mirror,
                // A hint about the injector's flags, not a setting: not handed over.
                insecure_port_mismatch: None,
            });
        }
        if out.is_empty() {
            return Err(DecodeError(format!(
                "registries[{registry:?}]: no endpoint"
            )));
        }
        endpoints.insert(registry, out);
    }
    let metered = match wire.metered {
        None => None,
        Some(m) => Some(Metered {
            registries: m.registries,
            get: match (m.get.as_str(), m.margin) {
                ("always", None) => MeteredGet::Always,
                ("never", None) => MeteredGet::Never,
                ("affordable", Some(margin)) => MeteredGet::IfAffordable { margin },
                (get, margin) => {
                    return Err(DecodeError(format!(
                        "metered: get {get:?} with margin {margin:?}: write always or never without a margin, or affordable with one"
                    )));
                }
            },
        }),
    };
    Ok(Some(Received {
        ca_bundles,
        endpoints,
        metered,
    }))
}

/// The capabilities named, or the first unknown name.
fn capabilities(names: &[String]) -> Result<Capabilities, String> {
    let mut c = Capabilities {
        pull: false,
        resolve: false,
        push: false,
        referrers: false,
    };
    for n in names {
        match n.as_str() {
            "pull" => c.pull = true,
            "resolve" => c.resolve = true,
            "push" => c.push = true,
            "referrers" => c.referrers = true,
            other => return Err(other.to_string()),
        }
    }
    Ok(c)
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Wire {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ca_bundles: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    registries: BTreeMap<String, Vec<WireEndpoint>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metered: Option<WireMetered>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WireEndpoint {
    /// `scheme://host[:port]` and the API root, as [`Endpoint::base_url`] writes it.
    url: String,
    /// Absent: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capabilities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "is_false")]
    skip_verify: bool,
    /// PEM text of the endpoint's `ca` files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ca: Vec<String>,
    /// Requests carry `?ns=<registry>`.
    #[serde(default, skip_serializing_if = "is_false")]
    mirror: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireMetered {
    registries: Vec<String>,
    get: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    margin: Option<u64>,
}

impl From<&Metered> for WireMetered {
    fn from(m: &Metered) -> Self {
        let (get, margin) = match m.get {
            MeteredGet::Always => ("always", None),
            MeteredGet::Never => ("never", None),
            MeteredGet::IfAffordable { margin } => ("affordable", Some(margin)),
        };
        WireMetered {
            registries: m.registries.clone(),
            get: get.to_string(),
            margin,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests;
