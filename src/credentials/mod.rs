//! Credentials: which username/password pairs the kubelet would try for an image, in the
//! order it would try them.
//!
//! Sources, in order (kubelet `pkg/kubelet/images/image_manager.go`
//! `makeLookupPullCredentialsFunc`, `pkg/credentialprovider/keyring.go`):
//! 1. **Pull secrets** ([`load_pull_secrets`]): every secret merged into one kubelet
//!    keyring ([`Keyring`], a port of `BasicDockerKeyring` from kubernetes
//!    `pkg/credentialprovider/keyring.go`), decoded per `config.go` and `secrets.go`. An
//!    `identitytoken` in a pull secret is ignored, as the kubelet's `DockerConfigEntry`
//!    has no such field.
//! 2. **The user's auth sources** ([`UserAuth`]), standing in for the node's keyring:
//!    `DOCKER_AUTH_CONFIG`, the docker config, then the containers auth files, first
//!    source with a credential wins (order and reasons in `user_auth.rs`). Each is read
//!    by [`AuthFile`] with its tool's rules: `auths`, or the credential helper that
//!    `credHelpers` / `credsStore` names. A helper runs **only** because one of these
//!    files names it, never because a pull secret or an environment variable does (pull
//!    secrets cannot express one; their `credHelpers` / `credsStore` fields are ignored).
//!    Identity tokens here are OAuth2 refresh tokens ([`SecretKind::RefreshToken`]).
//!
//! 3. **Credential-provider plugins** ([`provider::Providers`]), the kubelet's
//!    `--image-credential-provider-config`: last, as the kubelet's external provider keyring
//!    comes after its node keyring.
//!
//! [`Keychain`] concatenates them, as the kubelet's `UnionDockerKeyring` does; an empty
//! result means "pull anonymously". Secret values live in [`Secret`], which prints
//! `(redacted)`; [`Credential::fingerprint`] is the only derived value safe to log.

mod auth_file;
pub(crate) mod child;
pub mod docker_config;
mod helper;
pub(crate) mod keyring;
pub mod provider;
mod pull_secrets;
pub(crate) mod secret;
mod user_auth;

use std::fmt;
use std::path::PathBuf;

use sha2::{Digest, Sha256};

pub use auth_file::AuthFile;
pub use docker_config::{AuthFieldError, DockerConfig, DockerConfigEntry, DockerConfigError};
pub(crate) use keyring::KeyMiss;
pub use keyring::{Keyring, is_default_registry_match, union_lookup, urls_match_str};
pub use pull_secrets::load_pull_secrets;
pub use secret::Secret;
pub(crate) use user_auth::UserAuth;

/// One username/password pair to try, and where it came from.
///
/// `Debug` shows the username and the source but prints the password as `(redacted)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    /// May be empty (kubelet accepts `auth: base64(":password")`).
    pub username: String,
    /// The password or token; may contain `:`.
    pub password: Secret,
    /// Whether `password` is a password or an OAuth2 refresh token.
    pub kind: SecretKind,
    /// Which file and key supplied it.
    pub source: CredentialSource,
}

/// What a credential's secret is: it decides how a bearer token is asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SecretKind {
    /// Sent as HTTP Basic (`username:password`) to a Basic registry or to the token realm
    /// (GET).
    #[default]
    Password,
    /// An OAuth2 refresh token, which docker calls an *identity token* (`identitytoken` in
    /// a docker config's `auths`, or a credential helper's `<token>` username). It is
    /// exchanged at the realm with a POST (`grant_type=refresh_token`, built by the
    /// registry module's token fetch); the username is empty.
    RefreshToken,
}

impl Credential {
    /// First 16 hex characters of `sha256(username ‖ 0x00 ‖ password)`: stable for equal
    /// credentials, safe to log and to use as a cache key (the token cache keys on it).
    pub(crate) fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.username.as_bytes());
        h.update([0u8]);
        h.update(self.password.expose().as_bytes());
        // A refresh token and a password with the same text get different tokens from the
        // realm, so they must not share a cache entry. Passwords hash as before.
        if self.kind == SecretKind::RefreshToken {
            h.update(b"\0refresh_token");
        }
        let digest = h.finalize();
        let mut hex = String::with_capacity(16);
        for b in &digest[..8] {
            hex.push_str(&format!("{b:02x}"));
        }
        hex
    }

    /// True if both username and password are empty. containerd pulls anonymously with
    /// such an entry (kubelet `pkg/kubelet/kuberuntime/kuberuntime_image.go` `PullImage`; containerd
    /// `internal/cri/server/images/image_pull.go` `ParseAuth`), but it still counts as one attempt.
    pub(crate) fn is_anonymous(&self) -> bool {
        self.username.is_empty() && self.password.is_empty()
    }
}

/// Where a credential came from. Contains no secret, so it may be logged and serialized.
///
/// `Display` prints `<origin> key <key>`, e.g.
/// `pull secret /secrets/regcred/.dockerconfigjson key ghcr.io`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct CredentialSource {
    /// The file or program, e.g. `pull secret /secrets/regcred/.dockerconfigjson`,
    /// `docker config /home/me/.docker/config.json`, `credential helper
    /// docker-credential-pass`.
    pub origin: String,
    /// The config key that matched, exactly as written (e.g. `https://index.docker.io/v1/`),
    /// or the server URL handed to a credential helper.
    pub key: String,
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} key {}", self.origin, self.key)
    }
}

/// The ordered list of credentials the kubelet would try for an image: pull secrets first
/// (one kubelet keyring, [`Keyring::lookup`] order), then the user's auth sources (the
/// node-keyring stand-in). An empty list means anonymous.
///
/// Duplicates are kept: the kubelet tries every entry, and so does pullcheck.
#[derive(Debug, Default, Clone)]
pub(crate) struct Keychain {
    pull_secrets: Keyring,
    docker: Option<UserAuth>,
    providers: Option<std::sync::Arc<provider::Providers>>,
    workload: Option<provider::Workload>,
}

/// What [`Keychain::lookup`] found for one image.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// Every credential, in the order the kubelet tries them.
    pub credentials: Vec<Credential>,
    /// What each matching credential provider did (empty without providers).
    pub providers: Vec<provider::ProviderUse>,
}

impl Keychain {
    /// A keychain over the loaded pull secrets and, optionally, the user's auth sources.
    pub(crate) fn new(pull_secrets: Keyring, docker: Option<UserAuth>) -> Keychain {
        Keychain {
            pull_secrets,
            docker,
            providers: None,
            workload: None,
        }
    }

    /// The same keychain with credential-provider plugins after its other sources, run for
    /// `workload` (token-mode providers need one).
    pub(crate) fn with_providers(
        self,
        providers: Option<std::sync::Arc<provider::Providers>>,
        workload: Option<provider::Workload>,
    ) -> Keychain {
        Keychain {
            providers,
            workload,
            ..self
        }
    }

    /// The credential providers, if any are configured.
    pub(crate) fn providers(&self) -> Option<&provider::Providers> {
        self.providers.as_deref()
    }

    /// No credentials at all: every lookup is anonymous.
    pub(crate) fn empty() -> Keychain {
        Keychain::default()
    }

    /// Credentials for one image, in the order to try them.
    ///
    /// `repo_to_pull` is the kubelet's fully-qualified repository without tag or digest,
    /// e.g. `docker.io/library/busybox`; `registry_host` is its domain, e.g. `docker.io`.
    /// Runs a credential helper that a user auth file names for the registry (5 s timeout
    /// each); a helper failure is logged as a warning and contributes nothing. Runs the
    /// matching credential-provider plugins (their own deadline); their problems are in
    /// [`Found::providers`].
    pub(crate) async fn lookup(&self, repo_to_pull: &str, registry_host: &str) -> Found {
        let mut credentials = self.pull_secrets.lookup(repo_to_pull);
        if let Some(docker) = &self.docker {
            credentials.extend(docker.lookup(repo_to_pull, registry_host).await);
        }
        let mut providers = Vec::new();
        if let Some(p) = &self.providers {
            let found = p.lookup(repo_to_pull, self.workload.as_ref()).await;
            credentials.extend(found.credentials);
            providers = found.uses;
        }
        Found {
            credentials,
            providers,
        }
    }

    /// What an image's verdict depends on among these credentials, without running any
    /// credential provider: the fingerprints of the pull-secret and user credentials, then
    /// per matching provider its name and the workload it runs for. The webhook keys its
    /// verdict cache on this, so one review runs a provider once (in the engine), not twice.
    pub(crate) async fn identity(&self, repo_to_pull: &str, registry_host: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .pull_secrets
            .lookup(repo_to_pull)
            .iter()
            .map(Credential::fingerprint)
            .collect();
        if let Some(docker) = &self.docker {
            out.extend(
                docker
                    .lookup(repo_to_pull, registry_host)
                    .await
                    .iter()
                    .map(Credential::fingerprint),
            );
        }
        if let Some(p) = &self.providers {
            let who = self.workload.as_ref().map_or(String::new(), |w| {
                format!(
                    " {}/{}",
                    w.namespace,
                    w.service_account.as_deref().unwrap_or("")
                )
            });
            out.extend(
                p.matching_names(repo_to_pull)
                    .map(|name| format!("provider {name}{who}")),
            );
        }
        out
    }

    /// For `explain`: the sources [`Keychain::lookup`] would use before the credential
    /// providers (which `explain` runs itself, through [`Keychain::providers`]), in order,
    /// without running any helper. A helper appears once, with origin `credential helper
    /// docker-credential-<name> (not run)`. The registry host is the first `/`-separated
    /// part of `repo_to_pull`.
    pub(crate) fn lookup_keys(&self, repo_to_pull: &str) -> Vec<CredentialSource> {
        let mut out: Vec<CredentialSource> = self
            .pull_secrets
            .lookup(repo_to_pull)
            .into_iter()
            .map(|c| c.source)
            .collect();
        if let Some(docker) = &self.docker {
            let host = repo_to_pull.split('/').next().unwrap_or_default();
            out.extend(docker.lookup_keys(repo_to_pull, host));
        }
        out
    }

    /// The pull-secret keys not used for `repo_to_pull`, each with the part of the kubelet's
    /// keyring match that failed ([`Keyring::misses`]).
    pub(crate) fn pull_secret_misses(&self, repo_to_pull: &str) -> Vec<KeyMiss> {
        self.pull_secrets.misses(repo_to_pull)
    }
}

/// Loading pull secrets or the docker config failed. One line, naming the file (and the
/// registry key when there is one) and the fix; never contains a secret value.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// A `--pull-secrets` path does not exist.
    #[error(
        "pull secret {}: no such file or directory; pass a .dockerconfigjson or .dockercfg file, a Secret in JSON, or the directory the secrets are mounted in",
        path.display()
    )]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// A file or directory could not be read.
    #[error("{origin}: cannot read {}: {reason}; check the path and its permissions", path.display())]
    Read {
        /// e.g. `pull secret /s/x/.dockerconfigjson`.
        origin: String,
        /// The file or directory.
        path: PathBuf,
        /// The OS error, or "not a regular file" (no contents).
        reason: crate::files::FileError,
    },
    /// A file is larger than pullcheck reads (`limit` bytes).
    #[error("{origin}: larger than {limit} bytes; this is not a docker config")]
    TooLarge {
        /// e.g. `pull secret /s/x/.dockerconfigjson`.
        origin: String,
        /// The cap, in bytes.
        limit: u64,
    },
    /// A pull secret does not decode; the kubelet would fail the pull.
    #[error("{origin}: {error}; re-create the secret with kubectl create secret docker-registry")]
    PullSecret {
        /// e.g. `pull secret /s/x/.dockerconfigjson`.
        origin: String,
        /// What is wrong (names the registry key when there is one).
        error: DockerConfigError,
    },
    /// A file holding a Kubernetes Secret object is malformed.
    #[error("{origin}: {problem}; export it with kubectl get secret NAME -o json")]
    SecretObject {
        /// e.g. `pull secret /tmp/regcred.json`.
        origin: String,
        /// What is wrong.
        problem: String,
    },
    /// `DOCKER_AUTH_CONFIG` or a containers auth file does not decode.
    #[error("{origin}: {error}; {fix}")]
    AuthSource {
        /// e.g. `environment DOCKER_AUTH_CONFIG`, `auth file /x/auth.json ($REGISTRY_AUTH_FILE)`.
        origin: String,
        /// What is wrong (names the registry key when there is one).
        error: DockerConfigError,
        /// How to fix it, for this kind of source.
        fix: &'static str,
    },
    /// The user's docker config does not decode.
    #[error("{origin}: {error}; fix the file or run docker login again")]
    DockerConfig {
        /// e.g. `docker config /home/me/.docker/config.json`.
        origin: String,
        /// What is wrong (names the registry key when there is one).
        error: DockerConfigError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(user: &str, pass: &str) -> Credential {
        Credential {
            username: user.into(),
            password: Secret::new(pass),
            kind: SecretKind::Password,
            source: CredentialSource {
                origin: "pull secret /s/.dockerconfigjson".into(),
                key: "ghcr.io".into(),
            },
        }
    }

    #[test]
    fn debug_never_shows_the_password() {
        let c = cred("alice", "s3cr3t-p4ss");
        for text in [format!("{c:?}"), format!("{c:#?}")] {
            assert!(!text.contains("s3cr3t-p4ss"), "{text}");
            assert!(
                text.contains("alice") && text.contains("(redacted)"),
                "{text}"
            );
        }
        let chain = Keychain::new(Keyring::new(), None);
        assert!(!format!("{chain:?}").contains("s3cr3t"));
    }

    #[test]
    fn fingerprint_is_stable_and_separates_fields() {
        let a = cred("ab", "c");
        assert_eq!(a.fingerprint().len(), 16);
        assert_eq!(a.fingerprint(), cred("ab", "c").fingerprint());
        assert_ne!(a.fingerprint(), cred("a", "bc").fingerprint());
        // sha256("\0") starts with 6e340b9c…
        assert_eq!(cred("", "").fingerprint(), "6e340b9cffb37a98");
        assert!(cred("", "").is_anonymous());
        assert!(!cred("", "x").is_anonymous());
        let refresh = Credential {
            kind: SecretKind::RefreshToken,
            ..cred("", "x")
        };
        assert_ne!(refresh.fingerprint(), cred("", "x").fingerprint());
        assert!(!refresh.is_anonymous());
    }

    #[test]
    fn source_display() {
        assert_eq!(
            cred("a", "b").source.to_string(),
            "pull secret /s/.dockerconfigjson key ghcr.io"
        );
    }

    #[tokio::test]
    async fn keychain_concatenates_in_order() {
        let mut cfg = DockerConfig::new();
        cfg.insert(
            "ghcr.io",
            DockerConfigEntry {
                username: "u".into(),
                password: Secret::new("p"),
                email: String::new(),
            },
        );
        let mut k = Keyring::new();
        k.add(&cfg, "pull secret a");
        let chain = Keychain::new(k, None);
        let found = chain.lookup("ghcr.io/o/r", "ghcr.io").await;
        assert_eq!(found.credentials.len(), 1);
        assert!(found.providers.is_empty());
        assert_eq!(chain.lookup_keys("ghcr.io/o/r")[0].key, "ghcr.io");
        assert!(
            Keychain::empty()
                .lookup("ghcr.io/o/r", "ghcr.io")
                .await
                .credentials
                .is_empty()
        );
    }
}
