use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::*;
use crate::audit::platforms::PlatformSource;
use crate::audit::report::CredentialsNote;
use crate::registry::quota::Quota;

fn row(container: &str, image: &str, verdict: Verdict) -> ImageRow {
    ImageRow {
        container: container.into(),
        image: image.into(),
        verdict,
        exit_code: verdict.exit_code(),
        reason: "why".into(),
        credentials: None,
    }
}

fn workload(kind: &str, name: &str, images: Vec<ImageRow>) -> WorkloadRow {
    WorkloadRow {
        next_run: None,
        namespace: "team-a".into(),
        kind: kind.into(),
        name: name.into(),
        images,
    }
}

/// A CronJob whose image is gone, a Deployment with a pullable image and a private one
/// checked anonymously, Docker Hub's quota stated.
fn report() -> Report {
    let mut private = row("side", "r.example/private:v1", Verdict::Unauthenticated);
    private.credentials = Some(CredentialsNote::SecretsNotReadable);
    Report {
        exit_code: 11,
        platforms: vec!["linux/amd64".into()],
        platform_source: PlatformSource::Nodes,
        workloads: vec![
            workload(
                "CronJob",
                "nightly",
                vec![row("main", "r.example/gone:v1", Verdict::NotFound)],
            ),
            workload(
                "Deployment",
                "web",
                vec![row("web", "r.example/web:v2", Verdict::Pullable), private],
            ),
        ],
        skipped: vec![],
        unserved: vec![],
        forbidden: vec![],
        registry_quota: BTreeMap::from([(
            "docker.io".to_string(),
            Quota {
                limit: 100,
                remaining: 76,
                window_seconds: Some(21_600),
            },
        )]),
    }
}

/// The sample lines of `text` (no `# HELP`/`# TYPE`/`# EOF`), in the encoder's order.
fn samples(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

const COUNTS_AFTER_REPORT: [&str; 8] = [
    "pullcheck_audit_images{verdict=\"pullable\"} 1",
    "pullcheck_audit_images{verdict=\"invalid_reference\"} 0",
    "pullcheck_audit_images{verdict=\"not_found\"} 1",
    "pullcheck_audit_images{verdict=\"platform_missing\"} 0",
    "pullcheck_audit_images{verdict=\"denied\"} 0",
    "pullcheck_audit_images{verdict=\"unauthenticated\"} 1",
    "pullcheck_audit_images{verdict=\"unusable_artifact\"} 0",
    "pullcheck_audit_images{verdict=\"transient\"} 0",
];

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn before_the_first_pass_only_the_pass_metrics_have_samples() {
    let m = AuditMetrics::new(MetricNames::Pullcheck, 10, Duration::from_secs(600));
    assert_eq!(
        sorted(samples(&m.render(Instant::now()))),
        sorted(
            [
                "pullcheck_audit_workloads 0",
                "pullcheck_audit_image_series_dropped 0",
                "pullcheck_audit_passes_total{outcome=\"succeeded\"} 0",
                "pullcheck_audit_passes_total{outcome=\"failed\"} 0",
                "pullcheck_audit_passes_total{outcome=\"timed_out\"} 0",
                "pullcheck_audit_last_pass_duration_seconds 0.0",
                "pullcheck_audit_results_age_seconds -1.0",
                "pullcheck_audit_interval_seconds 600.0",
            ]
            .map(String::from)
            .to_vec()
        )
    );
}

#[test]
fn a_good_pass_exports_every_image_with_its_verdict_counts_and_quota() {
    let m = AuditMetrics::new(MetricNames::Pullcheck, 10, Duration::from_secs(600));
    let end = Instant::now();
    m.record(&report(), Duration::from_millis(2_500), end);
    let mut want: Vec<String> = [
        "pullcheck_audit_image_verdict{namespace=\"team-a\",kind=\"CronJob\",name=\"nightly\",container=\"main\",image=\"r.example/gone:v1\",verdict=\"not_found\",credentials=\"pod\"} 1",
        "pullcheck_audit_image_verdict{namespace=\"team-a\",kind=\"Deployment\",name=\"web\",container=\"web\",image=\"r.example/web:v2\",verdict=\"pullable\",credentials=\"pod\"} 1",
        "pullcheck_audit_image_verdict{namespace=\"team-a\",kind=\"Deployment\",name=\"web\",container=\"side\",image=\"r.example/private:v1\",verdict=\"unauthenticated\",credentials=\"anonymous_assumed\"} 1",
        "pullcheck_audit_workloads 2",
        "pullcheck_audit_image_series_dropped 0",
        "pullcheck_audit_passes_total{outcome=\"succeeded\"} 1",
        "pullcheck_audit_passes_total{outcome=\"failed\"} 0",
        "pullcheck_audit_passes_total{outcome=\"timed_out\"} 0",
        "pullcheck_audit_last_pass_duration_seconds 2.5",
        "pullcheck_audit_results_age_seconds 30.0",
        "pullcheck_audit_interval_seconds 600.0",
        "pullcheck_registry_quota_remaining{registry=\"docker.io\"} 76",
        "pullcheck_registry_quota_limit{registry=\"docker.io\"} 100",
    ]
    .map(String::from)
    .to_vec();
    want.extend(COUNTS_AFTER_REPORT.map(String::from));
    assert_eq!(
        sorted(samples(&m.render(end + Duration::from_secs(30)))),
        sorted(want)
    );
}

#[test]
fn a_failed_pass_is_counted_and_keeps_the_last_results_which_age() {
    let m = AuditMetrics::new(MetricNames::Pullcheck, 10, Duration::from_secs(60));
    let end = Instant::now();
    m.record(&report(), Duration::from_secs(2), end);
    m.failed(PassOutcome::Failed, Duration::from_millis(250));
    m.failed(PassOutcome::TimedOut, Duration::from_secs(60));
    let text = m.render(end + Duration::from_secs(125));
    let s = samples(&text);
    for line in [
        "pullcheck_audit_passes_total{outcome=\"succeeded\"} 1",
        "pullcheck_audit_passes_total{outcome=\"failed\"} 1",
        "pullcheck_audit_passes_total{outcome=\"timed_out\"} 1",
        "pullcheck_audit_last_pass_duration_seconds 60.0",
        "pullcheck_audit_results_age_seconds 125.0",
        "pullcheck_audit_image_verdict{namespace=\"team-a\",kind=\"CronJob\",name=\"nightly\",container=\"main\",image=\"r.example/gone:v1\",verdict=\"not_found\",credentials=\"pod\"} 1",
    ] {
        assert!(s.contains(&line.to_string()), "{line} missing from\n{text}");
    }
    assert_eq!(
        s.iter()
            .filter(|l| l.starts_with("pullcheck_audit_image_verdict{"))
            .count(),
        3,
        "{text}"
    );
}

#[test]
fn a_new_pass_replaces_the_rows_so_a_fixed_image_loses_its_failing_series() {
    let m = AuditMetrics::new(MetricNames::Pullcheck, 10, Duration::from_secs(60));
    m.record(&report(), Duration::from_secs(1), Instant::now());
    let mut fixed = report();
    fixed.workloads.truncate(1);
    fixed.workloads[0].images[0].verdict = Verdict::Pullable;
    fixed.registry_quota.clear();
    m.record(&fixed, Duration::from_secs(1), Instant::now());
    let s = samples(&m.render(Instant::now()));
    let rows: Vec<&String> = s
        .iter()
        .filter(|l| l.starts_with("pullcheck_audit_image_verdict{"))
        .collect();
    assert_eq!(
        rows,
        [
            "pullcheck_audit_image_verdict{namespace=\"team-a\",kind=\"CronJob\",name=\"nightly\",container=\"main\",image=\"r.example/gone:v1\",verdict=\"pullable\",credentials=\"pod\"} 1"
        ]
    );
    // The quota last stated stays: a pass that met no metered registry says nothing new.
    assert!(
        s.contains(&"pullcheck_registry_quota_remaining{registry=\"docker.io\"} 76".to_string())
    );
}

#[test]
fn over_max_series_failing_rows_are_kept_first_and_the_rest_counted() {
    let m = AuditMetrics::new(MetricNames::Pullcheck, 2, Duration::from_secs(60));
    m.record(&report(), Duration::from_secs(1), Instant::now());
    let s = samples(&m.render(Instant::now()));
    let rows: Vec<String> = s
        .iter()
        .filter(|l| l.starts_with("pullcheck_audit_image_verdict{"))
        .cloned()
        .collect();
    // The encoder's order is a hash map's: compare sorted.
    assert_eq!(
        sorted(rows),
        [
            "pullcheck_audit_image_verdict{namespace=\"team-a\",kind=\"CronJob\",name=\"nightly\",container=\"main\",image=\"r.example/gone:v1\",verdict=\"not_found\",credentials=\"pod\"} 1",
            "pullcheck_audit_image_verdict{namespace=\"team-a\",kind=\"Deployment\",name=\"web\",container=\"side\",image=\"r.example/private:v1\",verdict=\"unauthenticated\",credentials=\"anonymous_assumed\"} 1",
        ]
    );
    assert!(s.contains(&"pullcheck_audit_image_series_dropped 1".to_string()));
    // The counts are of every image, not only the exported ones.
    for line in COUNTS_AFTER_REPORT {
        assert!(s.contains(&line.to_string()), "{line}");
    }
}

#[test]
fn deckhouse_names_are_seven_gauges_per_container_with_the_peers_labels() {
    let m = AuditMetrics::new(MetricNames::Deckhouse, 10, Duration::from_secs(60));
    m.record(&report(), Duration::from_secs(1), Instant::now());
    let s = samples(&m.render(Instant::now()));
    let peer: Vec<String> = s
        .iter()
        .filter(|l| l.starts_with("k8s_image_availability_exporter_"))
        .cloned()
        .collect();
    let labels = [
        (
            "team-a",
            "main",
            "r.example/gone:v1",
            "cronjob",
            "nightly",
            "absent",
        ),
        (
            "team-a",
            "web",
            "r.example/web:v2",
            "deployment",
            "web",
            "available",
        ),
        (
            "team-a",
            "side",
            "r.example/private:v1",
            "deployment",
            "web",
            "authentication_failure",
        ),
    ];
    let mut want = vec!["k8s_image_availability_exporter_completed_rechecks_total 1".to_string()];
    for mode in [
        "available",
        "absent",
        "bad_image_format",
        "registry_unavailable",
        "authentication_failure",
        "authorization_failure",
        "unknown_error",
    ] {
        for (ns, c, i, k, n, m) in labels {
            want.push(format!(
                "k8s_image_availability_exporter_{mode}{{namespace=\"{ns}\",container=\"{c}\",image=\"{i}\",kind=\"{k}\",name=\"{n}\"}} {}",
                u8::from(m == mode)
            ));
        }
    }
    assert_eq!(sorted(peer), sorted(want));
    // pullcheck's own names are still there.
    assert_eq!(
        s.iter()
            .filter(|l| l.starts_with("pullcheck_audit_image_verdict{"))
            .count(),
        3
    );
}

#[test]
fn deckhouse_rows_of_one_container_in_two_templates_keep_the_failing_mode() {
    let m = AuditMetrics::new(MetricNames::Deckhouse, 10, Duration::from_secs(60));
    let mut r = report();
    r.workloads = vec![workload(
        "PyTorchJob",
        "train",
        vec![
            row("pytorch", "r.example/t:v1", Verdict::Pullable),
            row("pytorch", "r.example/t:v1", Verdict::PlatformMissing),
        ],
    )];
    m.record(&r, Duration::from_secs(1), Instant::now());
    let s = samples(&m.render(Instant::now()));
    let labels = "{namespace=\"team-a\",container=\"pytorch\",image=\"r.example/t:v1\",kind=\"pytorchjob\",name=\"train\"}";
    assert!(s.contains(&format!(
        "k8s_image_availability_exporter_available{labels} 0"
    )));
    assert!(s.contains(&format!("k8s_image_availability_exporter_absent{labels} 1")));
}

#[test]
fn the_peer_modes_cover_every_verdict() {
    let got: Vec<(Verdict, &str)> = Verdict::ALL
        .iter()
        .map(|v| (*v, PeerMode::of(*v).metric()))
        .collect();
    assert_eq!(
        got,
        [
            (
                Verdict::Pullable,
                "k8s_image_availability_exporter_available"
            ),
            (
                Verdict::InvalidReference,
                "k8s_image_availability_exporter_bad_image_format"
            ),
            (Verdict::NotFound, "k8s_image_availability_exporter_absent"),
            (
                Verdict::PlatformMissing,
                "k8s_image_availability_exporter_absent"
            ),
            (
                Verdict::Denied,
                "k8s_image_availability_exporter_authorization_failure"
            ),
            (
                Verdict::Unauthenticated,
                "k8s_image_availability_exporter_authentication_failure"
            ),
            (
                Verdict::UnusableArtifact,
                "k8s_image_availability_exporter_unknown_error"
            ),
            (
                Verdict::Transient,
                "k8s_image_availability_exporter_registry_unavailable"
            ),
        ]
    );
}

#[test]
fn long_label_values_are_cut_at_a_character_boundary() {
    let long = format!("r.example/{}:v1", "é".repeat(400));
    let cut = label(&long);
    assert!(cut.len() <= MAX_LABEL_BYTES, "{}", cut.len());
    assert_eq!(cut.len(), 511);
    assert!(cut.ends_with('…'));
    assert_eq!(label("r.example/a:v1"), "r.example/a:v1");
}
