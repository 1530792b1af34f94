//! `pullcheck inject`: add the pullcheck init container to manifests (stdout), warnings on
//! stderr.

use std::path::PathBuf;

use clap::Args;

use super::init_container::{Transient, unpinned_image_warning, validate_options};
use super::input::{load_table, read_documents};
use super::{CliError, UsageError};
use crate::k8s::KubernetesVersion;
use crate::k8s::container::{DEFAULT_CPU, DEFAULT_MEMORY, InjectOptions, default_image};
use crate::k8s::inject::inject_documents;
use crate::k8s::remove::remove_object;
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

    /// The checker's image (required: pin it by digest; mirror it next to the workload).
    #[arg(
        long = "image",
        value_name = "IMAGE",
        help_heading = "Init container",
        long_help = "The pullcheck image for the init container, pulled with IfNotPresent. \
Required: there is no published default, and an image the nodes can't pull leaves every pod in \
Init:ImagePullBackOff. scripts/publish-image.sh REGISTRY/REPO:TAG builds and pushes it and prints \
the --image IMAGE@sha256:… to pass. It is the one image that can itself strand a pod: mirror it \
to the registry your workloads use and pin it by digest (lint flags an unpinned one)."
    )]
    pub image: Option<String>,

    /// Take pullcheck out instead: its init container, volumes, annotations and rules.
    #[arg(long = "remove", help_heading = "Input",
        conflicts_with_all = ["image", "check_args", "fail_fast", "transient", "kubernetes_version"],
        long_help = "Write the manifests without pullcheck: its init container, its volumes and \
annotations and its podFailurePolicy rules are removed from every pod template inject knows \
(--kinds too); everything else stays, byte for byte. For uninstalling: apply the output to \
CronJobs, Deployments and runtimes' objects; a stored Job, JobSet or Pod can't change its \
template, so those are warned about and must be recreated (kubectl replace --force -f).")]
    pub remove: bool,

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
restartPolicy Never: put rules first in podFailurePolicy sending pullcheck's codes 10-15 to \
FailJob and 20 to Count (see --transient). A restartPolicy is never changed: a warning says why \
the policy was not set. Kubeflow jobs get warnings about restartPolicy and runPolicy."
    )]
    pub fail_fast: bool,

    /// What pullcheck's transient code 20 does: auto, count, ignore or restart.
    #[arg(long = "transient", value_name = "ACTION", help_heading = "Job policy",
        value_enum, default_value_t = Transient::Auto,
        long_help = "auto (default): restart when --kubernetes-version says 1.35 or later, else \
count (inject can't see the cluster, so without --kubernetes-version it writes count). \
count: a transient failure (registry down, timeout) uses one of backoffLimit's \
retries. ignore: it doesn't, so retries only stop at activeDeadlineSeconds (warned when unset). \
restart (Kubernetes 1.35+, container restart rules): the init container gets restartPolicy Never \
and a rule restarting it on code 20, so the check is retried in the same pod under the kubelet's \
back-off, and a permanent code fails the pod at once, also under restartPolicy OnFailure; the \
podFailurePolicy rule for 20 stays Count (see --fail-fast). Under restartPolicy Never those \
restarts are not counted toward backoffLimit, so only activeDeadlineSeconds bounds them (warned \
when unset). Below 1.35 (--kubernetes-version) it falls back to count, with a warning.")]
    pub transient: Transient,

    /// The cluster's Kubernetes version (unset: auto writes count, restart assumes 1.35+).
    #[arg(long = "kubernetes-version", value_name = "MAJOR.MINOR", help_heading = "Job policy",
        value_parser = parse_kubernetes_version,
        long_help = "The Kubernetes version of the cluster the manifests are for, e.g. 1.33 or \
v1.35.4. With 1.35 or later, --transient auto (the default) writes restart. Unset, auto writes \
count and an explicit --transient restart assumes 1.35 or later (container restart rules beta \
and on by default). \
Below 1.35, --transient restart falls back to count with a warning: a 1.34 API server drops the \
fields while its feature gate is off, an older one rejects restartPolicy Never on an init \
container. A 1.35 cluster whose ContainerRestartRules gate was turned off drops them too: \
inject can't tell.")]
    pub kubernetes_version: Option<KubernetesVersion>,

    /// Registry the check talks plain HTTP to (repeatable), handed over like the webhook's.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST[:PORT]",
        help_heading = "Registry hand-over",
        long_help = "As the webhook's --insecure-registry: the check in the init container talks plain \
HTTP to this registry. Written, with --ca-file and --hosts-dir, into the pod-template annotation \
pullcheck.io/registry-config that the container reads through a downward-API volume (docs/webhook.md)."
    )]
    pub insecure_registry: Vec<String>,

    /// CA file (PEM) the check trusts (repeatable), embedded in the workload.
    #[arg(
        long = "ca-file",
        value_name = "FILE",
        help_heading = "Registry hand-over",
        long_help = "A PEM file of CA certificates, embedded (certificates only, no key) in the \
pullcheck.io/registry-config annotation: the check trusts them for every registry, as the webhook's \
--ca-file."
    )]
    pub ca_file: Vec<PathBuf>,

    /// containerd certs.d root whose mirrors, CAs and skip_verify are embedded.
    #[arg(
        long = "hosts-dir",
        value_name = "DIR",
        help_heading = "Registry hand-over",
        long_help = "A containerd certs.d root (as on the nodes): for each registry of a template's \
images, the endpoints it configures (mirrors, capabilities, plain-HTTP servers, skip_verify and the \
text of their ca files) are embedded in the pullcheck.io/registry-config annotation. header entries are \
never embedded (they may carry credentials): a template whose registry needs them gets no check, with a \
warning. Client certificates are never used by the check."
    )]
    pub hosts_dir: Option<PathBuf>,
}

fn parse_kubernetes_version(text: &str) -> Result<KubernetesVersion, String> {
    KubernetesVersion::parse(text).ok_or_else(|| "write MAJOR.MINOR, e.g. 1.35".to_string())
}

impl InjectArgs {
    /// The library options these flags describe, and the warning when the cluster's
    /// version can't carry out `--transient` as asked.
    pub(crate) fn options(
        &self,
        image: String,
    ) -> Result<(InjectOptions, Option<String>), UsageError> {
        let (transient, warning) = self.transient.resolve(self.kubernetes_version);
        if let Some(d) = self.hosts_dir.as_ref().filter(|d| !d.is_dir()) {
            return Err(UsageError(format!(
                "--hosts-dir {}: not a directory; pass a containerd certs.d root such as /etc/containerd/certs.d",
                d.display()
            )));
        }
        let registry = super::init_container::registry_settings(
            self.hosts_dir.clone(),
            &self.insecure_registry,
            &self.ca_file,
            None,
        )?;
        let options = InjectOptions {
            image,
            cpu: self.cpu.clone(),
            memory: self.memory.clone(),
            check_args: self.check_args.clone(),
            fail_fast: self.fail_fast,
            transient,
            // Offline: nothing has been read to hand over.
            index_bodies: Default::default(),
            registry,
        };
        Ok((options, warning))
    }
}

/// `inject --remove`: the stream without pullcheck on stdout, warnings on stderr, exit 0.
fn remove(
    a: &InjectArgs,
    docs: &mut [crate::k8s::yaml::Document],
    table: &crate::k8s::templates::Table,
) -> Result<u8, CliError> {
    let shown = a.filename.display();
    let mut warnings = Vec::new();
    for d in docs.iter_mut() {
        warnings.extend(
            remove_object(&mut d.value, table)
                .into_iter()
                .map(|w| (d.number, w)),
        );
    }
    let out = to_yaml_stream(docs.iter().map(|d| &d.value))
        .map_err(|e| UsageError(format!("{shown}: {e}")))?;
    print_warnings(&shown.to_string(), &warnings);
    super::print_result(&out, code::OK)
}

fn print_warnings(shown: &str, warnings: &[(usize, crate::k8s::Warning)]) {
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
}

/// Run `pullcheck inject`: the rewritten stream on stdout, one warning line per finding on
/// stderr, exit 0. Unreadable or invalid input is a usage error naming file and document.
pub(crate) fn run(a: InjectArgs) -> Result<u8, CliError> {
    // No default image: the project's image name is a placeholder nobody publishes. Naming
    // it on purpose is allowed (with the warning below); leaving --image out is not.
    let image = match (&a.image, a.remove) {
        (_, true) => None,
        (Some(image), false) => Some(image.clone()),
        (None, false) => {
            return Err(UsageError(format!(
                "inject needs --image: the pullcheck image your nodes pull; publish it with \
scripts/publish-image.sh REGISTRY/REPO:TAG and pass the --image IMAGE@sha256:… it prints \
({} is a placeholder nobody publishes)",
                default_image()
            ))
            .into());
        }
    };
    let table = load_table(a.kinds.as_deref())?;
    let mut docs = read_documents(&a.filename)?;
    let Some(image) = image else {
        return remove(&a, &mut docs, &table);
    };
    let (options, version_warning) = a.options(image)?;
    validate_options(&options, "")?;
    if let Some(w) = version_warning {
        eprintln!("pullcheck: warning: {w}");
    }
    if let Some(w) = unpinned_image_warning("--image", &options.image) {
        eprintln!("pullcheck: warning: {w}");
    }
    let shown = a.filename.display();
    let warnings = inject_documents(&mut docs, &options, &table);
    let out = to_yaml_stream(docs.iter().map(|d| &d.value))
        .map_err(|e| UsageError(format!("{shown}: {e}")))?;
    print_warnings(&shown.to_string(), &warnings);
    super::print_result(&out, code::OK)
}
