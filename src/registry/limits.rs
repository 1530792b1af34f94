//! Every size cap and default deadline of the transport, with its unit, in one place.

use std::time::Duration;

/// Largest manifest or index body read, in bytes. containerd rejects larger manifests
/// (`MaxManifestSize = 4*1048*1048` in core/remotes/docker/resolver.go).
pub const MAX_MANIFEST_BYTES: usize = 4 * 1048 * 1048;
/// Largest token-endpoint response body read, in bytes.
pub const MAX_TOKEN_BYTES: usize = 1024 * 1024;
/// Largest error body read (to decode the registry's `errors` array), in bytes.
pub const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// Redirect hops followed per request (containerd follows 10).
pub const MAX_REDIRECTS: usize = 10;
/// Default deadline of one HTTP request, headers and body included.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline for establishing a TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default deadline of a whole `check` run (`--timeout`).
pub const DEFAULT_OVERALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Attempts per request for transient failures (the first try included).
pub const MAX_ATTEMPTS: usize = 4;
/// Tokens are treated as valid for at least this long when `expires_in` is smaller or
/// absent (token spec: "defaults to 60 seconds").
pub const MIN_TOKEN_LIFETIME: Duration = Duration::from_secs(60);
