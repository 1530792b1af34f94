//! `pullcheck lint`: report the gaps that keep a broken image from failing a workload fast.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::CliError;
use super::input::{load_table, read_manifests};
use crate::k8s::lint::{Finding, lint_documents, rule};
use crate::report::json::SCHEMA_VERSION;
use crate::verdict::code;

/// Output format of `pullcheck lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LintOutput {
    /// One line per finding on stdout.
    Text,
    /// One JSON document on stdout.
    Json,
}

/// Arguments of `pullcheck lint`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LintArgs {
    /// Manifest file or directory (multi-document YAML), or - for stdin; repeatable.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        required = true,
        help_heading = "Input",
        long_help = "The manifests to check: a multi-document YAML file, - to read stdin, or a \
directory (its *.yaml, *.yml and *.json files, by name; -R for subdirectories); repeatable, as \
kubectl apply -f. A v1 List is read item by item. Workloads annotated pullcheck.io/skip: \
\"true\" are skipped; an object of an unknown kind that holds containers or an image field is \
a finding (unknown-kind-with-images) unless --ignore-unknown-kinds."
    )]
    pub filename: Vec<PathBuf>,

    /// Read the directories given to -f recursively.
    #[arg(
        short = 'R',
        long = "recursive",
        help_heading = "Input",
        long_help = "Also read the subdirectories of every directory given to -f, in name \
order, as kubectl -R does."
    )]
    pub recursive: bool,

    /// No finding for objects of unknown kinds that hold images.
    #[arg(
        long = "ignore-unknown-kinds",
        help_heading = "Input",
        long_help = "Drop the unknown-kind-with-images findings: objects of kinds pullcheck \
doesn't know (not built in, not in --kinds) are then passed over in silence, as a ConfigMap is."
    )]
    pub ignore_unknown_kinds: bool,

    /// Kind → pod-template paths file extending the built-in table.
    #[arg(
        long = "kinds",
        value_name = "FILE",
        help_heading = "Input",
        long_help = "The same YAML list of {apiVersion, kind, podTemplatePaths, jobSpecPath, \
runPolicyPath} rows that `inject --kinds` reads."
    )]
    pub kinds: Option<PathBuf>,

    /// Exit 30 when there is any finding.
    #[arg(
        long = "strict",
        help_heading = "Output",
        long_help = "Exit with code 30 (lint_findings) when there is at least one finding, for CI; \
without it lint exits 0 whatever it finds."
    )]
    pub strict: bool,

    /// Output format, on stdout.
    #[arg(long = "output", short = 'o', value_name = "FORMAT", help_heading = "Output",
        value_enum, default_value_t = LintOutput::Text,
        long_help = "text: one line per finding, `FILE: document N: Kind ns/name: PATH: RULE: \
message`. json: {\"schema_version\": 1, \"exit_code\": N, \"findings\": [{file, rule, kind, namespace, name, \
document, path, message}]}.")]
    pub output: LintOutput,
}

/// One text line for a finding.
fn line(file: &str, f: &Finding) -> String {
    let ns = if f.namespace.is_empty() {
        String::new()
    } else {
        format!("{}/", f.namespace)
    };
    let document = f.document.unwrap_or(0);
    // A document that is no object has no kind, name or field to point at.
    if f.kind.is_empty() && f.path.is_empty() {
        return format!("{file}: document {document}: {}: {}", f.rule, f.message);
    }
    format!(
        "{file}: document {document}: {} {ns}{}: {}: {}: {}",
        f.kind, f.name, f.path, f.rule, f.message
    )
}

/// Run `pullcheck lint`: findings on stdout; exit 0, or 30 with `--strict` and findings.
/// Unreadable or invalid input is a usage error naming the file and document.
pub(crate) fn run(a: LintArgs) -> Result<u8, CliError> {
    let table = load_table(a.kinds.as_deref())?;
    let manifests = read_manifests(&a.filename, a.recursive)?;
    let findings: Vec<FileFinding> = manifests
        .iter()
        .flat_map(|m| {
            lint_documents(&m.docs, &table)
                .into_iter()
                .filter(|f| !(a.ignore_unknown_kinds && f.rule == rule::UNKNOWN_KIND))
                .map(|finding| FileFinding {
                    file: &m.shown,
                    finding,
                })
        })
        .collect();
    let code = if a.strict && !findings.is_empty() {
        code::LINT_FINDINGS
    } else {
        code::OK
    };
    let body = match a.output {
        LintOutput::Text => findings
            .iter()
            .map(|f| line(f.file, &f.finding) + "\n")
            .collect::<String>(),
        LintOutput::Json => {
            let doc = serde_json::json!({"schema_version": SCHEMA_VERSION, "exit_code": code, "findings": findings});
            crate::report::json::render(&doc)?
        }
    };
    super::print_result(&body, code)
}

/// A finding with the file it is in (the JSON `file` field).
#[derive(serde::Serialize)]
struct FileFinding<'a> {
    file: &'a str,
    #[serde(flatten)]
    finding: Finding,
}
