//! `pullcheck webhook`: the admission webhook. It rejects a workload whose images can't be
//! pulled before any pod exists, and injects the `pullcheck` init container into the ones it
//! admits.
//!
//! One request flows through these parts, in order:
//! - [`server`]: HTTPS (rustls, certificate reloaded when its files change), the routes,
//!   body limit, graceful shutdown;
//! - [`handler`]: the only async step: decode the review, pick the pod templates, read the
//!   namespace's pull secrets ([`cluster`]), resolve every image through the engine and the
//!   verdict cache ([`cache`], [`engines`]) within the budget, then hand everything to
//!   [`review`];
//! - [`review`]: pure functions from (request, verdicts, policy) to an `AdmissionResponse`:
//!   which objects are checked at all, the deny message, the warnings, the mutation patch.
//!
//! [`config`] holds the settings the CLI resolved once; [`metrics`] the Prometheus families.

pub mod cache;
pub mod cluster;
pub mod config;
pub mod engines;
pub mod handler;
pub mod metrics;
pub mod review;
pub mod server;

pub use config::{Config, Mode};
pub use review::{Checked, ImageCheck, Policy, Skip, Triage};
