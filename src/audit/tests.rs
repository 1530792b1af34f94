//! The pure steps of a pass on a fixture of listed objects (tests/data/audit/objects.json):
//! every kind the audit reads, with the objects it must leave out.

use super::*;

fn fixture() -> Vec<Value> {
    serde_json::from_str(include_str!("../../tests/data/audit/objects.json")).unwrap()
}

fn names(w: &[Workload]) -> Vec<String> {
    w.iter()
        .map(|w| format!("{}/{}/{}", w.namespace, w.kind, w.name))
        .collect()
}

#[test]
fn an_object_listed_under_two_versions_is_audited_once() {
    let objects = dedupe(fixture());
    assert_eq!(objects.len(), 14);
    let mpi: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "MPIJob")
        .map(|o| o["apiVersion"].as_str().unwrap())
        .collect();
    assert_eq!(mpi, ["kubeflow.org/v1"]);
    // Objects without a uid (never from the API, but a fixture may lack one) are all kept.
    assert_eq!(
        dedupe(vec![serde_json::json!({}), serde_json::json!({})]).len(),
        2
    );
}

#[test]
fn the_workloads_audited_and_the_ones_left_out_with_why() {
    let (audit, skipped) = select_all(dedupe(fixture()));
    assert_eq!(
        names(&audit),
        [
            "team-a/CronJob/nightly",
            "team-a/Job/queued",
            "team-b/Deployment/web",
            "team-b/ReplicaSet/orphan",
            "team-b/Pod/debug",
            "team-a/MPIJob/allreduce",
            "team-a/Workload/raw",
        ]
    );
    let why: Vec<String> = skipped
        .iter()
        .map(|s| format!("{}/{}/{}: {}", s.namespace, s.kind, s.name, s.reason))
        .collect();
    assert_eq!(
        why,
        [
            "team-a/Job/nightly-29000000: owned by CronJob/nightly",
            "team-a/Job/done: finished (Complete)",
            "team-b/ReplicaSet/web-5d8f: owned by Deployment/web",
            "team-b/Pod/web-5d8f-abcde: owned by ReplicaSet/web-5d8f",
            "kube-system/Pod/etcd-node1: mirror pod",
            "team-a/Workload/job-queued-1a2b: owned by Job/queued",
            "team-a/Workload/ended: finished (Finished)",
        ]
    );
}

#[test]
fn the_census_counts_templates_and_distinct_pulled_images() {
    let table = collections::audit_table();
    let (audit, _) = select_all(dedupe(fixture()));
    // Templates: CronJob 1, Job 1, Deployment 1, ReplicaSet 1, Pod 1, MPIJob 2, Workload 2.
    // Images pulled: etl, fetch, web, orphan, toolbox, mpi, raw (local is Never, etl twice).
    assert_eq!(census(&audit, &table), (9, 7));
    let uses: Vec<usize> = audit
        .iter()
        .map(|w| pulled_images(&w.object, &table))
        .collect();
    assert_eq!(uses, [1, 2, 1, 1, 1, 2, 2]);
}

#[test]
fn a_check_becomes_a_row_with_its_credentials_mark() {
    use crate::webhook::review::Unchecked;
    let row = image_row(ImageCheck {
        container: "c".into(),
        image: "r.example/a:v1".into(),
        pointer: "/spec/containers/0/image".into(),
        result: Checked::NotVerified(Unchecked::NoTime, "no verdict within 60s".into()),
        secrets: SecretAccess::Refused,
    });
    assert_eq!(
        row,
        ImageRow {
            container: "c".into(),
            image: "r.example/a:v1".into(),
            verdict: Verdict::Transient,
            exit_code: 20,
            reason: "no verdict within 60s".into(),
            credentials: Some(CredentialsNote::SecretsNotReadable),
        }
    );
}

#[test]
fn notes_are_one_plain_line_each() {
    assert_eq!(
        Note::Forbidden(ForbiddenList {
            group: "batch".into(),
            plural: "jobs".into(),
            namespace: Some("a".into()),
        })
        .to_string(),
        "jobs.batch may not be listed in namespace a (403): not audited; RBAC needs verb \"list\" on resource \"jobs\" in API group \"batch\""
    );
    assert_eq!(
        Note::Forbidden(ForbiddenList {
            group: String::new(),
            plural: "pods".into(),
            namespace: None,
        })
        .to_string(),
        "pods may not be listed cluster-wide (403): not audited; RBAC needs verb \"list\" on resource \"pods\" in API group \"\" (core)"
    );
    assert_eq!(
        Note::AllNamespacesForbidden.to_string(),
        "-A lists every namespace at once, which only a ClusterRole (bound by a ClusterRoleBinding) grants; a namespaced Role doesn't: audit one namespace with -n NAMESPACE"
    );
    assert_eq!(
        Note::SecretsRefused(vec!["a".into(), "b".into()]).to_string(),
        "pull secrets may not be read (403) in namespace a, b: their workloads' images were checked anonymously, marked *"
    );
}

#[test]
fn a_kind_not_listed_is_never_a_green_result() {
    use Verdict::*;
    // Complete: scan's rule.
    assert_eq!(exit_code([Pullable], false), 0);
    assert_eq!(exit_code([Pullable, Transient], false), 20);
    // Incomplete: never 0 nor 20, but a real finding among what was read still wins.
    assert_eq!(exit_code([Pullable], true), 2);
    assert_eq!(exit_code([], true), 2);
    assert_eq!(exit_code([Transient], true), 2);
    assert_eq!(exit_code([Pullable, NotFound, Transient], true), 11);
}

fn collection(group: &str, version: &str, plural: &str) -> Collection {
    Collection {
        group: group.into(),
        version: Some(version.into()),
        kind: String::new(),
        plural: plural.into(),
    }
}

#[test]
fn a_resource_is_unserved_only_when_no_version_of_it_is_served() {
    let mut u = Unread::default();
    u.add(
        &collection("kubeflow.org", "v1", "tfjobs"),
        &Listed::NotServed,
        Some("a"),
    );
    u.add(
        &collection("kubeflow.org", "v1", "mpijobs"),
        &Listed::Objects(vec![]),
        Some("a"),
    );
    u.add(
        &collection("kubeflow.org", "v2beta1", "mpijobs"),
        &Listed::NotServed,
        Some("a"),
    );
    u.add(
        &collection("batch", "v1", "jobs"),
        &Listed::Forbidden,
        Some("a"),
    );
    u.add(&collection("", "v1", "pods"), &Listed::Forbidden, Some("a"));
    u.add(
        &collection("apps", "v1", "deployments"),
        &Listed::NotServed,
        Some("a"),
    );
    let (unserved, forbidden) = u.finish();
    assert_eq!(unserved, ["deployments.apps", "tfjobs.kubeflow.org"]);
    let names: Vec<String> = forbidden.iter().map(ForbiddenList::resource).collect();
    assert_eq!(names, ["jobs.batch", "pods"]);
}

#[test]
fn a_cronjob_next_run_is_its_schedule_in_its_zone_or_suspended() {
    let now: jiff::Timestamp = "2026-12-03T12:00:00Z".parse().unwrap();
    let cron = |spec: Value| serde_json::json!({"kind": "CronJob", "spec": spec});
    assert_eq!(
        next_run(&cron(serde_json::json!({"schedule": "0 3 * * *"})), now).to_string(),
        "2026-12-04T03:00:00Z"
    );
    assert_eq!(
        next_run(
            &cron(serde_json::json!({"schedule": "0 3 * * *", "timeZone": "Asia/Tokyo"})),
            now
        )
        .to_string(),
        // 03:00 in Tokyo (UTC+9) is 18:00 the day before in UTC.
        "2026-12-03T18:00:00Z"
    );
    assert_eq!(
        next_run(
            &cron(serde_json::json!({"schedule": "0 3 * * *", "suspend": true})),
            now
        ),
        NextRun::Suspended
    );
    assert_eq!(
        next_run(&cron(serde_json::json!({"schedule": "0 3 * *"})), now).to_string(),
        "unknown: schedule \"0 3 * *\": expected exactly 5 fields, found 4"
    );
    // @every counts from the last scheduled run.
    let mut every = cron(serde_json::json!({"schedule": "@every 2h"}));
    every["status"] = serde_json::json!({"lastScheduleTime": "2026-12-03T11:30:00Z"});
    assert_eq!(next_run(&every, now).to_string(), "2026-12-03T13:30:00Z");
}
