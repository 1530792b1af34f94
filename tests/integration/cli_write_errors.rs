//! Output errors through the real binary: a full disk is one line and exit 1 (`internal`);
//! a reader that went away (`| head`) leaves the command's own exit code (the verdict) and
//! no message.

use std::fs::File;
use std::process::Stdio;

use crate::support::process::pullcheck_unwrapped;

const JOB: &str = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: a, image: 'local/only:dev', imagePullPolicy: Never}]\n";

/// Every command that writes stdout, in a form that needs no registry.
fn commands(manifest: &str) -> Vec<Vec<String>> {
    let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        f(&[
            "check",
            "-o",
            "json",
            "--platform",
            "any",
            "Not_A/Valid:Ref",
        ]),
        f(&[
            "inject",
            "--image",
            crate::support::CHECKER_IMAGE,
            "-f",
            manifest,
        ]),
        f(&["lint", "-f", manifest]),
        f(&["scan", "-o", "json", "-f", manifest]),
    ]
}

fn run(args: &[String], stdout: Stdio) -> (i32, String) {
    let out = pullcheck_unwrapped()
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn manifest() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.yaml");
    std::fs::write(&path, JOB).unwrap();
    let shown = path.display().to_string();
    (dir, shown)
}

#[test]
fn a_full_disk_is_one_line_and_exit_1() {
    let (_dir, path) = manifest();
    for args in commands(&path) {
        let full = File::options().write(true).open("/dev/full").unwrap();
        let (code, stderr) = run(&args, Stdio::from(full));
        assert_eq!(code, 1, "{args:?}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("pullcheck: cannot write output: "),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            stderr
                .lines()
                .filter(|l| l.starts_with("pullcheck: cannot write"))
                .count(),
            1,
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_closed_pipe_keeps_the_commands_exit_code_without_a_panic() {
    let (_dir, path) = manifest();
    // check's reference is invalid (10); the others have nothing to report (0).
    for (args, want) in commands(&path).into_iter().zip([10, 0, 0, 0]) {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let (code, stderr) = run(&args, Stdio::from(writer));
        assert_eq!(code, want, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("cannot write"), "{args:?}: {stderr}");
    }
}
