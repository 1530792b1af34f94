//! `pullcheck inject`: add the pullcheck init container to manifests (stdout), warnings on
//! stderr.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::UsageError;
use crate::k8s::inject::{
    DEFAULT_CPU, DEFAULT_MEMORY, InjectOptions, TransientAction, default_image, inject_stream,
};
use crate::k8s::templates::Table;
use crate::verdict::code;

/// The largest manifest stream read, in bytes.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// What the podFailurePolicy does with the transient code (20).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transient {
    /// Count toward backoffLimit.
    Count,
    /// Don't count (set activeDeadlineSeconds to bound the retries).
    Ignore,
}

impl From<Transient> for TransientAction {
    fn from(t: Transient) -> TransientAction {
        match t {
            Transient::Count => TransientAction::Count,
            Transient::Ignore => TransientAction::Ignore,
        }
    }
}

/// Arguments of `pullcheck inject`.
#[derive(Debug, Clone, Args)]
pub struct InjectArgs {
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
    pub fn options(&self) -> InjectOptions {
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

/// Check the init container's settings before writing them into anybody's pod spec:
/// quantities must be positive Kubernetes quantities, the image a valid reference, and the
/// extra check arguments flags that `pullcheck check` accepts. `flag` prefixes the flag
/// names (`""` for inject, `"inject-"` for the webhook).
pub fn validate_options(o: &InjectOptions, flag: &str) -> Result<(), UsageError> {
    for (name, value) in [("cpu", &o.cpu), ("memory", &o.memory)] {
        if !is_positive_quantity(value) {
            return Err(UsageError(format!(
                "--{flag}{name} {value}: not a positive Kubernetes quantity; write e.g. 100m, 0.5, 64Mi or 1Gi"
            )));
        }
    }
    crate::reference::Reference::parse(&o.image)
        .map_err(|e| UsageError(format!("--{flag}image: {e}")))?;
    let mut argv = vec!["pullcheck".to_string(), "check".to_string()];
    argv.extend(o.check_args.iter().cloned());
    argv.push("example.com/image:tag".to_string());
    if let Err(e) = <super::args::Cli as clap::Parser>::try_parse_from(&argv) {
        let first = e
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_string();
        return Err(UsageError(format!(
            "--{flag}check-arg {}: `pullcheck check` would refuse it: {first}",
            o.check_args.join(" ")
        )));
    }
    Ok(())
}

/// `[+]?(digits[.digits]|.digits)(suffix)?`, greater than zero; suffixes as in
/// k8s.io/apimachinery `resource.Quantity` (binary Ki…Ei, decimal m k M G T P E, e-notation).
fn is_positive_quantity(q: &str) -> bool {
    let q = q.strip_prefix('+').unwrap_or(q);
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let valid_suffix = matches!(
        suffix,
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
    ) || (suffix.len() > 1
        && (suffix.starts_with('e') || suffix.starts_with('E'))
        && suffix[1..]
            .trim_start_matches(['+', '-'])
            .chars()
            .all(|c| c.is_ascii_digit())
        && !suffix[1..].trim_start_matches(['+', '-']).is_empty());
    let valid_number =
        number.matches('.').count() <= 1 && number.chars().any(|c| c.is_ascii_digit());
    valid_suffix && valid_number && number.parse::<f64>().is_ok_and(|n| n > 0.0)
}

/// Read a manifest stream from a file or `-` (stdin). Input larger than
/// [`MAX_INPUT_BYTES`] is refused whole: cutting it would silently drop documents.
pub fn read_input(path: &std::path::Path) -> Result<String, UsageError> {
    let shown = path.display();
    let mut text = String::new();
    // One byte over the cap tells "exactly at the cap" from "larger".
    let limit = MAX_INPUT_BYTES + 1;
    let result = if path.as_os_str() == "-" {
        std::io::stdin().take(limit).read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_string(&mut text))
    };
    result.map_err(|e| UsageError(format!("{shown}: cannot read: {e}")))?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(UsageError(format!(
            "{shown}: larger than {} MiB; split the manifests into several files",
            MAX_INPUT_BYTES / (1024 * 1024)
        )));
    }
    Ok(text)
}

/// The kind table: built-ins, extended by `--kinds` when given.
pub fn load_table(kinds: Option<&std::path::Path>) -> Result<Table, UsageError> {
    match kinds {
        None => Ok(Table::builtin()),
        Some(p) => Table::load(&p.display().to_string()).map_err(|e| UsageError(e.to_string())),
    }
}

/// Run `pullcheck inject`: the rewritten stream on stdout, one warning line per finding on
/// stderr, exit 0. Unreadable or invalid input is a usage error naming file and document.
pub fn run(a: InjectArgs) -> Result<u8, UsageError> {
    let table = load_table(a.kinds.as_deref())?;
    let text = read_input(&a.filename)?;
    let shown = a.filename.display();
    let options = a.options();
    validate_options(&options, "")?;
    let (out, warnings) =
        inject_stream(&text, &options, &table).map_err(|e| UsageError(format!("{shown}: {e}")))?;
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
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(code::OK),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(code::OK),
        Err(e) => Err(UsageError(format!("stdout: cannot write: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        for ok in ["100m", "0.5", "64Mi", "1Gi", "2", "1e3", "+1", ".5"] {
            assert!(is_positive_quantity(ok), "{ok}");
        }
        for bad in ["lots", "-5", "0", "0m", "1.2.3", "Mi", "", "5x", "1e"] {
            assert!(!is_positive_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn options_are_checked() {
        let mut o = InjectOptions::default();
        assert!(validate_options(&o, "").is_ok());
        o.check_args = vec!["--bogus".into()];
        let e = validate_options(&o, "").unwrap_err().0;
        assert!(
            e.starts_with("--check-arg --bogus: `pullcheck check` would refuse it: "),
            "{e}"
        );
        o.check_args = vec!["--insecure-registry=127.0.0.1:5000".into()];
        assert!(validate_options(&o, "").is_ok());
        o.image = "Not/Valid".into();
        assert!(
            validate_options(&o, "inject-")
                .unwrap_err()
                .0
                .starts_with("--inject-image: ")
        );
        o.image = InjectOptions::default().image;
        o.cpu = "lots".into();
        assert_eq!(
            validate_options(&o, "").unwrap_err().0,
            "--cpu lots: not a positive Kubernetes quantity; write e.g. 100m, 0.5, 64Mi or 1Gi"
        );
    }
}
