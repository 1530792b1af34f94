//! Kubeflow Trainer v2 TrainJobs at admission, through a real kube-apiserver with the
//! Trainer v2.3.0 CRDs (tests/data/crds): the chart's validating webhook sends a TrainJob
//! CREATE to pullcheck, which reads the ClusterTrainingRuntime it names with the chart's
//! RBAC and checks the images of the templates the trainer would build. No trainer
//! controller or webhook runs here: what is shown is pullcheck's answer alone.

use serde_json::{Value, json};

use super::{apply_crds, checked_namespace, create, created, denied, env, missing, present, repo};

/// Ours, cluster-wide: a trainer step whose `node` container the TrainJob's image replaces
/// (its own image is present, so a denial can only come from the TrainJob's), and a model
/// initializer whose image is checked as written.
const RUNTIME: &str = "pullcheck-e2e-runtime";

fn install_trainer_crds() {
    let dir = format!("{}/tests/data/crds", repo());
    apply_crds(
        &[
            &format!("{dir}/trainer.kubeflow.org_trainjobs.yaml"),
            &format!("{dir}/trainer.kubeflow.org_clustertrainingruntimes.yaml"),
        ],
        &[
            "trainjobs.trainer.kubeflow.org",
            "clustertrainingruntimes.trainer.kubeflow.org",
        ],
    );
}

fn runtime(trainer_image: &str, initializer_image: &str) -> Value {
    let step = |name: &str, step: &str, image: &str| {
        json!({"name": name, "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": name, "image": image, "command": ["true"]}]}}}}})
    };
    json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
    "metadata": {"name": RUNTIME},
    "spec": {"mlPolicy": {"numNodes": 1},
        "template": {"spec": {"replicatedJobs": [
            step("model-initializer", "model-initializer", initializer_image),
            step("node", "trainer", trainer_image),
        ]}}}})
}

fn train_job(name: &str, runtime: &str, image: &str) -> Value {
    json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"image": image}}})
}

#[test]
#[ignore = "needs etcd + kube-apiserver: run scripts/apiserver-e2e.sh"]
fn trainjob_is_checked_at_create_on_the_templates_its_runtime_gives() {
    let env = env().expect("setup");
    install_trainer_crds();
    super::kubectl_ok(
        &["apply", "-f", "-"],
        Some(&runtime(&present(), &present()).to_string()),
    );
    let ns = checked_namespace("e2e-trainjob");

    // The trainer image is missing: denied at create with the very line a Job with that
    // image gets, under the runtime's `node` container's name.
    let image = missing();
    let reason = |err: &str| {
        err.lines()
            .find(|l| l.contains("denied the request"))
            .unwrap_or_else(|| panic!("no denial line in {err}"))
            .to_string()
    };
    let job_reason = reason(&denied(&ns, &super::job("missing-job", &image)));
    assert!(
        job_reason.contains(&format!(
            "admission webhook \"validate.pullcheck.io\" denied the request: main: {image}: not_found (manifest unknown"
        )),
        "{job_reason}"
    );
    let err = denied(&ns, &train_job("missing", RUNTIME, &image));
    assert_eq!(
        reason(&err).replace("trainjobs.trainer.kubeflow.org \"missing\"", "OBJ"),
        job_reason
            .replace("jobs.batch \"missing-job\"", "OBJ")
            .replace(": main: ", ": node: "),
        "{err}"
    );

    // Present: admitted, stored as sent (never mutated), no warning.
    let out = created(&ns, &train_job("present", RUNTIME, &present()), env);
    assert_eq!(out.trim(), "", "warnings on a present image");
    let stored = super::get_json(&["-n", &ns, "trainjob.trainer.kubeflow.org", "present"]);
    assert_eq!(stored["spec"]["trainer"], json!({"image": present()}));
    assert_eq!(
        stored["metadata"]["annotations"],
        Value::Null,
        "a TrainJob is never mutated"
    );

    // A runtime that doesn't exist: not a green result. With the chart's default
    // (failClosed: false) it is admitted with the warning naming the runtime.
    let o = create(&ns, &train_job("no-runtime", "no-such-runtime", &present()));
    assert!(o.ok, "{}\n{}", o.stderr, env.log());
    assert_eq!(
        o.stderr.trim(),
        "Warning: not verified, admitted: runtimeRef: ClusterTrainingRuntime no-such-runtime (not found; the trainer builds nothing for this TrainJob until it exists)"
    );

    // The runtime's own initializer image is checked as written.
    super::kubectl_ok(
        &["apply", "-f", "-"],
        Some(&runtime(&present(), &image).to_string()),
    );
    let err = denied(&ns, &train_job("bad-initializer", RUNTIME, &present()));
    assert!(
        err.contains(&format!(
            "denied the request: model-initializer: {image}: not_found (manifest unknown"
        )),
        "{err}"
    );
    assert!(!err.contains("node: "), "{err}");
}
