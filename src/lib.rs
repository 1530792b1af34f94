//! pullcheck: decide, the way the kubelet would, whether an image can be pulled.
//!
//! Data flows one way: [`reference`] → [`credentials`] → [`registry`] → [`platform`] →
//! [`verdict`] → `report`. The `engine` runs that pipeline for many images; the CLI, the
//! init container and the webhook are thin shells over it.
//!
//! Everything is `pub(crate)` unless the binary, `tests/` or `fuzz/` use it, so rustc
//! reports dead code: the public items are the ones those need.

pub(crate) mod apiserver;
mod audit;
pub mod cli;
pub mod credentials;
mod engine;
pub(crate) mod files;
pub mod k8s;
mod kueue;
pub mod manifest;
pub(crate) mod pem;
pub mod platform;
pub mod reference;
pub mod registry;
mod report;
pub(crate) mod runtime;
mod serve;
pub mod verdict;
pub(crate) mod watch;
pub mod webhook;
