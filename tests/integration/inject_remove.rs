//! `inject --remove`, the way an uninstall runs it: inject then remove gives the manifest
//! back byte for byte (as inject writes YAML: comments and quoting aside) for every example
//! kind and a Deployment through --kinds; removing twice changes nothing; the kinds whose
//! stored templates are immutable are named for recreation.

use std::path::Path;

use pullcheck::k8s::yaml::{parse_documents, to_yaml};

use crate::support::CHECKER_IMAGE;
use crate::support::process::{output, pullcheck};

fn binary(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = output(pullcheck().args(args), Some(stdin.as_bytes()));
    let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code().unwrap(), s(out.stdout), s(out.stderr))
}

/// The manifest as inject's YAML writer puts it: the same objects, without comments.
fn canonical(text: &str) -> String {
    parse_documents(text)
        .unwrap()
        .iter()
        .map(|d| to_yaml(&d.value).unwrap())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn example(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("examples/{name}"));
    std::fs::read_to_string(path).unwrap()
}

const RECREATE_JOB: &str = "pullcheck: warning: -: document 1: a stored Job's pod template is immutable: recreate it from this output (kubectl replace --force -f)\n";
const RECREATE_JOBSET: &str = "pullcheck: warning: -: document 1: a stored JobSet's replicatedJobs are immutable: recreate it from this output (kubectl replace --force -f)\n";

#[test]
fn inject_then_remove_gives_every_example_back() {
    for (name, warning) in [
        ("job-backoff-limit-0", RECREATE_JOB),
        ("job-pod-failure-policy", RECREATE_JOB),
        ("cronjob", ""),
        ("pytorchjob", ""),
        ("jobset", RECREATE_JOBSET),
    ] {
        let plain = example(&format!("{name}.yaml"));
        let (code, injected, err) = binary(
            &["inject", "--fail-fast", "--image", CHECKER_IMAGE, "-f", "-"],
            &plain,
        );
        assert_eq!(code, 0, "{name}: {err}");
        assert!(injected.contains("name: pullcheck\n"), "{name}: {injected}");
        let (code, removed, err) = binary(&["inject", "--remove", "-f", "-"], &injected);
        assert_eq!((code, err.as_str()), (0, warning), "{name}");
        assert_eq!(removed, canonical(&plain), "{name}");
        // The committed injected example (other options) comes back the same way.
        let (code, committed, _) = binary(
            &["inject", "--remove", "-f", "-"],
            &example(&format!("{name}.injected.yaml")),
        );
        assert_eq!((code, committed.as_str()), (0, removed.as_str()), "{name}");
        // Idempotent: nothing left to remove, so nothing to recreate either.
        let (code, again, err) = binary(&["inject", "--remove", "-f", "-"], &removed);
        assert_eq!(
            (code, err.as_str(), again.as_str()),
            (0, "", removed.as_str()),
            "{name}"
        );
    }
}

#[test]
fn a_deployment_known_through_kinds_is_cleaned_too() {
    // inject reads Deployments only through a --kinds row (scan knows apps/v1 itself).
    let dir = crate::support::temp_dir();
    let kinds = dir.path().join("kinds.yaml");
    std::fs::write(
        &kinds,
        "- {apiVersion: apps/v1, kind: Deployment, podTemplatePaths: [spec.template]}\n",
    )
    .unwrap();
    let kinds = kinds.to_str().unwrap();
    let plain = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      imagePullSecrets:\n      - name: regcred\n      containers:\n      - name: web\n        image: registry.example.com/web:v1\n";
    let (code, injected, err) = binary(
        &[
            "inject",
            "--kinds",
            kinds,
            "--image",
            CHECKER_IMAGE,
            "-f",
            "-",
        ],
        plain,
    );
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(injected.contains("pullcheck-pull-secrets"), "{injected}");
    // A mutable template: no warning.
    let (code, removed, err) = binary(
        &["inject", "--kinds", kinds, "--remove", "-f", "-"],
        &injected,
    );
    assert_eq!((code, err.as_str(), removed.as_str()), (0, "", plain));
    // Without the row the kind is unknown: left as it is, with inject's warning.
    let (code, out, err) = binary(&["inject", "--remove", "-f", "-"], &injected);
    assert_eq!((code, out.as_str()), (0, injected.as_str()));
    assert_eq!(
        err,
        "pullcheck: warning: -: document 1: unknown kind apps/v1 Deployment holds containers pullcheck doesn't know where to find: left unchanged (add it with --kinds)\n"
    );
}

#[test]
fn remove_takes_no_injection_flags() {
    let (code, out, err) = binary(
        &["inject", "--remove", "--image", CHECKER_IMAGE, "-f", "-"],
        "",
    );
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.starts_with("error: the argument '--remove' cannot be used with '--image <IMAGE>'"),
        "{err}"
    );
}

/// docs/webhook.md "Uninstall": the kubectl + jq line listing the objects that still carry
/// pullcheck's init container, its filter run on a List like `kubectl get -o json` returns
/// (the injected examples, a plain Job, a user's own init container).
#[test]
fn the_documented_listing_finds_exactly_the_injected_objects() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/webhook.md"))
            .unwrap();
    let line = docs
        .lines()
        .find(|l| l.trim_start().starts_with("| jq -r '"))
        .expect("the jq line in docs/webhook.md");
    let filter = line
        .trim_start()
        .strip_prefix("| jq -r '")
        .and_then(|f| f.strip_suffix('\''))
        .unwrap();
    let mut items = Vec::new();
    for name in ["cronjob", "jobset", "pytorchjob", "job-backoff-limit-0"] {
        let file = if name == "job-backoff-limit-0" {
            format!("{name}.yaml")
        } else {
            format!("{name}.injected.yaml")
        };
        let mut v = parse_documents(&example(&file)).unwrap().remove(0).value;
        v["metadata"]["namespace"] = serde_json::json!("ml");
        items.push(v);
    }
    // A user's init container of another name is not pullcheck's.
    let mut own = items[3].clone();
    own["metadata"]["name"] = serde_json::json!("own-init");
    own["spec"]["template"]["spec"]["initContainers"] =
        serde_json::json!([{"name": "pullcheck-setup", "image": "busybox:1"}]);
    items.push(own);
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let out = output(
        std::process::Command::new("jq").args(["-r", filter]),
        Some(list.to_string().as_bytes()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let image = "registry.example.com/mirror/pullcheck:0.1.0@sha256:d567c976667703decd261c22c94eed5e4ddbbcb07cf71cb9b06261c277e5849d";
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "CronJob\tml/nightly-report\t{image}\nJobSet\tml/llm-pretrain\t{image}\nPyTorchJob\tml/resnet\t{image}\n"
        )
    );
}
