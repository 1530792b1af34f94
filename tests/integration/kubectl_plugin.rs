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

/// A kubeconfig with the contexts `names` (the first current), each on a cluster at
/// `server` with a token.
fn kubeconfig(path: &Path, server: &str, names: &[&str]) {
    let contexts: Vec<serde_json::Value> = names
        .iter()
        .map(|n| serde_json::json!({"name": n, "context": {"cluster": "c", "user": "u"}}))
        .collect();
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": names[0],
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t0k"}}],
        "contexts": contexts,
    });
    std::fs::write(path, config.to_string()).unwrap();
}

#[test]
fn completion_offers_the_kubeconfigs_contexts_and_its_clusters_namespaces_within_a_bound() {
    let dir = temp_dir();
    // A server that takes connections and never answers: the namespace list must give up.
    let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = format!("https://{}", hanging.local_addr().unwrap());
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    kubeconfig(&a, &server, &["prod", "dev"]);
    kubeconfig(&b, &server, &["staging", "dev"]);
    let var = std::env::join_paths([&a, &b]).unwrap();
    let complete = |kubeconfig: Option<&std::ffi::OsStr>, args: &[&str]| {
        let mut cmd = pullcheck_as(&dir.path().join("kubectl_complete-pullcheck"));
        if let Some(k) = kubeconfig {
            cmd.env("KUBECONFIG", k);
        }
        let started = std::time::Instant::now();
        let r: Run = output(cmd.args(args), None).into();
        r.assert_code(0);
        assert_eq!(r.stderr, "", "completion stays silent on stderr");
        (r.stdout, started.elapsed())
    };
    // $KUBECONFIG's files merged (dev once), sorted; the prefix typed filters them.
    assert_eq!(
        complete(Some(&var), &["audit", "--context", ""]).0,
        "dev\nprod\nstaging\n:4\n"
    );
    assert_eq!(
        complete(Some(&var), &["watch", "-A", "--context", "p"]).0,
        "prod\n:4\n"
    );
    // --kubeconfig typed before, in either spelling, is the only file read.
    let b_path = b.to_str().unwrap();
    assert_eq!(
        complete(
            Some(&var),
            &["audit", "--kubeconfig", b_path, "--context", ""]
        )
        .0,
        "dev\nstaging\n:4\n"
    );
    assert_eq!(
        complete(
            None,
            &["watch", &format!("--kubeconfig={b_path}"), "--context", ""]
        )
        .0,
        "dev\nstaging\n:4\n"
    );
    // No kubeconfig (HOME points nowhere): no contexts, no namespaces, at once.
    assert_eq!(complete(None, &["audit", "--context", ""]).0, ":4\n");
    let (out, took) = complete(None, &["audit", "-n", ""]);
    assert_eq!(out, ":4\n");
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    // A cluster that never answers: nothing offered, and the shell waits 2 s, not forever.
    let (out, took) = complete(Some(&var), &["audit", "--context", "dev", "-n", ""]);
    assert_eq!(out, ":4\n");
    assert!(
        took >= std::time::Duration::from_secs(2) && took < std::time::Duration::from_secs(4),
        "{took:?}"
    );
    drop(hanging);
}
