//! Running as a kubectl plugin. kubectl runs `kubectl-pullcheck` for `kubectl pullcheck …`
//! (its plugin naming: `kubectl-` and the command, on PATH), and for shell completion of
//! `kubectl pullcheck …` it runs `kubectl_complete-pullcheck` with the words after the plugin
//! name, the last one being the word under the cursor, and reads candidates one per line,
//! optionally ended by cobra's `:DIRECTIVE` line. Both are this binary under another name
//! (a symlink or a copy), told apart by argv[0].
//!
//! Completion walks the clap command tree rather than using clap_complete's dynamic engine:
//! that engine is behind clap_complete's `unstable-dynamic` feature, whose API may change
//! in any release, and the tree already holds every subcommand, flag and enumerated value.
//! The values of `--context` and `-n` are the kubeconfig's contexts and the cluster's
//! namespaces ([`super::cluster_names`]), from the `--kubeconfig` and `--context` typed so
//! far, as kubectl completes its own.

use std::ffi::OsStr;
use std::path::Path;

use clap::{Arg, Command, CommandFactory};

use super::Cli;

/// The program name kubectl users type.
const KUBECTL_PROGRAM: &str = "kubectl pullcheck";

/// cobra's `ShellCompDirectiveDefault`: the shell may complete file names.
const FILES: &str = ":0";
/// cobra's `ShellCompDirectiveNoFileComp`: only the candidates printed.
const NO_FILES: &str = ":4";

/// Which name the binary was started under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Invocation {
    /// `pullcheck` (or any other name).
    Pullcheck,
    /// `kubectl-pullcheck`: `kubectl pullcheck …`.
    KubectlPlugin,
    /// `kubectl_complete-pullcheck`: kubectl asks for completions.
    KubectlComplete,
}

/// The invocation argv[0] names.
pub(crate) fn invocation(argv0: Option<&OsStr>) -> Invocation {
    let name = argv0
        .and_then(|a| Path::new(a).file_name())
        .and_then(OsStr::to_str)
        .unwrap_or_default();
    match name {
        "kubectl-pullcheck" => Invocation::KubectlPlugin,
        "kubectl_complete-pullcheck" => Invocation::KubectlComplete,
        _ => Invocation::Pullcheck,
    }
}

/// The clap command for `invocation`: as a kubectl plugin, usage lines and the examples
/// under `--help` say `kubectl pullcheck`.
pub(crate) fn command(invocation: Invocation) -> Command {
    let cmd = Cli::command();
    if invocation != Invocation::KubectlPlugin {
        return cmd;
    }
    let mut cmd = cmd
        .bin_name(KUBECTL_PROGRAM)
        .after_long_help(super::after_help_for(KUBECTL_PROGRAM));
    let with_examples: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| s.get_after_long_help().is_some())
        .map(|s| s.get_name().to_string())
        .collect();
    for name in with_examples {
        cmd = cmd.mut_subcommand(name, |s| {
            s.after_long_help(super::after_help_for(KUBECTL_PROGRAM))
        });
    }
    cmd
}

/// The completion answer for `words` (the words after `kubectl pullcheck`, the last one
/// being completed): matching candidates one per line, then cobra's directive line.
pub(crate) fn complete(words: &[String]) -> String {
    let mut root = Cli::command();
    // Built, so global flags (-v) and the help subcommand are in every command.
    root.build();
    let (partial, done) = match words.split_last() {
        Some((last, rest)) => (last.as_str(), rest),
        None => ("", &[][..]),
    };
    let mut cmd = &root;
    let mut value_of: Option<&Arg> = None;
    let mut typed = Typed::default();
    for w in done {
        if let Some(arg) = value_of.take() {
            typed.note(arg.get_id().as_str(), w);
            continue;
        }
        if let Some((name, value)) = w.strip_prefix("--").and_then(|l| l.split_once('=')) {
            typed.note(name, value);
        }
        if let Some(long) = w.strip_prefix("--") {
            value_of = (!long.contains('='))
                .then(|| cmd.get_arguments().find(|a| a.get_long() == Some(long)))
                .flatten()
                .filter(|a| takes_value(a));
        } else if let Some(short) = w.strip_prefix('-').filter(|s| s.chars().count() == 1) {
            value_of = cmd
                .get_arguments()
                .find(|a| a.get_short().map(String::from).as_deref() == Some(short))
                .filter(|a| takes_value(a));
        } else if let Some(sub) = cmd.find_subcommand(w) {
            cmd = sub;
        }
    }
    let (candidates, directive): (Vec<String>, &str) = if let Some(arg) = value_of {
        if let Some(names) = typed.cluster_names(arg) {
            return answer(names, partial, NO_FILES);
        }
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect();
        // A flag without a fixed list (-f FILE, --hosts-dir DIR) gets the shell's files.
        let directive = if values.is_empty() { FILES } else { NO_FILES };
        (values, directive)
    } else if partial.starts_with('-') {
        let flags = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        (flags, NO_FILES)
    } else if cmd.has_subcommands() {
        let subs = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name().to_string())
            .collect();
        (subs, NO_FILES)
    } else {
        // Image references: nothing to offer, and file names would be wrong.
        (Vec::new(), NO_FILES)
    };
    answer(candidates, partial, directive)
}

/// The candidates that start with `partial`, one per line, then the directive line.
fn answer(candidates: Vec<String>, partial: &str, directive: &str) -> String {
    let mut out: String = candidates
        .into_iter()
        .filter(|c| c.starts_with(partial))
        .map(|c| c + "\n")
        .collect();
    out.push_str(directive);
    out.push('\n');
    out
}

/// The `--kubeconfig` and `--context` already on the command line: which cluster the
/// names of `--context` and `-n` come from.
#[derive(Default)]
struct Typed {
    kubeconfig: Option<std::path::PathBuf>,
    context: Option<String>,
}

impl Typed {
    /// Keep `value` if `id` (a flag's long name or clap id) is one of the two.
    fn note(&mut self, id: &str, value: &str) {
        match id {
            "kubeconfig" => self.kubeconfig = Some(value.into()),
            "context" => self.context = Some(value.to_string()),
            _ => {}
        }
    }

    /// The names `arg` takes when it is `--context` or `-n`; `None` for any other flag.
    fn cluster_names(&self, arg: &Arg) -> Option<Vec<String>> {
        match arg.get_id().as_str() {
            "context" => Some(super::cluster_names::contexts(self.kubeconfig.clone())),
            "namespace" => Some(super::cluster_names::namespaces(
                self.kubeconfig.clone(),
                self.context.clone(),
            )),
            _ => None,
        }
    }
}

fn takes_value(a: &Arg) -> bool {
    a.get_action().takes_values()
}
