//! `pullcheck scan -f FILE|DIR|-`: check every image referenced by Kubernetes manifests (all
//! files, all documents, the items of a v1 List, all pod templates the kind table knows,
//! deduplicated) with the `check` engine.
//! Meant for CI before `kubectl apply`. Exit code as `check`.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use super::args::{Output, ResolveArgs};
use super::input::{load_table, read_manifests};
use super::{CliError, UsageError};
use crate::engine::{Engine, Outcome};
use crate::k8s::templates::images;
use crate::report::{count, json, text};
use crate::verdict::combined_exit_code;

/// `pullcheck scan`.
#[derive(Debug, Args)]
pub(crate) struct ScanArgs {
    /// Manifest file or directory (multi-document YAML or JSON), or - for stdin; repeatable.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        required = true,
        help_heading = "Input",
        long_help = "Kubernetes manifests to scan: multi-document YAML (or JSON), '-' for \
stdin, or a directory (its *.yaml, *.yml and *.json files, by name; -R for subdirectories); \
repeatable, as kubectl apply -f. A v1 List (kubectl get -o yaml) is read item by item. Every \
pod template of a known kind is read (Job, CronJob, Pod, Kubeflow jobs, JobSet, plus --kinds); \
images with imagePullPolicy: Never are skipped, as the kubelet never pulls them."
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

    /// Extra kind → pod-template-path table (YAML).
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Input",
        long_help = "A YAML list of {apiVersion, kind, podTemplatePaths} entries extending the \
built-in table (Volcano, Argo, Tekton, RayJob, TrainJob, …)."
    )]
    pub kinds: Option<PathBuf>,

    /// Scan the rest when an object of an unknown kind holds images.
    #[arg(
        long = "ignore-unknown-kinds",
        help_heading = "Input",
        long_help = "An object of a kind pullcheck doesn't know (not built in, not in --kinds) \
that holds containers or an image field is a usage error (exit 2) by default: its images would \
go unchecked. With this flag it is a warning and the other images are scanned."
    )]
    pub ignore_unknown_kinds: bool,

    #[command(flatten)]
    pub resolve: ResolveArgs,

    /// Output format, on stdout (text: a line per image and a summary).
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT", default_value_t = Output::Text, help_heading = "Output",
        long_help = "text: a summary table on stdout, one line per image. json: the `check` \
document with a `uses` list per image (where each image appears).")]
    pub output: Output,
}

#[derive(serde::Serialize, PartialEq)]
struct Use {
    /// The file as given or found in a directory given (`-` for stdin).
    file: String,
    document: usize,
    kind: String,
    /// `metadata.namespace`, when the document sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
    container: String,
}

#[derive(serde::Serialize)]
struct ScanDocument<'a> {
    schema_version: u32,
    exit_code: u8,
    images: Vec<ScannedImage<'a>>,
}

#[derive(serde::Serialize)]
struct ScannedImage<'a> {
    #[serde(flatten)]
    outcome: &'a Outcome,
    uses: &'a [Use],
}

/// Run the scan; returns the exit code.
pub(crate) async fn run(a: ScanArgs) -> Result<u8, CliError> {
    let table = load_table(a.kinds.as_deref())?.with_workloads();
    let manifests = read_manifests(&a.filename, a.recursive)?;
    let mut order: Vec<String> = Vec::new();
    let mut uses: Vec<Vec<Use>> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for m in &manifests {
        for d in &m.docs {
            if let Some(why) = crate::k8s::not_an_object(&d.value) {
                eprintln!(
                    "pullcheck: warning: {}: document {}: {why}: skipped",
                    m.shown, d.number
                );
                continue;
            }
            for (at, obj) in crate::k8s::objects(&d.value) {
                if let Some(what) = crate::k8s::templates::unknown_workload(obj, &table) {
                    let at = if at.is_empty() {
                        at
                    } else {
                        format!(" at {at}")
                    };
                    unknown.push(format!("{}: document {}{at}: {what}", m.shown, d.number));
                    continue;
                }
                collect(&mut order, &mut uses, obj, &table, &m.shown, d.number);
            }
        }
    }
    if let Some(first) = unknown.first() {
        if !a.ignore_unknown_kinds {
            let more = match unknown.len() {
                1 => String::new(),
                n => format!(" (and {} more such objects)", n - 1),
            };
            return Err(UsageError(format!(
                "{first}{more}: its images can't be checked; give its pod template paths with --kinds, or scan the rest with --ignore-unknown-kinds"
            ))
            .into());
        }
        for u in &unknown {
            eprintln!("pullcheck: warning: {u}: not scanned (--ignore-unknown-kinds)");
        }
    }
    super::plan::validate_hosts(&a.resolve, &order)?;
    let (plan, registry) = super::plan::build(&a.resolve)?;
    let engine = Engine::new(plan, registry);
    let progress = progress_bar(order.len());
    let deadline = std::time::Instant::now() + engine.plan().timeout;
    let concurrency = engine.plan().concurrency.max(1);
    let outcomes: Vec<Outcome> = {
        use futures_util::StreamExt;
        futures_util::stream::iter(order.iter().map(|i| {
            let engine = &engine;
            let progress = &progress;
            async move {
                let o = engine.check_one(i, deadline).await;
                if let Some(p) = progress {
                    p.inc(1);
                }
                o
            }
        }))
        .buffered(concurrency)
        .collect()
        .await
    };
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let code = combined_exit_code(outcomes.iter().map(|o| o.verdict));
    text::print_warnings(&outcomes);
    let mut out = String::new();
    match a.output {
        Output::Json => {
            let doc = ScanDocument {
                schema_version: json::SCHEMA_VERSION,
                exit_code: code,
                images: outcomes
                    .iter()
                    .zip(&uses)
                    .map(|(outcome, uses)| ScannedImage { outcome, uses })
                    .collect(),
            };
            out = json::render(&doc)?;
        }
        Output::Text => {
            for (o, u) in outcomes.iter().zip(&uses) {
                let at: Vec<String> = u
                    .iter()
                    .map(|u| match &u.namespace {
                        Some(ns) => format!("{} {ns}/{}:{}", u.kind, u.name, u.container),
                        None => format!("{}/{}:{}", u.kind, u.name, u.container),
                    })
                    .collect();
                let _ = writeln!(out, "{}  [{}]", text::line(o), at.join(", "));
            }
            let failing = outcomes
                .iter()
                .filter(|o| o.verdict != crate::verdict::Verdict::Pullable)
                .count();
            let documents: usize = manifests.iter().map(|m| m.docs.len()).sum();
            let files = match manifests.len() {
                1 => String::new(),
                n => format!("{}, ", count(n, "file")),
            };
            let _ = writeln!(
                out,
                "scanned {files}{}, {}: {} pullable, {failing} not (exit {code})",
                count(documents, "document"),
                count(outcomes.len(), "image"),
                outcomes.len() - failing
            );
        }
    }
    super::print_result(&out, code)
}

/// Add the pulled images of one object (`shown` file, document `number`) to the scan:
/// `order` holds each image once, first use first, and `uses[i]` where `order[i]` appears.
fn collect(
    order: &mut Vec<String>,
    uses: &mut Vec<Vec<Use>>,
    obj: &serde_json::Value,
    table: &crate::k8s::templates::Table,
    shown: &str,
    number: usize,
) {
    let kind = obj["kind"].as_str().unwrap_or("").to_string();
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    for u in images(obj, table) {
        if !u.is_pulled() {
            continue;
        }
        let i = match order.iter().position(|o| *o == u.image) {
            Some(i) => i,
            None => {
                order.push(u.image.clone());
                uses.push(Vec::new());
                order.len() - 1
            }
        };
        let place = Use {
            file: shown.to_string(),
            document: number,
            kind: kind.clone(),
            namespace: obj["metadata"]["namespace"].as_str().map(str::to_string),
            name: name.clone(),
            container: u.container,
        };
        // Replicas of one workload (a PyTorchJob's Master and Worker) often share a
        // container name: the same place, listed once.
        if !uses[i].contains(&place) {
            uses[i].push(place);
        }
    }
}

fn progress_bar(total: usize) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() || total < 2 {
        return None;
    }
    let p = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} images checked")
    {
        p.set_style(style);
    }
    Some(p)
}
