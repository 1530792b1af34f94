//! Every size cap and default deadline of the transport, with its unit, in one place.

use std::time::Duration;

/// Largest manifest or index body read, in bytes. containerd rejects larger manifests
/// (`MaxManifestSize = 4*1048*1048` in core/remotes/docker/resolver.go).
pub(crate) const MAX_MANIFEST_BYTES: usize = 4 * 1048 * 1048;
/// Largest token-endpoint response body read, in bytes.
pub(crate) const MAX_TOKEN_BYTES: usize = 1024 * 1024;
/// Largest error body read (to decode the registry's `errors` array), in bytes.
pub(crate) const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Redirect hops followed per request (containerd follows 10).
pub(crate) const MAX_REDIRECTS: usize = 10;
/// Deadline for establishing a TCP connection.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per request for transient failures (the first try included).
pub(crate) const MAX_ATTEMPTS: usize = 4;
/// Tokens are treated as valid for at least this long when `expires_in` is smaller or
/// absent (token spec: "defaults to 60 seconds").
pub(crate) const MIN_TOKEN_LIFETIME: Duration = Duration::from_secs(60);
