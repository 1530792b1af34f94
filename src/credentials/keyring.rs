//! Port of the kubelet's `BasicDockerKeyring`: index registry keys, match an image's
//! repository against them, and return every matching credential, most specific first.
//!
//! Source: kubernetes `pkg/credentialprovider/keyring.go` (`BasicDockerKeyring.Add`,
//! `Lookup`, `isDefaultRegistryMatch`, `ParseSchemelessURL`, `SplitURL`, `URLsMatch`,
//! `URLsMatchStr`, `UnionDockerKeyring`), plus the Go standard library pieces it relies on
//! (`net/url.Parse`, `net.SplitHostPort`, `path/filepath.Match`), reproduced here only as
//! far as registry keys and image names exercise them.

use std::collections::HashMap;

mod go;

use super::docker_config::DockerConfig;
use super::{Credential, CredentialSource, SecretKind};
use go::{GoUrl, filepath_match, split_host_port};

/// The keyring key that serves Docker Hub images when nothing else matched
/// (`https://index.docker.io/v1/` indexes to it).
pub(crate) const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

/// The kubelet's `BasicDockerKeyring`: credentials indexed by `host[:port][/path]`.
///
/// - [`Keyring::add`] indexes every key of a config (scheme dropped, a leading `/v1/` or
///   `/v2/` path dropped) and appends its credential to that index key, so credentials
///   from several configs that share a key stay in insertion order;
/// - the index is de-duplicated and sorted in **reverse** lexicographic order, so longer
///   keys with the same prefix and non-wildcard keys come first;
/// - [`Keyring::lookup`] walks the index and returns the credentials of **every** key that
///   [`urls_match_str`] accepts, then falls back to Docker Hub credentials for names
///   [`is_default_registry_match`] accepts.
///
/// All pull secrets of a pod share one keyring (kubernetes
/// `pkg/credentialprovider/secrets/secrets.go`).
#[derive(Clone, Debug, Default)]
pub struct Keyring {
    index: Vec<String>,
    creds: HashMap<String, Vec<Credential>>,
}

impl Keyring {
    /// An empty keyring.
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes every entry of `config` (in key order; see [`DockerConfig`]). `origin` names
    /// the file for [`CredentialSource::origin`], e.g.
    /// `pull secret /secrets/regcred/.dockerconfigjson`.
    ///
    /// A key that Go's `url.Parse` would reject (a bad port, a space in the host, a bad
    /// `%` escape, a control character) is skipped with a warning, as the kubelet does.
    pub fn add(&mut self, config: &DockerConfig, origin: &str) {
        for (key, entry) in config.iter() {
            let value = if key.starts_with("https://") || key.starts_with("http://") {
                key.to_owned()
            } else {
                format!("https://{key}")
            };
            let Some(parsed) = GoUrl::parse(&value) else {
                tracing::warn!(
                    origin,
                    key,
                    "registry key is not a valid URL; ignoring it (kubelet does the same)"
                );
                continue;
            };
            let mut path = parsed.path.as_str();
            if path.starts_with("/v2/") || path.starts_with("/v1/") {
                path = &path[3..];
            }
            let index_key = if !path.is_empty() && path != "/" {
                format!("{}{}", parsed.host, path)
            } else {
                parsed.host.clone()
            };
            self.creds
                .entry(index_key.clone())
                .or_default()
                .push(Credential {
                    username: entry.username.clone(),
                    password: entry.password.clone(),
                    // A pull secret has no identity token: the kubelet's `DockerConfigEntry`
                    // (`pkg/credentialprovider/config.go`) does not decode one.
                    kind: SecretKind::Password,
                    source: CredentialSource {
                        origin: origin.to_owned(),
                        key: key.to_owned(),
                    },
                });
            self.index.push(index_key);
        }
        self.index.sort_unstable_by(|a, b| b.cmp(a));
        self.index.dedup();
    }

    /// Every credential for `repo_to_pull` (the kubelet's fully-qualified repository
    /// without tag or digest, e.g. `docker.io/library/busybox`), in the order the kubelet
    /// tries them. Empty means "pull anonymously".
    pub fn lookup(&self, repo_to_pull: &str) -> Vec<Credential> {
        let mut out = Vec::new();
        for key in &self.index {
            if urls_match_str(key, repo_to_pull) {
                out.extend(self.creds[key].iter().cloned());
            }
        }
        if out.is_empty()
            && is_default_registry_match(repo_to_pull)
            && let Some(hub) = self.creds.get(DEFAULT_REGISTRY_HOST)
        {
            out.extend(hub.iter().cloned());
        }
        out
    }

    /// The keys [`Keyring::lookup`] does not use for `repo_to_pull`, each with why, in
    /// lookup order: what `explain` prints when a pull secret "doesn't work".
    pub(crate) fn misses(&self, repo_to_pull: &str) -> Vec<KeyMiss> {
        let hub_used = self.index.iter().all(|k| !urls_match_str(k, repo_to_pull))
            && is_default_registry_match(repo_to_pull);
        let mut out = Vec::new();
        for key in &self.index {
            let mut reasons = mismatches(key, repo_to_pull);
            if reasons.is_empty() || (key == DEFAULT_REGISTRY_HOST && hub_used) {
                continue;
            }
            if key == DEFAULT_REGISTRY_HOST && is_default_registry_match(repo_to_pull) {
                reasons = vec![Mismatch::HubFallbackUnused];
            }
            for c in &self.creds[key] {
                // A scheme the kubelet keeps explains every other failing part at once.
                let reasons = match c.source.key.split_once("://") {
                    Some((scheme, _)) if scheme != "https" && scheme != "http" => {
                        vec![Mismatch::Scheme {
                            scheme: scheme.to_owned(),
                        }]
                    }
                    _ => reasons.clone(),
                };
                out.push(KeyMiss {
                    source: c.source.clone(),
                    reasons,
                });
            }
        }
        out
    }

    #[cfg(test)]
    /// The index keys, in lookup order (reverse-sorted, de-duplicated).
    pub(crate) fn index_keys(&self) -> &[String] {
        &self.index
    }

    #[cfg(test)]
    /// True if no entry was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// The kubelet's `UnionDockerKeyring.Lookup`: the lookups of each keyring, concatenated in
/// order. The Docker Hub fallback applies per member, not to the union.
pub fn union_lookup(keyrings: &[&Keyring], repo_to_pull: &str) -> Vec<Credential> {
    keyrings
        .iter()
        .flat_map(|k| k.lookup(repo_to_pull))
        .collect()
}

/// The kubelet's `isDefaultRegistryMatch`: does `image` (a repository name, with or
/// without a domain) pull from Docker Hub?
///
/// True when the first `/`-separated part is non-empty and either there is no `/`, or
/// the first part is `docker.io` or `index.docker.io`, or it contains neither `.` nor `:`.
pub fn is_default_registry_match(image: &str) -> bool {
    let (first, rest) = match image.split_once('/') {
        Some((first, _)) => (first, true),
        None => (image, false),
    };
    if first.is_empty() {
        return false;
    }
    if !rest {
        return true;
    }
    if first == "docker.io" || first == DEFAULT_REGISTRY_HOST {
        return true;
    }
    !first.contains(['.', ':'])
}

/// The kubelet's `URLsMatchStr(glob, target)`: does the keyring key `glob` match the image
/// repository `target`? Both are schemeless (`https://` is prepended for parsing).
///
/// - the ports must be equal (no port ≠ any port);
/// - the hosts must have the same number of `.`-separated labels, and each target label
///   must match the glob label with Go's `filepath.Match` (`*`, `?`, `[…]`, `\`), so `*`
///   never crosses a `.`; case-sensitive;
/// - the glob's path must be a plain string prefix of the target's path (not
///   segment-aware: `x.io/pong` matches `x.io/pongz`).
///
/// A string Go's `url.Parse` rejects, or a malformed glob, is "no match".
pub fn urls_match_str(glob: &str, target: &str) -> bool {
    mismatches(glob, target).is_empty()
}

/// Which part of the keyring key `glob` fails to match the image repository `target`, by
/// the rules of [`urls_match_str`] (the kubelet's `URLsMatch`), every failing part at once;
/// empty when the key matches. For `explain`, which names why a pull secret is not used.
pub(crate) fn mismatches(glob: &str, target: &str) -> Vec<Mismatch> {
    let (Some(g), Some(t)) = (
        GoUrl::parse(&format!("https://{glob}")),
        GoUrl::parse(&format!("https://{target}")),
    ) else {
        return vec![Mismatch::NotAUrl];
    };
    let (glob_labels, glob_port) = split_url(&g.host);
    let (target_labels, target_port) = split_url(&t.host);
    let mut out = Vec::new();
    if glob_port != target_port {
        out.push(Mismatch::Port {
            key: glob_port.to_owned(),
            image: target_port.to_owned(),
        });
    }
    let host = |labels: &[&str]| labels.join(".");
    if glob_labels.len() != target_labels.len() {
        out.push(Mismatch::LabelCount {
            key: host(&glob_labels),
            image: host(&target_labels),
        });
    } else if let Some((k, i)) = glob_labels
        .iter()
        .zip(&target_labels)
        .find(|(g, t)| filepath_match(g, t) != Ok(true))
    {
        out.push(Mismatch::Label {
            key: (*k).to_owned(),
            image: (*i).to_owned(),
        });
    }
    if !t.path.starts_with(&g.path) {
        out.push(Mismatch::Path {
            key: g.path,
            image: t.path,
        });
    }
    out
}

/// One reason a keyring key does not match an image ([`mismatches`]). `Display` is one
/// phrase naming the part (`port:`, `host:`, `path:`, `scheme:`) and both sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// The ports differ; `""` is no port, which matches no port but never a given one.
    Port {
        /// The key's port, `""` for none.
        key: String,
        /// The image registry's port, `""` for none.
        image: String,
    },
    /// The hosts have different numbers of `.`-separated labels (`*` never spans a `.`).
    LabelCount {
        /// The key's host, without port.
        key: String,
        /// The image's host, without port.
        image: String,
    },
    /// A host label does not match its glob label (`filepath.Match`, case-sensitive).
    Label {
        /// The key's label.
        key: String,
        /// The image's label.
        image: String,
    },
    /// The key's path is not a string prefix of the image's repository path.
    Path {
        /// The key's path, e.g. `/team`.
        key: String,
        /// The image's path, e.g. `/other/app`.
        image: String,
    },
    /// The key was written with a scheme the kubelet does not strip (only `https://` and
    /// `http://` are), e.g. `docker://`, so its host is read as `docker:`.
    Scheme {
        /// The scheme as written, without `://`.
        scheme: String,
    },
    /// The key or the image does not parse as a URL the way Go's `url.Parse` does.
    NotAUrl,
    /// Docker Hub's key (`index.docker.io`, `https://index.docker.io/v1/`) serves
    /// `docker.io` images only when no other key matches (`isDefaultRegistryMatch`).
    HubFallbackUnused,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let port = |p: &str| {
            if p.is_empty() {
                "no port".to_string()
            } else {
                format!("port {p}")
            }
        };
        match self {
            Mismatch::Port { key, image } => write!(
                f,
                "port: the key has {}, the image's registry has {}; ports must be equal",
                port(key),
                port(image)
            ),
            Mismatch::LabelCount { key, image } => {
                let labels = |h: &str| match h.split('.').count() {
                    1 => "1 label".to_string(),
                    n => format!("{n} labels"),
                };
                write!(
                    f,
                    "host: {key} has {}, {image} has {}; a * never spans a dot",
                    labels(key),
                    labels(image)
                )
            }
            Mismatch::Label { key, image } => {
                write!(f, "host: {key} does not match {image}")
            }
            Mismatch::Path { key, image } => write!(
                f,
                "path: the key's {key} is not a prefix of the image's {}",
                if image.is_empty() { "(none)" } else { image }
            ),
            Mismatch::Scheme { scheme } => write!(
                f,
                "scheme: the kubelet strips only https:// and http://, so a {scheme}:// key is \
read as the host {scheme}:; write the key without {scheme}://"
            ),
            Mismatch::NotAUrl => f.write_str("not a URL the kubelet can parse"),
            Mismatch::HubFallbackUnused => f.write_str(
                "Docker Hub's default key serves docker.io images only when no other key matches",
            ),
        }
    }
}

/// A keyring key that matched nothing for an image, with why ([`Keyring::misses`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyMiss {
    /// Where the key was read and the key as written; never a secret.
    pub source: CredentialSource,
    /// Every part that failed.
    pub reasons: Vec<Mismatch>,
}

/// The kubelet's `ParseSchemelessURL` succeeds: `key` (a `matchImages` entry) is a valid
/// keyring pattern.
pub(crate) fn is_valid_key(key: &str) -> bool {
    GoUrl::parse(&format!("https://{key}")).is_some()
}

/// The kubelet's `SplitURL`: host labels and port (`""` if `net.SplitHostPort` fails).
fn split_url(host: &str) -> (Vec<&str>, &str) {
    let (h, port) = split_host_port(host).unwrap_or((host, ""));
    (h.split('.').collect(), port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::docker_config::DockerConfigEntry;
    use crate::credentials::secret::Secret;

    fn config(entries: &[(&str, &str)]) -> DockerConfig {
        let mut c = DockerConfig::new();
        for (key, user) in entries {
            c.insert(
                *key,
                DockerConfigEntry {
                    username: (*user).to_owned(),
                    password: Secret::new(format!("{user}-pw")),
                    email: String::new(),
                },
            );
        }
        c
    }

    fn users(creds: &[Credential]) -> Vec<&str> {
        creds.iter().map(|c| c.username.as_str()).collect()
    }

    #[test]
    fn index_is_reverse_sorted_and_deduplicated() {
        let mut k = Keyring::new();
        k.add(
            &config(&[
                ("quay.io", "a"),
                ("https://quay.io/v1/", "b"),
                ("quay.io/coreos", "c"),
                ("*.quay.io", "d"),
                ("registry.quay.io", "e"),
            ]),
            "t",
        );
        assert_eq!(
            k.index_keys(),
            ["registry.quay.io", "quay.io/coreos", "quay.io", "*.quay.io"]
        );
        // Both keys that index to "quay.io" keep their credential, in config-key order.
        assert_eq!(users(&k.lookup("quay.io/coreos/etcd")), ["c", "b", "a"]);
        assert_eq!(users(&k.lookup("registry.quay.io/x")), ["e", "d"]);
    }

    #[test]
    fn secrets_sharing_a_key_keep_insertion_order() {
        let mut k = Keyring::new();
        k.add(&config(&[("ghcr.io", "first")]), "s1");
        k.add(&config(&[("ghcr.io", "second")]), "s2");
        let found = k.lookup("ghcr.io/o/r");
        assert_eq!(users(&found), ["first", "second"]);
        assert_eq!(found[1].source.origin, "s2");
    }

    #[test]
    fn hub_fallback_and_ports() {
        let mut k = Keyring::new();
        k.add(
            &config(&[("https://index.docker.io/v1/", "hub"), ("r.io:5000", "p")]),
            "t",
        );
        assert_eq!(users(&k.lookup("docker.io/library/busybox")), ["hub"]);
        assert_eq!(users(&k.lookup("index.docker.io/library/busybox")), ["hub"]);
        assert!(k.lookup("r.io/x").is_empty());
        assert_eq!(users(&k.lookup("r.io:5000/x")), ["p"]);
        let other = Keyring::new();
        assert_eq!(
            users(&union_lookup(&[&other, &k], "docker.io/a/b")),
            ["hub"]
        );
    }

    /// `explain`'s reasons: every key that is not used, and which part failed, as the
    /// kubelet's `URLsMatch` decides.
    #[test]
    fn misses_name_the_part_that_fails() {
        let mut k = Keyring::new();
        k.add(
            &config(&[
                ("127.0.0.1", "a"),
                ("127.0.0.1:5443/team", "b"),
                ("docker://127.0.0.1:5443", "c"),
                ("*.example.com", "d"),
                ("127.0.0.1:5443/app", "ok"),
                ("https://index.docker.io/v1/", "hub"),
            ]),
            "pull secret s",
        );
        let shown: Vec<String> = k
            .misses("127.0.0.1:5443/app")
            .iter()
            .map(|m| {
                let why: Vec<String> = m.reasons.iter().map(|r| r.to_string()).collect();
                format!(
                    "{} key {}: {}",
                    m.source.origin,
                    m.source.key,
                    why.join("; ")
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                "pull secret s key https://index.docker.io/v1/: port: the key has no port, the \
image's registry has port 5443; ports must be equal; host: index.docker.io has 3 labels, \
127.0.0.1 has 4 labels; a * never spans a dot",
                "pull secret s key docker://127.0.0.1:5443: scheme: the kubelet strips only \
https:// and http://, so a docker:// key is read as the host docker:; write the key without \
docker://",
                "pull secret s key 127.0.0.1:5443/team: path: the key's /team is not a prefix of \
the image's /app",
                "pull secret s key 127.0.0.1: port: the key has no port, the image's registry \
has port 5443; ports must be equal",
                "pull secret s key *.example.com: port: the key has no port, the image's \
registry has port 5443; ports must be equal; host: *.example.com has 3 labels, 127.0.0.1 has \
4 labels; a * never spans a dot",
            ]
        );
        // Docker Hub's key serves a docker.io image only when nothing else matches.
        let mut hub = Keyring::new();
        hub.add(
            &config(&[("https://index.docker.io/v1/", "hub"), ("docker.io", "io")]),
            "t",
        );
        assert_eq!(
            hub.misses("docker.io/library/busybox"),
            [KeyMiss {
                source: CredentialSource {
                    origin: "t".into(),
                    key: "https://index.docker.io/v1/".into()
                },
                reasons: vec![Mismatch::HubFallbackUnused]
            }]
        );
        let mut only_hub = Keyring::new();
        only_hub.add(&config(&[("https://index.docker.io/v1/", "hub")]), "t");
        assert_eq!(only_hub.misses("docker.io/library/busybox"), []);
    }

    #[test]
    fn invalid_keys_are_skipped() {
        let mut k = Keyring::new();
        k.add(
            &config(&[("bad host", "x"), ("r.io:port", "y"), ("ok.io", "z")]),
            "t",
        );
        assert_eq!(k.index_keys(), ["ok.io"]);
    }
}
