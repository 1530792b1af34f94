//! A kubeconfig, read as kubectl reads it: which files ([`Environment`], [`select`]), how
//! they merge, which context, and what its cluster and user become ([`super::ApiServer`]).
//!
//! The rules are client-go's (`k8s.io/client-go/tools/clientcmd/loader.go`,
//! `ClientConfigLoadingRules.Load` and `ResolveLocalPaths`):
//! - `--kubeconfig FILE` alone, and it must exist; else the files of `$KUBECONFIG` (split
//!   like `PATH`, a missing one skipped); else `~/.kube/config` if it exists.
//! - Files merge first-wins: the first file to name a cluster, user or context, or to set
//!   `current-context`, keeps it; later files never change it.
//! - A relative path (`certificate-authority`, `client-certificate`, `client-key`,
//!   `tokenFile`, and an exec `command` that holds a `/`) is taken against the directory of
//!   the file that defined the entry; a bare command name is looked up in `PATH`.
//!
//! A file that exists but can't be read or parsed is an error, as in kubectl, never a
//! silent fall-back to the next source; so is every setting pullcheck can't honour: one
//! line naming the file and the entry, rather than talk to the cluster in a way the user
//! did not ask for.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;

use super::exec::{ExecApiVersion, ExecPlugin, InteractiveMode};
use super::{ApiServer, CaBundle, ClientIdentity, Credentials, Source};
use crate::credentials::Secret;

/// The largest kubeconfig file read (a kubeconfig with many clusters and inline CAs runs to
/// tens of KiB).
pub(crate) const MAX_KUBECONFIG_BYTES: u64 = 4 * 1024 * 1024;
/// The largest CA, client certificate or key file read.
const MAX_PEM_BYTES: u64 = 1024 * 1024;
/// The extension of a cluster that is handed to an exec plugin as `spec.cluster.config`
/// (`k8s.io/client-go/tools/auth/exec`, `clusterExtensionKey`).
const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// What decides where the kubeconfig is: passed in, so that the choice is testable without
/// touching the process environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Environment {
    /// `--kubeconfig FILE`.
    pub flag: Option<PathBuf>,
    /// `$KUBECONFIG`, as set (a `PATH`-like list).
    pub kubeconfig_var: Option<OsString>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
}

impl Environment {
    /// From this process: `$KUBECONFIG` and `$HOME`, with `--kubeconfig` given.
    pub(crate) fn from_process(flag: Option<PathBuf>) -> Environment {
        Environment {
            flag,
            kubeconfig_var: std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()),
            home: std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        }
    }
}

/// What a kubeconfig gives: the API server and the context's namespace.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    /// The server, its CA and the user's credentials; its source is [`Source::Kubeconfig`].
    pub api: ApiServer,
    /// The context's `namespace`, if it sets one: the default for `-n`, as in kubectl.
    pub namespace: Option<String>,
}

/// A kubeconfig that can't be used. One line naming the file (or variable) and the entry.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KubeconfigError {
    /// A file can't be read (`--kubeconfig` missing, not a regular file, too large).
    #[error("{by} {}: {source}", file.display())]
    Read {
        /// `--kubeconfig`, `$KUBECONFIG` or `~/.kube/config`.
        by: &'static str,
        /// The file.
        file: PathBuf,
        /// Why.
        source: crate::files::FileError,
    },
    /// A file is not a kubeconfig.
    #[error("kubeconfig {}: not a kubeconfig: {reason}", file.display())]
    Parse {
        /// The file.
        file: PathBuf,
        /// The YAML error.
        reason: String,
    },
    /// No `--context` and no `current-context`.
    #[error(
        "kubeconfig {files}: no current-context; pass --context NAME (kubectl config get-contexts lists them)"
    )]
    NoContext {
        /// The files, `:`-joined.
        files: String,
    },
    /// The context, or the cluster or user it names, is not in any file.
    #[error("kubeconfig {files}: {what} {name:?} not found{}", if *by_flag { " (--context)" } else { "" })]
    Missing {
        /// The files, `:`-joined.
        files: String,
        /// `context`, `cluster` or `user`.
        what: &'static str,
        /// The name looked for.
        name: String,
        /// The context was named by `--context`.
        by_flag: bool,
    },
    /// An entry pullcheck does not support or that is broken: names the file, the entry
    /// and the fix.
    #[error("kubeconfig {}, {entry}: {problem}", file.display())]
    Entry {
        /// The file that defines the entry.
        file: PathBuf,
        /// `cluster NAME` or `user NAME`.
        entry: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// One file names two clusters, users or contexts alike. kubectl refuses the file
    /// (k8s.io/client-go/tools/clientcmd/api/v1/conversion.go: "duplicate name ... in
    /// list"); taking either entry could talk to the wrong cluster.
    #[error("kubeconfig {}: two {what} entries named {name:?}; rename or remove one", file.display())]
    Duplicate {
        /// The file.
        file: PathBuf,
        /// `cluster`, `user` or `context`.
        what: &'static str,
        /// The name used twice.
        name: String,
    },
    /// `--context ""`.
    #[error(
        "--context \"\": empty; name a context of the kubeconfig (kubectl config get-contexts), or leave --context out for its current-context"
    )]
    EmptyContext,
    /// `--context` was given but no kubeconfig was found.
    #[error("--context {0}: no kubeconfig found (pass --kubeconfig FILE or set KUBECONFIG)")]
    ContextWithoutKubeconfig(String),
}

// The file format (k8s.io/client-go/tools/clientcmd/api/v1/types.go `Config`). Unknown keys
// are ignored, as kubectl ignores them; a key of the wrong type is a parse error.

#[derive(Deserialize, Default)]
struct RawConfig {
    #[serde(rename = "current-context", default)]
    current_context: Option<String>,
    #[serde(default)]
    clusters: Option<Vec<NamedCluster>>,
    #[serde(default)]
    users: Option<Vec<NamedUser>>,
    #[serde(default)]
    contexts: Option<Vec<NamedContext>>,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    #[serde(default)]
    cluster: Option<RawCluster>,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: Option<RawUser>,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    #[serde(default)]
    context: Option<RawContext>,
}

#[derive(Deserialize, Default, Clone)]
struct RawCluster {
    #[serde(default)]
    server: Option<String>,
    #[serde(rename = "certificate-authority", default)]
    certificate_authority: Option<String>,
    #[serde(rename = "certificate-authority-data", default)]
    certificate_authority_data: Option<String>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    insecure_skip_tls_verify: Option<bool>,
    #[serde(rename = "tls-server-name", default)]
    tls_server_name: Option<String>,
    #[serde(rename = "proxy-url", default)]
    proxy_url: Option<String>,
    #[serde(default)]
    extensions: Option<Vec<NamedExtension>>,
}

#[derive(Deserialize, Clone)]
struct NamedExtension {
    name: String,
    #[serde(default)]
    extension: Option<serde_json::Value>,
}

#[derive(Deserialize, Default, Clone)]
struct RawUser {
    #[serde(default)]
    token: Option<String>,
    #[serde(rename = "tokenFile", default)]
    token_file: Option<String>,
    #[serde(rename = "client-certificate", default)]
    client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data", default)]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key", default)]
    client_key: Option<String>,
    #[serde(rename = "client-key-data", default)]
    client_key_data: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(rename = "auth-provider", default)]
    auth_provider: Option<RawAuthProvider>,
    #[serde(default)]
    exec: Option<RawExec>,
    #[serde(rename = "as", default)]
    impersonate: Option<String>,
}

#[derive(Deserialize, Clone)]
struct RawAuthProvider {
    name: String,
}

#[derive(Deserialize, Clone)]
struct RawExec {
    #[serde(default)]
    command: String,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<RawEnv>>,
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(rename = "installHint", default)]
    install_hint: Option<String>,
    #[serde(rename = "provideClusterInfo", default)]
    provide_cluster_info: bool,
    #[serde(rename = "interactiveMode", default)]
    interactive_mode: Option<String>,
}

#[derive(Deserialize, Clone)]
struct RawEnv {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize, Default, Clone)]
struct RawContext {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
    #[serde(default)]
    namespace: Option<String>,
}

/// One merged entry and the file that defined it.
struct Defined<T> {
    file: PathBuf,
    value: T,
}

/// The merge of every file, first-wins.
#[derive(Default)]
struct Merged {
    current_context: Option<String>,
    clusters: BTreeMap<String, Defined<RawCluster>>,
    users: BTreeMap<String, Defined<RawUser>>,
    contexts: BTreeMap<String, Defined<RawContext>>,
}

impl Merged {
    /// Adds one file's entries under the ones already merged (first file wins, as kubectl
    /// merges). Errors: a name used twice within the file.
    fn add(&mut self, file: &Path, raw: RawConfig) -> Result<(), KubeconfigError> {
        if self.current_context.is_none() {
            self.current_context = raw.current_context.filter(|c| !c.is_empty());
        }
        let clusters = raw.clusters.unwrap_or_default();
        let users = raw.users.unwrap_or_default();
        let contexts = raw.contexts.unwrap_or_default();
        unique(file, "cluster", clusters.iter().map(|c| c.name.as_str()))?;
        unique(file, "user", users.iter().map(|u| u.name.as_str()))?;
        unique(file, "context", contexts.iter().map(|c| c.name.as_str()))?;
        for c in clusters {
            self.clusters.entry(c.name).or_insert_with(|| Defined {
                file: file.to_path_buf(),
                value: c.cluster.unwrap_or_default(),
            });
        }
        for u in users {
            self.users.entry(u.name).or_insert_with(|| Defined {
                file: file.to_path_buf(),
                value: u.user.unwrap_or_default(),
            });
        }
        for c in contexts {
            self.contexts.entry(c.name).or_insert_with(|| Defined {
                file: file.to_path_buf(),
                value: c.context.unwrap_or_default(),
            });
        }
        Ok(())
    }
}

/// The first name of `names` used twice, as [`KubeconfigError::Duplicate`].
fn unique<'a>(
    file: &Path,
    what: &'static str,
    names: impl Iterator<Item = &'a str>,
) -> Result<(), KubeconfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(KubeconfigError::Duplicate {
                file: file.to_path_buf(),
                what,
                name: n.to_string(),
            });
        }
    }
    Ok(())
}

/// Which kubeconfig files to read, and what named them; `None`: no kubeconfig (go on to
/// in-cluster). `$KUBECONFIG` entries that don't exist are skipped, as kubectl skips them.
fn files(env: &Environment) -> Option<(&'static str, Vec<PathBuf>)> {
    if let Some(f) = &env.flag {
        return Some(("--kubeconfig", vec![f.clone()]));
    }
    if let Some(var) = &env.kubeconfig_var {
        let mut seen = Vec::new();
        for f in std::env::split_paths(var) {
            if f.as_os_str().is_empty() || seen.contains(&f) {
                continue;
            }
            // A dangling path is skipped; anything that exists is read (and must parse).
            if std::fs::symlink_metadata(&f).is_ok() {
                seen.push(f);
            }
        }
        // $KUBECONFIG set means ~/.kube/config is not consulted, even if none exists.
        return (!seen.is_empty()).then_some(("$KUBECONFIG", seen));
    }
    let home = env.home.as_ref()?.join(".kube").join("config");
    std::fs::symlink_metadata(&home)
        .is_ok()
        .then(|| ("~/.kube/config", vec![home]))
}

/// Why [`select`] found no kubeconfig in `env`, for the "no Kubernetes API" message:
/// `$KUBECONFIG (a:b) names no file that exists`, or `no ~/.kube/config`.
pub(crate) fn why_none(env: &Environment) -> String {
    match (&env.kubeconfig_var, &env.home) {
        (Some(var), _) => format!(
            "$KUBECONFIG ({}) names no file that exists",
            var.to_string_lossy()
        ),
        (None, Some(home)) => format!(
            "no kubeconfig ({} does not exist)",
            home.join(".kube").join("config").display()
        ),
        (None, None) => "no kubeconfig ($HOME is not set)".to_string(),
    }
}

/// The kubeconfig's API server, or `None` when there is no kubeconfig at all (the caller
/// goes on to in-cluster). `context`: `--context`, else the merged `current-context`.
pub(crate) fn select(
    env: &Environment,
    context: Option<&str>,
) -> Result<Option<Loaded>, KubeconfigError> {
    let Some((by, files)) = files(env) else {
        return match context {
            Some(c) => Err(KubeconfigError::ContextWithoutKubeconfig(c.to_string())),
            None => Ok(None),
        };
    };
    let mut merged = Merged::default();
    for f in &files {
        let text = crate::files::read_capped_text(f, MAX_KUBECONFIG_BYTES).map_err(|source| {
            KubeconfigError::Read {
                by,
                file: f.clone(),
                source,
            }
        })?;
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_saphyr::from_str(&text).map_err(|e| KubeconfigError::Parse {
                file: f.clone(),
                reason: e.to_string().lines().next().unwrap_or_default().to_string(),
            })?
        };
        merged.add(f, raw)?;
    }
    let joined = || {
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    let by_flag = context.is_some();
    let name = match context
        .map(str::to_string)
        .or(merged.current_context.clone())
    {
        Some(n) => n,
        None => return Err(KubeconfigError::NoContext { files: joined() }),
    };
    let missing = |what, n: &str| KubeconfigError::Missing {
        files: joined(),
        what,
        name: n.to_string(),
        by_flag: by_flag && what == "context",
    };
    let ctx = merged
        .contexts
        .get(&name)
        .ok_or_else(|| missing("context", &name))?;
    let cluster = merged
        .clusters
        .get(&ctx.value.cluster)
        .ok_or_else(|| missing("cluster", &ctx.value.cluster))?;
    let user = match ctx.value.user.as_str() {
        // A context without a user: no credentials (a client certificate-less anonymous
        // call), as kubectl allows.
        "" => None,
        u => Some(merged.users.get(u).ok_or_else(|| missing("user", u))?),
    };
    let (url, ca, cluster_info) = cluster_settings(&ctx.value.cluster, cluster)?;
    let (credentials, identity) = match user {
        None => (Credentials::None, None),
        Some(u) => user_settings(&ctx.value.user, u, &cluster_info)?,
    };
    Ok(Some(Loaded {
        api: ApiServer {
            url,
            ca,
            credentials,
            identity,
            source: Source::Kubeconfig {
                by,
                files,
                context: name,
            },
        },
        namespace: ctx.value.namespace.clone().filter(|n| !n.is_empty()),
    }))
}

/// A relative path against the directory of the file that defined it, with `.` parts
/// dropped as Go's `filepath.Join` drops them (`./bin/plugin` → `DIR/bin/plugin`: the
/// path messages show). `..` parts stay: dropping them lexically is wrong past a symlink.
fn resolve(file: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    dir.join(p)
        .components()
        .filter(|c| *c != std::path::Component::CurDir)
        .collect()
}

fn entry_error(file: &Path, entry: String, problem: impl Into<String>) -> KubeconfigError {
    KubeconfigError::Entry {
        file: file.to_path_buf(),
        entry,
        problem: problem.into(),
    }
}

fn b64(file: &Path, entry: &str, key: &str, data: &str) -> Result<Vec<u8>, KubeconfigError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| entry_error(file, entry.to_string(), format!("{key}: not base64 ({e})")))
}

fn read_file(file: &Path, entry: &str, key: &str, path: &Path) -> Result<Vec<u8>, KubeconfigError> {
    crate::files::read_capped(path, MAX_PEM_BYTES).map_err(|e| {
        entry_error(
            file,
            entry.to_string(),
            format!("{key} {}: {e}", path.display()),
        )
    })
}

/// Server, CA and the `spec.cluster` an exec plugin may be given.
fn cluster_settings(
    name: &str,
    c: &Defined<RawCluster>,
) -> Result<(String, Option<CaBundle>, serde_json::Value), KubeconfigError> {
    let entry = format!("cluster {name}");
    let file = &c.file;
    let v = &c.value;
    if v.insecure_skip_tls_verify == Some(true) {
        return Err(entry_error(
            file,
            entry,
            "insecure-skip-tls-verify is not supported: a token sent to an unverified server can be stolen; set certificate-authority(-data) to the API server's CA",
        ));
    }
    if v.tls_server_name.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(entry_error(
            file,
            entry,
            "tls-server-name is not supported; use a server URL whose host the API server's certificate names",
        ));
    }
    if v.proxy_url.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(entry_error(
            file,
            entry,
            "proxy-url is not supported; reach the API server directly",
        ));
    }
    let server = match v.server.as_deref() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => return Err(entry_error(file, entry, "no server")),
    };
    // client-go prefers the data to the file when both are set.
    let (ca, ca_pem) = if let Some(d) = v
        .certificate_authority_data
        .as_deref()
        .filter(|d| !d.is_empty())
    {
        let pem = b64(file, &entry, "certificate-authority-data", d)?;
        (
            Some(CaBundle::Pem {
                origin: format!(
                    "kubeconfig {}, {entry}: certificate-authority-data",
                    file.display()
                ),
                pem: pem.clone(),
            }),
            Some(pem),
        )
    } else if let Some(p) = v.certificate_authority.as_deref().filter(|p| !p.is_empty()) {
        let path = resolve(file, p);
        let pem = read_file(file, &entry, "certificate-authority", &path)?;
        (
            Some(CaBundle::Pem {
                origin: format!(
                    "kubeconfig {}, {entry}: certificate-authority {}",
                    file.display(),
                    path.display()
                ),
                pem: pem.clone(),
            }),
            Some(pem),
        )
    } else {
        (None, None)
    };
    // What client-go hands an exec plugin with provideClusterInfo (k8s.io/client-go
    // `pkg/apis/clientauthentication/v1` `Cluster`): the CA always as data.
    let mut info = serde_json::json!({ "server": server });
    if let Some(pem) = ca_pem {
        info["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    if let Some(ext) = v
        .extensions
        .iter()
        .flatten()
        .find(|e| e.name == EXEC_EXTENSION)
        .and_then(|e| e.extension.clone())
    {
        info["config"] = ext;
    }
    Ok((server, ca, info))
}

/// The replacement of each removed `auth-provider` (kubectl v1.26 removed the in-tree gcp
/// and azure providers; oidc was never built in here).
fn auth_provider_fix(name: &str) -> String {
    match name {
        "gcp" => "auth-provider gcp was removed from kubectl; use gke-gcloud-auth-plugin (exec): `gcloud components install gke-gcloud-auth-plugin`, then `gcloud container clusters get-credentials`".into(),
        "azure" => "auth-provider azure was removed from kubectl; use kubelogin (exec): `kubelogin convert-kubeconfig`".into(),
        "oidc" => "auth-provider oidc is not supported; use kubelogin or an oidc exec plugin (exec)".into(),
        other => format!("auth-provider {other} is not supported; use an exec credential plugin (exec)"),
    }
}

/// Credentials and client certificate of a user entry.
fn user_settings(
    name: &str,
    u: &Defined<RawUser>,
    cluster_info: &serde_json::Value,
) -> Result<(Credentials, Option<ClientIdentity>), KubeconfigError> {
    let entry = format!("user {name}");
    let file = &u.file;
    let v = &u.value;
    if let Some(p) = &v.auth_provider {
        return Err(entry_error(file, entry, auth_provider_fix(&p.name)));
    }
    if v.username.as_deref().is_some_and(|s| !s.is_empty())
        || v.password.as_deref().is_some_and(|s| !s.is_empty())
    {
        return Err(entry_error(
            file,
            entry,
            "username/password (basic auth) is not supported: the API server removed it (v1.19); use a token, a client certificate or an exec plugin",
        ));
    }
    if v.impersonate.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(entry_error(
            file,
            entry,
            "as (impersonation) is not supported; use a context whose user is the identity to act as",
        ));
    }
    let identity = identity(&entry, file, v)?;
    let credentials = if let Some(x) = &v.exec {
        Credentials::Exec(Arc::new(exec_plugin(&entry, file, x, cluster_info)?))
    } else if let Some(p) = v.token_file.as_deref().filter(|p| !p.is_empty()) {
        // Read once now, so a wrong path fails naming the entry; re-read per request after.
        let path = resolve(file, p);
        let token =
            crate::files::read_capped_text(&path, super::MAX_TOKEN_FILE_BYTES).map_err(|e| {
                entry_error(
                    file,
                    entry.clone(),
                    format!("tokenFile {}: {e}", path.display()),
                )
            })?;
        if token.trim().is_empty() {
            return Err(entry_error(
                file,
                entry,
                format!("tokenFile {}: empty", path.display()),
            ));
        }
        if !super::auth::sendable(token.trim()) {
            return Err(entry_error(
                file,
                entry,
                format!("tokenFile {}: {}", path.display(), super::auth::UNSENDABLE),
            ));
        }
        Credentials::TokenFile(path)
    } else if let Some(t) = v.token.as_deref().filter(|t| !t.is_empty()) {
        if !super::auth::sendable(t.trim()) {
            return Err(entry_error(
                file,
                entry,
                format!("token: {}", super::auth::UNSENDABLE),
            ));
        }
        Credentials::Token(Secret::new(t.trim()))
    } else {
        Credentials::None
    };
    Ok((credentials, identity))
}

/// `client-certificate(-data)` and `client-key(-data)`: both or neither.
fn identity(
    entry: &str,
    file: &Path,
    v: &RawUser,
) -> Result<Option<ClientIdentity>, KubeconfigError> {
    let pem = |data: &Option<String>,
               path: &Option<String>,
               key: &str|
     -> Result<Option<Vec<u8>>, KubeconfigError> {
        if let Some(d) = data.as_deref().filter(|d| !d.is_empty()) {
            return b64(file, entry, &format!("{key}-data"), d).map(Some);
        }
        match path.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => read_file(file, entry, key, &resolve(file, p)).map(Some),
            None => Ok(None),
        }
    };
    let cert = pem(
        &v.client_certificate_data,
        &v.client_certificate,
        "client-certificate",
    )?;
    let key = pem(&v.client_key_data, &v.client_key, "client-key")?;
    match (cert, key) {
        (None, None) => Ok(None),
        (Some(certificate_pem), Some(key)) => Ok(Some(ClientIdentity {
            origin: format!("kubeconfig {}, {entry}", file.display()),
            certificate_pem,
            key_pem: Secret::new(String::from_utf8_lossy(&key)),
        })),
        (Some(_), None) => Err(entry_error(
            file,
            entry.to_string(),
            "client-certificate without client-key; set both",
        )),
        (None, Some(_)) => Err(entry_error(
            file,
            entry.to_string(),
            "client-key without client-certificate; set both",
        )),
    }
}

fn exec_plugin(
    entry: &str,
    file: &Path,
    x: &RawExec,
    cluster_info: &serde_json::Value,
) -> Result<ExecPlugin, KubeconfigError> {
    let bad = |p: String| entry_error(file, entry.to_string(), p);
    if x.command.is_empty() {
        return Err(bad("exec: no command".into()));
    }
    let api_version = ExecApiVersion::parse(&x.api_version).ok_or_else(|| {
        bad(format!(
            "exec: apiVersion {:?} is not client.authentication.k8s.io/v1 or v1beta1",
            x.api_version
        ))
    })?;
    let interactive = match x.interactive_mode.as_deref() {
        Some("Never") => InteractiveMode::Never,
        Some("IfAvailable") => InteractiveMode::IfAvailable,
        Some("Always") => InteractiveMode::Always,
        // v1 requires the field; v1beta1 defaults it (client-go `exec.go`,
        // `newAuthenticator`).
        None if api_version == ExecApiVersion::V1beta1 => InteractiveMode::IfAvailable,
        None => {
            return Err(bad(
                "exec: interactiveMode is required with client.authentication.k8s.io/v1 (Never, IfAvailable or Always)".into(),
            ));
        }
        Some(other) => {
            return Err(bad(format!(
                "exec: interactiveMode {other:?} is not Never, IfAvailable or Always"
            )));
        }
    };
    // Only a command with a path separator is a path; a bare name is found in PATH.
    let command = if x.command.contains('/') {
        resolve(file, &x.command)
    } else {
        PathBuf::from(&x.command)
    };
    Ok(ExecPlugin::new(
        format!("kubeconfig {}, {entry}", file.display()),
        command,
        x.args.clone().unwrap_or_default(),
        x.env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        api_version,
        interactive,
        x.install_hint.clone().filter(|h| !h.trim().is_empty()),
        x.provide_cluster_info.then(|| cluster_info.clone()),
    ))
}

#[cfg(test)]
mod tests;
