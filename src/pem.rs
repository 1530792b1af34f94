//! TLS material shared by the registry client, the Kubernetes API client and the webhook's
//! server: the process's one rustls crypto provider, and PEM certificate bundles read with
//! one rule (a bounded regular file, at least one `CERTIFICATE` block).
//!
//! It sits below `registry` and `apiserver` so that neither reaches into the other.

use std::path::Path;

use rustls::pki_types::{CertificateDer, pem::PemObject};

use crate::files::FileError;

/// The largest CA bundle read (Debian's whole `ca-certificates.crt` is ~220 KB).
pub(crate) const MAX_CA_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Install the ring crypto provider once per process (reqwest is built without one).
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why a PEM bundle gave no certificates. Displays as the reason alone; callers name the
/// file and the flag.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PemError {
    /// The file can't be read (or is not a regular file, or is over [`MAX_CA_FILE_BYTES`]).
    #[error(transparent)]
    Read(#[from] FileError),
    /// A block does not decode.
    #[error("{0}")]
    Decode(String),
    /// No `CERTIFICATE` block at all.
    #[error("no certificates found")]
    Empty,
}

/// The certificates of the PEM file at `path`, in file order.
pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, PemError> {
    certificates_in(&crate::files::read_capped(path, MAX_CA_FILE_BYTES)?)
}

/// The certificates of PEM text already read (a bundle handed over in an annotation), with
/// the rule of [`certificates`].
pub(crate) fn certificates_in(bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| PemError::Decode(e.to_string()))?;
    if certs.is_empty() {
        return Err(PemError::Empty);
    }
    Ok(certs)
}
