//! The Kubernetes API client the webhook and the watch share: where the API server is
//! ([`ApiServer`], from flags or the in-cluster ServiceAccount), and one authorized HTTP
//! client for it ([`ApiClient`]). Resource-specific reads and writes live with their users
//! (`webhook::cluster`, `watch::api`).
//!
//! Written on reqwest rather than kube-rs' client: the binary already carries reqwest and
//! rustls for the registry protocol, and kube's client stack (tower, hyper-rustls,
//! kubeconfig parsing) would add to a binary held under 8 MB (docs/watch.md says what the
//! watch needs and why its own list/watch loop is small).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rustls::RootCertStore;
use url::Url;

/// The in-cluster ServiceAccount directory.
pub(crate) const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Connect deadline of every API request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The largest bearer token file read (a projected ServiceAccount token is ~1 KiB).
pub(crate) const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// Where the Kubernetes API is.
#[derive(Debug, Clone)]
pub struct ApiServer {
    /// Base URL, e.g. `https://10.96.0.1:443`.
    pub url: String,
    /// File holding the bearer token (re-read on every request: projected tokens rotate).
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA that signed the API server's certificate.
    pub ca_file: Option<PathBuf>,
}

/// A `--apiserver*` setting that keeps the client from being built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClusterError {
    /// `--apiserver` is not a URL.
    #[error("--apiserver {url}: {source}")]
    Url {
        /// The value given.
        url: String,
        /// Why it does not parse.
        source: url::ParseError,
    },
    /// `--apiserver` is a URL of another scheme.
    #[error("--apiserver {url}: must be an https URL")]
    Scheme {
        /// The value given.
        url: String,
    },
    /// `--apiserver-ca-file` can't be read as PEM.
    #[error("--apiserver-ca-file {}: {reason}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// The read or PEM error.
        reason: String,
    },
    /// `--apiserver-ca-file` holds no certificate.
    #[error("--apiserver-ca-file {}: no certificates found", path.display())]
    NoCertificates {
        /// The file.
        path: PathBuf,
    },
    /// `--apiserver-token-file` can't be read.
    #[error("--apiserver-token-file {}: {source}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// The I/O failure, or "not a regular file".
        source: crate::files::FileError,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the API client: {0}")]
    Client(reqwest::Error),
}

/// The API server as seen from inside a pod, if this is one.
pub(crate) fn in_cluster() -> Option<ApiServer> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST").ok()?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
    let dir = Path::new(SERVICE_ACCOUNT_DIR);
    let token = dir.join("token");
    if !token.is_file() {
        return None;
    }
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    Some(ApiServer {
        url: format!("https://{host}:{port}"),
        token_file: Some(token),
        ca_file: Some(dir.join("ca.crt")).filter(|p| p.is_file()),
    })
}

/// One HTTP client for the API server, with its base URL and token file.
#[derive(Clone)]
pub(crate) struct ApiClient {
    client: reqwest::Client,
    base: Url,
    token_file: Option<PathBuf>,
}

impl ApiClient {
    /// A client for `api`; errors name the flag or file.
    pub(crate) fn new(api: &ApiServer) -> Result<ApiClient, ClusterError> {
        crate::pem::install_crypto_provider();
        let base = Url::parse(&api.url).map_err(|source| ClusterError::Url {
            url: api.url.clone(),
            source,
        })?;
        if !matches!(base.scheme(), "https" | "http") {
            return Err(ClusterError::Scheme {
                url: api.url.clone(),
            });
        }
        let mut roots = RootCertStore::empty();
        match &api.ca_file {
            Some(f) => {
                let certs = crate::pem::certificates(f).map_err(|e| match e {
                    crate::pem::PemError::Empty => ClusterError::NoCertificates { path: f.clone() },
                    e => ClusterError::CaFile {
                        path: f.clone(),
                        reason: e.to_string(),
                    },
                })?;
                roots.add_parsable_certificates(certs);
            }
            None => {
                roots.add_parsable_certificates(
                    webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().cloned(),
                );
            }
        }
        let tls = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(format!("pullcheck/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ClusterError::Client)?;
        if let Some(f) = &api.token_file {
            crate::files::read_capped(f, MAX_TOKEN_FILE_BYTES).map_err(|source| {
                ClusterError::TokenFile {
                    path: f.clone(),
                    source,
                }
            })?;
        }
        Ok(ApiClient {
            client,
            base,
            token_file: api.token_file.clone(),
        })
    }

    /// The base URL with these path segments (each percent-encoded as needed).
    pub(crate) fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut segs) = url.path_segments_mut() {
            segs.pop_if_empty().extend(segments);
        }
        url
    }

    /// A request with the bearer token (read now: projected tokens rotate) and
    /// `Accept: application/json`. Errors: the token file can't be read.
    pub(crate) async fn request(
        &self,
        method: reqwest::Method,
        url: Url,
    ) -> Result<reqwest::RequestBuilder, TokenFileError> {
        let mut req = self
            .client
            .request(method, url)
            .header(http::header::ACCEPT, "application/json");
        if let Some(f) = &self.token_file {
            let token = crate::files::read_capped_async(f, MAX_TOKEN_FILE_BYTES)
                .await
                .map_err(|source| TokenFileError {
                    file: f.clone(),
                    source: std::sync::Arc::new(source),
                })?;
            req = req.bearer_auth(String::from_utf8_lossy(&token).trim());
        }
        Ok(req)
    }
}

/// An API server answer that says "later", not "no": 408, 429 (API Priority and Fairness
/// sheds load with it, with a `Retry-After`) and every 5xx (an apiserver restarting, etcd
/// unavailable). The one definition for every face that talks to the API: the watch's
/// `--once` exits transient (20) on these and usage (2) on other statuses, and the webhook's
/// restart-rules probe asks again later. client-go retries the same answers
/// (`k8s.io/client-go/rest/request.go`, `checkWait`/`IsRetryableError`).
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

/// The bearer token file can't be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("token file {}: {source}", file.display())]
pub(crate) struct TokenFileError {
    /// The file.
    pub file: PathBuf,
    /// The I/O failure, or "not a regular file".
    pub source: std::sync::Arc<crate::files::FileError>,
}

/// An error and its sources, `: `-separated.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}
