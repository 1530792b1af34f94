//! The Kubernetes API, for every face that talks to it (the webhook, the watch, the
//! controllers to come): where the API server is and who we are to it ([`ApiServer`]: from
//! flags, a kubeconfig or the in-cluster ServiceAccount), and the one client
//! ([`client::ApiClient`]) with its one error ([`error::ApiError`]).
//!
//! Written on reqwest rather than kube-rs' client: the binary already carries reqwest and
//! rustls for the registry protocol; kube-client measured +2.5 MB on the static binary
//! (docs/benchmarks.md, "Kubernetes client: kube-rs or our own (measured)").

pub(crate) mod auth;
pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod exec;
pub(crate) mod kubeconfig;
pub(crate) mod time;

use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use url::Url;

pub(crate) use auth::MAX_TOKEN_FILE_BYTES;
pub use auth::{ClientIdentity, Credentials};
pub(crate) use client::ApiClient;
pub(crate) use error::ApiError;

/// The in-cluster ServiceAccount directory.
pub(crate) const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The CA bundle that signs the API server's certificate.
#[derive(Debug, Clone)]
pub enum CaBundle {
    /// A PEM file (`--apiserver-ca-file`, a kubeconfig's `certificate-authority`, the
    /// ServiceAccount's `ca.crt`).
    File(PathBuf),
    /// PEM bytes (a kubeconfig's `certificate-authority-data`), and where they came from.
    Pem {
        /// For messages: `kubeconfig FILE, cluster NAME`.
        origin: String,
        /// The PEM.
        pem: Vec<u8>,
    },
}

/// How the API server was chosen, for the line that says so and for messages that name
/// the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--apiserver` and its `--apiserver-*` flags.
    Flags,
    /// The in-cluster ServiceAccount (`KUBERNETES_SERVICE_HOST`).
    InCluster,
    /// A kubeconfig: the files read (first wins), and the context used.
    Kubeconfig {
        /// What named the files: `--kubeconfig`, `$KUBECONFIG` or `~/.kube/config`.
        by: &'static str,
        /// The files, in merge order.
        files: Vec<PathBuf>,
        /// The context.
        context: String,
    },
}

impl Source {
    /// The line that says which API server was found (`using kubeconfig $KUBECONFIG (…),
    /// context c`), for stderr or the log; `None` for `--apiserver`, the caller's own choice
    /// on the command line.
    pub(crate) fn announce(&self) -> Option<String> {
        match self {
            Source::Flags => None,
            Source::Kubeconfig { .. } => Some(format!("using kubeconfig {self}")),
            Source::InCluster => Some(format!("using {self}")),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flags => f.write_str("--apiserver"),
            Source::InCluster => f.write_str("the in-cluster ServiceAccount"),
            Source::Kubeconfig { by, files, context } => {
                let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
                write!(f, "{by} ({}), context {context}", files.join(":"))
            }
        }
    }
}

/// Where the Kubernetes API is, and how to prove who we are to it.
#[derive(Debug, Clone)]
pub struct ApiServer {
    /// Base URL, e.g. `https://10.96.0.1:443`.
    pub url: String,
    /// The CA that signed the API server's certificate (`None`: the Mozilla roots).
    pub ca: Option<CaBundle>,
    /// The bearer credential.
    pub credentials: Credentials,
    /// A client certificate, for mutual TLS.
    pub identity: Option<ClientIdentity>,
    /// How this was chosen.
    pub source: Source,
}

/// A setting that keeps the client from being built; each names the flag, file or
/// kubeconfig entry at fault.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClusterError {
    /// The server is not a URL.
    #[error("{origin} {url}: {source}")]
    Url {
        /// Where the URL came from (`--apiserver`, `kubeconfig … server`).
        origin: String,
        /// The value given.
        url: String,
        /// Why it does not parse.
        source: url::ParseError,
    },
    /// The server is a URL of another scheme.
    #[error("{origin} {url}: must be an https URL")]
    Scheme {
        /// Where the URL came from.
        origin: String,
        /// The value given.
        url: String,
    },
    /// The CA can't be read as PEM.
    #[error("{origin}: {reason}")]
    Ca {
        /// `--apiserver-ca-file FILE`, or the kubeconfig entry.
        origin: String,
        /// The read or PEM error.
        reason: String,
    },
    /// The CA holds no certificate.
    #[error("{origin}: no certificates found")]
    NoCertificates {
        /// `--apiserver-ca-file FILE`, or the kubeconfig entry.
        origin: String,
    },
    /// The client certificate or key can't be used.
    #[error("{origin}: {reason}")]
    Identity {
        /// The kubeconfig user entry.
        origin: String,
        /// Why.
        reason: String,
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

impl ApiServer {
    /// `--apiserver URL` with its token and CA files.
    pub fn from_flags(url: String, token_file: Option<PathBuf>, ca_file: Option<PathBuf>) -> Self {
        ApiServer {
            url,
            ca: ca_file.map(CaBundle::File),
            credentials: token_file.map_or(Credentials::None, Credentials::TokenFile),
            identity: None,
            source: Source::Flags,
        }
    }

    /// What the URL is called in messages.
    fn url_origin(&self) -> String {
        match &self.source {
            Source::Flags => "--apiserver".into(),
            Source::InCluster => "KUBERNETES_SERVICE_HOST".into(),
            s @ Source::Kubeconfig { .. } => format!("{s}: server"),
        }
    }

    /// The base URL, https (http only for a loopback test server is not offered: tokens
    /// would travel in clear).
    pub(crate) fn base_url(&self) -> Result<Url, ClusterError> {
        let base = Url::parse(&self.url).map_err(|source| ClusterError::Url {
            origin: self.url_origin(),
            url: self.url.clone(),
            source,
        })?;
        if !matches!(base.scheme(), "https" | "http") {
            return Err(ClusterError::Scheme {
                origin: self.url_origin(),
                url: self.url.clone(),
            });
        }
        Ok(base)
    }

    /// A token file that can't be read fails at start, not on the first call.
    pub(crate) fn check_token_file(&self) -> Result<(), ClusterError> {
        if let Credentials::TokenFile(f) = &self.credentials {
            crate::files::read_capped(f, MAX_TOKEN_FILE_BYTES).map_err(|source| {
                ClusterError::TokenFile {
                    path: f.clone(),
                    source,
                }
            })?;
        }
        Ok(())
    }

    /// The fix for an API server certificate no CA of ours signs: which setting holds the
    /// CA, naming the kubeconfig file and cluster entry, or the flag, it came from.
    pub(crate) fn ca_hint(&self) -> String {
        match (&self.ca, &self.source) {
            (Some(CaBundle::Pem { origin, .. }), _) => {
                format!("{origin} does not sign it; set it to the API server's CA")
            }
            (Some(CaBundle::File(f)), Source::InCluster) => format!(
                "the ServiceAccount's {} does not sign it (is KUBERNETES_SERVICE_HOST this cluster's API server?)",
                f.display()
            ),
            (Some(CaBundle::File(f)), _) => format!(
                "--apiserver-ca-file {} does not sign it; pass the API server's CA",
                f.display()
            ),
            (None, s @ Source::Kubeconfig { .. }) => format!(
                "the context's cluster entry sets no certificate-authority(-data) and the public roots don't sign it; set the API server's CA there ({s})"
            ),
            (None, _) => "pass the API server's CA with --apiserver-ca-file".to_string(),
        }
    }

    /// The TLS configuration: the CA (or the Mozilla roots) and the client certificate.
    pub(crate) fn tls_config(&self) -> Result<rustls::ClientConfig, ClusterError> {
        crate::pem::install_crypto_provider();
        let mut roots = RootCertStore::empty();
        match &self.ca {
            Some(ca) => {
                let (origin, certs) = match ca {
                    CaBundle::File(f) => (
                        format!("--apiserver-ca-file {}", f.display()),
                        crate::pem::certificates(f),
                    ),
                    CaBundle::Pem { origin, pem } => {
                        (origin.clone(), crate::pem::certificates_in(pem))
                    }
                };
                let certs = certs.map_err(|e| match e {
                    crate::pem::PemError::Empty => ClusterError::NoCertificates {
                        origin: origin.clone(),
                    },
                    e => ClusterError::Ca {
                        origin: origin.clone(),
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
        let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
        match &self.identity {
            None => Ok(builder.with_no_client_auth()),
            Some(id) => {
                use rustls::pki_types::PrivateKeyDer;
                use rustls::pki_types::pem::PemObject;
                let bad = |reason: String| ClusterError::Identity {
                    origin: id.origin.clone(),
                    reason,
                };
                let certs = crate::pem::certificates_in(&id.certificate_pem)
                    .map_err(|e| bad(format!("client certificate: {e}")))?;
                let key = PrivateKeyDer::from_pem_slice(id.key_pem.expose().as_bytes())
                    .map_err(|_| bad("client key: no PEM private key found".into()))?;
                builder.with_client_auth_cert(certs, key).map_err(|e| {
                    bad(match e {
                        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                            "client-key does not belong to client-certificate (their public keys differ); set the key the certificate was issued for".into()
                        }
                        e => format!("client certificate and key: {e}"),
                    })
                })
            }
        }
    }
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
        ca: Some(dir.join("ca.crt"))
            .filter(|p| p.is_file())
            .map(CaBundle::File),
        credentials: Credentials::TokenFile(token),
        identity: None,
        source: Source::InCluster,
    })
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
