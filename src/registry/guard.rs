//! The address guard: where requests and credentials may go.
//!
//! Rules (checked before any request leaves the process):
//! - a token realm must be `https` (plain `http` only when its registry endpoint is itself
//!   plain HTTP, i.e. configured insecure), carry no userinfo, and may point at a loopback,
//!   link-local or cloud-metadata address only when the registry itself is on such an
//!   address; a cloud-metadata address only ever as a registry endpoint itself, never as
//!   a realm or redirect target of another host (a loopback registry may use a loopback
//!   realm, but must not send us, or credentials, to 169.254.169.254);
//! - redirects follow the same rules and never downgrade https to http;
//! - names are checked on the addresses they actually resolve to, in the resolver that the
//!   HTTP client connects with, so a DNS answer that changes between the check and the
//!   connection (DNS rebinding) is still caught;
//! - with [`GuardPolicy::deny_special_registries`] (the webhook), registries on those
//!   addresses are refused too, as are hosts on the deny list or off the allow list.
//!
//! Credentials are attached by [`super::client`] only to the endpoint they matched and to its
//! validated realm; reqwest strips `Authorization` on cross-host redirects.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Url;

/// Address classes that a name chosen by someone else must not reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// Cloud metadata services: 169.254.169.254, fd00:ec2::254, 100.100.100.200.
    Metadata,
    /// 0.0.0.0, ::.
    Unspecified,
    /// Anything else.
    Ordinary,
}

/// Classify one address.
pub fn classify(ip: IpAddr) -> AddrClass {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => {
            if v4 == Ipv4Addr::new(169, 254, 169, 254) || v4 == Ipv4Addr::new(100, 100, 100, 200) {
                AddrClass::Metadata
            } else if v4.is_loopback() {
                AddrClass::Loopback
            } else if v4.is_link_local() {
                AddrClass::LinkLocal
            } else if v4.is_unspecified() {
                AddrClass::Unspecified
            } else {
                AddrClass::Ordinary
            }
        }
        IpAddr::V6(v6) => {
            let metadata: Ipv6Addr = "fd00:ec2::254".parse().expect("constant address");
            if v6 == metadata {
                AddrClass::Metadata
            } else if v6.is_loopback() {
                AddrClass::Loopback
            } else if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                AddrClass::LinkLocal
            } else if v6.is_unspecified() {
                AddrClass::Unspecified
            } else {
                AddrClass::Ordinary
            }
        }
    }
}

/// Configuration of the guard.
#[derive(Debug, Clone, Default)]
pub struct GuardPolicy {
    /// Refuse registries (not only realms) on loopback, link-local, metadata and
    /// unspecified addresses. Off for the CLI (a person may probe a local registry), on for
    /// the webhook, where image names come from whoever writes a Job.
    pub deny_special_registries: bool,
    /// Registry hosts (`host` or `*.domain` globs, no port) that are always refused.
    pub deny_hosts: Vec<String>,
    /// When non-empty, only these registry hosts (same syntax) may be contacted.
    pub allow_hosts: Vec<String>,
    /// Addresses always refused (for example the cluster's API server).
    pub deny_addrs: Vec<IpAddr>,
}

/// A refusal, with the reason in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GuardError(pub String);

/// Shared guard state; cheap to clone (one `Arc`).
#[derive(Debug, Clone)]
pub struct Guard {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    policy: GuardPolicy,
    /// Hosts (no port) allowed to resolve to special addresses: registry endpoints (unless
    /// the policy forbids) and realms of registries that are themselves special.
    special_ok: RwLock<HashSet<String>>,
    /// Hosts whose resolution produced a special address.
    resolved_special: RwLock<HashSet<String>>,
    /// Hosts (no port) admitted as registry endpoints: the only hosts that may be on a
    /// cloud-metadata address.
    registries: RwLock<HashSet<String>>,
}

fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern.eq_ignore_ascii_case(host),
    }
}

/// The host part of a URL without brackets, lowercased.
fn url_host(url: &Url) -> Option<String> {
    url.host_str().map(|h| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()
    })
}

impl Guard {
    /// A guard with the given policy.
    pub fn new(policy: GuardPolicy) -> Guard {
        Guard {
            inner: Arc::new(Inner {
                policy,
                special_ok: RwLock::new(HashSet::new()),
                resolved_special: RwLock::new(HashSet::new()),
                registries: RwLock::new(HashSet::new()),
            }),
        }
    }

    fn is_special_ok(&self, host: &str) -> bool {
        self.inner
            .special_ok
            .read()
            .expect("guard lock")
            .contains(host)
    }

    /// Check a registry endpoint host (`host` or `host:port`) before contacting it, and
    /// remember it as a registry. Errors when the policy refuses the host.
    pub fn admit_registry(&self, endpoint_host: &str) -> Result<(), GuardError> {
        let host = strip_port(endpoint_host);
        let p = &self.inner.policy;
        if p.deny_hosts.iter().any(|d| host_matches(d, &host)) {
            return Err(GuardError(format!(
                "registry host {host} is on the deny list"
            )));
        }
        if !p.allow_hosts.is_empty() && !p.allow_hosts.iter().any(|a| host_matches(a, &host)) {
            return Err(GuardError(format!(
                "registry host {host} is not on the allow list"
            )));
        }
        self.inner
            .registries
            .write()
            .expect("guard lock")
            .insert(host.clone());
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_ip(&host, ip, !p.deny_special_registries)?;
        }
        if !p.deny_special_registries {
            self.inner
                .special_ok
                .write()
                .expect("guard lock")
                .insert(host);
        }
        Ok(())
    }

    fn check_ip(&self, host: &str, ip: IpAddr, special_allowed: bool) -> Result<(), GuardError> {
        if self.inner.policy.deny_addrs.contains(&ip) {
            return Err(GuardError(format!(
                "{host} is {ip}, which is on the deny list"
            )));
        }
        let class = classify(ip);
        let allowed = match class {
            AddrClass::Ordinary => true,
            // Metadata services only when the user named one as the registry.
            AddrClass::Metadata => {
                special_allowed
                    && self
                        .inner
                        .registries
                        .read()
                        .expect("guard lock")
                        .contains(host)
            }
            _ => special_allowed,
        };
        if !allowed {
            return Err(GuardError(format!(
                "{host} is {ip}, a {} address",
                match class {
                    AddrClass::Loopback => "loopback",
                    AddrClass::LinkLocal => "link-local",
                    AddrClass::Metadata => "cloud metadata",
                    AddrClass::Unspecified => "unspecified",
                    AddrClass::Ordinary => "ordinary",
                }
            )));
        }
        Ok(())
    }

    /// True when the registry endpoint host is itself on a special address (an IP literal,
    /// or a name that resolved to one).
    fn registry_is_special(&self, endpoint_host: &str) -> bool {
        let host = strip_port(endpoint_host);
        match host.parse::<IpAddr>() {
            Ok(ip) => classify(ip) != AddrClass::Ordinary,
            Err(_) => self
                .inner
                .resolved_special
                .read()
                .expect("guard lock")
                .contains(&host),
        }
    }

    /// Validate a token realm announced by `endpoint_host` (served over `endpoint_scheme`)
    /// before any request or credential goes to it.
    pub fn admit_realm(
        &self,
        realm: &Url,
        endpoint_host: &str,
        endpoint_scheme: &str,
    ) -> Result<(), GuardError> {
        match realm.scheme() {
            "https" => {}
            "http" if endpoint_scheme == "http" => {}
            "http" => {
                return Err(GuardError(format!(
                    "token realm {} is plain http while the registry uses https",
                    super::error::redact_url(realm)
                )));
            }
            other => return Err(GuardError(format!("token realm has scheme {other:?}"))),
        }
        if !realm.username().is_empty() || realm.password().is_some() {
            return Err(GuardError("token realm carries userinfo".to_string()));
        }
        let host = url_host(realm).ok_or_else(|| GuardError("token realm has no host".into()))?;
        let special_allowed = self.registry_is_special(endpoint_host);
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_ip(&host, ip, special_allowed)?;
        }
        if special_allowed {
            self.inner
                .special_ok
                .write()
                .expect("guard lock")
                .insert(host);
        }
        Ok(())
    }

    /// Check any outgoing URL (registry request, token request, redirect target): no
    /// userinfo; an IP literal must be allowed for that host.
    pub fn admit_url(&self, url: &Url) -> Result<(), GuardError> {
        if !url.username().is_empty() || url.password().is_some() {
            return Err(GuardError("URL carries userinfo".to_string()));
        }
        let host = url_host(url).ok_or_else(|| GuardError("URL has no host".into()))?;
        if let Ok(ip) = host.parse::<IpAddr>() {
            let ok = self.is_special_ok(&host);
            self.check_ip(&host, ip, ok)?;
        }
        Ok(())
    }

    /// Check a redirect hop from `previous` to `next`.
    pub fn admit_redirect(&self, previous: &Url, next: &Url) -> Result<(), GuardError> {
        if previous.scheme() == "https" && next.scheme() != "https" {
            return Err(GuardError(format!(
                "redirect from https to {}",
                super::error::redact_url(next)
            )));
        }
        self.admit_url(next)
    }

    /// The DNS resolver the HTTP clients connect through: resolves with the system
    /// resolver, then drops every address this host may not reach.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver {
            guard: self.clone(),
        })
    }

    fn filter(&self, host: &str, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, GuardError> {
        let special_ok = self.is_special_ok(host);
        if addrs
            .iter()
            .any(|a| classify(a.ip()) != AddrClass::Ordinary)
        {
            self.inner
                .resolved_special
                .write()
                .expect("guard lock")
                .insert(host.to_string());
        }
        let mut refused = None;
        let kept: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| match self.check_ip(host, a.ip(), special_ok) {
                Ok(()) => true,
                Err(e) => {
                    refused = Some(e);
                    false
                }
            })
            .collect();
        match (kept.is_empty(), refused) {
            (true, Some(e)) => Err(e),
            _ => Ok(kept),
        }
    }
}

fn strip_port(host_port: &str) -> String {
    let h = if let Some(rest) = host_port.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else if host_port.matches(':').count() == 1 {
        host_port.split(':').next().unwrap_or(host_port)
    } else {
        host_port
    };
    h.to_ascii_lowercase()
}

/// reqwest DNS resolver that applies the [`Guard`] to resolved addresses.
#[derive(Debug)]
pub struct GuardedResolver {
    guard: Guard,
}

/// Resolution failure that names the host, so the message can say "cannot resolve".
#[derive(Debug, thiserror::Error)]
#[error("cannot resolve {host}: {message}")]
pub struct DnsError {
    /// The name looked up.
    pub host: String,
    /// The resolver's message.
    pub message: String,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let host = name.as_str().to_ascii_lowercase();
        Box::pin(async move {
            let looked_up = tokio::net::lookup_host((host.clone(), 0)).await;
            let addrs: Vec<SocketAddr> = match looked_up {
                Ok(a) => a.collect(),
                Err(e) => {
                    return Err(Box::new(DnsError {
                        host,
                        message: e.to_string(),
                    })
                        as Box<dyn std::error::Error + Send + Sync>);
                }
            };
            let kept = guard.filter(&host, addrs).map_err(Box::new)?;
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn classification() {
        assert_eq!(classify("127.0.0.1".parse().unwrap()), AddrClass::Loopback);
        assert_eq!(
            classify("169.254.169.254".parse().unwrap()),
            AddrClass::Metadata
        );
        assert_eq!(
            classify("169.254.1.2".parse().unwrap()),
            AddrClass::LinkLocal
        );
        assert_eq!(classify("fe80::1".parse().unwrap()), AddrClass::LinkLocal);
        assert_eq!(
            classify("fd00:ec2::254".parse().unwrap()),
            AddrClass::Metadata
        );
        assert_eq!(
            classify("::ffff:127.0.0.1".parse().unwrap()),
            AddrClass::Loopback
        );
        assert_eq!(classify("10.1.2.3".parse().unwrap()), AddrClass::Ordinary);
    }

    #[test]
    fn realm_rules() {
        let g = Guard::new(GuardPolicy::default());
        g.admit_registry("registry.example.com").unwrap();
        // A public registry may not send us to loopback or metadata addresses.
        assert!(
            g.admit_realm(
                &url("https://127.0.0.1/token"),
                "registry.example.com",
                "https"
            )
            .is_err()
        );
        assert!(
            g.admit_realm(
                &url("https://169.254.169.254/t"),
                "registry.example.com",
                "https"
            )
            .is_err()
        );
        assert!(
            g.admit_realm(
                &url("http://auth.example.com/t"),
                "registry.example.com",
                "https"
            )
            .is_err()
        );
        assert!(
            g.admit_realm(
                &url("https://u:p@auth.example.com/t"),
                "registry.example.com",
                "https"
            )
            .is_err()
        );
        assert!(
            g.admit_realm(
                &url("https://auth.example.com/t"),
                "registry.example.com",
                "https"
            )
            .is_ok()
        );
        // A loopback registry may use a loopback realm, and a plain-http one an http realm.
        g.admit_registry("127.0.0.1:5000").unwrap();
        assert!(
            g.admit_realm(&url("https://127.0.0.1:5001/t"), "127.0.0.1:5000", "https")
                .is_ok()
        );
        assert!(
            g.admit_realm(&url("http://127.0.0.1:5001/t"), "127.0.0.1:5000", "http")
                .is_ok()
        );
    }

    #[test]
    fn metadata_address_only_as_the_registry_itself() {
        let g = Guard::new(GuardPolicy::default());
        g.admit_registry("127.0.0.1:5000").unwrap();
        // A loopback registry is special, but that does not open the metadata service.
        assert!(
            g.admit_realm(
                &url("https://169.254.169.254/token"),
                "127.0.0.1:5000",
                "https"
            )
            .is_err()
        );
        assert!(
            g.admit_realm(&url("https://[fd00:ec2::254]/t"), "127.0.0.1:5000", "https")
                .is_err()
        );
        // Nor does a realm name that resolves there (rebinding).
        g.admit_realm(&url("https://auth.example/t"), "127.0.0.1:5000", "https")
            .unwrap();
        let meta = vec!["169.254.169.254:443".parse().unwrap()];
        assert!(g.filter("auth.example", meta).is_err());
        // Other link-local addresses follow the special-registry rule as before.
        assert!(
            g.admit_realm(&url("https://169.254.1.1/t"), "127.0.0.1:5000", "https")
                .is_ok()
        );
        // Someone who names the metadata address as the registry gets what they asked for.
        g.admit_registry("169.254.169.254").unwrap();
        assert!(
            g.admit_realm(
                &url("https://169.254.169.254/token"),
                "169.254.169.254",
                "https"
            )
            .is_ok()
        );
    }

    #[test]
    fn webhook_policy_refuses_special_registries() {
        let g = Guard::new(GuardPolicy {
            deny_special_registries: true,
            ..Default::default()
        });
        assert!(g.admit_registry("169.254.169.254").is_err());
        assert!(g.admit_registry("127.0.0.1:5000").is_err());
        assert!(g.admit_registry("[::1]:5000").is_err());
        assert!(g.admit_registry("ghcr.io").is_ok());
        let addrs = vec!["127.0.0.1:443".parse().unwrap()];
        assert!(
            g.filter("ghcr.io", addrs).is_err(),
            "rebinding to loopback is refused"
        );
    }

    #[test]
    fn allow_and_deny_lists() {
        let g = Guard::new(GuardPolicy {
            allow_hosts: vec!["*.example.com".into(), "ghcr.io".into()],
            deny_hosts: vec!["bad.example.com".into()],
            ..Default::default()
        });
        assert!(g.admit_registry("r.example.com:5000").is_ok());
        assert!(g.admit_registry("ghcr.io").is_ok());
        assert!(g.admit_registry("bad.example.com").is_err());
        assert!(g.admit_registry("docker.io").is_err());
    }

    #[test]
    fn redirects_never_downgrade() {
        let g = Guard::new(GuardPolicy::default());
        assert!(
            g.admit_redirect(&url("https://a.example/x"), &url("http://a.example/x"))
                .is_err()
        );
        assert!(
            g.admit_redirect(
                &url("https://a.example/x"),
                &url("https://169.254.169.254/")
            )
            .is_err()
        );
        assert!(
            g.admit_redirect(&url("https://a.example/x"), &url("https://b.example/y"))
                .is_ok()
        );
    }
}
