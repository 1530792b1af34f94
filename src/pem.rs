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
/// the rule of [`certificates`]: only `CERTIFICATE` blocks count (a key beside them is
/// skipped), and each must be an X.509 certificate rustls can use as a trust anchor (a block
/// of other bytes would otherwise be dropped silently later, and the registry read "not
/// trusted" with the CA given).
pub(crate) fn certificates_in(bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| PemError::Decode(e.to_string()))?;
    if certs.is_empty() {
        return Err(PemError::Empty);
    }
    for (i, c) in certs.iter().enumerate() {
        let mut probe = rustls::RootCertStore::empty();
        probe.add(c.clone()).map_err(|e| {
            PemError::Decode(format!(
                "certificate {} of the bundle does not parse: {e}",
                i + 1
            ))
        })?;
    }
    Ok(certs)
}

/// PEM text holding exactly these certificates (64-column base64, RFC 7468): what is handed
/// over to the injected check, so that nothing else of a CA file (a private key kept in the
/// same file, comments) ever reaches a workload's annotation.
pub(crate) fn encode_certificates(certs: &[CertificateDer<'_>]) -> String {
    use base64::Engine as _;
    let mut out = String::new();
    for c in certs {
        let b64 = base64::engine::general_purpose::STANDARD.encode(c.as_ref());
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}
