//! What a context's cluster and user entries become: the server URL, its CA and the
//! `spec.cluster` an exec plugin may be given ([`cluster_settings`]); a token, token file,
//! client certificate or exec plugin ([`user_settings`]). Relative paths are taken against
//! the file that defined the entry; every setting pullcheck can't honour is an error
//! naming the file and the entry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;

use super::error::KubeconfigError;
use super::format::{Defined, RawCluster, RawExec, RawUser};
use crate::apiserver::exec::{ExecApiVersion, ExecPlugin, InteractiveMode};
use crate::apiserver::{CaBundle, ClientIdentity, Credentials};
use crate::credentials::Secret;

/// The largest CA, client certificate or key file read.
const MAX_PEM_BYTES: u64 = 1024 * 1024;
/// The extension of a cluster that is handed to an exec plugin as `spec.cluster.config`
/// (`k8s.io/client-go/tools/auth/exec`, `clusterExtensionKey`).
const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

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
pub(super) fn cluster_settings(
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
pub(super) fn user_settings(
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
        let token = crate::files::read_capped_text(&path, crate::apiserver::MAX_TOKEN_FILE_BYTES)
            .map_err(|e| {
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
        if !crate::apiserver::auth::sendable(token.trim()) {
            return Err(entry_error(
                file,
                entry,
                format!(
                    "tokenFile {}: {}",
                    path.display(),
                    crate::apiserver::auth::UNSENDABLE
                ),
            ));
        }
        Credentials::TokenFile(path)
    } else if let Some(t) = v.token.as_deref().filter(|t| !t.is_empty()) {
        if !crate::apiserver::auth::sendable(t.trim()) {
            return Err(entry_error(
                file,
                entry,
                format!("token: {}", crate::apiserver::auth::UNSENDABLE),
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
