//! A kubeconfig, read as kubectl reads it: which files ([`Environment`], [`select`]), how
//! they merge, which context, and what its cluster and user become ([`super::ApiServer`]).
//!
//! The rules are client-go's (`k8s.io/client-go/tools/clientcmd/loader.go`,
//! `ClientConfigLoadingRules.Load` and `ResolveLocalPaths`):
//! - `--kubeconfig FILE` alone, and it must exist; else the files of `$KUBECONFIG` (split
//!   like `PATH`, a missing one skipped); else `~/.kube/config` if it exists.
//! - Files merge first-wins: the first file to name a cluster, user or context, or to set
//!   `current-context`, keeps it; later files never change it.
//! - A relative path (`certificate-authority`, `client-certificate`, `client-key`,
//!   `tokenFile`, and an exec `command` that holds a `/`) is taken against the directory of
//!   the file that defined the entry; a bare command name is looked up in `PATH`.
//!
//! A file that exists but can't be read or parsed is an error, as in kubectl, never a
//! silent fall-back to the next source; so is every setting pullcheck can't honour: one
//! line naming the file and the entry, rather than talk to the cluster in a way the user
//! did not ask for.

mod entries;
mod error;
mod format;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{ApiServer, Credentials, Source};
use entries::{cluster_settings, user_settings};
pub(crate) use error::KubeconfigError;
use format::{Defined, RawCluster, RawConfig, RawContext, RawUser};

/// The largest kubeconfig file read (a kubeconfig with many clusters and inline CAs runs to
/// tens of KiB).
pub(crate) const MAX_KUBECONFIG_BYTES: u64 = 4 * 1024 * 1024;
/// What decides where the kubeconfig is: passed in, so that the choice is testable without
/// touching the process environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Environment {
    /// `--kubeconfig FILE`.
    pub flag: Option<PathBuf>,
    /// `$KUBECONFIG`, as set (a `PATH`-like list).
    pub kubeconfig_var: Option<OsString>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
}

impl Environment {
    /// From this process: `$KUBECONFIG` and `$HOME`, with `--kubeconfig` given.
    pub(crate) fn from_process(flag: Option<PathBuf>) -> Environment {
        Environment {
            flag,
            kubeconfig_var: std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()),
            home: std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        }
    }
}

/// What a kubeconfig gives: the API server and the context's namespace.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    /// The server, its CA and the user's credentials; its source is [`Source::Kubeconfig`].
    pub api: ApiServer,
    /// The context's `namespace`, if it sets one: the default for `-n`, as in kubectl.
    pub namespace: Option<String>,
}

/// The merge of every file, first-wins.
#[derive(Default)]
struct Merged {
    current_context: Option<String>,
    clusters: BTreeMap<String, Defined<RawCluster>>,
    users: BTreeMap<String, Defined<RawUser>>,
    contexts: BTreeMap<String, Defined<RawContext>>,
}

impl Merged {
    /// Adds one file's entries under the ones already merged (first file wins, as kubectl
    /// merges). Errors: a name used twice within the file.
    fn add(&mut self, file: &Path, raw: RawConfig) -> Result<(), KubeconfigError> {
        if self.current_context.is_none() {
            self.current_context = raw.current_context.filter(|c| !c.is_empty());
        }
        let clusters = raw.clusters.unwrap_or_default();
        let users = raw.users.unwrap_or_default();
        let contexts = raw.contexts.unwrap_or_default();
        unique(file, "cluster", clusters.iter().map(|c| c.name.as_str()))?;
        unique(file, "user", users.iter().map(|u| u.name.as_str()))?;
        unique(file, "context", contexts.iter().map(|c| c.name.as_str()))?;
        for c in clusters {
            self.clusters.entry(c.name).or_insert_with(|| Defined {
                file: file.to_path_buf(),
                value: c.cluster.unwrap_or_default(),
            });
        }
        for u in users {
            self.users.entry(u.name).or_insert_with(|| Defined {
                file: file.to_path_buf(),
                value: u.user.unwrap_or_default(),
            });
        }
        for c in contexts {
            self.contexts.entry(c.name).or_insert_with(|| Defined {
                file: file.to_path_buf(),
                value: c.context.unwrap_or_default(),
            });
        }
        Ok(())
    }
}

/// The first name of `names` used twice, as [`KubeconfigError::Duplicate`].
fn unique<'a>(
    file: &Path,
    what: &'static str,
    names: impl Iterator<Item = &'a str>,
) -> Result<(), KubeconfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            return Err(KubeconfigError::Duplicate {
                file: file.to_path_buf(),
                what,
                name: n.to_string(),
            });
        }
    }
    Ok(())
}

/// Which kubeconfig files to read, and what named them; `None`: no kubeconfig (go on to
/// in-cluster). `$KUBECONFIG` entries that don't exist are skipped, as kubectl skips them.
fn files(env: &Environment) -> Option<(&'static str, Vec<PathBuf>)> {
    if let Some(f) = &env.flag {
        return Some(("--kubeconfig", vec![f.clone()]));
    }
    if let Some(var) = &env.kubeconfig_var {
        let mut seen = Vec::new();
        for f in std::env::split_paths(var) {
            if f.as_os_str().is_empty() || seen.contains(&f) {
                continue;
            }
            // A dangling path is skipped; anything that exists is read (and must parse).
            if std::fs::symlink_metadata(&f).is_ok() {
                seen.push(f);
            }
        }
        // $KUBECONFIG set means ~/.kube/config is not consulted, even if none exists.
        return (!seen.is_empty()).then_some(("$KUBECONFIG", seen));
    }
    let home = env.home.as_ref()?.join(".kube").join("config");
    std::fs::symlink_metadata(&home)
        .is_ok()
        .then(|| ("~/.kube/config", vec![home]))
}

/// Why [`select`] found no kubeconfig in `env`, for the "no Kubernetes API" message:
/// `$KUBECONFIG (a:b) names no file that exists`, or `no ~/.kube/config`.
pub(crate) fn why_none(env: &Environment) -> String {
    match (&env.kubeconfig_var, &env.home) {
        (Some(var), _) => format!(
            "$KUBECONFIG ({}) names no file that exists",
            var.to_string_lossy()
        ),
        (None, Some(home)) => format!(
            "no kubeconfig ({} does not exist)",
            home.join(".kube").join("config").display()
        ),
        (None, None) => "no kubeconfig ($HOME is not set)".to_string(),
    }
}

/// The kubeconfig files read and merged.
struct Read {
    /// What named the files: `--kubeconfig`, `$KUBECONFIG` or `~/.kube/config`.
    by: &'static str,
    /// The files, in merge order.
    files: Vec<PathBuf>,
    merged: Merged,
}

/// Every file of `env` read and merged, with what named them; `None`: no kubeconfig.
fn read_merged(env: &Environment) -> Result<Option<Read>, KubeconfigError> {
    let Some((by, files)) = files(env) else {
        return Ok(None);
    };
    let mut merged = Merged::default();
    for f in &files {
        let text = crate::files::read_capped_text(f, MAX_KUBECONFIG_BYTES).map_err(|source| {
            KubeconfigError::Read {
                by,
                file: f.clone(),
                source,
            }
        })?;
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_saphyr::from_str(&text).map_err(|e| KubeconfigError::Parse {
                file: f.clone(),
                reason: e.to_string().lines().next().unwrap_or_default().to_string(),
            })?
        };
        merged.add(f, raw)?;
    }
    Ok(Some(Read { by, files, merged }))
}

/// The context names of the kubeconfig `env` selects, sorted (shell completion of
/// `--context`). Empty when there is none or it can't be read: completion stays silent.
pub(crate) fn context_names(env: &Environment) -> Vec<String> {
    match read_merged(env) {
        Ok(Some(read)) => read.merged.contexts.into_keys().collect(),
        _ => Vec::new(),
    }
}

/// The kubeconfig's API server, or `None` when there is no kubeconfig at all (the caller
/// goes on to in-cluster). `context`: `--context`, else the merged `current-context`.
pub(crate) fn select(
    env: &Environment,
    context: Option<&str>,
) -> Result<Option<Loaded>, KubeconfigError> {
    let Some(Read { by, files, merged }) = read_merged(env)? else {
        return match context {
            Some(c) => Err(KubeconfigError::ContextWithoutKubeconfig(c.to_string())),
            None => Ok(None),
        };
    };
    let joined = || {
        files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    let by_flag = context.is_some();
    let name = match context
        .map(str::to_string)
        .or(merged.current_context.clone())
    {
        Some(n) => n,
        None => return Err(KubeconfigError::NoContext { files: joined() }),
    };
    let missing = |what, n: &str| KubeconfigError::Missing {
        files: joined(),
        what,
        name: n.to_string(),
        by_flag: by_flag && what == "context",
    };
    let ctx = merged
        .contexts
        .get(&name)
        .ok_or_else(|| missing("context", &name))?;
    let cluster = merged
        .clusters
        .get(&ctx.value.cluster)
        .ok_or_else(|| missing("cluster", &ctx.value.cluster))?;
    let user = match ctx.value.user.as_str() {
        // A context without a user: no credentials (a client certificate-less anonymous
        // call), as kubectl allows.
        "" => None,
        u => Some(merged.users.get(u).ok_or_else(|| missing("user", u))?),
    };
    let (url, ca, cluster_info) = cluster_settings(&ctx.value.cluster, cluster)?;
    let (credentials, identity) = match user {
        None => (Credentials::None, None),
        Some(u) => user_settings(&ctx.value.user, u, &cluster_info)?,
    };
    Ok(Some(Loaded {
        api: ApiServer {
            url,
            ca,
            credentials,
            identity,
            source: Source::Kubeconfig {
                by,
                files,
                context: name,
            },
        },
        namespace: ctx.value.namespace.clone().filter(|n| !n.is_empty()),
    }))
}

#[cfg(test)]
mod tests;
