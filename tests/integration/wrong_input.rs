//! Wrong input gets a clear answer and a non-zero code, through the binary as a user runs
//! it: empty manifests, documents that are no Kubernetes objects.

use crate::support::process::run;
use crate::support::temp_dir;

const JOB: &str = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n";

#[test]
fn empty_manifests_are_a_usage_error_naming_the_file() {
    let dir = temp_dir();
    for (name, body) in [
        ("empty.yaml", ""),
        ("comments.yaml", "# generated\n---\n---\n"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        let file = path.to_str().unwrap();
        for args in [
            vec![
                "inject",
                "--image",
                crate::support::CHECKER_IMAGE,
                "-f",
                file,
            ],
            vec!["lint", "-f", file],
            vec!["lint", "--strict", "-f", file],
            vec!["scan", "-f", file],
        ] {
            let r = run(&args, &[]);
            r.assert_code(2);
            assert_eq!(r.stdout, "", "{args:?}");
            assert_eq!(
                r.stderr,
                format!(
                    "pullcheck: {file}: no Kubernetes objects in it; it is empty or holds only comments\n"
                ),
                "{args:?}"
            );
        }
    }
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "a: 1\n---\nb: 2\n").unwrap();
    let r = run(&["lint", "-f", path.to_str().unwrap()], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: {}: no Kubernetes objects in it; none of its 2 documents has apiVersion and kind\n",
            path.display()
        )
    );
}

#[test]
fn documents_that_are_no_objects_are_named_and_fail_strict_lint() {
    let dir = temp_dir();
    let path = dir.path().join("m.yaml");
    std::fs::write(&path, format!("image: busybox\n---\n{JOB}---\n- a\n")).unwrap();
    let file = path.to_str().unwrap();
    let r = run(&["lint", "--strict", "-f", file], &[]);
    r.assert_code(30);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "{file}: document 1: not-a-kubernetes-object: not a Kubernetes object: no apiVersion and no kind"
        )
    );
    assert_eq!(
        lines.last().copied().unwrap(),
        format!(
            "{file}: document 3: not-a-kubernetes-object: not a Kubernetes object: not a mapping with apiVersion and kind"
        )
    );
    let r = run(
        &[
            "inject",
            "--image",
            crate::support::CHECKER_IMAGE,
            "-f",
            file,
        ],
        &[],
    );
    r.assert_code(0);
    assert!(!r.stderr.contains("unknown kind ?"), "{}", r.stderr);
    let line = format!(
        "pullcheck: warning: {file}: document 1: not a Kubernetes object: no apiVersion and no kind: left unchanged"
    );
    assert!(r.stderr.lines().any(|l| l == line), "{}", r.stderr);
    let r = run(
        &["scan", "--platform", "any", "--timeout", "0.1", "-f", file],
        &[],
    );
    assert!(
        r.stderr.contains(&format!(
            "pullcheck: warning: {file}: document 1: not a Kubernetes object: no apiVersion and no kind: skipped\n"
        )),
        "{}",
        r.stderr
    );
}

#[test]
fn scan_says_when_a_workload_of_an_unknown_kind_goes_unchecked() {
    let dir = temp_dir();
    let path = dir.path().join("deploy.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: 'r.example/a:1'}]\n",
    )
    .unwrap();
    let file = path.to_str().unwrap();
    let r = run(&["scan", "-f", file], &[]);
    r.assert_code(0);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: warning: {file}: document 2: unknown kind apps/v1 Deployment holds containers pullcheck doesn't know where to find: not scanned (add it with --kinds)\n"
        )
    );
}

#[test]
fn scan_names_the_namespace_of_each_place_an_image_is_used() {
    let dir = temp_dir();
    let path = dir.path().join("pods.yaml");
    let pod = |ns: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: a, namespace: {ns}}}\nspec:\n  containers: [{{name: c, image: 'bad image'}}]\n"
        )
    };
    std::fs::write(&path, format!("{}---\n{}", pod("ns1"), pod("ns2"))).unwrap();
    let r = run(&["scan", "-f", path.to_str().unwrap()], &[]);
    r.assert_code(10);
    assert!(
        r.stdout
            .lines()
            .next()
            .unwrap_or_default()
            .ends_with("[Pod ns1/a:c, Pod ns2/a:c]"),
        "{}",
        r.stdout
    );
}
