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
fn scan_refuses_a_workload_of_an_unknown_kind_unless_told() {
    let dir = temp_dir();
    let path = dir.path().join("deploy.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {image: 'r.example/a:1'}\n---\napiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: 'r.example/a:1'}]\n",
    )
    .unwrap();
    let file = path.to_str().unwrap();
    let r = run(&["scan", "-f", file], &[]);
    r.assert_code(2);
    assert_eq!(r.stdout, "");
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: {file}: document 2: unknown kind ray.io/v1 RayCluster holds containers pullcheck doesn't know where to find: its images can't be checked; give its pod template paths with --kinds, or scan the rest with --ignore-unknown-kinds\n"
        )
    );
    let r = run(&["scan", "--ignore-unknown-kinds", "-f", file], &[]);
    r.assert_code(0);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: warning: {file}: document 2: unknown kind ray.io/v1 RayCluster holds containers pullcheck doesn't know where to find: not scanned (--ignore-unknown-kinds)\n"
        )
    );
    assert_eq!(
        r.stdout,
        "scanned 2 documents, 0 images: 0 pullable, 0 not (exit 0)\n"
    );
    // A --kinds row says where to look: the image is checked (and is invalid here).
    let kinds = dir.path().join("kinds.yaml");
    std::fs::write(
        &kinds,
        "- {apiVersion: ray.io/v1, kind: RayCluster, podTemplatePaths: [spec.template]}\n",
    )
    .unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: 'Bad Image'}]\n",
    )
    .unwrap();
    let r = run(
        &[
            "scan",
            "--kinds",
            kinds.to_str().unwrap(),
            "-f",
            bad.to_str().unwrap(),
        ],
        &[],
    );
    r.assert_code(10);
    assert_eq!(r.stderr, "");
}

/// Deployments, StatefulSets, DaemonSets and ReplicaSets are known to `scan` (their pods pull
/// like a Job's), not findings: their images are checked without --kinds.
#[test]
fn scan_checks_the_long_running_workload_kinds() {
    let dir = temp_dir();
    let path = dir.path().join("apps.yaml");
    let doc = |kind: &str| {
        format!(
            "apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: w, namespace: ns}}\nspec:\n  template:\n    spec:\n      containers: [{{name: c, image: 'Bad Image'}}]\n"
        )
    };
    let text = ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"]
        .map(doc)
        .join("---\n");
    std::fs::write(&path, text).unwrap();
    let r = run(&["scan", "-o", "json", "-f", path.to_str().unwrap()], &[]);
    r.assert_code(10);
    assert_eq!(r.stderr, "");
    let j = r.json();
    let kinds: Vec<&str> = j["images"][0]["uses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"],
        "{j}"
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

/// `check -f FILE` and `-f -`: one reference a line, blank and `#` lines skipped, after the
/// IMAGE arguments; what can't be read as such a list is one line naming the file (and line).
#[test]
fn check_reads_references_from_files_and_stdin() {
    let f = crate::support::fixture();
    let a = &f.anon.host;
    let ca = f.ca_file.to_str().unwrap();
    let stdin = format!("# the team's images\n\n  {a}/oci/app:v1-typo  \n{a}/oci/app:v1\n");
    let out = crate::support::process::output(
        crate::support::process::pullcheck().args([
            "check",
            "--ca-file",
            ca,
            "--insecure-registry",
            a,
            "--platform",
            "any",
            "-o",
            "json",
            &format!("{a}/oci/app:v1"),
            "-f",
            "-",
        ]),
        Some(stdin.as_bytes()),
    );
    let r: crate::support::process::Run = out.into();
    r.assert_code(11);
    let got: Vec<(String, String)> = r.json()["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["image"].as_str().unwrap().into(),
                i["verdict"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want = |tag: &str, v: &str| (format!("{a}/oci/app:{tag}"), v.to_string());
    assert_eq!(
        got,
        vec![
            want("v1", "pullable"),
            want("v1-typo", "not_found"),
            want("v1", "pullable")
        ]
    );

    let dir = temp_dir();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let two = write("two.txt", "busybox:1.36\nnginx:1.27 alpine:3\n");
    let r = run(&["check", "-f", &two], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: -f {two}: line 2: \"nginx:1.27 alpine:3\" holds whitespace; write one image reference a line (comments on lines of their own, starting with #)\n"
        )
    );
    let empty = write("empty.txt", "# nothing\n\n");
    let r = run(&["check", "-f", &empty], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: -f {empty}: no image references in it (one a line; blank and # lines are skipped)\n"
        )
    );
    let fifo = dir.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.to_str().unwrap();
    // A pipe is read to its writer's close, as `-f <(kubectl get …)` needs (a named pipe
    // nobody writes to is an error after 30 s: files::tests covers it with a short bound).
    let feeding = feed_fifo(fifo, "# nothing\n");
    let r = run(&["check", "-f", fifo], &[]);
    feeding.join().unwrap();
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: -f {fifo}: no image references in it (one a line; blank and # lines are skipped)\n"
        )
    );
    // The manifest readers too (they hung until killed on a FIFO, found by a new user's
    // trial, then refused every pipe): the stream is read, here one without an object.
    for args in [
        vec!["lint", "-f", fifo],
        vec!["scan", "-f", fifo],
        vec!["inject", "--image", "r.example/pullcheck:1", "-f", fifo],
    ] {
        let feeding = feed_fifo(fifo, "a: 1\n");
        let r = run(&args, &[]);
        feeding.join().unwrap();
        r.assert_code(2);
        assert_eq!(
            r.stderr,
            format!(
                "pullcheck: {fifo}: no Kubernetes objects in it; its one document has no apiVersion and kind\n"
            ),
            "{args:?}"
        );
    }
    let r = run(&["check", "-"], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: '-' is not an image reference; to read references from stdin, use -f -\n"
    );
    let r = run(&["check", "-f", "-", "-f", "-"], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: -f - given more than once: stdin can be read only once\n"
    );
}

/// A typo in --platform is a usage error naming the close match, not a verdict: against a
/// single-platform image it used to pass, against an index to fail with 12.
#[test]
fn a_platform_flag_typo_is_a_usage_error_with_the_close_match() {
    let r = run(&["check", "--platform", "linux/amd", "busybox"], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: --platform linux/amd: invalid platform \"linux/amd\": unknown architecture \"amd\" (did you mean linux/amd64?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8\n"
    );
    // What inject hands to the init container's `check` is checked now, not in every pod.
    let dir = temp_dir();
    let job = dir.path().join("job.yaml");
    std::fs::write(&job, JOB).unwrap();
    let job = job.to_str().unwrap();
    let r = run(
        &[
            "inject",
            "--image",
            crate::support::CHECKER_IMAGE,
            "--check-arg=--platform=linux/amd",
            "-f",
            job,
        ],
        &[],
    );
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: --check-arg: --platform linux/amd: invalid platform \"linux/amd\": unknown architecture \"amd\" (did you mean linux/amd64?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8\n"
    );
    // The chart's clusterPlatforms values arrive as --cluster-platform; checked before the
    // TLS files are read.
    let r = run(
        &[
            "webhook",
            "--tls-cert",
            "/nonexistent/tls.crt",
            "--tls-key",
            "/nonexistent/tls.key",
            "--cluster-platform",
            "linux/arm64/v8",
            "--cluster-platform",
            "lnux/arm64",
        ],
        &[],
    );
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        "pullcheck: --cluster-platform lnux/arm64: invalid platform \"lnux/arm64\": unknown operating system \"lnux\" (did you mean linux/arm64?); expected os/arch[/variant], e.g. linux/amd64 or linux/arm64/v8\n"
    );
}

/// The webhook has no default checker image, as `inject` has none: the project's image name
/// is a placeholder nobody publishes, and a webhook injecting it would hold every mutated pod
/// in Init:ImagePullBackOff (found by a newcomer's trial: README said there was no default).
#[test]
fn the_webhook_refuses_to_start_without_an_inject_image() {
    let r = run(
        &[
            "webhook",
            "--tls-cert",
            "/nonexistent/tls.crt",
            "--tls-key",
            "/nonexistent/tls.key",
        ],
        &[],
    );
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: webhook needs --inject-image: the pullcheck image your nodes pull for the init container /mutate injects; publish it with scripts/publish-image.sh REGISTRY/REPO:TAG and pass the --inject-image IMAGE@sha256:… it prints (ghcr.io/pullcheck/pullcheck:{} is a placeholder nobody publishes)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// A `--kinds` row whose paths miss where the object keeps its containers (a typo, or a
/// TrainJob that has no pod template at all) must not turn the object into "0 images, exit
/// 0": scan refuses it, lint --strict fails (found by a newcomer's trial).
#[test]
fn a_kinds_row_that_misses_the_containers_is_not_a_clean_pass() {
    let dir = temp_dir();
    let kinds = dir.path().join("kinds.yaml");
    std::fs::write(
        &kinds,
        "- {apiVersion: ray.io/v1, kind: RayJob, podTemplatePaths: [spec.rayClusterSpec.headGroupSpec.templat]}\n",
    )
    .unwrap();
    let job = dir.path().join("rayjob.yaml");
    std::fs::write(
        &job,
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: r}\nspec:\n  rayClusterSpec:\n    headGroupSpec:\n      template:\n        spec:\n          containers: [{name: head, image: 'r.example/ray:missing'}]\n",
    )
    .unwrap();
    let (kinds, job) = (kinds.to_str().unwrap(), job.to_str().unwrap());
    let r = run(&["scan", "--kinds", kinds, "-f", job], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: {job}: document 1: ray.io/v1 RayJob holds an image at /spec/rayClusterSpec/headGroupSpec/template/spec/containers, outside its pod template paths, which pullcheck doesn't know where to find: its images can't be checked; give its pod template paths with --kinds, or scan the rest with --ignore-unknown-kinds\n"
        )
    );
    let r = run(&["lint", "--strict", "--kinds", kinds, "-f", job], &[]);
    r.assert_code(30);
    assert!(
        r.stdout.contains(
            "/spec/rayClusterSpec/headGroupSpec/template/spec/containers: unknown-kind-with-images: an image outside the kind's pod template paths: it is not checked; fix the paths with --kinds"
        ),
        "{}",
        r.stdout
    );
}

/// A Secret saved with `kubectl get secret -o yaml` is a fine secret in a format pullcheck
/// doesn't read: the message says to export it as JSON, not to re-create it.
#[test]
fn a_pull_secret_in_yaml_is_named_as_such_with_the_export_command() {
    let dir = temp_dir();
    let path = dir.path().join("secret.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: regcred}\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: e30=\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let r = run(&["check", "--pull-secrets", p, "127.0.0.1:9/a:b"], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: pull secret {p}: a Kubernetes object in YAML; pullcheck reads pull secrets as JSON; export it with kubectl get secret NAME -o json\n"
        )
    );
}

/// A typed list as the API returns it (`batch/v1 JobList`, items without apiVersion and
/// kind) is read item by item like a `v1 List`, not refused as an unknown kind.
#[test]
fn a_typed_list_from_the_api_is_read_item_by_item() {
    let dir = temp_dir();
    let path = dir.path().join("joblist.json");
    std::fs::write(
        &path,
        r#"{"apiVersion":"batch/v1","kind":"JobList","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"j","namespace":"ml"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"Bad Image"}]}}}}]}"#,
    )
    .unwrap();
    let r = run(&["scan", "-o", "json", "-f", path.to_str().unwrap()], &[]);
    r.assert_code(10);
    assert_eq!(r.stderr, "");
    let u = &r.json()["images"][0]["uses"][0];
    assert_eq!(
        (
            u["kind"].as_str(),
            u["namespace"].as_str(),
            u["name"].as_str()
        ),
        (Some("Job"), Some("ml"), Some("j"))
    );
}

/// A Trainer v2 TrainJob without an image of its own (its pods come from the runtime it
/// names) read "0 images: 0 pullable, 0 not (exit 0)" (issue 22's measurement): a green
/// result for images nobody looked at. It is refused like any kind pullcheck can't read.
#[test]
fn a_trainjob_alone_is_never_a_clean_zero() {
    let dir = temp_dir();
    let tj = dir.path().join("trainjob.yaml");
    std::fs::write(
        &tj,
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: t}\nspec:\n  runtimeRef: {name: torch-distributed}\n",
    )
    .unwrap();
    let tj = tj.to_str().unwrap();
    let r = run(&["scan", "-f", tj], &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: {tj}: document 1: unknown kind trainer.kubeflow.org/v1alpha1 TrainJob gets its pods from a training runtime (torch-distributed), which pullcheck doesn't read yet: its images can't be checked; give its pod template paths with --kinds, or scan the rest with --ignore-unknown-kinds\n"
        )
    );
    assert_eq!(r.stdout, "");
}

/// Write `text` into the named pipe `path` once a reader opens it, then close it: a writer
/// that waits (at most 10 s) for the command under test, as a shell's `cat x > fifo` would.
fn feed_fifo(path: &str, text: &'static str) -> std::thread::JoinHandle<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = path.to_string();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            // O_NONBLOCK: opening for write fails (ENXIO) until a reader is there.
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
            {
                Ok(mut w) => {
                    w.write_all(text.as_bytes()).unwrap();
                    return;
                }
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(e) => panic!("no reader opened {path} in 10 s: {e}"),
            }
        }
    })
}

/// `--termination-log` naming a named pipe nobody reads: the write fails at once and says
/// why, and the exit code is the check's (it hung after printing, found by a newcomer's
/// trial, so the code was lost when the pod was killed).
#[test]
fn a_termination_log_pipe_with_no_reader_neither_hangs_nor_changes_the_exit_code() {
    let dir = temp_dir();
    let fifo = dir.path().join("termination-log");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.to_str().unwrap();
    let started = std::time::Instant::now();
    let r = run(&["check", "--termination-log", fifo, "Not/Valid"], &[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    r.assert_code(10); // invalid_reference
    assert_eq!(
        r.stderr.lines().last().unwrap(),
        format!("pullcheck: termination log {fifo}: a named pipe with no reader")
    );
}

/// `check -f` with a list of a hundred thousand references ends near `--timeout` (the
/// margin is for rendering on a loaded CI machine) with one line each: the dedupe was
/// quadratic, 10^10 comparisons here, and alone outlasted the deadline (found by a
/// newcomer's trial). Invalid references need no registry, so only the bookkeeping is timed.
#[test]
fn check_of_a_hundred_thousand_references_ends_near_its_timeout() {
    let dir = temp_dir();
    let list = dir.path().join("refs.txt");
    let mut text = String::new();
    for i in 0..100_000 {
        text.push_str(&format!("reg.invalid/a{i}/UPPER:v1\n"));
    }
    // Duplicates are answered from the first one's result, in input order.
    text.push_str("reg.invalid/a0/UPPER:v1\n");
    std::fs::write(&list, text).unwrap();
    let started = std::time::Instant::now();
    let r = run(
        &["check", "--timeout", "5", "-f", list.to_str().unwrap()],
        &[],
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    r.assert_code(10);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 100_001);
    assert!(
        lines[100_000].starts_with("invalid_reference reg.invalid/a0/UPPER:v1 "),
        "{}",
        lines[100_000]
    );
}

/// A mistyped `--docker-config` is a usage error naming it, not a silent anonymous check
/// (which would call a private image unauthenticated; found by a newcomer's trial).
#[test]
fn a_docker_config_flag_without_a_config_json_is_refused() {
    let dir = temp_dir();
    let empty = dir.path().to_str().unwrap();
    for (path, why) in [
        ("/nonexistent/docker", "no such directory"),
        (empty, "it holds no config.json"),
    ] {
        let r = run(&["check", "--docker-config", path, "r.example/app:v1"], &[]);
        r.assert_code(2);
        assert_eq!(
            r.stderr,
            format!(
                "pullcheck: --docker-config {path}: {why}; pass the directory that holds config.json (as docker's --config), or leave the flag out\n"
            )
        );
    }
}
