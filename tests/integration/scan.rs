//! `pullcheck scan`: every image of every pod template in a manifest stream, deduplicated,
//! checked against the real registry.

use crate::support::process::{output, pullcheck, run};
use crate::support::{fixture, temp_dir};

fn manifests(anon: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata: {{name: train}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - {{name: fetch, image: "{anon}/oci/app:v1"}}
      containers:
      - {{name: main, image: "{anon}/org/sub/project/img:v1"}}
      - {{name: local, image: "{anon}/only/on/node:v1", imagePullPolicy: Never}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: nightly}}
spec:
  schedule: "0 1 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - {{name: main, image: "{anon}/oci/app:v1"}}
          - {{name: typo, image: "{anon}/oci/app:v1-typo"}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: not-a-workload}}
data: {{image: "{anon}/ignored:v1"}}
"#
    )
}

#[test]
fn scan_checks_each_image_once_and_reports_where_it_is_used() {
    let f = fixture();
    let dir = temp_dir();
    let file = dir.path().join("m.yaml");
    std::fs::write(&file, manifests(&f.anon.host)).unwrap();
    let r = run(
        &[
            "scan",
            "-f",
            file.to_str().unwrap(),
            "--insecure-registry",
            &f.anon.host,
            "--output",
            "json",
            "--platform",
            "linux/amd64",
        ],
        &[],
    );
    r.assert_code(11);
    let j = r.json();
    let images: Vec<(String, String)> = j["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["image"].as_str().unwrap().to_string(),
                i["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let a = &f.anon.host;
    assert_eq!(
        images,
        vec![
            (format!("{a}/oci/app:v1"), "pullable".to_string()),
            (
                format!("{a}/org/sub/project/img:v1"),
                "pullable".to_string()
            ),
            (format!("{a}/oci/app:v1-typo"), "not_found".to_string()),
        ]
    );
    let shown = file.to_str().unwrap();
    assert_eq!(
        j["images"][0]["uses"],
        serde_json::json!([
            {"file": shown, "document": 1, "kind": "Job", "name": "train", "container": "fetch"},
            {"file": shown, "document": 2, "kind": "CronJob", "name": "nightly", "container": "main"},
        ])
    );
}

#[test]
fn scan_text_summary_and_stdin() {
    let f = fixture();
    let out = output(
        pullcheck().args([
            "scan",
            "-f",
            "-",
            "--insecure-registry",
            &f.anon.host,
            "--platform",
            "any",
        ]),
        Some(manifests(&f.anon.host).as_bytes()),
    );
    assert_eq!(out.status.code(), Some(11));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.lines().last().unwrap(),
        "scanned 3 documents, 3 images: 2 pullable, 1 not (exit 11)"
    );
    assert!(
        stdout.contains("[Job/train:fetch, CronJob/nightly:main]"),
        "{stdout}"
    );
}

#[test]
fn scan_of_unreadable_input_is_a_usage_error() {
    let r = run(&["scan", "-f", "/nonexistent/m.yaml"], &[]);
    r.assert_code(2);
    assert_eq!(r.stderr.lines().count(), 1);
    assert!(
        r.stderr
            .starts_with("pullcheck: /nonexistent/m.yaml: cannot read: "),
        "{}",
        r.stderr
    );
}

/// One document, one image, two replicas with the same container name: counted in the
/// singular, and the place listed once.
#[test]
fn scan_text_is_singular_for_one_and_names_a_place_once() {
    let f = fixture();
    let image = f.images.oci_manifest.reference(&f.anon);
    let job = format!(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {{name: resnet}}\nspec:\n  pytorchReplicaSpecs:\n    Master: {{template: {{spec: {{containers: [{{name: pytorch, image: \"{image}\"}}]}}}}}}\n    Worker: {{template: {{spec: {{containers: [{{name: pytorch, image: \"{image}\"}}]}}}}}}\n"
    );
    let dir = temp_dir();
    let path = dir.path().join("job.yaml");
    std::fs::write(&path, job).unwrap();
    let file = path.to_str().unwrap();
    let base = [
        "scan",
        "--insecure-registry",
        &f.anon.host,
        "--platform",
        "any",
    ];
    let mut args = base.to_vec();
    args.extend(["-f", file]);
    let r = run(&args, &[]);
    r.assert_code(0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(
        lines[0].ends_with("  [PyTorchJob/resnet:pytorch]"),
        "{}",
        lines[0]
    );
    assert_eq!(
        lines[1],
        "scanned 1 document, 1 image: 1 pullable, 0 not (exit 0)"
    );
    args.extend(["--output", "json"]);
    let r = run(&args, &[]);
    assert_eq!(
        r.image(0)["uses"],
        serde_json::json!([{"file": file, "document": 1, "kind": "PyTorchJob", "name": "resnet", "container": "pytorch"}])
    );
}

/// What `kubectl get jobs -o yaml` prints: a v1 List. Its Job's missing image fails the scan
/// as it would in a stream of documents; a RayJob in it (no --kinds row) refuses the scan.
#[test]
fn scan_reads_a_list_item_by_item() {
    let f = fixture();
    let a = &f.anon.host;
    let list = format!(
        "apiVersion: v1\nkind: List\nmetadata: {{resourceVersion: \"\"}}\nitems:\n- apiVersion: batch/v1\n  kind: Job\n  metadata: {{name: j, namespace: team}}\n  spec:\n    template:\n      spec:\n        restartPolicy: Never\n        containers: [{{name: c, image: \"{a}/oci/app:v1-typo\"}}]\n"
    );
    let dir = temp_dir();
    let path = dir.path().join("jobs.yaml");
    std::fs::write(&path, &list).unwrap();
    let file = path.to_str().unwrap();
    let args = [
        "scan",
        "--insecure-registry",
        a,
        "--platform",
        "any",
        "-f",
        file,
    ];
    let r = run(&args, &[]);
    r.assert_code(11);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(lines[0].starts_with("not_found "), "{}", lines[0]);
    assert!(lines[0].ends_with("  [Job team/j:c]"), "{}", lines[0]);
    assert_eq!(
        lines[1],
        "scanned 1 document, 1 image: 0 pullable, 1 not (exit 11)"
    );
    let ray = "- apiVersion: ray.io/v1\n  kind: RayJob\n  metadata: {name: r}\n  spec:\n    rayClusterSpec:\n      headGroupSpec:\n        template:\n          spec:\n            containers: [{name: head, image: 'rayproject/ray:2.9.0'}]\n";
    std::fs::write(&path, format!("{list}{ray}")).unwrap();
    let r = run(&args, &[]);
    r.assert_code(2);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: {file}: document 1 at /items/1: unknown kind ray.io/v1 RayJob holds containers pullcheck doesn't know where to find: its images can't be checked; give its pod template paths with --kinds, or scan the rest with --ignore-unknown-kinds\n"
        )
    );
}

/// `-f` repeated and a directory: every file is read, the text summary counts them and the
/// JSON names each use's file.
#[test]
fn scan_reads_several_files_and_a_directory() {
    let f = fixture();
    let a = &f.anon.host;
    let dir = temp_dir();
    let pod = |name: &str, tag: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, image: \"{a}/oci/app:{tag}\"}}]\n"
        )
    };
    let m = dir.path().join("m");
    std::fs::create_dir(&m).unwrap();
    std::fs::write(m.join("2.yaml"), pod("two", "v1")).unwrap();
    std::fs::write(m.join("1.yml"), pod("one", "v1-typo")).unwrap();
    let extra = dir.path().join("extra.yaml");
    std::fs::write(&extra, pod("three", "v1")).unwrap();
    let (m, extra) = (m.to_str().unwrap(), extra.to_str().unwrap());
    let base = [
        "scan",
        "--insecure-registry",
        a,
        "--platform",
        "any",
        "-f",
        m,
        "-f",
        extra,
    ];
    let r = run(&base, &[]);
    r.assert_code(11);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert!(lines[0].ends_with("  [Pod/one:c]"), "{}", lines[0]);
    assert!(
        lines[1].ends_with("  [Pod/two:c, Pod/three:c]"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        "scanned 3 files, 3 documents, 2 images: 1 pullable, 1 not (exit 11)"
    );
    let mut json = base.to_vec();
    json.extend(["-o", "json"]);
    let r = run(&json, &[]);
    assert_eq!(
        r.image(1)["uses"],
        serde_json::json!([
            {"file": format!("{m}/2.yaml"), "document": 1, "kind": "Pod", "name": "two", "container": "c"},
            {"file": extra, "document": 1, "kind": "Pod", "name": "three", "container": "c"},
        ])
    );
}
