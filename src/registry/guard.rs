//! The address guard: which addresses requests may reach.
//!
//! The policy is a set of allowed [`AddrClass`]es per kind of destination, decided from the
//! configuration and the exchange at hand, never from what earlier checks saw (a verdict
//! must not depend on which images were checked before it in the same process):
//! - a **registry endpoint** (the host of an image reference, or a `hosts.toml` mirror) may
//!   be on any class the policy's [`GuardPolicy::registries`] lists: every class for the
//!   CLI (a person may probe a local registry), ordinary addresses only for the webhook,
//!   where image names come from whoever writes a Job;
//! - a **referral**, a host the registry sent us to (a token realm, a redirect target), may
//!   be on an ordinary address, or on the class of the address that referred us when the
//!   policy allows registries there: a loopback registry may use a loopback realm, but a
//!   public registry can't send us, or credentials, to 127.0.0.1 or 169.254.169.254, and a
//!   loopback registry can't send us to the metadata service;
//! - a token realm must be `https` (plain `http` only when its registry endpoint is itself
//!   plain HTTP), and no URL may carry userinfo; redirects never downgrade https to http
//!   (checked where redirects are followed, hop by hop, in the HTTP layer);
//! - names are checked on the addresses they actually resolve to, in the resolver that the
//!   HTTP client connects with ([`Guard::resolver`]), so a DNS answer that changes between
//!   a check and the connection (DNS rebinding) is still caught; IP literals are checked
//!   before anything is sent.
//!
//! With a proxy (`HTTPS_PROXY` and friends) the proxy is trusted wherever it is, and the
//! registry's name is resolved by the proxy, not here: no address check on the registry is
//! possible then, and protection from metadata and internal addresses is the proxy's job.
//!
//! Credentials are attached only to the endpoint they matched and to its validated realm,
//! and dropped on a redirect to another host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::Url;

/// The kinds of address a destination may be on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum AddrClass {
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

impl AddrClass {
    fn bit(self) -> u8 {
        match self {
            AddrClass::Loopback => 1,
            AddrClass::LinkLocal => 2,
            AddrClass::Metadata => 4,
            AddrClass::Unspecified => 8,
            AddrClass::Ordinary => 16,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AddrClass::Loopback => "loopback",
            AddrClass::LinkLocal => "link-local",
            AddrClass::Metadata => "cloud metadata",
            AddrClass::Unspecified => "unspecified",
            AddrClass::Ordinary => "ordinary",
        }
    }
}

/// Classify one address.
pub(crate) fn classify(ip: IpAddr) -> AddrClass {
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

/// A set of [`AddrClass`]es.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Classes(u8);

impl Classes {
    /// Ordinary addresses only.
    pub(crate) const ORDINARY: Classes = Classes(16);
    /// Every class.
    pub(crate) const ALL: Classes = Classes(31);

    /// This set plus `c`.
    pub(crate) const fn with(self, c: AddrClass) -> Classes {
        Classes(
            self.0
                | match c {
                    AddrClass::Loopback => 1,
                    AddrClass::LinkLocal => 2,
                    AddrClass::Metadata => 4,
                    AddrClass::Unspecified => 8,
                    AddrClass::Ordinary => 16,
                },
        )
    }

    /// Whether `c` is in the set.
    pub(crate) fn contains(self, c: AddrClass) -> bool {
        self.0 & c.bit() != 0
    }
}

/// Who chose a destination, which decides the classes it may be on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Destination {
    /// A registry endpoint: named by the image reference or by `hosts.toml`.
    Registry,
    /// A host a response sent us to (a token realm, a redirect target); `from` is the class
    /// of the address that response came from.
    Referral {
        /// Class of the referring server's address.
        from: AddrClass,
    },
}

/// Configuration of the guard.
#[derive(Debug, Clone)]
pub(crate) struct GuardPolicy {
    /// Classes a registry endpoint may be on. [`Classes::ALL`] for the CLI;
    /// [`Classes::ORDINARY`] for the webhook (plus loopback with
    /// `--allow-loopback-registries`, for tests and kind clusters).
    pub registries: Classes,
    /// Registry hosts (`host` or `*.domain` globs, no port) that are always refused.
    pub deny_hosts: Vec<String>,
    /// When non-empty, only these registry hosts (same syntax) may be contacted.
    pub allow_hosts: Vec<String>,
    /// Addresses always refused (for example the cluster's API server).
    pub deny_addrs: Vec<IpAddr>,
}

impl Default for GuardPolicy {
    /// The CLI's policy: registries anywhere, referrals by the rules above.
    fn default() -> Self {
        GuardPolicy {
            registries: Classes::ALL,
            deny_hosts: Vec::new(),
            allow_hosts: Vec::new(),
            deny_addrs: Vec::new(),
        }
    }
}

impl GuardPolicy {
    /// The webhook's policy. Image names come from whoever writes a Job, so registries on
    /// special addresses are refused (loopback only with `allow_loopback`, for tests and kind
    /// clusters), and so is the cluster's API server: `service_host` is the value of
    /// `KUBERNETES_SERVICE_HOST` (an IP literal, brackets allowed; anything else adds nothing).
    pub(crate) fn webhook(
        allow_loopback: bool,
        deny_hosts: Vec<String>,
        allow_hosts: Vec<String>,
        service_host: Option<&str>,
    ) -> Self {
        GuardPolicy {
            registries: if allow_loopback {
                Classes::ORDINARY.with(AddrClass::Loopback)
            } else {
                Classes::ORDINARY
            },
            deny_hosts,
            allow_hosts,
            deny_addrs: service_host
                .and_then(|h| h.trim_matches(['[', ']']).parse().ok())
                .into_iter()
                .collect(),
        }
    }
}

/// A refusal, with the reason in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct GuardError {
    /// The reason, one line.
    pub message: String,
    /// The host and the class of the refused address, when the refusal is about one (not
    /// a deny list, a scheme or userinfo): the engine tells "refused to look at a loopback
    /// registry" (no fact about the image) from a registry that sent us to one.
    pub refused: Option<(String, AddrClass)>,
}

impl GuardError {
    /// A refusal that is not about an address class.
    pub(crate) fn new(message: impl Into<String>) -> GuardError {
        GuardError {
            message: message.into(),
            refused: None,
        }
    }
}

/// The guard: a policy, shared cheaply (one `Arc`). Stateless: every decision is a
/// function of the policy and its arguments.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    policy: Arc<GuardPolicy>,
    /// Proxy hosts from the environment, trusted wherever they are: the operator chose
    /// them. Behind a proxy the registry's address is the proxy's to check.
    proxies: Arc<Vec<String>>,
}

/// The proxy hosts the HTTP clients will use, from the variables reqwest reads
/// (hyper-util `client/proxy/matcher.rs`: `ALL_PROXY`, `HTTPS_PROXY`, `HTTP_PROXY`, upper
/// case first, then lower case).
fn proxy_hosts() -> Vec<String> {
    let mut hosts = Vec::new();
    for pair in [
        ["ALL_PROXY", "all_proxy"],
        ["HTTPS_PROXY", "https_proxy"],
        ["HTTP_PROXY", "http_proxy"],
    ] {
        let Some(value) = pair
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        else {
            continue;
        };
        // A proxy without a scheme is http:// to reqwest too.
        let with_scheme = if value.contains("://") {
            value
        } else {
            format!("http://{value}")
        };
        if let Some(h) = Url::parse(&with_scheme).ok().as_ref().and_then(url_host) {
            hosts.push(h);
        }
    }
    hosts
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
    pub(crate) fn new(policy: GuardPolicy) -> Guard {
        Guard {
            policy: Arc::new(policy),
            proxies: Arc::new(proxy_hosts()),
        }
    }

    /// The classes a destination may be on.
    pub(crate) fn allowed(&self, destination: Destination) -> Classes {
        match destination {
            Destination::Registry => self.policy.registries,
            Destination::Referral { from } if self.policy.registries.contains(from) => {
                Classes::ORDINARY.with(from)
            }
            Destination::Referral { .. } => Classes::ORDINARY,
        }
    }

    /// Check a registry endpoint host (`host` or `host:port`) before contacting it: the
    /// deny and allow lists, and an IP literal's class.
    pub(crate) fn admit_registry(&self, endpoint_host: &str) -> Result<(), GuardError> {
        let host = strip_port(endpoint_host);
        let p = &self.policy;
        if p.deny_hosts.iter().any(|d| host_matches(d, &host)) {
            return Err(GuardError::new(format!(
                "registry host {host} is on the deny list"
            )));
        }
        if !p.allow_hosts.is_empty() && !p.allow_hosts.iter().any(|a| host_matches(a, &host)) {
            return Err(GuardError::new(format!(
                "registry host {host} is not on the allow list"
            )));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_ip(&host, ip, p.registries)?;
        }
        Ok(())
    }

    fn check_ip(&self, host: &str, ip: IpAddr, allowed: Classes) -> Result<(), GuardError> {
        if self.policy.deny_addrs.contains(&ip) {
            return Err(GuardError::new(format!(
                "{host} is {ip}, which is on the deny list"
            )));
        }
        let class = classify(ip);
        if !allowed.contains(class) {
            return Err(GuardError {
                message: format!("{host} is {ip}, a {} address", class.name()),
                refused: Some((host.to_string(), class)),
            });
        }
        Ok(())
    }

    /// Validate a token realm announced by a registry endpoint served over
    /// `endpoint_scheme` from an address of class `from`, before any request or credential
    /// goes to it.
    pub(crate) fn admit_realm(
        &self,
        realm: &Url,
        endpoint_scheme: &str,
        from: AddrClass,
    ) -> Result<(), GuardError> {
        match realm.scheme() {
            "https" => {}
            "http" if endpoint_scheme == "http" => {}
            "http" => {
                return Err(GuardError::new(format!(
                    "token realm {} is plain http while the registry uses https",
                    super::redact::redact_url(realm)
                )));
            }
            other => return Err(GuardError::new(format!("token realm has scheme {other:?}"))),
        }
        if !realm.username().is_empty() || realm.password().is_some() {
            return Err(GuardError::new("token realm carries userinfo".to_string()));
        }
        self.admit_url(realm, self.allowed(Destination::Referral { from }))
    }

    /// Check any outgoing URL (registry request, token request, redirect target) against
    /// `allowed`: no userinfo; an IP literal must be of an allowed class.
    pub(crate) fn admit_url(&self, url: &Url, allowed: Classes) -> Result<(), GuardError> {
        if !url.username().is_empty() || url.password().is_some() {
            return Err(GuardError::new("URL carries userinfo".to_string()));
        }
        let host = url_host(url).ok_or_else(|| GuardError::new("URL has no host"))?;
        if let Ok(ip) = host.parse::<IpAddr>() {
            self.check_ip(&host, ip, allowed)?;
        }
        Ok(())
    }

    /// The DNS resolver for clients that may reach `allowed`: resolves with the system
    /// resolver, then drops every address of another class.
    pub(crate) fn resolver(&self, allowed: Classes) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver {
            guard: self.clone(),
            allowed,
        })
    }

    fn filter(
        &self,
        host: &str,
        addrs: Vec<SocketAddr>,
        allowed: Classes,
    ) -> Result<Vec<SocketAddr>, GuardError> {
        // Only the proxy itself is resolved when one is configured (the registry's name
        // goes to it in the CONNECT), so this trusts nothing but the operator's choice.
        if self.proxies.iter().any(|p| p == host) {
            return Ok(addrs);
        }
        let mut refused = None;
        let kept: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| match self.check_ip(host, a.ip(), allowed) {
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
pub(crate) struct GuardedResolver {
    guard: Guard,
    allowed: Classes,
}

/// Resolution failure that names the host, so the message can say "cannot resolve".
#[derive(Debug, thiserror::Error)]
#[error("cannot resolve {host}: {message}")]
pub(crate) struct DnsError {
    /// The name looked up.
    pub host: String,
    /// The resolver's message.
    pub message: String,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        let allowed = self.allowed;
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
            // Boxed as itself (not as a `Box<GuardError>`, which `?` would wrap once more),
            // so the HTTP layer can find it in the error chain and report a refusal rather
            // than a connection failure.
            let kept = guard
                .filter(&host, addrs, allowed)
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
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

    const LOOPBACK: AddrClass = AddrClass::Loopback;
    const ORDINARY: AddrClass = AddrClass::Ordinary;

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
            g.admit_realm(&url("https://127.0.0.1/token"), "https", ORDINARY)
                .is_err()
        );
        assert!(
            g.admit_realm(&url("https://169.254.169.254/t"), "https", ORDINARY)
                .is_err()
        );
        assert!(
            g.admit_realm(&url("http://auth.example.com/t"), "https", ORDINARY)
                .is_err()
        );
        assert!(
            g.admit_realm(&url("https://u:p@auth.example.com/t"), "https", ORDINARY)
                .is_err()
        );
        assert!(
            g.admit_realm(&url("https://auth.example.com/t"), "https", ORDINARY)
                .is_ok()
        );
        // A loopback registry may use a loopback realm, and a plain-http one an http realm.
        g.admit_registry("127.0.0.1:5000").unwrap();
        assert!(
            g.admit_realm(&url("https://127.0.0.1:5001/t"), "https", LOOPBACK)
                .is_ok()
        );
        assert!(
            g.admit_realm(&url("http://127.0.0.1:5001/t"), "http", LOOPBACK)
                .is_ok()
        );
    }

    #[test]
    fn metadata_address_only_as_the_registry_itself() {
        let g = Guard::new(GuardPolicy::default());
        g.admit_registry("127.0.0.1:5000").unwrap();
        // A loopback registry is special, but that does not open the metadata service.
        assert!(
            g.admit_realm(&url("https://169.254.169.254/token"), "https", LOOPBACK)
                .is_err()
        );
        assert!(
            g.admit_realm(&url("https://[fd00:ec2::254]/t"), "https", LOOPBACK)
                .is_err()
        );
        // Nor does a realm name that resolves there (rebinding).
        g.admit_realm(&url("https://auth.example/t"), "https", LOOPBACK)
            .unwrap();
        let meta = vec!["169.254.169.254:443".parse().unwrap()];
        let referral = g.allowed(Destination::Referral { from: LOOPBACK });
        assert!(g.filter("auth.example", meta, referral).is_err());
        // Other special classes are not opened by a loopback registry either.
        assert!(
            g.admit_realm(&url("https://169.254.1.1/t"), "https", LOOPBACK)
                .is_err()
        );
        // Someone who names the metadata address as the registry gets what they asked for.
        g.admit_registry("169.254.169.254").unwrap();
        assert!(
            g.admit_realm(
                &url("https://169.254.169.254/token"),
                "https",
                AddrClass::Metadata
            )
            .is_ok()
        );
    }

    #[test]
    fn verdicts_do_not_depend_on_history() {
        // Contacting a loopback registry first must not open loopback to a realm that a
        // public registry announces afterwards.
        let g = Guard::new(GuardPolicy::default());
        g.admit_registry("127.0.0.1:5000").unwrap();
        g.admit_realm(&url("https://127.0.0.1:5001/t"), "https", LOOPBACK)
            .unwrap();
        assert!(
            g.admit_realm(&url("https://127.0.0.1:5001/t"), "https", ORDINARY)
                .is_err()
        );
        let lo = vec!["127.0.0.1:5001".parse().unwrap()];
        let referral = g.allowed(Destination::Referral { from: ORDINARY });
        assert!(g.filter("localhost", lo, referral).is_err());
    }

    #[test]
    fn webhook_policy_refuses_special_registries() {
        let g = Guard::new(GuardPolicy {
            registries: Classes::ORDINARY,
            ..Default::default()
        });
        assert!(g.admit_registry("169.254.169.254").is_err());
        assert!(g.admit_registry("127.0.0.1:5000").is_err());
        assert!(g.admit_registry("[::1]:5000").is_err());
        assert!(g.admit_registry("ghcr.io").is_ok());
        let addrs = vec!["127.0.0.1:443".parse().unwrap()];
        assert!(
            g.filter("ghcr.io", addrs, g.allowed(Destination::Registry))
                .is_err(),
            "rebinding to loopback is refused"
        );
        // With loopback let through (tests, kind clusters), the other special classes stay
        // refused, and so does a loopback registry's referral to the metadata service.
        let g = Guard::new(GuardPolicy {
            registries: Classes::ORDINARY.with(AddrClass::Loopback),
            ..Default::default()
        });
        assert!(g.admit_registry("127.0.0.1:5000").is_ok());
        assert!(g.admit_registry("169.254.169.254").is_err());
        assert!(g.admit_registry("169.254.1.1:5000").is_err());
        assert!(g.admit_registry("0.0.0.0:5000").is_err());
        assert!(
            g.admit_realm(&url("https://169.254.169.254/t"), "https", LOOPBACK)
                .is_err()
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
    fn a_configured_proxy_is_trusted_wherever_it_is() {
        let g = Guard {
            proxies: Arc::new(vec!["localhost".into()]),
            ..Guard::new(GuardPolicy {
                registries: Classes::ORDINARY,
                ..Default::default()
            })
        };
        let lo = vec!["127.0.0.1:3128".parse().unwrap()];
        assert_eq!(
            g.filter("localhost", lo.clone(), Classes::ORDINARY),
            Ok(lo.clone())
        );
        // Only the proxy: another name on loopback is still refused.
        assert!(g.filter("elsewhere", lo, Classes::ORDINARY).is_err());
    }

    #[tokio::test]
    async fn a_name_resolving_to_a_refused_class_fails_with_the_guards_error() {
        // `localhost` is in every /etc/hosts, on loopback.
        let g = Guard::new(GuardPolicy::default());
        let resolver = g.resolver(Classes::ORDINARY);
        let Err(e) = resolver.resolve("localhost".parse().unwrap()).await else {
            panic!("localhost resolved to an ordinary address");
        };
        let refused = e
            .downcast_ref::<GuardError>()
            .expect("the guard's own error");
        assert!(
            refused.message.starts_with("localhost is ")
                && refused.message.ends_with(", a loopback address"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn deny_addrs_win_over_classes() {
        let g = Guard::new(GuardPolicy {
            deny_addrs: vec!["10.96.0.1".parse().unwrap()],
            ..Default::default()
        });
        assert!(g.admit_registry("10.96.0.1:443").is_err());
        assert!(g.admit_registry("10.96.0.2:443").is_ok());
    }

    #[test]
    fn the_webhook_policy_refuses_the_api_server_and_lets_loopback_through_only_when_asked() {
        let p = GuardPolicy::webhook(false, vec![], vec![], Some("[fd00::1]"));
        assert_eq!(p.deny_addrs, vec!["fd00::1".parse::<IpAddr>().unwrap()]);
        assert_eq!(p.registries, Classes::ORDINARY);
        let p = GuardPolicy::webhook(true, vec!["d".into()], vec!["a".into()], Some("10.96.0.1"));
        assert_eq!(p.deny_addrs, vec!["10.96.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(p.registries, Classes::ORDINARY.with(AddrClass::Loopback));
        assert_eq!(
            (p.deny_hosts, p.allow_hosts),
            (vec!["d".to_string()], vec!["a".to_string()])
        );
        // A host name (not an address) and no variable add nothing.
        assert!(
            GuardPolicy::webhook(false, vec![], vec![], Some("kubernetes"))
                .deny_addrs
                .is_empty()
        );
        assert!(
            GuardPolicy::webhook(false, vec![], vec![], None)
                .deny_addrs
                .is_empty()
        );
    }
}
