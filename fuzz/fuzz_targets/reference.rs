//! Reference parsing (distribution/reference grammar, kubelet normalisation): no panic on
//! any input, and whatever parses is stable under its own printed forms.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pullcheck::reference::{self, Reference};

fuzz_target!(|input: &str| {
    let _ = reference::parse_raw(input);
    let _ = reference::parse_any(input);
    let _ = reference::with_name(input);
    let _ = reference::parse_named(input);
    let _ = reference::kubelet_image_sent_to_cri(input);
    let Ok(r) = Reference::parse(input) else {
        return;
    };
    // The normalised form parses back to the same reference, and is canonical.
    let normalized = r.normalized();
    let again = Reference::parse(&normalized)
        .unwrap_or_else(|e| panic!("{input:?} → {normalized:?} does not parse: {e}"));
    assert_eq!(again, r, "{input:?} → {normalized:?}");
    assert!(
        reference::parse_named(&normalized).is_ok(),
        "{normalized:?}"
    );
    // What containerd pulls parses too and is a fixed point.
    let full = r.full();
    let pulled = Reference::parse(&full)
        .unwrap_or_else(|e| panic!("{input:?} → {full:?} does not parse: {e}"));
    assert_eq!(pulled.full(), full);
    // The request path pieces are never empty.
    assert!(!r.path().is_empty());
    assert!(!r.manifest_reference().is_empty());
    let _ = (r.familiar(), r.pull_scope(), r.name(), r.to_string());
});
