//! One budget for everything pullcheck writes into pod-template annotations: the registry
//! configuration it hands over (`pullcheck.io/registry-config`) and the index bodies
//! (`pullcheck.io/index-bodies`), later more.
//!
//! Counted per object written, keys and values: a JobSet holds each replicated Job's
//! template, and Kueue copies each podSet's annotations into one Workload (up to 18
//! podSets), so what is written into N templates is stored N times in one object, which
//! must stay far below etcd's request limit (1.5 MiB by default; a 40-job JobSet once
//! reached it). Within a template, the registry configuration is served first: without it
//! the check fails differently from the webhook's, while without index bodies it only
//! spends GETs.

/// The most pullcheck's annotations may take in one object, keys and values, in bytes.
pub(crate) const MAX_OBJECT_BYTES: usize = 64 * 1024;

/// All of an object's annotations, keys and values, may take this many bytes
/// (`ValidateAnnotationsSize` in k8s.io/apimachinery `pkg/api/validation/objectmeta.go`);
/// a pod carries its template's.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Left free below [`MAX_ANNOTATIONS_BYTES`] for what controllers add to the pods.
const POD_ANNOTATIONS_MARGIN: usize = 4 * 1024;

/// The bytes pullcheck's annotations may take (keys and values) in a template whose other
/// annotations take `existing` bytes, as the API server counts them.
pub(crate) fn room_beside(existing: usize) -> usize {
    MAX_ANNOTATIONS_BYTES
        .saturating_sub(POD_ANNOTATIONS_MARGIN)
        .saturating_sub(existing)
}

/// What one annotation costs: its key and its value.
pub(crate) fn cost(key: &str, value: &str) -> usize {
    key.len() + value.len()
}

/// The bytes one object may still spend, shared by its templates in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObjectBudget {
    left: usize,
}

impl ObjectBudget {
    /// A fresh budget for one object.
    pub(crate) fn new() -> Self {
        ObjectBudget {
            left: MAX_OBJECT_BYTES,
        }
    }

    /// Bytes a template with `existing` bytes of other annotations may take.
    pub(crate) fn room(&self, existing: usize) -> usize {
        self.left.min(room_beside(existing))
    }

    /// Spend `bytes`.
    pub(crate) fn spend(&mut self, bytes: usize) {
        self.left = self.left.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_object_and_beside_other_annotations() {
        assert_eq!(room_beside(0), 256 * 1024 - 4 * 1024);
        assert_eq!(room_beside(250 * 1024), 2 * 1024);
        assert_eq!(room_beside(300 * 1024), 0);
        let mut b = ObjectBudget::new();
        assert_eq!(b.room(0), 64 * 1024);
        assert_eq!(b.room(250 * 1024), 2 * 1024);
        b.spend(60 * 1024);
        assert_eq!(b.room(0), 4 * 1024);
        b.spend(10 * 1024);
        assert_eq!(b.room(0), 0);
        assert_eq!(cost("pullcheck.io/x", "abc"), 17);
    }
}
