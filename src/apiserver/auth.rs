//! How a request to the Kubernetes API proves who sends it: [`Credentials`] (a bearer token,
//! held or read from a file on each request) and [`ClientIdentity`] (a client certificate,
//! given to TLS when the client is built). Where they come from — flags, a kubeconfig, the
//! in-cluster ServiceAccount — is [`super::ApiServer`]'s business.

use std::path::PathBuf;
use std::sync::Arc;

use crate::credentials::Secret;

/// The largest bearer token file read (a projected ServiceAccount token is ~1 KiB).
pub(crate) const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// The bearer credential of every request.
#[derive(Debug, Clone, Default)]
pub enum Credentials {
    /// None (a client certificate may still identify the caller).
    #[default]
    None,
    /// A fixed token (a kubeconfig's `token`).
    Token(Secret),
    /// A file holding the token, re-read on every request: projected ServiceAccount tokens
    /// rotate (`--apiserver-token-file`, a kubeconfig's `tokenFile`, in-cluster).
    TokenFile(PathBuf),
    /// A kubeconfig user's exec credential plugin: run for a token, which is cached until
    /// its expiry or a 401 ([`super::exec`]).
    Exec(Arc<super::exec::ExecPlugin>),
}

/// Why no bearer token could be had for a request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CredentialError {
    /// The token file can't be read.
    #[error("token file {}: {source}", file.display())]
    TokenFile {
        /// The file.
        file: PathBuf,
        /// The I/O failure, or "not a regular file".
        source: Arc<crate::files::FileError>,
    },
    /// The exec plugin gave no token.
    #[error(transparent)]
    Exec(#[from] super::exec::ExecError),
    /// The token can't be sent: it holds a byte an HTTP header value can't carry (a line
    /// break or another control character, `http::HeaderValue::from_str`'s rule).
    #[error("{from}: {UNSENDABLE}")]
    Unsendable {
        /// Where the token came from (`token file /path`, `exec plugin aws (kubeconfig ...)`).
        from: String,
    },
}

/// What is wrong with a token [`sendable`] refuses, and the fix.
pub(crate) const UNSENDABLE: &str = "the token holds a line break or another control character, which an HTTP header can't carry; write the token on one line";

/// True when `token` can go in an `Authorization: Bearer` header. Checked where a token
/// enters (kubeconfig, token file, plugin answer), so a bad one is a usage error naming its
/// source, not a transport failure of the request.
pub(crate) fn sendable(token: &str) -> bool {
    // "Bearer " is itself a valid header value, so the token alone decides (no allocation
    // per request).
    http::HeaderValue::from_str(token).is_ok()
}

impl CredentialError {
    /// True when asking again may succeed (a plugin that timed out); a file that can't be
    /// read stays unreadable until someone fixes it.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            CredentialError::TokenFile { .. } | CredentialError::Unsendable { .. } => false,
            // A plugin that timed out (its identity provider slow) may answer next time;
            // one that failed or answered nonsense needs the user.
            CredentialError::Exec(e) => matches!(e, super::exec::ExecError::Timeout { .. }),
        }
    }
}

impl Credentials {
    /// The token to send now (`None`: send no `Authorization` header). A token file is read
    /// here, bounded ([`MAX_TOKEN_FILE_BYTES`], regular files only), and trimmed.
    pub(crate) async fn bearer(&self) -> Result<Option<Secret>, CredentialError> {
        let token = self.read().await?;
        if let Some(t) = &token
            && !sendable(t.expose())
        {
            return Err(CredentialError::Unsendable {
                from: match self {
                    Credentials::TokenFile(f) => format!("token file {}", f.display()),
                    Credentials::Exec(p) => format!("exec plugin {} ({})", p.command(), p.origin()),
                    _ => "the kubeconfig token".to_string(),
                },
            });
        }
        Ok(token)
    }

    async fn read(&self) -> Result<Option<Secret>, CredentialError> {
        match self {
            Credentials::None => Ok(None),
            Credentials::Token(t) => Ok(Some(t.clone())),
            Credentials::TokenFile(f) => {
                let bytes = crate::files::read_capped_async(f, MAX_TOKEN_FILE_BYTES)
                    .await
                    .map_err(|source| CredentialError::TokenFile {
                        file: f.clone(),
                        source: Arc::new(source),
                    })?;
                Ok(Some(Secret::new(String::from_utf8_lossy(&bytes).trim())))
            }
            Credentials::Exec(p) => Ok(Some(p.token().await?)),
        }
    }

    /// The server answered 401 to the token [`Credentials::bearer`] gave: forget whatever is
    /// cached. True when asking once more may get a different token (worth one retry); a
    /// fixed token or a file just read would be refused again.
    pub(crate) fn refused(&self) -> bool {
        match self {
            Credentials::None | Credentials::Token(_) | Credentials::TokenFile(_) => false,
            Credentials::Exec(p) => {
                p.forget();
                true
            }
        }
    }

    /// The token file, if the token comes from one (for messages that name the fix).
    pub(crate) fn token_file(&self) -> Option<&std::path::Path> {
        match self {
            Credentials::TokenFile(f) => Some(f),
            _ => None,
        }
    }
}

/// A client certificate and its key, PEM, for mutual TLS (a kubeconfig's
/// `client-certificate(-data)` and `client-key(-data)`).
#[derive(Clone)]
pub struct ClientIdentity {
    /// Where it came from, for messages (`kubeconfig /root/.kube/config, user admin`).
    pub origin: String,
    /// The certificate chain, PEM.
    pub certificate_pem: Vec<u8>,
    /// The private key, PEM (never printed).
    pub key_pem: Secret,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_file_rewritten_with_a_line_break_is_a_usage_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "good-token\n").unwrap();
        let creds = Credentials::TokenFile(f.clone());
        assert_eq!(
            creds.bearer().await.unwrap().unwrap().expose(),
            "good-token"
        );
        std::fs::write(&f, "half\nother-half\n").unwrap();
        let e = creds.bearer().await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("token file {}: {UNSENDABLE}", f.display())
        );
        assert!(!e.is_retryable());
    }
}
