//! Registry transport: our own thin OCI distribution client on reqwest + rustls.
//!
//! Layers, one file each, assembled in [`client::Registry::new`]:
//! [`guard`] (realm, redirect and address policy, checked on the address actually
//! connected to) → [`tls`] (roots, CA files, skip-verify profiles) → [`http`] (one request
//! with a deadline and a body cap) → [`retry`] (backoff, `Retry-After`, within the overall
//! deadline) → [`token`] (challenge → token, cached per registry, repository and credential)
//! → [`client`] (HEAD/GET manifest). [`hosts`] reads containerd's `certs.d` layout to give
//! the endpoints to try; [`challenge`] parses `WWW-Authenticate`.
//!
//! Nothing here decides a verdict: errors carry protocol facts ([`error`]) and the engine
//! classifies them.

pub(crate) mod auth;
pub mod challenge;
pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod guard;
pub mod hosts;
pub(crate) mod http;
pub(crate) mod limits;
pub(crate) mod quota;
mod redact;
pub(crate) mod retry;
pub(crate) mod tls;
pub mod token;
