//! Regression tests for crashes the fuzz targets found (`fuzz/`, `scripts/fuzz.sh`). Each
//! names its target and keeps the minimized input (also under `fuzz/regressions/<target>/`).

use crate::support::process::run;

/// fuzz target `admission_review` (first 60 s run): a restartPolicy value longer than a
/// lint message may be panics the debug-assert in `k8s::lint` (`Ctx::push`: message ≤ 120
/// characters), because the value is copied into the message uncut. Release builds print an
/// over-long line instead. The same input reaches the webhook through `lint_object`.
/// Minimized AdmissionReview: `fuzz/regressions/admission_review/lint-long-restart-policy.json`.
#[test]
fn lint_with_a_very_long_restart_policy_does_not_panic() {
    let dir = crate::support::temp_dir();
    let file = dir.path().join("job.yaml");
    let policy = format!("N{}ver", "e".repeat(150));
    std::fs::write(
        &file,
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec:\n  template:\n    spec:\n      restartPolicy: {policy}\n      containers: [{{name: a, image: busybox:1.36}}]\n"
        ),
    )
    .unwrap();
    let r = run(&["lint", "-o", "json", "-f", file.to_str().unwrap()], &[]);
    r.assert_code(0);
    let doc = r.json();
    let findings = doc["findings"].as_array().expect("findings");
    assert!(!findings.is_empty());
    for f in findings {
        let m = f["message"].as_str().unwrap();
        assert!(m.chars().count() <= 120, "{m}");
    }
}
