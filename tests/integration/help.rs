//! The CLI's documentation contract: every argument has a one-line help and a long help,
//! `--help` ends with examples and the exit-code table, and the README's exit-code table is
//! the one in `src/verdict.rs`.

use clap::CommandFactory;

use crate::support::process::run;

fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        if arg.get_help().is_none() || arg.get_long_help().is_none() {
            missing.push(format!("{path} --{id}"));
        }
    }
    for sub in cmd.get_subcommands() {
        walk(sub, &format!("{path} {}", sub.get_name()), missing);
    }
}

#[test]
fn every_argument_has_help_and_long_help() {
    let mut missing = Vec::new();
    walk(&pullcheck::cli::Cli::command(), "pullcheck", &mut missing);
    assert_eq!(missing, Vec::<String>::new());
}

#[test]
fn long_help_ends_with_examples_and_exit_codes() {
    let r = run(&["check", "--help"], &[]);
    r.assert_code(0);
    assert!(
        r.stdout
            .contains("\nExamples:\n  pullcheck check busybox:1.36"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .trim_end()
            .ends_with(pullcheck::verdict::exit_code_table(false).trim_end()),
        "{}",
        r.stdout
    );
}

#[test]
fn readme_exit_code_table_matches_the_code() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("<!-- exit-codes:start -->\n")
        .expect("README marker")
        + "<!-- exit-codes:start -->\n".len();
    let end = readme
        .find("<!-- exit-codes:end -->")
        .expect("README end marker");
    assert_eq!(
        &readme[start..end],
        pullcheck::verdict::exit_code_table(true)
    );
}

#[test]
fn completion_scripts_are_generated() {
    let r = run(&["completion", "bash"], &[]);
    r.assert_code(0);
    assert!(
        r.stdout.contains("_pullcheck()"),
        "{}",
        &r.stdout[..r.stdout.len().min(200)]
    );
}

/// A default is printed once (clap's `[default: …]`), an environment variable by name only,
/// whatever the caller's environment holds.
#[test]
fn audit_help_ends_with_its_examples_and_the_exit_codes() {
    let r = run(&["audit", "--help"], &[]);
    r.assert_code(0);
    assert!(
        r.stdout
            .contains("\nExamples:\n  pullcheck audit                            # the current context's namespace\n  pullcheck audit -A "),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .trim_end()
            .ends_with(pullcheck::verdict::exit_code_table(false).trim_end()),
        "{}",
        r.stdout
    );
}

#[test]
fn help_states_each_default_once_and_no_environment_value() {
    for sub in ["check", "scan", "explain", "webhook", "audit"] {
        let r = run(
            &[sub, "--help"],
            &[("PULLCHECK_PULL_SECRETS", "/secret/path")],
        );
        r.assert_code(0);
        for paragraph in r.stdout.split("\n\n") {
            if paragraph.contains("[default: ") {
                assert!(!paragraph.contains("(default "), "{sub}: {paragraph}");
            }
        }
        assert!(!r.stdout.contains("/secret/path"), "{sub}");
        assert!(!r.stdout.contains("[env: PULLCHECK_PULL_SECRETS="), "{sub}");
    }
}
