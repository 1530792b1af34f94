//! Manifest / index decoding and platform selection: the first line is a `Content-Type`
//! and a `--platform` value, separated by a space, the rest is the body. No panic; a chosen
//! entry is one of the index's own.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pullcheck::manifest::{media_type_of, parse_index};
use pullcheck::manifest::{Selection, select};
use pullcheck::platform::Platform;

fn fixed() -> Vec<Platform> {
    [
        "linux/amd64",
        "linux/arm64/v8",
        "linux/arm/v7",
        "windows/amd64",
        "linux/386",
    ]
    .iter()
    .map(|p| Platform::parse(p).unwrap())
    .collect()
}

fuzz_target!(|data: &[u8]| {
    let (head, body) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&b""[..], data),
    };
    let head = String::from_utf8_lossy(head);
    let (content_type, platform) = head.split_once(' ').unwrap_or((&head, ""));
    let _ = media_type_of(Some(content_type), body);
    let _ = media_type_of(None, body);
    let mut targets = fixed();
    if let Ok(p) = Platform::parse(platform) {
        let _ = (p.normalize(), p.to_string());
        targets.push(p);
    }
    let Ok(index) = parse_index(body) else {
        return;
    };
    for t in &targets {
        let chosen = match select(t, &index.manifests) {
            Selection::Exact(e) | Selection::Fallback(e) | Selection::NoPlatformField(e) => e,
            Selection::Missing { available } => {
                assert!(available.len() <= index.manifests.len());
                continue;
            }
        };
        assert!(
            index.manifests.iter().any(|e| std::ptr::eq(e, chosen)),
            "selected entry is not from the index"
        );
    }
});
