//! containerd `certs.d/<host>/hosts.toml` (registry configuration, `--hosts-dir`): no
//! panic on any file, and every endpoint it yields can build its request URLs.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pullcheck::registry::hosts::endpoints;

const REGISTRY: &str = "registry.fuzz:5000";

fn root() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("pullcheck-fuzz-hosts-{}", std::process::id()));
        std::fs::create_dir_all(d.join(REGISTRY)).unwrap();
        d
    })
}

fuzz_target!(|data: &[u8]| {
    std::fs::write(root().join(REGISTRY).join("hosts.toml"), data).unwrap();
    let insecure = vec!["registry.fuzz:5000".to_string(), "mirror.fuzz".to_string()];
    if let Ok(eps) = endpoints(Some(root()), REGISTRY, &insecure) {
        assert!(!eps.is_empty(), "at least the upstream");
        for ep in &eps {
            let _ = ep.base_url();
            let _ = ep.manifest_url("team/app", "v1", ep.is_mirror.then_some(REGISTRY));
            let _ = ep.can_resolve_tags();
        }
    }
});
