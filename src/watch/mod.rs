//! `pullcheck watch`: act on the kubelet's own image-pull failures.
//!
//! Only the pure parts live here so far: [`classify`] turns a container's waiting reason and
//! message into one of pullcheck's verdicts, and [`decide`] applies the written decision
//! table (docs/watch.md). Neither does I/O, so the controller that feeds them pod statuses,
//! hosts dirs and engine results can be tested apart from them.

pub(crate) mod classify;
pub(crate) mod decide;
#[cfg(test)]
mod recorded;
