//! Pull secrets and Docker configs: `{"auths":…}`, the legacy bare map, the docker CLI's
//! config.json, `auth` fields, Kubernetes `Secret` / `List` files (through the same loader
//! `--pull-secrets` uses), then a keyring lookup. No panic on any input.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pullcheck::credentials::docker_config::decode_auth_field;
use pullcheck::credentials::{AuthFile, DockerConfig, Keyring, load_pull_secrets};

const IMAGES: &[&str] = &[
    "docker.io/library/busybox",
    "registry.example.com:5000/team/app",
    "127.0.0.1:5000/app",
    "ghcr.io/org/img",
];

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("pullcheck-fuzz-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let mut keyring = Keyring::new();
    if let Ok(c) = DockerConfig::from_config_json(data) {
        keyring.add(&c, "fuzz auths");
    }
    if let Ok(c) = DockerConfig::from_dockercfg(data) {
        keyring.add(&c, "fuzz dockercfg");
    }
    for image in IMAGES {
        let _ = keyring.lookup(image);
    }
    if let Ok(cli) = AuthFile::from_json(data, PathBuf::from("/fuzz/config.json")) {
        for (repo, host) in [
            ("docker.io/library/busybox", "docker.io"),
            ("index.docker.io/library/busybox", "index.docker.io"),
            ("127.0.0.1:5000/app", "127.0.0.1:5000"),
            ("ghcr.io/org/img", "ghcr.io"),
        ] {
            let _ = cli.lookup_keys(repo, host);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = decode_auth_field(text);
    }
    // The `--pull-secrets` loader: a file that is not named like a mounted secret is read
    // as a Kubernetes Secret / List in JSON or a docker config.
    let path = scratch().join("secret.json");
    std::fs::write(&path, data).unwrap();
    if let Ok(k) = load_pull_secrets(&[path]) {
        for image in IMAGES {
            let _ = k.lookup(image);
        }
    }
});
