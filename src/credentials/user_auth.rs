//! The user's own auth sources, after the pull secrets: which files the docker CLI, crane
//! and the containers tools (podman, skopeo, buildah) would read, in one order.
//!
//! Order, first source with a credential for the image wins:
//! 1. `DOCKER_AUTH_CONFIG`, a docker config JSON in the environment (the docker CLI ≥ 28.3
//!    lets it override `config.json`; GitLab CI sets it for exactly this job);
//! 2. the docker config: `--docker-config DIR`, else `$DOCKER_CONFIG`, else `~/.docker`,
//!    then `config.json` in it (docker/cli `cli/config/config.go`);
//! 3. `$REGISTRY_AUTH_FILE`, else `$XDG_RUNTIME_DIR/containers/auth.json`
//!    (containers/image `pkg/docker/config/config.go` `getPathToAuthWithOS`);
//! 4. `$XDG_CONFIG_HOME/containers/auth.json`, default `~/.config/containers/auth.json`,
//!    only when `REGISTRY_AUTH_FILE` is unset (containers/image `getAuthFilePaths`: a path
//!    the user named replaces the search).
//!
//! crane reads the docker config first and then the containers files, but only the first
//! file that exists; skopeo walks its own files first and the docker config last, per
//! registry. pullcheck takes crane's order, because the docker config is what it has
//! always read (the node-keyring stand-in), and skopeo's per-registry walk, so that a file
//! with nothing for this registry never hides one that has it. A missing file is skipped;
//! a file that exists but does not decode is an error naming it. containers/image's last
//! resort when `XDG_RUNTIME_DIR` is unset, `/run/containers/$UID/auth.json`, is not read.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::auth_file::AuthFile;
use super::{Credential, CredentialSource, CredentialsError};

/// The environment variables [`UserAuth::load_with`] reads. Empty values count as unset.
#[derive(Clone, Debug, Default)]
pub(crate) struct AuthEnv {
    /// `DOCKER_AUTH_CONFIG`.
    pub docker_auth_config: Option<OsString>,
    /// `DOCKER_CONFIG`.
    pub docker_config: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
    /// `REGISTRY_AUTH_FILE`.
    pub registry_auth_file: Option<OsString>,
    /// `XDG_RUNTIME_DIR`.
    pub xdg_runtime_dir: Option<OsString>,
    /// `XDG_CONFIG_HOME`.
    pub xdg_config_home: Option<OsString>,
}

impl AuthEnv {
    /// The variables of this process.
    pub(crate) fn from_process() -> AuthEnv {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        AuthEnv {
            docker_auth_config: var("DOCKER_AUTH_CONFIG"),
            docker_config: var("DOCKER_CONFIG"),
            home: var("HOME"),
            registry_auth_file: var("REGISTRY_AUTH_FILE"),
            xdg_runtime_dir: var("XDG_RUNTIME_DIR"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
        }
    }
}

/// The user's auth sources in the order of the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct UserAuth {
    files: Vec<AuthFile>,
}

impl UserAuth {
    /// [`UserAuth::load_with`] this process's environment.
    pub(crate) fn load(dir: Option<&Path>) -> Result<Option<UserAuth>, CredentialsError> {
        UserAuth::load_with(dir, &AuthEnv::from_process())
    }

    /// Reads every source that exists; `dir` is `--docker-config`. `Ok(None)` when none
    /// does.
    ///
    /// Errors: a source that cannot be read, is larger than 4 MiB, is not JSON, or has an
    /// `auths` entry that does not decode; the message names the file or variable.
    pub(crate) fn load_with(
        dir: Option<&Path>,
        env: &AuthEnv,
    ) -> Result<Option<UserAuth>, CredentialsError> {
        let mut files = Vec::new();
        if let Some(value) = &env.docker_auth_config {
            files.push(AuthFile::from_environment(&value.to_string_lossy())?);
        }
        let home = env.home.as_ref().map(PathBuf::from);
        let docker_dir = match (dir, &env.docker_config, &home) {
            (Some(d), _, _) => Some(d.to_path_buf()),
            (None, Some(d), _) => Some(PathBuf::from(d)),
            (None, None, Some(h)) => Some(h.join(".docker")),
            (None, None, None) => None,
        };
        if let Some(d) = docker_dir {
            files.extend(AuthFile::load_docker_config(&d)?);
        }
        for (path, shown) in containers_paths(env, home.as_deref()) {
            files.extend(AuthFile::load_containers(&path, shown)?);
        }
        Ok((!files.is_empty()).then_some(UserAuth { files }))
    }

    #[cfg(test)]
    /// The sources that were read, in order.
    pub(crate) fn files(&self) -> &[AuthFile] {
        &self.files
    }

    /// The credential of the first source that has one for the image (none if no source
    /// has). A helper that answers nothing or fails lets the next source answer.
    pub(crate) async fn lookup(&self, repo_to_pull: &str, registry_host: &str) -> Vec<Credential> {
        for file in &self.files {
            let found = file.lookup(repo_to_pull, registry_host).await;
            if !found.is_empty() {
                return found;
            }
        }
        Vec::new()
    }

    /// For `explain`: what [`UserAuth::lookup`] would consult, without running a helper:
    /// every helper up to the first `auths` entry that matches (a helper may answer
    /// nothing), and that entry.
    pub(crate) fn lookup_keys(
        &self,
        repo_to_pull: &str,
        registry_host: &str,
    ) -> Vec<CredentialSource> {
        let mut out = Vec::new();
        for file in &self.files {
            let keys = file.lookup_keys(repo_to_pull, registry_host);
            let definite = !keys.is_empty() && !file.names_helper(registry_host);
            out.extend(keys);
            if definite {
                break;
            }
        }
        out
    }
}

/// The containers auth files to read, with how each was found.
fn containers_paths(env: &AuthEnv, home: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    if let Some(file) = &env.registry_auth_file {
        return vec![(PathBuf::from(file), "$REGISTRY_AUTH_FILE")];
    }
    let mut out = Vec::new();
    if let Some(run) = &env.xdg_runtime_dir {
        out.push((
            Path::new(run).join("containers/auth.json"),
            "$XDG_RUNTIME_DIR/containers/auth.json",
        ));
    }
    match (&env.xdg_config_home, home) {
        (Some(cfg), _) => out.push((
            Path::new(cfg).join("containers/auth.json"),
            "$XDG_CONFIG_HOME/containers/auth.json",
        )),
        (None, Some(home)) => out.push((
            home.join(".config/containers/auth.json"),
            "~/.config/containers/auth.json",
        )),
        (None, None) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, json: &str) -> PathBuf {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, json).unwrap();
        path
    }

    fn entry(host: &str, user: &str) -> String {
        format!(r#"{{"auths":{{"{host}":{{"username":"{user}","password":"pw"}}}}}}"#)
    }

    async fn users(auth: &UserAuth, repo: &str) -> Vec<String> {
        let host = repo.split('/').next().unwrap();
        auth.lookup(repo, host)
            .await
            .into_iter()
            .map(|c| format!("{} from {}", c.username, c.source))
            .collect()
    }

    #[tokio::test]
    async fn order_is_environment_docker_config_then_containers_files() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "home/.docker/config.json", &entry("d.io", "docker"));
        write(r, "run/containers/auth.json", &entry("d.io", "runtime"));
        write(
            r,
            "home/.config/containers/auth.json",
            &entry("c.io", "config"),
        );
        let env = AuthEnv {
            docker_auth_config: Some(entry("e.io", "env").into()),
            home: Some(r.join("home").into()),
            xdg_runtime_dir: Some(r.join("run").into()),
            ..AuthEnv::default()
        };
        let auth = UserAuth::load_with(None, &env).unwrap().unwrap();
        let origins: Vec<&str> = auth.files().iter().map(|f| f.origin()).collect();
        assert_eq!(
            origins,
            [
                "environment DOCKER_AUTH_CONFIG".to_owned(),
                format!("docker config {}/home/.docker/config.json", r.display()),
                format!(
                    "auth file {}/run/containers/auth.json ($XDG_RUNTIME_DIR/containers/auth.json)",
                    r.display()
                ),
                format!(
                    "auth file {}/home/.config/containers/auth.json (~/.config/containers/auth.json)",
                    r.display()
                ),
            ]
        );
        assert_eq!(
            users(&auth, "e.io/x").await,
            ["env from environment DOCKER_AUTH_CONFIG key e.io"]
        );
        // Both the docker config and the runtime file have d.io: the docker config wins.
        assert_eq!(
            users(&auth, "d.io/x").await,
            [format!(
                "docker from docker config {}/home/.docker/config.json key d.io",
                r.display()
            )]
        );
        // Only the last file has c.io: the walk reaches it.
        assert_eq!(users(&auth, "c.io/x").await.len(), 1);
        assert!(users(&auth, "none.io/x").await.is_empty());
        assert_eq!(auth.lookup_keys("c.io/x", "c.io").len(), 1);
    }

    #[tokio::test]
    async fn registry_auth_file_replaces_the_containers_search() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let named = write(r, "named.json", &entry("a.io", "named"));
        write(r, "run/containers/auth.json", &entry("b.io", "runtime"));
        let env = AuthEnv {
            registry_auth_file: Some(named.clone().into()),
            xdg_runtime_dir: Some(r.join("run").into()),
            xdg_config_home: Some(r.join("cfg").into()),
            ..AuthEnv::default()
        };
        let auth = UserAuth::load_with(None, &env).unwrap().unwrap();
        assert_eq!(auth.files().len(), 1);
        assert_eq!(
            auth.files()[0].origin(),
            format!("auth file {} ($REGISTRY_AUTH_FILE)", named.display())
        );
        assert!(users(&auth, "b.io/x").await.is_empty());
        // Nothing exists: no user auth at all.
        let nothing = AuthEnv {
            home: Some(r.join("nohome").into()),
            ..AuthEnv::default()
        };
        assert!(UserAuth::load_with(None, &nothing).unwrap().is_none());
    }

    #[tokio::test]
    async fn containers_keys_may_name_a_namespace() {
        let root = tempfile::tempdir().unwrap();
        let file = write(
            root.path(),
            "auth.json",
            r#"{"auths":{
                "quay.io":{"username":"host","password":"p"},
                "quay.io/team":{"username":"team","password":"p"},
                "quay.io/team/app":{"username":"app","password":"p"},
                "https://ghcr.io/v1/":{"username":"legacy","password":"p"},
                "docker.io/library":{"username":"hub-library","password":"p"}}}"#,
        );
        let env = AuthEnv {
            registry_auth_file: Some(file.into()),
            ..AuthEnv::default()
        };
        let auth = UserAuth::load_with(None, &env).unwrap().unwrap();
        let user = |c: Vec<Credential>| c.first().map(|c| c.username.clone());
        let get = |repo: &'static str| {
            let host = repo.split('/').next().unwrap();
            auth.lookup(repo, host)
        };
        assert_eq!(user(get("quay.io/team/app").await).as_deref(), Some("app"));
        assert_eq!(
            user(get("quay.io/team/other").await).as_deref(),
            Some("team")
        );
        // Not segment-blind: quay.io/teamx is not under quay.io/team.
        assert_eq!(user(get("quay.io/teamx/a").await).as_deref(), Some("host"));
        assert_eq!(user(get("ghcr.io/o/r").await).as_deref(), Some("legacy"));
        assert_eq!(
            user(get("docker.io/library/busybox").await).as_deref(),
            Some("hub-library")
        );
        assert_eq!(user(get("docker.io/other/x").await), None);
    }

    #[test]
    fn a_malformed_source_names_itself() {
        let env = AuthEnv {
            docker_auth_config: Some("{not json".into()),
            ..AuthEnv::default()
        };
        let msg = UserAuth::load_with(None, &env).unwrap_err().to_string();
        assert!(
            msg.starts_with("environment DOCKER_AUTH_CONFIG: ")
                && msg.ends_with("; set it to a docker config.json document"),
            "{msg}"
        );
        let root = tempfile::tempdir().unwrap();
        let file = write(
            root.path(),
            "a.json",
            r#"{"auths":{"x.io":{"auth":"c2VjcmV0dmFsdWU="}}}"#,
        );
        let env = AuthEnv {
            registry_auth_file: Some(file.clone().into()),
            ..AuthEnv::default()
        };
        let msg = UserAuth::load_with(None, &env).unwrap_err().to_string();
        assert!(
            msg.starts_with(&format!(
                "auth file {} ($REGISTRY_AUTH_FILE): key \"x.io\": ",
                file.display()
            )) && !msg.contains("secretvalue"),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn environment_helpers_are_never_run() {
        let env = AuthEnv {
            docker_auth_config: Some(
                r#"{"credsStore":"evil","credHelpers":{"x.io":"evil"},"auths":{"x.io":{"username":"u","password":"p"}}}"#
                    .into(),
            ),
            ..AuthEnv::default()
        };
        let auth = UserAuth::load_with(None, &env).unwrap().unwrap();
        let found = auth.lookup("x.io/r", "x.io").await;
        assert_eq!(found[0].source.origin, "environment DOCKER_AUTH_CONFIG");
        assert_eq!(auth.lookup_keys("y.io/r", "y.io"), Vec::new());
    }
}
