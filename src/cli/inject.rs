//! `pullcheck inject`: add the pullcheck init container to manifests (stdout), warnings on
//! stderr.

use std::path::PathBuf;

use clap::Args;

use super::init_container::{Transient, unpinned_image_warning, validate_options};
use super::input::{load_table, read_documents};
use super::{CliError, UsageError};
use crate::k8s::inject::{
    DEFAULT_CPU, DEFAULT_MEMORY, InjectOptions, default_image, inject_documents,
};
use crate::k8s::yaml::to_yaml_stream;
use crate::verdict::code;

/// Arguments of `pullcheck inject`.
#[derive(Debug, Clone, Args)]
pub(crate) struct InjectArgs {
    /// Manifest file (multi-document YAML), or - for stdin.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        help_heading = "Input",
        long_help = "The manifests to rewrite: a multi-document YAML file, or - to read stdin. \
The result goes to stdout; comments and anchors are not kept, key order and every field are."
    )]
    pub filename: PathBuf,

    /// Kind → pod-template paths file extending the built-in table.
    #[arg(
        long = "kinds",
        value_name = "FILE",
        help_heading = "Input",
        long_help = "A YAML list of {apiVersion, kind, podTemplatePaths, jobSpecPath, \
runPolicyPath} rows for kinds pullcheck doesn't know (Volcano, Argo, RayJob…); a row replaces a \
built-in with the same apiVersion and kind. Paths are dotted or JSON pointers, * matches every \
map key or list element. See docs/fail-fast.md."
    )]
    pub kinds: Option<PathBuf>,

    /// The checker's image (pin it by digest; mirror it next to the workload).
    #[arg(long = "image", value_name = "IMAGE", help_heading = "Init container",
        default_value_t = default_image(),
        long_help = "The pullcheck image for the init container, pulled with IfNotPresent. It is \
the one image that can itself leave a pod in Init:ImagePullBackOff: mirror it to the registry \
your workloads use and pin it by digest (lint flags an unpinned one).")]
    pub image: String,

    /// CPU request and limit of the init container.
    #[arg(long = "cpu", value_name = "QUANTITY", help_heading = "Init container",
        default_value = DEFAULT_CPU,
        long_help = "CPU request, equal to the limit, as a Kubernetes quantity. Too small a limit \
throttles the TLS handshake. Explicit values keep a LimitRange from injecting its defaults.")]
    pub cpu: String,

    /// Memory request and limit of the init container.
    #[arg(long = "memory", value_name = "QUANTITY", help_heading = "Init container",
        default_value = DEFAULT_MEMORY,
        long_help = "Memory request, equal to the limit, as a Kubernetes quantity. Too small a \
limit ends in an OOM kill (exit 137), which podFailurePolicy does not treat as pullcheck's.")]
    pub memory: String,

    /// Extra `pullcheck check` argument (repeatable), e.g. --check-arg=--platform=any
    #[arg(
        long = "check-arg",
        value_name = "ARG",
        help_heading = "Init container",
        allow_hyphen_values = true,
        long_help = "Appended to the init container's `check` arguments, before the images; \
repeat for several (--check-arg=--hosts-dir=/etc/containerd/certs.d)."
    )]
    pub check_args: Vec<String>,

    /// Also set podFailurePolicy on Jobs with restartPolicy Never.
    #[arg(
        long = "fail-fast",
        help_heading = "Job policy",
        long_help = "For batch Jobs, CronJob job templates and JobSet jobs whose pod template has \
restartPolicy Never: put rules first in podFailurePolicy sending pullcheck's codes 10-14 to \
FailJob and 20 to Count (see --transient). A restartPolicy is never changed: a warning says why \
the policy was not set. Kubeflow jobs get warnings about restartPolicy and runPolicy."
    )]
    pub fail_fast: bool,

    /// Rule action for pullcheck's transient code 20.
    #[arg(long = "transient", value_name = "ACTION", help_heading = "Job policy",
        value_enum, default_value_t = Transient::Count,
        long_help = "count: a transient failure (registry down, timeout) uses one of backoffLimit's \
retries. ignore: it doesn't, so retries only stop at activeDeadlineSeconds (warned when unset).")]
    pub transient: Transient,
}

impl InjectArgs {
    /// The library options these flags describe.
    pub(crate) fn options(&self) -> InjectOptions {
        InjectOptions {
            image: self.image.clone(),
            cpu: self.cpu.clone(),
            memory: self.memory.clone(),
            check_args: self.check_args.clone(),
            fail_fast: self.fail_fast,
            transient: self.transient.into(),
        }
    }
}

/// Run `pullcheck inject`: the rewritten stream on stdout, one warning line per finding on
/// stderr, exit 0. Unreadable or invalid input is a usage error naming file and document.
pub(crate) fn run(a: InjectArgs) -> Result<u8, CliError> {
    let table = load_table(a.kinds.as_deref())?;
    let mut docs = read_documents(&a.filename)?;
    let options = a.options();
    validate_options(&options, "")?;
    if let Some(w) = unpinned_image_warning("--image", &options.image) {
        eprintln!("pullcheck: warning: {w}");
    }
    let shown = a.filename.display();
    let warnings = inject_documents(&mut docs, &options, &table);
    let out = to_yaml_stream(docs.iter().map(|d| &d.value))
        .map_err(|e| UsageError(format!("{shown}: {e}")))?;
    for (doc, w) in warnings {
        let at = if w.path.is_empty() {
            String::new()
        } else {
            format!(" {}", w.path)
        };
        eprintln!(
            "pullcheck: warning: {shown}: document {doc}{at}: {}",
            w.message
        );
    }
    super::print(&out)?;
    Ok(code::OK)
}
