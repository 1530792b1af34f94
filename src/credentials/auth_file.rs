//! Files in the docker config format (`{"auths":{…},"credHelpers":{…}}`) that the user's
//! tools write: the docker CLI's `config.json`, the `DOCKER_AUTH_CONFIG` variable, and the
//! containers auth files of podman, skopeo and buildah. One [`AuthFile`] is one of them,
//! read with the rules of its [`Flavor`]; [`super::UserAuth`] orders them.
//!
//! Docker CLI rules (docker/cli `cli/config/config.go` (directory),
//! `cli/config/configfile/file.go` (`LoadFromReader`, `decodeAuth`, `GetCredentialsStore`,
//! `getConfiguredCredentialStore`), `cli/config/credentials/file_store.go` (`Get`,
//! `ConvertToHostname`), `cli/config/credentials/native_store.go` (`<token>` username),
//! `cli/command/registry.go` (`getAuthConfigKey`)):
//! - the key for a registry is its host (`host:port`), except Docker Hub (`docker.io`,
//!   `index.docker.io`), whose key is `https://index.docker.io/v1/`;
//! - `credHelpers[key]` names the helper, else `credsStore`, else the `auths` file store;
//!   an empty name means "none";
//! - the file store takes `auths[key]`, else the first key (in sorted order; Go iterates
//!   a map) whose scheme-less, path-less form equals `key`;
//! - `auth` is decoded with padding required and the username must be non-empty (unlike
//!   the kubelet); `\0` is trimmed from both ends of the password;
//! - an identity token (`identitytoken`, or a helper's answer with the username
//!   `<token>`) is an OAuth2 refresh token: it becomes a [`SecretKind::RefreshToken`]
//!   credential with an empty username, and wins over a username/password in the same
//!   entry, as containerd's CRI `ParseAuth` and the docker CLI's token handler prefer it.
//!
//! `DOCKER_AUTH_CONFIG` follows the same rules but only its `auths` are read: a helper is
//! never run because an environment variable names one.
//!
//! Containers auth files (containers/image `pkg/docker/config/config.go`,
//! `normalizeAuthFileKey`, `authKeyLookupOrder`): a key without a scheme may name a
//! namespace (`quay.io/team`), and the longest key that is the image's repository or one of
//! its parents wins over the bare host; a key with a scheme keeps only its host; Docker
//! Hub's spellings are all `docker.io`. `credHelpers` names a helper per registry host,
//! asked with that host; `credsStore` is not read. Entries decode with the docker CLI's
//! rules above.
//!
//! Not implemented: the legacy `~/.dockercfg`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::docker_config::{
    AuthFieldError, DockerConfigError, Json, check_string_map, go_base64, string_fields,
};
use super::helper::{HelperAnswer, HelperRunner, program_name};
use super::secret::Secret;
use super::{Credential, CredentialSource, CredentialsError, SecretKind};

/// The docker CLI's key for Docker Hub.
pub(crate) const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// The largest `config.json` pullcheck reads, in bytes.
const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// The username a credential helper uses to say "the secret is an identity token".
const TOKEN_USERNAME: &str = "<token>";

/// One `auths` entry, decoded the docker CLI way.
#[derive(Clone, Debug)]
struct CliAuth {
    username: String,
    password: Secret,
    identity_token: Option<Secret>,
}

/// How a file in the docker config format is read: the format is shared, the rules for
/// keys and helpers are not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// The docker CLI's `config.json`: host keys, `credHelpers`, then `credsStore`.
    DockerConfig,
    /// `DOCKER_AUTH_CONFIG`: `auths` only, with the docker CLI's keys. A helper named in an
    /// environment variable is never run (docker CLI ≥ 28.3 reads only `auths` from it).
    Environment,
    /// A containers auth file (podman, skopeo, buildah; containers/image
    /// `pkg/docker/config/config.go`): keys may name a repository namespace, the longest
    /// matching key wins, and `credHelpers` names a helper per registry host; `credsStore`
    /// is not read.
    Containers,
}

/// One file (or environment variable) in the docker config format: its `auths`,
/// `credHelpers` and `credsStore`, read with the rules of its [`Flavor`]. Used through
/// [`super::UserAuth`].
#[derive(Clone, Debug)]
pub struct AuthFile {
    origin: String,
    flavor: Flavor,
    auths: BTreeMap<String, CliAuth>,
    cred_helpers: BTreeMap<String, String>,
    creds_store: Option<String>,
    runner: HelperRunner,
}

/// Where the credentials for a key come from.
enum Store<'a> {
    Helper(&'a str),
    File,
}

/// Reads a file of at most [`MAX_CONFIG_BYTES`]; `Ok(None)` if it does not exist.
pub(crate) fn read_small_file(
    path: &Path,
    origin: &str,
) -> Result<Option<Vec<u8>>, CredentialsError> {
    match crate::files::read_capped(path, MAX_CONFIG_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => {
            tracing::debug!(path = %path.display(), "{origin}: no such file");
            Ok(None)
        }
        Err(crate::files::FileError::TooLarge { limit }) => Err(CredentialsError::TooLarge {
            origin: origin.to_owned(),
            limit,
        }),
        Err(reason) => Err(CredentialsError::Read {
            origin: origin.to_owned(),
            path: path.to_path_buf(),
            reason,
        }),
    }
}

impl AuthFile {
    /// Reads `<dir>/config.json` (the docker CLI's config); `Ok(None)` if it does not exist.
    ///
    /// Errors: the file cannot be read, is larger than 4 MiB, is not JSON, or an `auths`
    /// entry does not decode ([`CredentialsError::DockerConfig`], naming the key).
    pub(crate) fn load_docker_config(dir: &Path) -> Result<Option<Self>, CredentialsError> {
        let path = dir.join("config.json");
        match read_small_file(&path, &origin_for(&path))? {
            Some(bytes) => Self::from_json(&bytes, path).map(Some),
            None => Ok(None),
        }
    }

    /// Reads a containers auth file; `shown` says how it was found (e.g.
    /// `$REGISTRY_AUTH_FILE`) and goes into the origin. `Ok(None)` if it does not exist, as
    /// containers/image treats a missing file as empty.
    pub(crate) fn load_containers(
        path: &Path,
        shown: &str,
    ) -> Result<Option<Self>, CredentialsError> {
        let origin = format!("auth file {} ({shown})", path.display());
        match read_small_file(path, &origin)? {
            Some(bytes) => Self::decode(&bytes, origin, Flavor::Containers).map(Some),
            None => Ok(None),
        }
    }

    /// Decodes the value of `DOCKER_AUTH_CONFIG`.
    pub(crate) fn from_environment(value: &str) -> Result<Self, CredentialsError> {
        Self::decode(
            value.as_bytes(),
            "environment DOCKER_AUTH_CONFIG".to_owned(),
            Flavor::Environment,
        )
    }

    /// Decodes a docker CLI config.json document; `path` is only used in messages and
    /// sources.
    pub fn from_json(bytes: &[u8], path: PathBuf) -> Result<Self, CredentialsError> {
        Self::decode(bytes, origin_for(&path), Flavor::DockerConfig)
    }

    fn decode(bytes: &[u8], origin: String, flavor: Flavor) -> Result<Self, CredentialsError> {
        let wrap = |error| match flavor {
            Flavor::DockerConfig => CredentialsError::DockerConfig {
                origin: origin.clone(),
                error,
            },
            Flavor::Environment => CredentialsError::AuthSource {
                origin: origin.clone(),
                error,
                fix: "set it to a docker config.json document",
            },
            Flavor::Containers => CredentialsError::AuthSource {
                origin: origin.clone(),
                error,
                fix: "fix the file or run podman login (or skopeo login) again",
            },
        };
        let node = Json::parse(bytes).map_err(wrap)?;
        let fields: &[(String, Json)] = match &node {
            Json::Object(f) => f,
            Json::Null => &[],
            other => {
                return Err(wrap(DockerConfigError::NotAnObject {
                    what: "the document",
                    key: None,
                    found: other.kind(),
                }));
            }
        };
        let mut auths = BTreeMap::new();
        match Json::field(fields, "auths") {
            None | Some(Json::Null) => {}
            Some(Json::Object(entries)) => {
                for (key, entry) in entries {
                    auths.insert(key.clone(), decode_cli_auth(entry, key).map_err(wrap)?);
                }
            }
            Some(other) => {
                return Err(wrap(DockerConfigError::NotAnObject {
                    what: "\"auths\"",
                    key: None,
                    found: other.kind(),
                }));
            }
        }
        let cred_helpers = match Json::field(fields, "credHelpers") {
            Some(node) => check_string_map(node, "credHelpers")
                .map_err(wrap)?
                .into_iter()
                .collect(),
            None => BTreeMap::new(),
        };
        let [creds_store] =
            string_fields(&node, ["credsStore"], None, "the document").map_err(wrap)?;
        let (cred_helpers, creds_store) = match flavor {
            Flavor::DockerConfig => (cred_helpers, creds_store),
            Flavor::Containers => (cred_helpers, None),
            Flavor::Environment => {
                if !cred_helpers.is_empty() || creds_store.is_some() {
                    tracing::debug!(%origin, "credHelpers and credsStore in an environment variable are not run");
                }
                (BTreeMap::new(), None)
            }
        };
        Ok(AuthFile {
            origin,
            flavor,
            auths,
            cred_helpers,
            creds_store,
            runner: HelperRunner::default(),
        })
    }

    #[cfg(test)]
    /// Where this came from, as [`CredentialSource::origin`] shows it, e.g.
    /// `docker config /home/me/.docker/config.json`.
    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    /// Credentials for an image: at most one, from the helper the file names or from
    /// `auths`. `repo_to_pull` is e.g. `docker.io/library/busybox`, `registry_host` its
    /// domain. A helper that fails or times out is logged as a warning and gives none.
    pub(crate) async fn lookup(&self, repo_to_pull: &str, registry_host: &str) -> Vec<Credential> {
        let key = self.helper_key(registry_host);
        match self.store_for(&key) {
            Store::File => self
                .file_lookup(repo_to_pull, registry_host)
                .into_iter()
                .collect(),
            Store::Helper(name) => {
                let program = program_name(name);
                match self.runner.get(name, &key).await {
                    Ok(HelperAnswer::NotFound) => {
                        tracing::debug!(helper = %program, key = %key, "helper has no credentials");
                        Vec::new()
                    }
                    Ok(HelperAnswer::Found { username, secret }) => {
                        if username.is_empty() && secret.is_empty() {
                            return Vec::new();
                        }
                        let (username, kind) = if username == TOKEN_USERNAME {
                            (String::new(), SecretKind::RefreshToken)
                        } else {
                            (username, SecretKind::Password)
                        };
                        vec![Credential {
                            username,
                            password: secret,
                            kind,
                            source: CredentialSource {
                                origin: format!("credential helper {program}"),
                                key,
                            },
                        }]
                    }
                    Err(error) => {
                        tracing::warn!(%error, key = %key, "credential helper failed; continuing without its credentials");
                        Vec::new()
                    }
                }
            }
        }
    }

    /// What [`AuthFile::lookup`] would use, without running a helper: `credential helper
    /// docker-credential-<name> (not run)`, or the matching `auths` key.
    pub fn lookup_keys(&self, repo_to_pull: &str, registry_host: &str) -> Vec<CredentialSource> {
        let key = self.helper_key(registry_host);
        match self.store_for(&key) {
            Store::Helper(name) => vec![CredentialSource {
                origin: format!("credential helper {} (not run)", program_name(name)),
                key,
            }],
            Store::File => self
                .file_lookup(repo_to_pull, registry_host)
                .map(|c| c.source)
                .into_iter()
                .collect(),
        }
    }

    /// True if this file names a helper for `registry_host` (which may answer nothing).
    pub(crate) fn names_helper(&self, registry_host: &str) -> bool {
        matches!(
            self.store_for(&self.helper_key(registry_host)),
            Store::Helper(_)
        )
    }

    /// The key a helper is chosen by and asked for: docker CLI `getAuthConfigKey`, or for a
    /// containers file the registry host with Docker Hub spelled `docker.io`.
    fn helper_key(&self, registry_host: &str) -> String {
        match self.flavor {
            Flavor::DockerConfig | Flavor::Environment => auth_config_key(registry_host),
            Flavor::Containers => normalize_registry(registry_host).to_owned(),
        }
    }

    /// Docker CLI `getConfiguredCredentialStore`.
    fn store_for(&self, key: &str) -> Store<'_> {
        if let Some(helper) = self.cred_helpers.get(key) {
            return if helper.is_empty() {
                Store::File
            } else {
                Store::Helper(helper)
            };
        }
        match self.creds_store.as_deref() {
            Some(store) if !store.is_empty() => Store::Helper(store),
            _ => Store::File,
        }
    }

    /// The `auths` entry for an image, by the flavor's key rules.
    fn file_lookup(&self, repo_to_pull: &str, registry_host: &str) -> Option<Credential> {
        let (matched, auth) = match self.flavor {
            Flavor::DockerConfig | Flavor::Environment => {
                self.docker_cli_entry(&auth_config_key(registry_host))?
            }
            Flavor::Containers => self.containers_entry(repo_to_pull, registry_host)?,
        };
        let (username, password, kind) = match &auth.identity_token {
            Some(token) => (String::new(), token.clone(), SecretKind::RefreshToken),
            None if auth.username.is_empty() && auth.password.is_empty() => return None,
            None => (
                auth.username.clone(),
                auth.password.clone(),
                SecretKind::Password,
            ),
        };
        Some(Credential {
            username,
            password,
            kind,
            source: CredentialSource {
                origin: self.origin.clone(),
                key: matched.clone(),
            },
        })
    }

    /// Docker CLI file store `Get`: exact key, else the first legacy key whose host part
    /// equals `key`.
    fn docker_cli_entry(&self, key: &str) -> Option<(&String, &CliAuth)> {
        self.auths.get_key_value(key).or_else(|| {
            self.auths
                .iter()
                .find(|(k, _)| convert_to_hostname(k) == key)
        })
    }

    /// containers/image `authKeyLookupOrder`: the repository, then each parent namespace,
    /// then the registry host; the first of those some key normalizes to wins.
    fn containers_entry(
        &self,
        repo_to_pull: &str,
        registry_host: &str,
    ) -> Option<(&String, &CliAuth)> {
        let path = repo_to_pull
            .strip_prefix(registry_host)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or_default();
        let host = normalize_registry(registry_host);
        let mut wanted: Vec<String> = Vec::new();
        let mut prefix = path;
        while !prefix.is_empty() {
            wanted.push(format!("{host}/{prefix}"));
            prefix = prefix.rsplit_once('/').map_or("", |(p, _)| p);
        }
        wanted.push(host.to_owned());
        wanted.iter().find_map(|want| {
            self.auths
                .iter()
                .find(|(k, _)| normalize_containers_key(k) == *want)
        })
    }

    /// Replaces the helper runner (tests: a fake `PATH`, a short timeout).
    #[cfg(test)]
    pub(crate) fn with_runner(mut self, runner: HelperRunner) -> Self {
        self.runner = runner;
        self
    }
}

/// containers/image `normalizeAuthFileKey`: a key written with a scheme (`https://…`) is a
/// docker-style registry key and keeps only its host; a key without one may name a
/// namespace (`quay.io/team`). Docker Hub's spellings become `docker.io`.
fn normalize_containers_key(key: &str) -> String {
    let stripped = key
        .strip_prefix("http://")
        .or_else(|| key.strip_prefix("https://"));
    let key = match stripped {
        Some(rest) => rest.split('/').next().unwrap_or(rest),
        None => key,
    };
    match key.split_once('/') {
        Some((host, path)) => format!("{}/{path}", normalize_registry(host)),
        None => normalize_registry(key).to_owned(),
    }
}

/// Docker Hub's host names, as containers/image `normalizeRegistry` folds them.
fn normalize_registry(host: &str) -> &str {
    match host {
        "index.docker.io" | "registry-1.docker.io" => "docker.io",
        other => other,
    }
}

fn origin_for(path: &Path) -> String {
    format!("docker config {}", path.display())
}

/// Docker CLI `getAuthConfigKey`: Docker Hub's key, or the host itself.
fn auth_config_key(registry_host: &str) -> String {
    if registry_host == "docker.io" || registry_host == "index.docker.io" {
        DOCKER_HUB_KEY.to_owned()
    } else {
        registry_host.to_owned()
    }
}

/// Docker CLI `ConvertToHostname`: drop `http://` / `https://`, keep up to the first `/`.
fn convert_to_hostname(key: &str) -> &str {
    let rest = key
        .strip_prefix("http://")
        .or_else(|| key.strip_prefix("https://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

/// One `auths` entry with the docker CLI's `decodeAuth`.
fn decode_cli_auth(node: &Json, key: &str) -> Result<CliAuth, DockerConfigError> {
    let [username, password, auth, identity_token] = string_fields(
        node,
        ["username", "password", "auth", "identitytoken"],
        Some(key),
        "the entry",
    )?;
    let mut out = CliAuth {
        username: username.unwrap_or_default(),
        password: Secret::new(password.unwrap_or_default()),
        identity_token: identity_token.filter(|t| !t.is_empty()).map(Secret::new),
    };
    if let Some(auth) = auth.filter(|a| !a.is_empty()) {
        let err = |reason| DockerConfigError::Auth {
            key: Some(key.to_owned()),
            reason,
        };
        let decoded = go_base64(&auth, true).ok_or(err(AuthFieldError::Base64 { padded: true }))?;
        let text = String::from_utf8(decoded).map_err(|_| err(AuthFieldError::NotUtf8))?;
        let (user, pass) = text.split_once(':').ok_or(err(AuthFieldError::NoColon))?;
        if user.is_empty() {
            return Err(err(AuthFieldError::EmptyUsername));
        }
        out.username = user.to_owned();
        out.password = Secret::new(pass.trim_matches('\0'));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::helper::HELPER_TIMEOUT;
    use crate::credentials::helper::tests::{fake_helper, runner};
    use std::time::Duration;

    fn cfg(json: &str) -> AuthFile {
        AuthFile::from_json(json.as_bytes(), PathBuf::from("/h/.docker/config.json")).unwrap()
    }

    #[tokio::test]
    async fn auths_host_only_and_docker_hub_key() {
        let c = cfg(r#"{"auths":{
            "https://index.docker.io/v1/":{"auth":"aHViOnB3"},
            "https://ghcr.io/v2/":{"username":"g","password":"p"},
            "docker.io":{"username":"never","password":"x"},
            "r.io:5000":{"username":"port","password":"x"}}}"#);
        let hub = c.lookup("docker.io/x", "docker.io").await;
        assert_eq!(hub[0].username, "hub");
        assert_eq!(hub[0].source.key, DOCKER_HUB_KEY);
        assert_eq!(
            hub[0].source.to_string(),
            "docker config /h/.docker/config.json key https://index.docker.io/v1/"
        );
        assert_eq!(
            c.lookup("index.docker.io/x", "index.docker.io").await[0].username,
            "hub"
        );
        let ghcr = c.lookup("ghcr.io/x", "ghcr.io").await;
        assert_eq!(
            (ghcr[0].username.as_str(), ghcr[0].source.key.as_str()),
            ("g", "https://ghcr.io/v2/")
        );
        assert_eq!(
            c.lookup("r.io:5000/x", "r.io:5000").await[0].username,
            "port"
        );
        assert!(c.lookup("r.io/x", "r.io").await.is_empty());
    }

    #[test]
    fn docker_cli_auth_rules() {
        let bad = |json: &str| {
            AuthFile::from_json(json.as_bytes(), PathBuf::from("/c.json"))
                .unwrap_err()
                .to_string()
        };
        // ":bar" — kubelet accepts, docker CLI does not.
        let msg = bad(r#"{"auths":{"x.io":{"auth":"OmJhcg=="}}}"#);
        assert!(
            msg.starts_with("docker config /c.json: key \"x.io\": auth is not base64"),
            "{msg}"
        );
        assert!(
            msg.ends_with("; fix the file or run docker login again"),
            "{msg}"
        );
        // Unpadded is not accepted by the docker CLI.
        bad(r#"{"auths":{"x.io":{"auth":"Zm9vOmJhcg"}}}"#);
        let c = cfg(r#"{"auths":{"x.io":{"auth":"dTpwdwAA"}}}"#); // "u:pw\0\0"
        assert_eq!(
            c.file_lookup("x.io/x", "x.io").unwrap().password.expose(),
            "pw"
        );
    }

    #[tokio::test]
    async fn identity_tokens_are_refresh_tokens() {
        // `az acr login` writes the zero GUID as the username beside the identity token;
        // the token wins.
        let c = cfg(r#"{"auths":{"x.io":{"identitytoken":"refresh"},
            "acr.io":{"auth":"MDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwOg==","identitytoken":"rt2"}}}"#);
        let x = c.lookup("x.io/x", "x.io").await;
        assert_eq!(x.len(), 1);
        assert_eq!(
            (x[0].username.as_str(), x[0].password.expose(), x[0].kind),
            ("", "refresh", SecretKind::RefreshToken)
        );
        assert_eq!(c.lookup_keys("x.io/x", "x.io")[0].key, "x.io");
        let acr = c.lookup("acr.io/x", "acr.io").await;
        assert_eq!(
            (
                acr[0].username.as_str(),
                acr[0].password.expose(),
                acr[0].kind
            ),
            ("", "rt2", SecretKind::RefreshToken)
        );
        let plain = cfg(r#"{"auths":{"p.io":{"username":"u","password":"p"}}}"#);
        assert_eq!(
            plain.lookup("p.io/x", "p.io").await[0].kind,
            SecretKind::Password
        );
    }

    #[tokio::test]
    async fn helpers_cred_helpers_then_creds_store() {
        let dir = tempfile::tempdir().unwrap();
        fake_helper(
            dir.path(),
            "test",
            r#"url=$(cat); printf '{"ServerURL":"%s","Username":"helper","Secret":"hs"}' "$url""#,
        );
        fake_helper(
            dir.path(),
            "tok",
            r#"cat >/dev/null; echo '{"Username":"<token>","Secret":"rt"}'"#,
        );
        fake_helper(dir.path(), "slow", "exec sleep 30");
        let c = cfg(r#"{"credsStore":"tok","credHelpers":{"ghcr.io":"test","https://index.docker.io/v1/":"test","slow.io":"slow","plain.io":""},
                        "auths":{"ghcr.io":{"username":"file","password":"x"},"plain.io":{"username":"p","password":"x"}}}"#)
            .with_runner(runner(dir.path(), HELPER_TIMEOUT));
        let got = c.lookup("ghcr.io/x", "ghcr.io").await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].username, "helper");
        assert_eq!(got[0].password.expose(), "hs");
        assert_eq!(
            got[0].source.to_string(),
            "credential helper docker-credential-test key ghcr.io"
        );
        assert_eq!(
            c.lookup("docker.io/x", "docker.io").await[0].source.key,
            DOCKER_HUB_KEY
        );
        // credsStore applies to every other host; its <token> answer is a refresh token.
        let quay = c.lookup("quay.io/x", "quay.io").await;
        assert_eq!(
            (
                quay[0].username.as_str(),
                quay[0].password.expose(),
                quay[0].kind
            ),
            ("", "rt", SecretKind::RefreshToken)
        );
        // An empty credHelpers entry means the file store.
        assert_eq!(c.lookup("plain.io/x", "plain.io").await[0].username, "p");
        assert_eq!(
            c.lookup_keys("ghcr.io/x", "ghcr.io")[0].origin,
            "credential helper docker-credential-test (not run)"
        );
        let slow = c.with_runner(runner(dir.path(), Duration::from_millis(200)));
        assert!(slow.lookup("slow.io/x", "slow.io").await.is_empty());
    }

    #[test]
    fn load_honours_dir_and_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(AuthFile::load_docker_config(dir.path()).unwrap().is_none());
        std::fs::write(dir.path().join("config.json"), r#"{"auths":{}}"#).unwrap();
        let c = AuthFile::load_docker_config(dir.path()).unwrap().unwrap();
        assert_eq!(
            c.origin(),
            format!("docker config {}", dir.path().join("config.json").display())
        );
        std::fs::write(dir.path().join("config.json"), "{").unwrap();
        assert!(AuthFile::load_docker_config(dir.path()).is_err());
    }

    #[test]
    fn hostname_conversion() {
        assert_eq!(convert_to_hostname("https://r.io:5000/v1/"), "r.io:5000");
        assert_eq!(convert_to_hostname("r.io/team"), "r.io");
    }
}
