//! The kubeconfig file format as pullcheck reads it, and one merged entry with the file
//! that defined it.

use std::path::PathBuf;

use serde::Deserialize;

// The file format (k8s.io/client-go/tools/clientcmd/api/v1/types.go `Config`). Unknown keys
// are ignored, as kubectl ignores them; a key of the wrong type is a parse error.

#[derive(Deserialize, Default)]
pub(super) struct RawConfig {
    #[serde(rename = "current-context", default)]
    pub(super) current_context: Option<String>,
    #[serde(default)]
    pub(super) clusters: Option<Vec<NamedCluster>>,
    #[serde(default)]
    pub(super) users: Option<Vec<NamedUser>>,
    #[serde(default)]
    pub(super) contexts: Option<Vec<NamedContext>>,
}

#[derive(Deserialize)]
pub(super) struct NamedCluster {
    pub(super) name: String,
    #[serde(default)]
    pub(super) cluster: Option<RawCluster>,
}

#[derive(Deserialize)]
pub(super) struct NamedUser {
    pub(super) name: String,
    #[serde(default)]
    pub(super) user: Option<RawUser>,
}

#[derive(Deserialize)]
pub(super) struct NamedContext {
    pub(super) name: String,
    #[serde(default)]
    pub(super) context: Option<RawContext>,
}

#[derive(Deserialize, Default, Clone)]
pub(super) struct RawCluster {
    #[serde(default)]
    pub(super) server: Option<String>,
    #[serde(rename = "certificate-authority", default)]
    pub(super) certificate_authority: Option<String>,
    #[serde(rename = "certificate-authority-data", default)]
    pub(super) certificate_authority_data: Option<String>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    pub(super) insecure_skip_tls_verify: Option<bool>,
    #[serde(rename = "tls-server-name", default)]
    pub(super) tls_server_name: Option<String>,
    #[serde(rename = "proxy-url", default)]
    pub(super) proxy_url: Option<String>,
    #[serde(default)]
    pub(super) extensions: Option<Vec<NamedExtension>>,
}

#[derive(Deserialize, Clone)]
pub(super) struct NamedExtension {
    pub(super) name: String,
    #[serde(default)]
    pub(super) extension: Option<serde_json::Value>,
}

#[derive(Deserialize, Default, Clone)]
pub(super) struct RawUser {
    #[serde(default)]
    pub(super) token: Option<String>,
    #[serde(rename = "tokenFile", default)]
    pub(super) token_file: Option<String>,
    #[serde(rename = "client-certificate", default)]
    pub(super) client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data", default)]
    pub(super) client_certificate_data: Option<String>,
    #[serde(rename = "client-key", default)]
    pub(super) client_key: Option<String>,
    #[serde(rename = "client-key-data", default)]
    pub(super) client_key_data: Option<String>,
    #[serde(default)]
    pub(super) username: Option<String>,
    #[serde(default)]
    pub(super) password: Option<String>,
    #[serde(rename = "auth-provider", default)]
    pub(super) auth_provider: Option<RawAuthProvider>,
    #[serde(default)]
    pub(super) exec: Option<RawExec>,
    #[serde(rename = "as", default)]
    pub(super) impersonate: Option<String>,
}

#[derive(Deserialize, Clone)]
pub(super) struct RawAuthProvider {
    pub(super) name: String,
}

#[derive(Deserialize, Clone)]
pub(super) struct RawExec {
    #[serde(default)]
    pub(super) command: String,
    #[serde(default)]
    pub(super) args: Option<Vec<String>>,
    #[serde(default)]
    pub(super) env: Option<Vec<RawEnv>>,
    #[serde(rename = "apiVersion", default)]
    pub(super) api_version: String,
    #[serde(rename = "installHint", default)]
    pub(super) install_hint: Option<String>,
    #[serde(rename = "provideClusterInfo", default)]
    pub(super) provide_cluster_info: bool,
    #[serde(rename = "interactiveMode", default)]
    pub(super) interactive_mode: Option<String>,
}

#[derive(Deserialize, Clone)]
pub(super) struct RawEnv {
    pub(super) name: String,
    #[serde(default)]
    pub(super) value: String,
}

#[derive(Deserialize, Default, Clone)]
pub(super) struct RawContext {
    #[serde(default)]
    pub(super) cluster: String,
    #[serde(default)]
    pub(super) user: String,
    #[serde(default)]
    pub(super) namespace: Option<String>,
}

/// One merged entry and the file that defined it.
pub(super) struct Defined<T> {
    pub(super) file: PathBuf,
    pub(super) value: T,
}
