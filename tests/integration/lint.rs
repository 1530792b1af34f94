//! `lint`: exact rule lists per workload shape, message limits, and the binary's exit codes.

use pullcheck::k8s::lint::{Finding, lint_object, lint_stream, rule};
use pullcheck::k8s::templates::Table;
use pullcheck::k8s::yaml::parse_documents;
use serde_json::Value;

use crate::support::process::{output, pullcheck};

fn doc(yaml: &str) -> Value {
    parse_documents(yaml).unwrap().remove(0).value
}

fn rules(yaml: &str) -> Vec<(&'static str, String)> {
    lint_object(&doc(yaml), &Table::builtin())
        .into_iter()
        .map(|f| (f.rule, f.path))
        .collect()
}

const BARE_JOB: &str = "\
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns}
spec:
  template:
    spec:
      restartPolicy: OnFailure
      containers:
      - {name: a, image: 'reg.example/a:latest', imagePullPolicy: IfNotPresent}
      - {name: b, image: 'reg.example/b', imagePullPolicy: IfNotPresent}
      - {name: c, image: 'reg.example/c:latest@sha256:0000000000000000000000000000000000000000000000000000000000000000', imagePullPolicy: IfNotPresent}
      - {name: d, image: 'local/d:dev', imagePullPolicy: Never}
      volumes:
      - {name: v, image: {reference: 'reg.example/v:latest', pullPolicy: IfNotPresent}}
";

#[test]
fn a_bare_job_has_every_batch_gap() {
    let t = "/spec/template";
    assert_eq!(
        rules(BARE_JOB),
        vec![
            (rule::PULLCHECK_MISSING, format!("{t}/spec/initContainers")),
            (rule::RESTART_POLICY, format!("{t}/spec/restartPolicy")),
            (
                rule::IMAGE_LATEST_IF_NOT_PRESENT,
                format!("{t}/spec/containers/0/imagePullPolicy")
            ),
            (
                rule::IMAGE_LATEST_IF_NOT_PRESENT,
                format!("{t}/spec/containers/1/imagePullPolicy")
            ),
            (
                rule::IMAGE_PULL_NEVER,
                format!("{t}/spec/containers/3/imagePullPolicy")
            ),
            (
                rule::IMAGE_LATEST_IF_NOT_PRESENT,
                format!("{t}/spec/volumes/0/image/pullPolicy")
            ),
            (rule::BACKOFF_LIMIT, "/spec/backoffLimit".into()),
            (rule::POD_FAILURE_POLICY, "/spec/podFailurePolicy".into()),
            (rule::ACTIVE_DEADLINE, "/spec/activeDeadlineSeconds".into()),
            (rule::TTL, "/spec/ttlSecondsAfterFinished".into()),
        ]
    );
}

#[test]
fn onfailure_is_no_gap_when_the_pullcheck_container_has_its_own_restart_policy() {
    // What `inject --transient restart` writes (Kubernetes 1.35 container restart rules):
    // pullcheck's own restartPolicy Never fails the pod on a permanent code even though the
    // pod's is OnFailure; without it, OnFailure is reported.
    let job = |own: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: OnFailure\n      initContainers:\n      - name: pullcheck\n        image: reg.example/pullcheck@sha256:{}\n{own}      containers: [{{name: a, image: 'reg.example/a:1'}}]\n",
            "0".repeat(64)
        )
    };
    let own = "        restartPolicy: Never\n        restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [20]}}]\n";
    let with_rules: Vec<&str> = rules(&job(own)).into_iter().map(|(r, _)| r).collect();
    assert!(
        !with_rules.contains(&rule::RESTART_POLICY),
        "{with_rules:?}"
    );
    let without: Vec<&str> = rules(&job("")).into_iter().map(|(r, _)| r).collect();
    assert!(without.contains(&rule::RESTART_POLICY), "{without:?}");
}

#[test]
fn finding_carries_the_workload_and_a_short_message() {
    let f = &lint_object(&doc(BARE_JOB), &Table::builtin())[1];
    assert_eq!(
        f,
        &Finding {
            rule: "restart-policy-not-never",
            kind: "Job".into(),
            namespace: "ns".into(),
            name: "j".into(),
            document: None,
            path: "/spec/template/spec/restartPolicy".into(),
            message: "restartPolicy OnFailure: a failed init container restarts instead of failing the pod".into(),
        }
    );
    let long = BARE_JOB.replace(
        "reg.example/b'",
        &format!("reg.example/{}/b'", "x".repeat(200)),
    );
    for f in lint_object(&doc(&long), &Table::builtin()) {
        assert!(
            f.message.chars().count() <= 120,
            "{} chars: {}",
            f.message.chars().count(),
            f.message
        );
    }
}

/// The examples are generated with a pinned checker image (tests/integration/k8s_examples.rs),
/// so lint has nothing to say about them.
#[test]
fn the_injected_examples_have_no_findings() {
    for name in [
        "job-backoff-limit-0",
        "job-pod-failure-policy",
        "cronjob",
        "pytorchjob",
        "jobset",
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("examples/{name}.injected.yaml"));
        let findings =
            lint_stream(&std::fs::read_to_string(path).unwrap(), &Table::builtin()).unwrap();
        assert_eq!(findings, vec![], "{name}");
    }
}

#[test]
fn a_policy_without_pullcheck_codes_and_a_pinned_checker() {
    let y = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  backoffLimit: 0\n  activeDeadlineSeconds: 60\n  ttlSecondsAfterFinished: 60\n  podFailurePolicy:\n    rules:\n    - {action: FailJob, onExitCodes: {containerName: pullcheck, operator: In, values: [10, 11]}}\n  template:\n    spec:\n      restartPolicy: Never\n      initContainers: [{name: pullcheck, image: 'm/pullcheck:1@sha256:abcd'}]\n      containers: [{name: a, image: 'a:1'}]\n";
    assert_eq!(
        rules(y),
        vec![(
            rule::POD_FAILURE_POLICY_CODES,
            "/spec/podFailurePolicy/rules".to_string()
        )]
    );
}

#[test]
fn kubeflow_and_pod_rules() {
    let y = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\nspec:\n  runPolicy: {cleanPodPolicy: None}\n  pytorchReplicaSpecs:\n    Master: {restartPolicy: ExitCode, template: {spec: {containers: [{name: a, image: 'm:1'}]}}}\n    Worker: {template: {spec: {containers: [{name: a, image: 'w:1'}]}}}\n";
    let m = "/spec/pytorchReplicaSpecs/Master";
    let w = "/spec/pytorchReplicaSpecs/Worker";
    assert_eq!(
        rules(y),
        vec![
            (
                rule::PULLCHECK_MISSING,
                format!("{m}/template/spec/initContainers")
            ),
            (rule::RESTART_POLICY_EXIT_CODE, format!("{m}/restartPolicy")),
            (
                rule::PULLCHECK_MISSING,
                format!("{w}/template/spec/initContainers")
            ),
            (rule::RESTART_POLICY, format!("{w}/restartPolicy")),
            (
                rule::RUN_POLICY_BACKOFF_LIMIT,
                "/spec/runPolicy/backoffLimit".into()
            ),
            (
                rule::CLEAN_POD_POLICY,
                "/spec/runPolicy/cleanPodPolicy".into()
            ),
            (
                rule::ACTIVE_DEADLINE,
                "/spec/runPolicy/activeDeadlineSeconds".into()
            ),
            (rule::TTL, "/spec/runPolicy/ttlSecondsAfterFinished".into()),
        ]
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a, image: 'a:1'}]\n";
    let f = lint_object(&doc(pod), &Table::builtin());
    assert_eq!(
        f.iter().map(|f| f.rule).collect::<Vec<_>>(),
        [rule::PULLCHECK_MISSING, rule::RESTART_POLICY]
    );
    assert!(
        f[1].message.starts_with("restartPolicy Always (default): "),
        "{}",
        f[1].message
    );
}

#[test]
fn skipped_windows_and_unknown_workloads_have_no_findings() {
    let skip = BARE_JOB.replace(
        "namespace: ns}",
        "namespace: ns, annotations: {pullcheck.io/skip: 'true'}}",
    );
    assert_eq!(rules(&skip), vec![]);
    assert_eq!(
        rules("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"),
        vec![]
    );
    let win = BARE_JOB.replace(
        "      restartPolicy: OnFailure\n",
        "      restartPolicy: OnFailure\n      os: {name: windows}\n",
    );
    // pullcheck can't run there, so its Job-level gaps are out of scope too.
    assert_eq!(rules(&win), vec![]);
}

fn binary(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = output(pullcheck().args(args), Some(stdin.as_bytes()));
    let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap(), s(out.stdout), s(out.stderr))
}

#[test]
fn binary_exit_codes_and_output_formats() {
    let stream = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n---\n{BARE_JOB}");
    let (code, out, err) = binary(&["lint", "-f", "-"], &stream);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 10);
    assert!(
        out.starts_with(
            "-: document 2: Job ns/j: /spec/template/spec/initContainers: pullcheck-missing: "
        ),
        "{out}"
    );
    let (code, out, _) = binary(
        &["lint", "--strict", "--output", "json", "-f", "-"],
        &stream,
    );
    assert_eq!(code, i32::from(pullcheck::verdict::code::LINT_FINDINGS));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["exit_code"], pullcheck::verdict::code::LINT_FINDINGS);
    assert_eq!(v["findings"].as_array().unwrap().len(), 10);
    assert_eq!(v["findings"][0]["document"], 2);
    assert_eq!(v["findings"][0]["rule"], "pullcheck-missing");
    let (code, out, _) = binary(
        &["lint", "--strict", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn binary_unreadable_or_invalid_input_exits_2_with_one_line() {
    let (code, out, err) = binary(
        &["lint", "--strict", "-f", "-"],
        "a: 1\n---\nb: 2\n---\nc: {d: 1\n",
    );
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("pullcheck: -: document 3, line "), "{err}");
    let (code, _, err) = binary(&["lint", "-f", "/nonexistent/m.yaml"], "");
    assert_eq!(code, 2);
    assert!(
        err.starts_with("pullcheck: /nonexistent/m.yaml: cannot read: "),
        "{err}"
    );
}

/// README calls `restartPolicy: Never` with `backoffLimit: 0` fail-fast: lint agrees.
#[test]
fn binary_backoff_limit_0_with_restart_never_needs_no_pod_failure_policy() {
    let job = |restart: &str, limit: u8| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec:\n  backoffLimit: {limit}\n  template:\n    spec:\n      restartPolicy: {restart}\n      containers: [{{name: c, image: busybox:1.36}}]\n"
        )
    };
    let has_rule = |restart: &str, limit: u8| {
        let (code, out, err) = binary(&["lint", "-f", "-"], &job(restart, limit));
        assert_eq!(code, 0, "{err}");
        out.contains(": pod-failure-policy-missing: ")
    };
    assert!(!has_rule("Never", 0));
    assert!(has_rule("Never", 1));
    // OnFailure restarts the container in place first; restart-policy-not-never says so.
    assert!(has_rule("OnFailure", 0));
}

/// A RayJob (containers in its cluster spec) and a Kubeflow Trainer TrainJob (only an
/// `image` field) are kinds the built-in table lacks: `lint --strict` fails on them instead
/// of printing nothing and exiting 0, unless --ignore-unknown-kinds.
const RAY_AND_TRAIN: &str = "\
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: r, namespace: ml}
spec:
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers: [{name: head, image: 'rayproject/ray:2.9.0'}]
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: t}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {image: 'docker.io/team/trainer:v1'}
";

#[test]
fn binary_unknown_kinds_with_images_fail_strict_lint() {
    let (code, out, err) = binary(&["lint", "--strict", "-f", "-"], RAY_AND_TRAIN);
    assert_eq!(code, 30, "{err}");
    assert_eq!(
        out,
        "-: document 1: RayJob ml/r: /kind: unknown-kind-with-images: unknown kind ray.io/v1 RayJob holds containers: its images are not checked; add it with --kinds\n\
-: document 2: TrainJob t: /kind: unknown-kind-with-images: unknown kind trainer.kubeflow.org/v1alpha1 TrainJob gets its pods from a training runtime: its images are not checked\n"
    );
    let (code, out, err) = binary(
        &["lint", "--strict", "--ignore-unknown-kinds", "-f", "-"],
        RAY_AND_TRAIN,
    );
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
}

#[test]
fn binary_a_list_is_linted_item_by_item_with_item_paths() {
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    restartPolicy: Never\n    containers: [{name: c, image: busybox}]\n";
    let (code, out, err) = binary(&["lint", "--strict", "-f", "-"], list);
    assert_eq!(code, 30, "{err}");
    assert_eq!(
        out,
        "-: document 1: Pod p: /items/1/spec/initContainers: pullcheck-missing: no pullcheck init container: run `pullcheck inject` so a missing image fails the pod\n"
    );
}

#[test]
fn binary_several_files_and_directories_in_name_order() {
    let dir = crate::support::temp_dir();
    let d = dir.path();
    let pod = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: Never\n  containers: [{{name: c, image: busybox}}]\n"
        )
    };
    std::fs::create_dir_all(d.join("m/sub")).unwrap();
    std::fs::write(d.join("m/b.yml"), pod("b")).unwrap();
    std::fs::write(d.join("m/a.yaml"), pod("a")).unwrap();
    std::fs::write(
        d.join("m/c.json"),
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}"#,
    )
    .unwrap();
    std::fs::write(d.join("m/notes.txt"), pod("txt")).unwrap();
    std::fs::write(d.join("m/empty.yaml"), "# nothing yet\n").unwrap();
    std::fs::write(d.join("m/sub/d.yaml"), pod("d")).unwrap();
    std::fs::write(d.join("z.yaml"), pod("z")).unwrap();
    let m = d.join("m");
    let z = d.join("z.yaml");
    let (m, z) = (m.to_str().unwrap(), z.to_str().unwrap());
    let names = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split(": pullcheck-missing").next().unwrap().to_string())
            .collect()
    };
    let (code, out, err) = binary(&["lint", "-f", z, "-f", m], "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        names(&out),
        vec![
            format!("{z}: document 1: Pod z: /spec/initContainers"),
            format!("{m}/a.yaml: document 1: Pod a: /spec/initContainers"),
            format!("{m}/b.yml: document 1: Pod b: /spec/initContainers"),
        ]
    );
    let (code, out, err) = binary(&["lint", "-R", "-f", m, "-o", "json"], "");
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let files: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        vec![
            format!("{m}/a.yaml"),
            format!("{m}/b.yml"),
            format!("{m}/sub/d.yaml"),
        ]
    );
    let empty = d.join("none");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    let (code, out, err) = binary(&["lint", "-f", empty], "");
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "pullcheck: {empty}: no .yaml, .yml or .json files in the directory (-R reads its subdirectories)\n"
        )
    );
    let (code, _, err) = binary(&["lint", "-f", "-", "-f", "-"], "");
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "pullcheck: -f - given more than once: stdin can be read only once\n"
    );
}

#[test]
fn a_kubeflow_replicas_restart_policy_is_judged_in_the_words_inject_uses() {
    // The same replicas as inject.rs kubeflow_replicas_and_run_policy_are_warned_about: lint
    // and inject --fail-fast say the same line for each (k8s::policy::replica_restart).
    let y = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\nspec:\n  pytorchReplicaSpecs:\n    Master:\n      restartPolicy: OnFailure\n      template:\n        spec:\n          containers: [{name: pytorch, image: 'm:1'}]\n    Worker:\n      restartPolicy: ExitCode\n      template:\n        spec:\n          containers: [{name: pytorch, image: 'w:1'}]\n";
    let replica_findings: Vec<(&str, String, String)> = lint_object(&doc(y), &Table::builtin())
        .into_iter()
        .filter(|f| f.path.ends_with("/restartPolicy"))
        .map(|f| (f.rule, f.path, f.message))
        .collect();
    assert_eq!(
        replica_findings,
        vec![
            (
                rule::RESTART_POLICY,
                "/spec/pytorchReplicaSpecs/Master/restartPolicy".to_string(),
                "replica restartPolicy OnFailure: a failed pullcheck restarts instead of failing; set Never".to_string()
            ),
            (
                rule::RESTART_POLICY_EXIT_CODE,
                "/spec/pytorchReplicaSpecs/Worker/restartPolicy".to_string(),
                "restartPolicy ExitCode fails the job on codes 1-127: transient pullcheck code 20 is final too".to_string()
            ),
        ]
    );
}

/// A JobSet with `failurePolicy` whose rules restart Jobs that failed by podFailurePolicy.
fn jobset(policy: &str) -> String {
    format!(
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {{name: js}}\nspec:\n{policy}  replicatedJobs:\n  - name: w\n    replicas: 1\n    template:\n      spec:\n        template:\n          spec:\n            containers: [{{name: c, image: 'r.example/a:1'}}]\n"
    )
}

#[test]
fn a_jobset_that_restarts_on_a_failed_check_is_flagged_with_the_action_and_the_limit() {
    let restarts = |policy: &str| -> Vec<String> {
        lint_object(&doc(&jobset(policy)), &Table::builtin())
            .into_iter()
            .filter(|f| f.rule == rule::JOBSET_RESTARTS)
            .map(|f| format!("{}: {}", f.path, f.message))
            .collect()
    };
    assert_eq!(
        restarts("  failurePolicy: {maxRestarts: 3}\n"),
        vec![
            "/spec/failurePolicy/rules: PodFailurePolicy Job failures get RestartJobSet (no rule), up to 3 restarts: add first a FailJobSet rule for them"
        ]
    );
    assert_eq!(
        restarts(
            "  failurePolicy:\n    maxRestarts: 2\n    rules:\n    - {name: other, action: RestartJobSetAndIgnoreMaxRestarts, onJobFailureReasons: [PodFailurePolicy]}\n"
        ),
        vec![
            "/spec/failurePolicy/rules: PodFailurePolicy Job failures get RestartJobSetAndIgnoreMaxRestarts, without limit: add first a FailJobSet rule for them"
        ]
    );
    // Fails fast: no failurePolicy (the first failed Job fails the JobSet), no restarts
    // allowed, or a FailJobSet rule for the reason before any other that matches it.
    assert_eq!(restarts(""), Vec::<String>::new());
    assert_eq!(
        restarts("  failurePolicy: {maxRestarts: 0}\n"),
        Vec::<String>::new()
    );
    assert_eq!(
        restarts(
            "  failurePolicy:\n    maxRestarts: 3\n    rules:\n    - {name: oom, action: RestartJobSet, onJobFailureReasons: [BackoffLimitExceeded]}\n    - {name: pullcheck, action: FailJobSet, onJobFailureReasons: [PodFailurePolicy]}\n"
        ),
        Vec::<String>::new()
    );
}
