//! [`KubeconfigError`]: a kubeconfig that can't be used, in one line naming the file (or
//! variable) and the entry.

use std::path::PathBuf;

/// A kubeconfig that can't be used. One line naming the file (or variable) and the entry.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KubeconfigError {
    /// A file can't be read (`--kubeconfig` missing, not a regular file, too large).
    #[error("{by} {}: {source}", file.display())]
    Read {
        /// `--kubeconfig`, `$KUBECONFIG` or `~/.kube/config`.
        by: &'static str,
        /// The file.
        file: PathBuf,
        /// Why.
        source: crate::files::FileError,
    },
    /// A file is not a kubeconfig.
    #[error("kubeconfig {}: not a kubeconfig: {reason}", file.display())]
    Parse {
        /// The file.
        file: PathBuf,
        /// The YAML error.
        reason: String,
    },
    /// No `--context` and no `current-context`.
    #[error(
        "kubeconfig {files}: no current-context; pass --context NAME (kubectl config get-contexts lists them)"
    )]
    NoContext {
        /// The files, `:`-joined.
        files: String,
    },
    /// The context, or the cluster or user it names, is not in any file.
    #[error("kubeconfig {files}: {what} {name:?} not found{}", if *by_flag { " (--context)" } else { "" })]
    Missing {
        /// The files, `:`-joined.
        files: String,
        /// `context`, `cluster` or `user`.
        what: &'static str,
        /// The name looked for.
        name: String,
        /// The context was named by `--context`.
        by_flag: bool,
    },
    /// An entry pullcheck does not support or that is broken: names the file, the entry
    /// and the fix.
    #[error("kubeconfig {}, {entry}: {problem}", file.display())]
    Entry {
        /// The file that defines the entry.
        file: PathBuf,
        /// `cluster NAME` or `user NAME`.
        entry: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// One file names two clusters, users or contexts alike. kubectl refuses the file
    /// (k8s.io/client-go/tools/clientcmd/api/v1/conversion.go: "duplicate name ... in
    /// list"); taking either entry could talk to the wrong cluster.
    #[error("kubeconfig {}: two {what} entries named {name:?}; rename or remove one", file.display())]
    Duplicate {
        /// The file.
        file: PathBuf,
        /// `cluster`, `user` or `context`.
        what: &'static str,
        /// The name used twice.
        name: String,
    },
    /// `--context ""`.
    #[error(
        "--context \"\": empty; name a context of the kubeconfig (kubectl config get-contexts), or leave --context out for its current-context"
    )]
    EmptyContext,
    /// `--context` was given but no kubeconfig was found.
    #[error("--context {0}: no kubeconfig found (pass --kubeconfig FILE or set KUBECONFIG)")]
    ContextWithoutKubeconfig(String),
}
