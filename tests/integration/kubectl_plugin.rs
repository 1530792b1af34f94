//! The binary installed as a kubectl plugin: `kubectl-pullcheck` (what `kubectl pullcheck`
//! runs) and `kubectl_complete-pullcheck` (what kubectl runs to complete it), each a symlink
//! in a temporary directory, as README's install step makes them.

use std::path::Path;

use crate::support::process::{Run, output, pullcheck_as};
use crate::support::temp_dir;

fn run_as(dir: &Path, name: &str, args: &[&str]) -> Run {
    output(pullcheck_as(&dir.join(name)).args(args), None).into()
}

#[test]
fn as_kubectl_pullcheck_it_works_and_its_help_says_kubectl_pullcheck() {
    let dir = temp_dir();
    let r = run_as(
        dir.path(),
        "kubectl-pullcheck",
        &["check", "--output", "json", "Bad Image"],
    );
    r.assert_code(10);
    assert_eq!(r.image(0)["verdict"], "invalid_reference");
    let r = run_as(dir.path(), "kubectl-pullcheck", &["check", "--help"]);
    r.assert_code(0);
    assert!(
        r.stdout
            .contains("Usage: kubectl pullcheck check [OPTIONS] [IMAGE]..."),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("\n  kubectl pullcheck check busybox:1.36 "),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("\n  pullcheck "), "{}", r.stdout);
    let r = run_as(dir.path(), "kubectl-pullcheck", &["chek"]);
    r.assert_code(2);
    assert!(
        r.stderr.contains("Usage: kubectl pullcheck "),
        "{}",
        r.stderr
    );
    // Under its own name nothing changes.
    let r = run_as(dir.path(), "pullcheck", &["check", "--help"]);
    assert!(r.stdout.contains("Usage: pullcheck check "), "{}", r.stdout);
}

#[test]
fn as_kubectl_complete_pullcheck_it_prints_candidates_and_a_directive() {
    let dir = temp_dir();
    let complete = |args: &[&str]| {
        let r = run_as(dir.path(), "kubectl_complete-pullcheck", args);
        r.assert_code(0);
        r.stdout
    };
    let subcommands = complete(&[""]);
    for sub in ["check", "explain", "scan", "inject", "lint", "webhook"] {
        assert!(subcommands.lines().any(|l| l == sub), "{subcommands}");
    }
    assert!(subcommands.ends_with("\n:4\n"), "{subcommands}");
    assert_eq!(complete(&["sc"]), "scan\n:4\n");
    assert_eq!(complete(&["check", "--out"]), "--output\n:4\n");
    assert_eq!(complete(&["check", "-o", ""]), "text\njson\n:4\n");
    assert_eq!(complete(&["lint", "--strict", "-o", "j"]), "json\n:4\n");
    // A file argument leaves completion to the shell's file names.
    assert_eq!(complete(&["lint", "-f", ""]), ":0\n");
    // Image references: no candidates, and no file names either.
    assert_eq!(complete(&["check", "--platform", "any", ""]), ":4\n");
}
