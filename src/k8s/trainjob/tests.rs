use super::*;
use serde_json::json;

use crate::k8s::templates::{Slot, pull_secret_names, template_images};

fn load(text: &str) -> Value {
    crate::k8s::yaml::parse_documents(text)
        .expect("fixture parses")
        .remove(0)
        .value
}

fn runtime() -> Value {
    load(include_str!(
        "../../../tests/data/trainjob/runtime-initializers.yaml"
    ))
}

fn patched() -> Value {
    load(include_str!(
        "../../../tests/data/trainjob/trainjob-patched.yaml"
    ))
}

/// `(slot, container or volume, image, pull policy)` of one built template.
fn images(t: &BuiltTemplate) -> Vec<(Slot, String, String, Option<String>)> {
    template_images(&t.template, &t.pointer)
        .into_iter()
        .map(|u| (u.slot, u.container, u.image, u.pull_policy))
        .collect()
}

fn row(
    slot: Slot,
    name: &str,
    image: &str,
    policy: Option<&str>,
) -> (Slot, String, String, Option<String>) {
    (slot, name.into(), image.into(), policy.map(str::to_string))
}

#[test]
fn runtime_ref_defaults_and_kinds() {
    let tj = |r: Value| json!({"spec": {"runtimeRef": r}});
    assert_eq!(
        runtime_ref(&tj(json!({"name": "torch"}))),
        Ok(RuntimeRef {
            kind: RuntimeKind::Cluster,
            name: "torch".into()
        })
    );
    assert_eq!(
        runtime_ref(&tj(
            json!({"name": "mine", "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"})
        )),
        Ok(RuntimeRef {
            kind: RuntimeKind::Namespaced,
            name: "mine".into()
        })
    );
    assert_eq!(
        runtime_ref(&tj(
            json!({"name": "x", "apiGroup": "example.com", "kind": "TrainingRuntime"})
        )),
        Err(TrainJobError::UnsupportedRuntime {
            api_group: "example.com".into(),
            kind: "TrainingRuntime".into()
        })
    );
    assert_eq!(
        runtime_ref(&tj(json!({"name": ""}))),
        Err(TrainJobError::NoRuntimeName)
    );
    assert_eq!(
        runtime_ref(&json!({"spec": {}})),
        Err(TrainJobError::NoRuntimeName)
    );
    assert_eq!(
        RuntimeRef {
            kind: RuntimeKind::Namespaced,
            name: "mine".into()
        }
        .to_string(),
        "TrainingRuntime mine"
    );
}

#[test]
fn no_trainer_image_keeps_every_runtime_image() {
    let tj = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "spec": {"runtimeRef": {"name": "fixture-initializers"}}});
    let built = build(&tj, &runtime()).unwrap();
    let names: Vec<(&str, &Step)> = built
        .iter()
        .map(|b| (b.replicated_job.as_str(), &b.step))
        .collect();
    assert_eq!(
        names,
        vec![
            ("dataset-initializer", &Step::DatasetInitializer),
            ("model-initializer", &Step::ModelInitializer),
            ("node", &Step::Trainer),
        ]
    );
    assert_eq!(
        built[2].pointer,
        "/spec/template/spec/replicatedJobs/2/template/spec/template"
    );
    assert_eq!(
        images(&built[0]),
        vec![row(
            Slot::Container,
            "dataset-initializer",
            "registry.example/trainer/dataset-initializer:v2.3.0",
            None
        )]
    );
    assert_eq!(
        images(&built[2]),
        vec![
            row(
                Slot::InitContainer,
                "node",
                "registry.example/tools/prepare:v1",
                None
            ),
            row(
                Slot::Container,
                "node",
                "registry.example/trainer/default-trainer:v1",
                None
            ),
            row(
                Slot::Container,
                "sidecar",
                "registry.example/tools/sidecar:v1",
                None
            ),
            row(
                Slot::ImageVolume,
                "weights",
                "registry.example/models/base:v1",
                Some("IfNotPresent")
            ),
        ]
    );
    // Unpatched templates are the runtime's, byte for byte.
    assert_eq!(
        &built[1].template,
        runtime()
            .pointer("/spec/template/spec/replicatedJobs/1/template/spec/template")
            .unwrap()
    );
}

#[test]
fn trainer_image_and_patches_are_applied_where_the_trainer_applies_them() {
    let built = build(&patched(), &runtime()).unwrap();
    assert_eq!(built.len(), 3);
    // Initializers: images as written (spec.initializer has no image field); the
    // model-initializer's pull secrets merged by name.
    assert_eq!(
        images(&built[0]),
        vec![row(
            Slot::Container,
            "dataset-initializer",
            "registry.example/trainer/dataset-initializer:v2.3.0",
            None
        )]
    );
    assert_eq!(
        images(&built[1]),
        vec![row(
            Slot::Container,
            "model-initializer",
            "registry.example/trainer/model-initializer:v2.3.0",
            None
        )]
    );
    assert_eq!(
        pull_secret_names(&built[1].template),
        vec!["runtime-secret".to_string(), "hf-mirror-pull".to_string()]
    );
    // Trainer step: spec.trainer.image on the `node` container only (not the init
    // container of the same name, not the sidecar); the image volume of the same name
    // merged (new reference, the runtime's pullPolicy kept), a new one appended.
    assert_eq!(
        images(&built[2]),
        vec![
            row(
                Slot::InitContainer,
                "node",
                "registry.example/tools/prepare:v1",
                None
            ),
            row(
                Slot::Container,
                "node",
                "registry.example/team-a/trainer:v7",
                None
            ),
            row(
                Slot::Container,
                "sidecar",
                "registry.example/tools/sidecar:v1",
                None
            ),
            row(
                Slot::ImageVolume,
                "weights",
                "registry.example/models/tuned:v3",
                Some("IfNotPresent")
            ),
            row(
                Slot::ImageVolume,
                "tokenizer",
                "registry.example/models/tokenizer:v1",
                Some("Always")
            ),
        ]
    );
    let spec = &built[2].template["spec"];
    assert_eq!(spec["serviceAccountName"], json!("trainer-sa"));
    assert_eq!(
        pull_secret_names(&built[2].template),
        vec!["team-a-pull".to_string()]
    );
    // nodeSelector merged key by key across both patches, on top of the runtime's.
    assert_eq!(
        spec["nodeSelector"],
        json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64", "cloud.example/flavor": "big"})
    );
    assert_eq!(
        spec["affinity"],
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}
        ]}}})
    );
    assert_eq!(
        spec["volumes"][1],
        json!({"name": "scratch", "emptyDir": {}})
    );
}

#[test]
fn trainer_image_only_reaches_the_trainer_step() {
    // A replicatedJob named `node` without the trainer label keeps its image; a labelled one
    // with another name gets it.
    let rt = json!({"kind": "TrainingRuntime", "metadata": {"name": "r"}, "spec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [{"name": "node", "image": "a:1"}]}}}}},
        {"name": "workers", "template": {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "b:1"}]}}}}},
        {"name": "launcher", "template": {"metadata": {"labels": {ANCESTOR_LABEL: "launcher"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "c:1"}]}}}}},
        {"name": "empty"},
    ]}}}});
    let tj = json!({"spec": {"runtimeRef": {"name": "r", "kind": "TrainingRuntime"}, "trainer": {"image": "t:9"}}});
    let built = build(&tj, &rt).unwrap();
    let got: Vec<(String, Step, String)> = built
        .iter()
        .map(|b| {
            (
                b.replicated_job.clone(),
                b.step.clone(),
                b.template["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("node".into(), Step::Unlabelled, "a:1".into()),
            ("workers".into(), Step::Trainer, "t:9".into()),
            (
                "launcher".into(),
                Step::Other("launcher".into()),
                "c:1".into()
            ),
        ]
    );
}

#[test]
fn a_runtime_without_replicated_jobs_is_an_error_naming_it() {
    let rt = json!({"kind": "ClusterTrainingRuntime", "metadata": {"name": "broken"}, "spec": {"template": {}}});
    let err = build(&patched(), &rt).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ClusterTrainingRuntime broken has no spec.template.spec.replicatedJobs list"
    );
}
