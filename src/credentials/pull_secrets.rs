//! Loads `--pull-secrets PATH…` into one kubelet keyring.
//!
//! Source: kubernetes `pkg/credentialprovider/secrets/secrets.go` (`MakeDockerKeyring`):
//! every usable secret goes into **one** `BasicDockerKeyring`, in secret order; a secret is
//! usable when its `.dockerconfigjson` (`{"auths":…}`) or `.dockercfg` (bare map) data is
//! non-empty; **a JSON or `auth` error in any secret fails the whole pull**.
//!
//! Each PATH is one of:
//! - a file named `.dockerconfigjson` or `.dockercfg` (decoded as that shape);
//! - a directory where secrets are mounted: files with those names directly in it, or one
//!   level down in per-secret subdirectories (`/secrets/<name>/.dockerconfigjson`), in
//!   sorted name order; kubelet's atomic-writer entries (`..data`, `..2024_…`) are skipped;
//! - any other file: a Kubernetes `Secret` (or a `List` of them) in JSON, as printed by
//!   `kubectl get secret -o json` (`type` plus base64 `data`, or plain `stringData`);
//!   otherwise a docker config, `{"auths":…}` if it has an `auths` field, else the legacy
//!   bare map.
//!
//! `credHelpers` and `credsStore` in a pull secret are ignored: a pull secret never makes
//! pullcheck run a program.

use std::path::{Path, PathBuf};

use super::docker_config::{DockerConfig, Json, go_base64};
use super::{CredentialsError, Keyring};

/// The largest pull-secret file pullcheck reads, in bytes (a Kubernetes Secret is at most
/// 1 MiB; a `List` export can be larger).
const MAX_SECRET_FILE_BYTES: u64 = 8 * 1024 * 1024;

const DOCKER_CONFIG_JSON: &str = ".dockerconfigjson";
const DOCKERCFG: &str = ".dockercfg";
const TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
const TYPE_DOCKERCFG: &str = "kubernetes.io/dockercfg";

/// The two data shapes a pull secret can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `.dockerconfigjson`: `{"auths": {…}}`.
    ConfigJson,
    /// `.dockercfg`: `{<registry>: {…}}`.
    Dockercfg,
}

/// Loads every pull secret under `paths` (in the order given) into one [`Keyring`].
///
/// Errors ([`CredentialsError`]): a path does not exist or cannot be read; a file is
/// larger than 8 MiB; a secret is not valid JSON or has an `auth` that is not
/// `base64(username:password)` (the kubelet fails the pull in that case, so pullcheck
/// does too); a Secret object is malformed. Empty files are skipped, as the kubelet skips
/// empty data; a directory with no secrets and Secrets of other types are skipped with a
/// warning.
pub fn load_pull_secrets(paths: &[PathBuf]) -> Result<Keyring, CredentialsError> {
    let mut keyring = Keyring::new();
    for path in paths {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CredentialsError::NotFound { path: path.clone() });
            }
            Err(io) => {
                return Err(CredentialsError::Read {
                    origin: origin_for(path),
                    path: path.clone(),
                    reason: io.into(),
                });
            }
        };
        if meta.is_dir() {
            let files = scan_dir(path)?;
            if files.is_empty() {
                tracing::warn!(dir = %path.display(), "no .dockerconfigjson or .dockercfg in this directory or its subdirectories");
            }
            for (file, shape) in files {
                load_file(&mut keyring, &file, Some(shape))?;
            }
        } else {
            let shape = match path.file_name().and_then(|n| n.to_str()) {
                Some(DOCKER_CONFIG_JSON) => Some(Shape::ConfigJson),
                Some(DOCKERCFG) => Some(Shape::Dockercfg),
                _ => None,
            };
            load_file(&mut keyring, path, shape)?;
        }
    }
    Ok(keyring)
}

fn origin_for(path: &Path) -> String {
    format!("pull secret {}", path.display())
}

/// Secret files directly in `dir`, then one level down, in sorted name order.
fn scan_dir(dir: &Path) -> Result<Vec<(PathBuf, Shape)>, CredentialsError> {
    let mut found = Vec::new();
    for name in sorted_names(dir)? {
        let path = dir.join(&name);
        if let Some(shape) = shape_for_name(&name) {
            if path.is_file() {
                found.push((path, shape));
            }
        } else if !name.starts_with("..") && path.is_dir() {
            for sub in sorted_names(&path)? {
                if let Some(shape) = shape_for_name(&sub) {
                    let file = path.join(&sub);
                    if file.is_file() {
                        found.push((file, shape));
                    }
                }
            }
        }
    }
    Ok(found)
}

fn shape_for_name(name: &str) -> Option<Shape> {
    match name {
        DOCKER_CONFIG_JSON => Some(Shape::ConfigJson),
        DOCKERCFG => Some(Shape::Dockercfg),
        _ => None,
    }
}

fn sorted_names(dir: &Path) -> Result<Vec<String>, CredentialsError> {
    let read_err = |io: std::io::Error| CredentialsError::Read {
        origin: origin_for(dir),
        path: dir.to_path_buf(),
        reason: io.into(),
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        // Names that are not UTF-8 cannot be `.dockerconfigjson`, `.dockercfg` or a
        // Kubernetes secret name.
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// The file's bytes, through [`crate::files::read_capped`]: a regular file of at most
/// [`MAX_SECRET_FILE_BYTES`] (a FIFO named by `--pull-secrets` is refused, not waited on).
fn read_capped(path: &Path) -> Result<Vec<u8>, CredentialsError> {
    crate::files::read_capped(path, MAX_SECRET_FILE_BYTES).map_err(|e| match e {
        crate::files::FileError::TooLarge { limit } => CredentialsError::TooLarge {
            origin: origin_for(path),
            limit,
        },
        reason => CredentialsError::Read {
            origin: origin_for(path),
            path: path.to_path_buf(),
            reason,
        },
    })
}

/// True when the text starts (after comments and blank lines) with a YAML `apiVersion:` or
/// `kind:` key, as `kubectl get secret NAME -o yaml` writes it.
fn looks_like_yaml_object(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---")
        .is_some_and(|l| l.starts_with("apiVersion:") || l.starts_with("kind:"))
}

fn load_file(
    keyring: &mut Keyring,
    path: &Path,
    shape: Option<Shape>,
) -> Result<(), CredentialsError> {
    let bytes = read_capped(path)?;
    let origin = origin_for(path);
    if bytes.is_empty() {
        tracing::debug!(%origin, "empty pull secret file; skipped (the kubelet skips empty data)");
        return Ok(());
    }
    let shape = match shape {
        Some(shape) => shape,
        None => {
            let node = Json::parse(&bytes).map_err(|error| {
                if looks_like_yaml_object(&bytes) {
                    // `kubectl get secret -o yaml` output: the secret is fine, the format
                    // is not one pullcheck reads.
                    CredentialsError::SecretObject {
                        origin: origin.clone(),
                        problem:
                            "a Kubernetes object in YAML; pullcheck reads pull secrets as JSON"
                                .into(),
                    }
                } else {
                    CredentialsError::PullSecret {
                        origin: origin.clone(),
                        error,
                    }
                }
            })?;
            if let Some(items) = secret_objects(&node) {
                for (i, item) in items.iter().enumerate() {
                    load_secret_object(keyring, path, item, items.len() > 1, i)?;
                }
                return Ok(());
            }
            match &node {
                Json::Object(fields) if Json::field(fields, "auths").is_some() => Shape::ConfigJson,
                _ => Shape::Dockercfg,
            }
        }
    };
    add_data(keyring, &origin, &bytes, shape)
}

fn add_data(
    keyring: &mut Keyring,
    origin: &str,
    bytes: &[u8],
    shape: Shape,
) -> Result<(), CredentialsError> {
    let config = match shape {
        Shape::ConfigJson => DockerConfig::from_config_json(bytes),
        Shape::Dockercfg => DockerConfig::from_dockercfg(bytes),
    }
    .map_err(|error| CredentialsError::PullSecret {
        origin: origin.to_owned(),
        error,
    })?;
    keyring.add(&config, origin);
    Ok(())
}

/// The Secret objects in a document: `kind: Secret` (or an object with `type` and `data` /
/// `stringData`), or `kind: List` / `SecretList` with `items`. `None` if it is not one.
fn secret_objects(node: &Json) -> Option<Vec<&Json>> {
    let Json::Object(fields) = node else {
        return None;
    };
    let get = |name: &str| fields.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v);
    let kind = match get("kind") {
        Some(Json::String(k)) => Some(k.as_str()),
        _ => None,
    };
    match (kind, get("items")) {
        (Some("List" | "SecretList"), Some(Json::Array(items))) => Some(items.iter().collect()),
        (Some("Secret"), _) => Some(vec![node]),
        (None, _)
            if get("type").is_some() && (get("data").is_some() || get("stringData").is_some()) =>
        {
            Some(vec![node])
        }
        _ => None,
    }
}

/// One Secret object, decoded as the API server and kubelet would see it.
fn load_secret_object(
    keyring: &mut Keyring,
    path: &Path,
    secret: &Json,
    many: bool,
    index: usize,
) -> Result<(), CredentialsError> {
    let Json::Object(fields) = secret else {
        return Err(CredentialsError::SecretObject {
            origin: origin_for(path),
            problem: format!("item {index} is {}, not a Secret object", secret.kind()),
        });
    };
    let get = |obj: &'_ [(String, Json)], name: &str| -> Option<Json> {
        obj.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let name = match get(fields, "metadata") {
        Some(Json::Object(meta)) => match (get(&meta, "namespace"), get(&meta, "name")) {
            (Some(Json::String(ns)), Some(Json::String(n))) => Some(format!("{ns}/{n}")),
            (_, Some(Json::String(n))) => Some(n),
            _ => None,
        },
        _ => None,
    };
    let origin = match (&name, many) {
        (Some(n), _) => format!("pull secret {} (secret {n})", path.display()),
        (None, true) => format!("pull secret {} (item {index})", path.display()),
        (None, false) => origin_for(path),
    };
    let problem = |problem: String| CredentialsError::SecretObject {
        origin: origin.clone(),
        problem,
    };
    let secret_type = match get(fields, "type") {
        Some(Json::String(t)) => t,
        _ => String::new(),
    };
    let (key, shape) = match secret_type.as_str() {
        TYPE_DOCKER_CONFIG_JSON => (DOCKER_CONFIG_JSON, Shape::ConfigJson),
        TYPE_DOCKERCFG => (DOCKERCFG, Shape::Dockercfg),
        other => {
            tracing::warn!(%origin, secret_type = other, "not an image pull secret type; ignored, as the kubelet ignores it");
            return Ok(());
        }
    };
    // stringData overrides data, as the API server merges them.
    let string_data = match get(fields, "stringData") {
        Some(Json::Object(sd)) => match get(&sd, key) {
            Some(Json::String(s)) => Some(s.into_bytes()),
            Some(Json::Null) | None => None,
            Some(other) => {
                return Err(problem(format!(
                    "stringData[{key:?}] is {}, not a string",
                    other.kind()
                )));
            }
        },
        _ => None,
    };
    let bytes = match string_data {
        Some(b) => b,
        None => match get(fields, "data") {
            Some(Json::Object(data)) => match get(&data, key) {
                Some(Json::String(b64)) => go_base64(&b64, true)
                    .ok_or_else(|| problem(format!("data[{key:?}] is not base64")))?,
                Some(Json::Null) | None => Vec::new(),
                Some(other) => {
                    return Err(problem(format!(
                        "data[{key:?}] is {}, not a string",
                        other.kind()
                    )));
                }
            },
            _ => Vec::new(),
        },
    };
    if bytes.is_empty() {
        tracing::warn!(%origin, "secret has no {key} data; ignored, as the kubelet ignores it");
        return Ok(());
    }
    add_data(keyring, &origin, &bytes, shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    const HUB: &str = r#"{"auths":{"https://index.docker.io/v1/":{"auth":"Zm9vOmJhcg=="}}}"#;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn mounted_directory_layout_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write(
            &d.join("b-secret/.dockerconfigjson"),
            r#"{"auths":{"ghcr.io":{"username":"b","password":"x"}}}"#,
        );
        write(
            &d.join("a-secret/.dockercfg"),
            r#"{"ghcr.io":{"username":"a","password":"x"}}"#,
        );
        // kubelet atomic-writer internals must not be read twice.
        write(
            &d.join("a-secret/..data/.dockercfg"),
            r#"{"ghcr.io":{"username":"dup","password":"x"}}"#,
        );
        write(
            &d.join("..data/.dockerconfigjson"),
            r#"{"auths":{"ghcr.io":{"username":"dup","password":"x"}}}"#,
        );
        write(&d.join("empty/.dockerconfigjson"), "");
        let k = load_pull_secrets(&[d.to_path_buf()]).unwrap();
        let found = k.lookup("ghcr.io/o/r");
        let users: Vec<_> = found.iter().map(|c| c.username.as_str()).collect();
        assert_eq!(users, ["a", "b"]);
        assert_eq!(
            found[0].source.origin,
            format!("pull secret {}", d.join("a-secret/.dockercfg").display())
        );
    }

    #[test]
    fn any_bad_secret_fails_everything() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good/.dockerconfigjson");
        let bad = dir.path().join("x/.dockerconfigjson");
        write(&good, HUB);
        write(&bad, r#"{"auths":{"ghcr.io":{"auth":"hunter2secret"}}}"#);
        let err = load_pull_secrets(&[good, bad.clone()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "pull secret {}: key \"ghcr.io\": auth is not base64(username:password): invalid unpadded base64; re-create the secret with kubectl create secret docker-registry",
                bad.display()
            )
        );
        assert!(!err.contains("hunter2"));
        let missing = dir.path().join("nope");
        assert!(matches!(
            load_pull_secrets(&[missing]),
            Err(CredentialsError::NotFound { .. })
        ));
    }

    #[test]
    fn helpers_in_pull_secrets_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join(".dockerconfigjson");
        write(
            &f,
            r#"{"auths":{},"credsStore":"test","credHelpers":{"ghcr.io":"test"}}"#,
        );
        let k = load_pull_secrets(&[f]).unwrap();
        assert!(k.is_empty());
        assert!(k.lookup("ghcr.io/o/r").is_empty());
    }

    #[test]
    fn secret_object_and_list() {
        let dir = tempfile::tempdir().unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(HUB);
        let secret = format!(
            r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"regcred","namespace":"ci"}},
                "type":"kubernetes.io/dockerconfigjson","data":{{".dockerconfigjson":"{b64}"}}}}"#
        );
        let f = dir.path().join("regcred.json");
        write(&f, &secret);
        let k = load_pull_secrets(std::slice::from_ref(&f)).unwrap();
        let found = k.lookup("docker.io/library/busybox");
        assert_eq!(found[0].username, "foo");
        assert_eq!(
            found[0].source.origin,
            format!("pull secret {} (secret ci/regcred)", f.display())
        );

        let list = r#"{"kind":"List","items":[{"kind":"Secret","type":"Opaque","data":{}},
                {"kind":"Secret","type":"kubernetes.io/dockercfg","stringData":{".dockercfg":"{\"q.io\":{\"username\":\"q\",\"password\":\"x\"}}"}}]}"#;
        let f = dir.path().join("list.json");
        write(&f, list);
        let k = load_pull_secrets(&[f]).unwrap();
        assert_eq!(k.lookup("q.io/a")[0].username, "q");
    }

    #[test]
    fn sniffed_plain_configs() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        write(&a, HUB);
        write(&b, r#"{"q.io":{"username":"legacy","password":"x"}}"#);
        let k = load_pull_secrets(&[a, b]).unwrap();
        assert_eq!(k.lookup("docker.io/x/y")[0].username, "foo");
        assert_eq!(k.lookup("q.io/x")[0].username, "legacy");
    }
}
