//! Reports: turn outcomes into bytes. No decisions are made here.
//!
//! - [`text`]: one human line per image, for stderr;
//! - [`json`]: the versioned JSON document for `--output json` (docs/json-schema.md);
//! - [`termination`]: the ≤ 4 KiB summary the kubelet shows in `kubectl describe pod`.

pub mod json;
pub mod termination;
pub mod text;
