//! `inject`: the init container, the projected pull-secret volume, the podFailurePolicy
//! merge, the warnings, idempotence, and the binary's I/O contract.

use pullcheck::k8s::inject::{
    InjectOptions, TransientAction, Warning, inject_object, inject_stream,
};
use pullcheck::k8s::templates::{Slot, Table, images, pod_templates};
use pullcheck::k8s::yaml::{parse_documents, to_yaml};
use serde_json::{Value, json};

use crate::support::process::{output, pullcheck};

fn doc(yaml: &str) -> Value {
    parse_documents(yaml).unwrap().remove(0).value
}

fn fail_fast() -> InjectOptions {
    InjectOptions {
        image: "mirror.example/pullcheck:1".into(),
        fail_fast: true,
        ..Default::default()
    }
}

fn run(obj: &mut Value, opts: &InjectOptions) -> Vec<(String, String)> {
    inject_object(obj, opts, &Table::builtin())
        .into_iter()
        .map(|Warning { path, message }| (path, message))
        .collect()
}

const JOB: &str = "\
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns, annotations: {zeta: '1', alpha: 'yes'}}
spec:
  template:
    spec:
      restartPolicy: Never
      imagePullSecrets: [{name: a}, {name: b}, {name: a}]
      initContainers:
      - {name: setup, image: 'reg.example/setup:1'}
      containers:
      - {name: app, image: 'reg.example/app:1', command: [run]}
      - {name: local, image: 'local/only:dev', imagePullPolicy: Never}
      - {name: dup, image: 'reg.example/app:1'}
      volumes:
      - {name: data, emptyDir: {}}
      - {name: model, image: {reference: 'reg.example/model:7', pullPolicy: IfNotPresent}}
";

/// The rule for `pullcheck watch`'s pod condition, which inject puts first.
static WATCH_RULE: std::sync::LazyLock<Value> = std::sync::LazyLock::new(
    || json!({"action": "FailJob", "onPodConditions": [{"type": "pullcheck.io/ImagePullFailed", "status": "True"}]}),
);

#[test]
fn container_is_first_with_every_pullable_image_once_and_the_exact_fields() {
    let mut v = doc(JOB);
    assert_eq!(run(&mut v, &fail_fast()), vec![]);
    let spec = &v["spec"]["template"]["spec"];
    let c = &spec["initContainers"][0];
    assert_eq!(spec["initContainers"][1]["name"], "setup");
    let want = json!({
        "name": "pullcheck",
        "image": "mirror.example/pullcheck:1",
        "imagePullPolicy": "IfNotPresent",
        "args": ["check", "--pull-secrets", "/var/run/pullcheck/secrets", "--no-docker-config",
                 "reg.example/setup:1", "reg.example/app:1", "reg.example/model:7"],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "pullcheck-pull-secrets", "mountPath": "/var/run/pullcheck/secrets", "readOnly": true}],
    });
    assert_eq!(c, &want);
    let secret = |n: &str| {
        json!({"secret": {"name": n, "optional": true, "items": [
            {"key": ".dockerconfigjson", "path": format!("{n}/.dockerconfigjson")},
            {"key": ".dockercfg", "path": format!("{n}/.dockercfg")}]}})
    };
    assert_eq!(
        spec["volumes"][2],
        json!({"name": "pullcheck-pull-secrets", "projected": {"sources": [secret("a"), secret("b")]}})
    );
    assert_eq!(spec["volumes"].as_array().unwrap().len(), 3);
}

#[test]
fn without_pull_secrets_there_is_no_flag_volume_or_mount_and_options_apply() {
    let mut v = doc(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  restartPolicy: Never\n  containers: [{name: c, image: x:1}]\n",
    );
    let opts = InjectOptions {
        cpu: "250m".into(),
        memory: "96Mi".into(),
        check_args: vec!["--platform=any".into()],
        ..fail_fast()
    };
    run(&mut v, &opts);
    let c = &v["spec"]["initContainers"][0];
    assert_eq!(
        c["args"],
        json!(["check", "--no-docker-config", "--platform=any", "x:1"])
    );
    assert_eq!(
        c["resources"]["limits"],
        json!({"cpu": "250m", "memory": "96Mi"})
    );
    assert_eq!(
        c["resources"]["requests"],
        json!({"cpu": "250m", "memory": "96Mi"})
    );
    assert!(c.get("volumeMounts").is_none());
    assert!(v["spec"].get("volumes").is_none());
    assert!(
        v["spec"].get("podFailurePolicy").is_none(),
        "a Pod has no Job policy"
    );
}

#[test]
fn pod_failure_policy_rules_are_exact_and_merged_in_front_without_duplicates() {
    let mut v = doc(JOB);
    v["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]});
    run(&mut v, &fail_fast());
    let rule = |action: &str, codes: Value| json!({"action": action, "onExitCodes": {"containerName": "pullcheck", "operator": "In", "values": codes}});
    // The watch's condition rule first: a deleted pod's containers end with 137, which a
    // user's exit-code rule could otherwise match first.
    let want = json!([WATCH_RULE.clone(), rule("FailJob", json!([10, 11, 12, 13, 14, 15])), rule("Count", json!([20])),
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]);
    assert_eq!(v["spec"]["podFailurePolicy"]["rules"], want);
    run(&mut v, &fail_fast());
    assert_eq!(
        v["spec"]["podFailurePolicy"]["rules"], want,
        "re-run must not duplicate"
    );

    let mut ignore = doc(JOB);
    let w = run(
        &mut ignore,
        &InjectOptions {
            transient: TransientAction::Ignore,
            ..fail_fast()
        },
    );
    assert_eq!(
        ignore["spec"]["podFailurePolicy"]["rules"][2]["action"],
        "Ignore"
    );
    assert_eq!(w, vec![("/spec".to_string(), "transient code 20 ignored and no activeDeadlineSeconds: a registry outage retries forever".to_string())]);
    let mut bounded = doc(JOB);
    bounded["spec"]["activeDeadlineSeconds"] = json!(600);
    assert_eq!(
        run(
            &mut bounded,
            &InjectOptions {
                transient: TransientAction::Ignore,
                ..fail_fast()
            }
        ),
        vec![]
    );
}

#[test]
fn more_than_twenty_rules_leaves_the_policy_alone_with_a_warning() {
    let mut v = doc(JOB);
    let theirs: Vec<Value> = (0..19)
        .map(
            |i| json!({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [100 + i]}}),
        )
        .collect();
    v["spec"]["podFailurePolicy"] = json!({"rules": theirs});
    let w = run(&mut v, &fail_fast());
    assert_eq!(
        v["spec"]["podFailurePolicy"]["rules"]
            .as_array()
            .unwrap()
            .len(),
        19
    );
    assert_eq!(
        w,
        vec![(
            "/spec/podFailurePolicy".into(),
            "podFailurePolicy would have 22 rules (max 20): left unchanged".into()
        )]
    );
}

#[test]
fn on_failure_is_warned_about_never_changed() {
    let mut v = doc(&JOB.replace("restartPolicy: Never", "restartPolicy: OnFailure"));
    let w = run(&mut v, &fail_fast());
    assert_eq!(v["spec"]["template"]["spec"]["restartPolicy"], "OnFailure");
    assert!(v["spec"].get("podFailurePolicy").is_none());
    assert_eq!(w, vec![(
        "/spec/template/spec/restartPolicy".to_string(),
        "restartPolicy OnFailure: no podFailurePolicy set (needs Never); init restarts count toward backoffLimit".to_string()
    )]);
    // Without --fail-fast there is no Job policy and nothing to warn about.
    let mut plain = doc(&JOB.replace("restartPolicy: Never", "restartPolicy: OnFailure"));
    assert_eq!(run(&mut plain, &InjectOptions::default()), vec![]);
}

#[test]
fn cronjob_and_jobset_get_the_policy_on_each_job_spec() {
    let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers: [{name: c, image: 'x:1'}]\n";
    let mut v = doc(cron);
    run(&mut v, &fail_fast());
    assert_eq!(
        v.pointer("/spec/jobTemplate/spec/podFailurePolicy/rules/0/action")
            .unwrap(),
        "FailJob"
    );
    assert_eq!(
        v.pointer("/spec/jobTemplate/spec/template/spec/initContainers/0/name")
            .unwrap(),
        "pullcheck"
    );

    let js = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: s}\nspec:\n  replicatedJobs:\n  - name: a\n    template:\n      spec:\n        template:\n          spec:\n            restartPolicy: Never\n            containers: [{name: c, image: 'a:1'}]\n  - name: b\n    template:\n      spec:\n        template:\n          spec:\n            restartPolicy: OnFailure\n            containers: [{name: c, image: 'b:1'}]\n";
    let mut v = doc(js);
    let w = run(&mut v, &fail_fast());
    assert_eq!(
        v.pointer("/spec/replicatedJobs/0/template/spec/podFailurePolicy/rules/2/action")
            .unwrap(),
        "Count"
    );
    assert!(
        v.pointer("/spec/replicatedJobs/1/template/spec/podFailurePolicy")
            .is_none()
    );
    assert_eq!(
        v.pointer("/spec/replicatedJobs/1/template/spec/template/spec/initContainers/0/args/2")
            .unwrap(),
        "b:1"
    );
    assert_eq!(
        w.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        vec!["/spec/replicatedJobs/1/template/spec/template/spec/restartPolicy"]
    );
}

/// Kubeflow v1 CRDs have no restartPolicyRules (training-operator v1.9: strict validation
/// rejects the field; measured in docs/fail-fast-results.md 10d): restart is written as
/// count there, with one warning, and no "restarts in place" warning.
#[test]
fn kubeflow_replicas_get_no_container_restart_rules() {
    let y = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\nspec:\n  runPolicy: {backoffLimit: 0}\n  pytorchReplicaSpecs:\n    Master:\n      restartPolicy: Never\n      template:\n        spec:\n          containers: [{name: pytorch, image: 'm:1'}]\n";
    let mut v = doc(y);
    let w = run(&mut v, &restart());
    let init = v
        .pointer("/spec/pytorchReplicaSpecs/Master/template/spec/initContainers/0")
        .unwrap();
    assert_eq!(init["name"], "pullcheck");
    assert!(init.get("restartPolicy").is_none(), "{init}");
    assert!(init.get("restartPolicyRules").is_none(), "{init}");
    assert_eq!(
        w,
        vec![(
            "/spec/pytorchReplicaSpecs/Master/template".to_string(),
            "Kubeflow replicas: the operator's CRD has no restartPolicyRules; transient restart written as count".to_string()
        )]
    );
    // A batch Job in the same run still gets them.
    let mut job = doc(JOB);
    run(&mut job, &restart());
    assert_eq!(restart_fields(&job).0, json!("Never"));
}

#[test]
fn kubeflow_replicas_and_run_policy_are_warned_about() {
    let y = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: p}\nspec:\n  pytorchReplicaSpecs:\n    Master:\n      restartPolicy: OnFailure\n      template:\n        spec:\n          containers: [{name: pytorch, image: 'm:1'}]\n    Worker:\n      restartPolicy: ExitCode\n      template:\n        spec:\n          containers: [{name: pytorch, image: 'w:1'}]\n";
    let mut v = doc(y);
    let w = run(&mut v, &fail_fast());
    assert_eq!(w, vec![
        ("/spec/pytorchReplicaSpecs/Master/restartPolicy".to_string(), "replica restartPolicy OnFailure: a failed pullcheck restarts instead of failing; set Never".to_string()),
        ("/spec/pytorchReplicaSpecs/Worker/restartPolicy".to_string(), "restartPolicy ExitCode fails the job on codes 1-127: transient pullcheck code 20 is final too".to_string()),
        ("/spec/runPolicy".to_string(), "runPolicy.backoffLimit unset: failed workers may restart forever; set it (e.g. 0)".to_string()),
    ]);
    assert_eq!(
        v.pointer("/spec/pytorchReplicaSpecs/Worker/template/spec/initContainers/0/args/2")
            .unwrap(),
        "w:1"
    );
    assert_eq!(
        v.pointer("/spec/pytorchReplicaSpecs/Worker/restartPolicy")
            .unwrap(),
        "ExitCode"
    );
    assert!(
        v.pointer("/spec/runPolicy").is_none(),
        "inject never adds a runPolicy"
    );
}

#[test]
fn unknown_kinds_windows_and_skip_annotation_are_left_alone() {
    // A ConfigMap holds no containers: left alone without a word.
    let cm = doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n");
    let mut v = cm.clone();
    assert_eq!(run(&mut v, &fail_fast()), vec![]);
    assert_eq!(v, cm);
    // A workload of a kind the table lacks: left alone, with a warning that its images go
    // unchecked.
    let deploy = doc(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers: [{name: a, image: 'r.example/a:1'}]\n",
    );
    let mut v = deploy.clone();
    assert_eq!(
        run(&mut v, &fail_fast()),
        vec![(
            String::new(),
            "unknown kind apps/v1 Deployment holds containers pullcheck doesn't know where to find: left unchanged (add it with --kinds)".to_string()
        )]
    );
    assert_eq!(v, deploy);

    let win = doc(&JOB.replace(
        "      restartPolicy: Never\n",
        "      restartPolicy: Never\n      os: {name: windows}\n",
    ));
    let mut v = win.clone();
    let w = run(&mut v, &fail_fast());
    assert_eq!(to_yaml(&v).unwrap(), to_yaml(&win).unwrap());
    assert_eq!(
        w,
        vec![(
            "/spec/template".to_string(),
            "Windows pod template: left unchanged (the pullcheck image is Linux-only)".to_string()
        )]
    );

    let skip = doc(&JOB.replace("alpha: 'yes'", "alpha: 'yes', pullcheck.io/skip: 'true'"));
    let mut v = skip.clone();
    assert_eq!(run(&mut v, &fail_fast()), vec![]);
    assert_eq!(to_yaml(&v).unwrap(), to_yaml(&skip).unwrap());
}

#[test]
fn every_other_field_and_key_order_survive_and_a_second_run_is_byte_equal() {
    let stream = format!(
        "{JOB}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata: {{on: 'on', n: '0755'}}\n"
    );
    let (once, _) = inject_stream(&stream, &fail_fast(), &Table::builtin()).unwrap();
    let (twice, _) = inject_stream(&once, &fail_fast(), &Table::builtin()).unwrap();
    assert_eq!(once, twice);
    // Remove what inject added: the result is the input, key order included.
    let mut v = parse_documents(&once).unwrap().remove(0).value;
    let spec = v.pointer_mut("/spec/template/spec").unwrap();
    spec["initContainers"].as_array_mut().unwrap().remove(0);
    spec["volumes"].as_array_mut().unwrap().pop();
    v["spec"]
        .as_object_mut()
        .unwrap()
        .shift_remove("podFailurePolicy");
    assert_eq!(to_yaml(&v).unwrap(), to_yaml(&doc(JOB)).unwrap());
    assert!(
        once.contains("alpha: \"yes\""),
        "a YAML 1.1 boolean look-alike stays a string:\n{once}"
    );
    assert!(
        once.ends_with("data:\n  \"on\": \"on\"\n  \"n\": \"0755\"\n"),
        "{once}"
    );
}

#[test]
fn an_existing_pullcheck_container_is_replaced_in_place_and_moved_first() {
    let y = JOB.replace(
        "      initContainers:\n",
        "      initContainers:\n      - {name: mesh-init, image: 'mesh:1'}\n      - {name: pullcheck, image: 'old:0', args: [check, stale:1]}\n",
    );
    let mut v = doc(&y);
    run(&mut v, &fail_fast());
    let names: Vec<&str> = v["spec"]["template"]["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pullcheck", "mesh-init", "setup"]);
    let args = &v["spec"]["template"]["spec"]["initContainers"][0]["args"];
    assert_eq!(
        args.as_array()
            .unwrap()
            .iter()
            .filter(|a| *a == "stale:1" || *a == "old:0")
            .count(),
        0
    );
    assert_eq!(args[4], "mesh:1");
}

#[test]
fn templates_and_images_are_found_per_kind() {
    let t = Table::builtin();
    let py = doc(
        "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata: {name: t}\nspec:\n  tfReplicaSpecs:\n    PS: {template: {spec: {containers: [{name: a, image: 'ps:1'}]}}}\n    Worker: {template: {spec: {containers: [{name: a, image: 'w:1', imagePullPolicy: Never}]}}}\n",
    );
    let refs = pod_templates(&py, &t);
    assert_eq!(
        refs.iter().map(|r| r.pointer.as_str()).collect::<Vec<_>>(),
        [
            "/spec/tfReplicaSpecs/PS/template",
            "/spec/tfReplicaSpecs/Worker/template"
        ]
    );
    assert_eq!(refs[0].run_policy.as_deref(), Some("/spec/runPolicy"));
    let imgs = images(&doc(JOB), &t);
    let got: Vec<(&str, &str, Option<&str>, Slot)> = imgs
        .iter()
        .map(|i| {
            (
                i.container.as_str(),
                i.image.as_str(),
                i.pull_policy.as_deref(),
                i.slot,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("setup", "reg.example/setup:1", None, Slot::InitContainer),
            ("app", "reg.example/app:1", None, Slot::Container),
            ("local", "local/only:dev", Some("Never"), Slot::Container),
            ("dup", "reg.example/app:1", None, Slot::Container),
            (
                "model",
                "reg.example/model:7",
                Some("IfNotPresent"),
                Slot::ImageVolume
            ),
        ]
    );
    assert_eq!(
        imgs[4].pointer,
        "/spec/template/spec/volumes/1/image/reference"
    );
}

#[test]
fn a_kinds_file_adds_a_kind() {
    let cfg = "- apiVersion: ray.io\n  kind: RayJob\n  podTemplatePaths: [spec.rayClusterSpec.headGroupSpec.template, 'spec.rayClusterSpec.workerGroupSpecs[*].template']\n";
    let t = Table::with_config("kinds.yaml", cfg).unwrap();
    let mut v = doc(
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: r}\nspec:\n  rayClusterSpec:\n    headGroupSpec: {template: {spec: {containers: [{name: h, image: 'h:1'}]}}}\n    workerGroupSpecs:\n    - template: {spec: {containers: [{name: w, image: 'w:1'}]}}\n",
    );
    assert!(inject_object(&mut v, &fail_fast(), &t).is_empty());
    assert_eq!(
        v.pointer("/spec/rayClusterSpec/workerGroupSpecs/0/template/spec/initContainers/0/args/2")
            .unwrap(),
        "w:1"
    );
    let err = Table::with_config("kinds.yaml", "- kind: X\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("kinds.yaml: document 1: missing field `apiVersion`"),
        "{err}"
    );
}

fn binary(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = output(pullcheck().args(args), Some(stdin.as_bytes()));
    let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap(), s(out.stdout), s(out.stderr))
}

#[test]
fn binary_reads_stdin_writes_stdout_and_warns_on_stderr() {
    let input = format!("{JOB}---\napiVersion: v1\nkind: Service\nmetadata: {{name: s}}\n");
    let (code, out, err) = binary(
        &[
            "inject",
            "--fail-fast",
            "--image",
            "mirror.example/pullcheck:1",
            "-f",
            "-",
        ],
        &input,
    );
    assert_eq!(code, 0, "{err}");
    let (lib, _) = inject_stream(&input, &fail_fast(), &Table::builtin()).unwrap();
    assert_eq!(out, lib);
    // The unpinned --image is warned about first; the Service holds no containers.
    assert_eq!(
        err,
        "pullcheck: warning: --image mirror.example/pullcheck:1 is not pinned by digest (lint flags it); \
get the digest with `crane digest mirror.example/pullcheck:1` or \
`skopeo inspect --format '{{.Digest}}' docker://mirror.example/pullcheck:1` \
(scripts/publish-image.sh prints it when it pushes the image) and pass --image IMAGE@sha256:…\n"
    );
}

#[test]
fn binary_warns_once_about_an_unpinned_image_and_not_about_a_pinned_one() {
    let pinned = format!("mirror.example/pullcheck:1@sha256:{}", "ab".repeat(32));
    let (code, _, err) = binary(&["inject", "--image", &pinned, "-f", "-"], JOB);
    assert_eq!((code, err.as_str()), (0, ""));
    // The project's image name is a placeholder nobody publishes: named on purpose it is
    // written, with a warning saying how to make a real one.
    let placeholder = format!("ghcr.io/pullcheck/pullcheck:{}", env!("CARGO_PKG_VERSION"));
    let (code, out, err) = binary(&["inject", "--image", &placeholder, "-f", "-"], JOB);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("image: {placeholder}\n")), "{out}");
    assert_eq!(
        err,
        format!(
            "pullcheck: warning: --image {placeholder} is the default, a placeholder nobody publishes: build and push your \
own with scripts/publish-image.sh REGISTRY/REPO:TAG and pass the --image IMAGE@sha256:… it prints\n"
        )
    );
}

/// Without --image nothing is written: piped into kubectl apply, the placeholder would leave
/// every pod in Init:ImagePullBackOff.
#[test]
fn binary_without_image_is_a_usage_error_naming_the_fix() {
    let (code, out, err) = binary(&["inject", "--fail-fast", "-f", "-"], JOB);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "pullcheck: inject needs --image: the pullcheck image your nodes pull; publish it with \
scripts/publish-image.sh REGISTRY/REPO:TAG and pass the --image IMAGE@sha256:… it prints \
(ghcr.io/pullcheck/pullcheck:{} is a placeholder nobody publishes)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn binary_bad_input_is_a_one_line_usage_error() {
    let (code, out, err) = binary(
        &[
            "inject",
            "--image",
            crate::support::CHECKER_IMAGE,
            "-f",
            "-",
        ],
        "kind: A\n---\nkey: [1, 2\nother: 3\n",
    );
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("pullcheck: -: document 2, line "), "{err}");
    let (code, _, err) = binary(
        &[
            "inject",
            "--image",
            crate::support::CHECKER_IMAGE,
            "-f",
            "/nonexistent/x.yaml",
        ],
        "",
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("pullcheck: /nonexistent/x.yaml: cannot read: "),
        "{err}"
    );
}

fn restart() -> InjectOptions {
    InjectOptions {
        transient: TransientAction::Restart,
        ..fail_fast()
    }
}

/// The init container's restart fields under `--transient restart`.
fn restart_fields(v: &Value) -> (Value, Value) {
    let c = &v["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(c["name"], "pullcheck");
    (c["restartPolicy"].clone(), c["restartPolicyRules"].clone())
}

#[test]
fn transient_restart_puts_a_restart_rule_on_the_init_container_and_keeps_count() {
    let mut v = doc(JOB);
    let w = run(&mut v, &restart());
    assert_eq!(
        restart_fields(&v),
        (
            json!("Never"),
            json!([{"action": "Restart", "exitCodes": {"operator": "In", "values": [20]}}])
        )
    );
    let rule = |action: &str, codes: Value| json!({"action": action, "onExitCodes": {"containerName": "pullcheck", "operator": "In", "values": codes}});
    assert_eq!(
        v["spec"]["podFailurePolicy"]["rules"],
        json!([
            WATCH_RULE.clone(),
            rule("FailJob", json!([10, 11, 12, 13, 14, 15])),
            rule("Count", json!([20]))
        ])
    );
    assert_eq!(
        w,
        vec![(
            "/spec".to_string(),
            "code 20 restarts in place and no activeDeadlineSeconds: a registry outage retries forever".to_string()
        )]
    );
    // Idempotent, like every other field.
    let once = to_yaml(&v).unwrap();
    run(&mut v, &restart());
    assert_eq!(to_yaml(&v).unwrap(), once);

    // A deadline on the Job or on the pod bounds the retries.
    for pointer in ["/spec", "/spec/template/spec"] {
        let mut bounded = doc(JOB);
        bounded.pointer_mut(pointer).unwrap()["activeDeadlineSeconds"] = json!(900);
        assert_eq!(run(&mut bounded, &restart()), vec![], "{pointer}");
    }
    // Under OnFailure the in-place restarts count toward backoffLimit: bounded, no warning
    // beyond the podFailurePolicy one; the rule is there all the same, so a permanent code
    // fails the pod at once instead of crash-looping.
    let mut on_failure = doc(&JOB.replace("restartPolicy: Never", "restartPolicy: OnFailure"));
    let w = run(&mut on_failure, &restart());
    assert_eq!(restart_fields(&on_failure).0, "Never");
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, "/spec/template/spec/restartPolicy");
    // Without --fail-fast: the container's rule, no Job policy.
    let mut plain = doc(JOB);
    run(
        &mut plain,
        &InjectOptions {
            fail_fast: false,
            ..restart()
        },
    );
    assert_eq!(restart_fields(&plain).0, "Never");
    assert!(plain["spec"].get("podFailurePolicy").is_none());
    // count and ignore leave the container's restart policy to the pod's.
    for transient in [TransientAction::Count, TransientAction::Ignore] {
        let mut v = doc(JOB);
        run(
            &mut v,
            &InjectOptions {
                transient,
                ..fail_fast()
            },
        );
        assert_eq!(restart_fields(&v), (Value::Null, Value::Null));
    }
}

#[test]
fn binary_transient_restart_follows_the_kubernetes_version() {
    fn args(version: Option<&str>) -> Vec<&str> {
        // A pinned checker image, so the only warnings are about the version.
        let mut a = vec![
            "inject",
            "--image",
            "registry.example.com/mirror/pullcheck:0.1.0@sha256:d567c976667703decd261c22c94eed5e4ddbbcb07cf71cb9b06261c277e5849d",
            "--fail-fast",
            "--transient",
            "restart",
        ];
        if let Some(v) = version {
            a.extend(["--kubernetes-version", v]);
        }
        a.extend(["-f", "-"]);
        a
    }
    let bounded = JOB.replace(
        "spec:\n  template:",
        "spec:\n  activeDeadlineSeconds: 900\n  template:",
    );
    for version in [None, Some("1.35"), Some("v1.36.0")] {
        let (code, out, err) = binary(&args(version), &bounded);
        assert_eq!((code, err.as_str()), (0, ""), "{version:?}");
        assert_eq!(restart_fields(&doc(&out)).0, "Never", "{version:?}");
    }
    for version in ["1.34", "1.33"] {
        let (code, out, err) = binary(&args(Some(version)), &bounded);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            err,
            format!(
                "pullcheck: warning: Kubernetes {version} has no container restart rules (beta and on by default from 1.35): --transient restart falls back to count\n"
            )
        );
        let count = InjectOptions {
            fail_fast: true,
            image: args(None)[2].to_string(),
            ..Default::default()
        };
        let (lib, _) = inject_stream(&bounded, &count, &Table::builtin()).unwrap();
        assert_eq!(out, lib, "today's policy: count");
    }
    let (code, _, err) = binary(&args(Some("latest")), JOB);
    assert_eq!(code, 2);
    assert!(err.contains("write MAJOR.MINOR, e.g. 1.35"), "{err}");
}
