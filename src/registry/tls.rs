//! TLS profiles and the HTTP clients built from them.
//!
//! Trust = Mozilla's roots compiled into the binary (so it works in a `FROM scratch` image
//! with no CA files) + `--ca-file` + `SSL_CERT_FILE` + per-endpoint `ca` from `hosts.toml`.
//! `skip_verify` (hosts.toml) and `--insecure-registry` over https accept any certificate
//! for that endpoint only. One reqwest client per distinct profile, so connections are
//! pooled and reused across images.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::guard::{Classes, Guard};
use super::limits;

/// What distinguishes one HTTP client from another.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct TlsProfile {
    /// Extra CA files (PEM) for this endpoint.
    pub ca_files: Vec<PathBuf>,
    /// Extra CA certificates (PEM text) for this endpoint.
    pub ca_pems: Vec<String>,
    /// Accept any server certificate.
    pub skip_verify: bool,
}

/// A CA file that could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    /// Unreadable or not PEM.
    #[error("CA file {path}: {message}; pass a PEM file with one or more CERTIFICATE blocks")]
    CaFile {
        /// The file as given.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

pub(crate) use crate::pem::install_crypto_provider;

/// The CA files every face trusts besides the built-in roots: the `--ca-file` values, then
/// `SSL_CERT_FILE` (the variable OpenSSL and Go's `crypto/x509` honour, which people set in
/// pods to add a private CA). One rule for check, scan, explain, the webhook and the watch.
/// An `SSL_CERT_FILE` that doesn't exist is ignored with a warning (an inherited environment
/// often names a host path that a scratch image doesn't have); a missing `--ca-file` is an
/// error later, naming the file.
pub(crate) fn ca_files(flags: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut files = flags.to_vec();
    if let Some(f) = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
        let f = std::path::PathBuf::from(f);
        if f.exists() {
            files.push(f);
        } else {
            tracing::warn!(path = %f.display(), "SSL_CERT_FILE does not exist; ignored");
        }
    }
    files
}

/// Read a PEM file of certificates ([`crate::pem::certificates`]); errors name the file and
/// say what to pass instead.
pub(crate) fn load_pem(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    crate::pem::certificates(path).map_err(|e| TlsError::CaFile {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Certificates from PEM text handed over by the webhook (`engine::handover`), with the
/// rule of [`load_pem`].
pub(crate) fn pem_text(text: &str) -> Result<Vec<CertificateDer<'static>>, crate::pem::PemError> {
    crate::pem::certificates_in(text.as_bytes())
}

/// What is handed over of a CA file: its certificates, checked as [`load_pem`] checks them
/// and written out again as PEM, never the file's text (a private key kept beside the
/// certificates would otherwise land in every workload's annotation).
pub(crate) fn ca_text(path: &Path) -> Result<String, TlsError> {
    Ok(crate::pem::encode_certificates(&load_pem(path)?))
}

/// A handed-over bundle that no longer decodes (`check --registry-config` checked it).
fn handed_over(e: crate::pem::PemError) -> TlsError {
    TlsError::CaFile {
        path: PathBuf::from("--registry-config"),
        message: e.to_string(),
    }
}

/// Builds and caches HTTP clients per [`TlsProfile`].
pub(crate) struct ClientPool {
    base_roots: Arc<RootCertStore>,
    guard: Guard,
    user_agent: String,
    clients: Mutex<HashMap<(TlsProfile, Classes), reqwest::Client>>,
}

impl ClientPool {
    /// `ca_files`: `--ca-file` values plus `SSL_CERT_FILE` if set; `ca_pems`: CA
    /// certificates handed over as PEM text. Errors name the file.
    pub(crate) fn new(
        ca_files: Vec<PathBuf>,
        ca_pems: &[String],
        guard: Guard,
        user_agent: String,
    ) -> Result<Self, TlsError> {
        install_crypto_provider();
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().cloned());
        for f in &ca_files {
            roots.add_parsable_certificates(load_pem(f)?);
        }
        for text in ca_pems {
            roots.add_parsable_certificates(pem_text(text).map_err(handed_over)?);
        }
        Ok(ClientPool {
            base_roots: Arc::new(roots),
            guard,
            user_agent,
            clients: Mutex::new(HashMap::new()),
        })
    }

    /// The client for a profile whose connections may reach `allowed`, built on first use.
    /// Each client resolves names through the guard for its classes, so a connection
    /// pooled for one kind of destination is never reused for another.
    pub(crate) fn client(
        &self,
        profile: &TlsProfile,
        allowed: Classes,
    ) -> Result<reqwest::Client, TlsError> {
        let key = (profile.clone(), allowed);
        if let Some(c) = self.clients.lock().expect("client pool lock").get(&key) {
            return Ok(c.clone());
        }
        let client = self.build(profile, allowed)?;
        self.clients
            .lock()
            .expect("client pool lock")
            .insert(key, client.clone());
        Ok(client)
    }

    fn build(&self, profile: &TlsProfile, allowed: Classes) -> Result<reqwest::Client, TlsError> {
        let builder = rustls::ClientConfig::builder();
        let mut config = if profile.skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate))
                .with_no_client_auth()
        } else {
            let mut roots = (*self.base_roots).clone();
            for f in &profile.ca_files {
                roots.add_parsable_certificates(load_pem(f)?);
            }
            for text in &profile.ca_pems {
                roots.add_parsable_certificates(pem_text(text).map_err(handed_over)?);
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        reqwest::Client::builder()
            .tls_backend_preconfigured(config)
            .dns_resolver(self.guard.resolver(allowed))
            // Redirects are followed hop by hop in the HTTP layer, each hop checked by the
            // guard for the classes its referrer allows.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits::CONNECT_TIMEOUT)
            .user_agent(self.user_agent.clone())
            .pool_max_idle_per_host(16)
            .build()
            .map_err(|e| TlsError::Client(e.to_string()))
    }
}

/// Verifier for `skip_verify` endpoints: accepts any certificate, still checks signatures.
#[derive(Debug)]
struct AcceptAnyCertificate;

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &rustls::crypto::ring::default_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
