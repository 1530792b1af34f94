//! One sample of the node: from `kubectl get pods,jobs -A -o json`, the Job's state, its
//! pods' states and the effective requests held on the node (the scheduler's count).
//!
//! Everything is read from structured fields (conditions, phases, exit codes, requests);
//! no message text is matched. The pod-state strings are what the doc prints.

use serde_json::Value;

/// The object a scenario follows: a Job (or a Kubeflow PyTorchJob) and its pods.
#[derive(Debug, Clone)]
pub struct Target {
    /// `kind` of the controller object (`Job`, `PyTorchJob`).
    pub kind: &'static str,
    /// Its namespace.
    pub ns: String,
    /// Its name.
    pub name: String,
    /// The pod label that holds the controller's name (`job-name`,
    /// `training.kubeflow.org/job-name`).
    pub label: &'static str,
}

impl Target {
    /// A batch/v1 Job.
    pub fn job(ns: &str, name: &str) -> Target {
        Target {
            kind: "Job",
            ns: ns.to_string(),
            name: name.to_string(),
            label: "job-name",
        }
    }
}

/// The controller's terminal condition, as the doc names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// No terminal condition yet (`-`).
    Running,
    /// A True `Failed` condition.
    Failed,
    /// A True `Complete` condition (Job).
    Complete,
    /// A True `Succeeded` condition (PyTorchJob).
    Succeeded,
}

impl Finished {
    /// The doc's word: `Failed`, `Complete`, `Succeeded`, or `-`.
    pub fn as_str(self) -> &'static str {
        match self {
            Finished::Running => "-",
            Finished::Failed => "Failed",
            Finished::Complete => "Complete",
            Finished::Succeeded => "Succeeded",
        }
    }
}

/// One sample; times in seconds from just before `kubectl create`, rounded to 0.1 s.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since creation (one decimal).
    pub t: f64,
    /// The controller's terminal condition.
    pub finished: Finished,
    /// Pods of the controller in phase Failed.
    pub failed_pods: usize,
    /// `active=N failed=N succeeded=N [Cond,...]`, or `job=none`.
    pub job: String,
    /// Each pod: `SUFFIX:Phase(init NAME=STATE NAME=STATE)[ marked][ deleting]`, `; `-joined
    /// (`no pods` when there are none).
    pub pods: String,
    /// Names of the controller's pods in this sample (for counting pods seen).
    pub pod_names: Vec<String>,
    /// The `state.waiting.reason` of every container of those pods (ErrImagePull, …).
    pub waiting: Vec<String>,
    /// The highest `restartCount` of any container of those pods.
    pub restarts: u64,
    /// The highest `restartCount` of their `pullcheck` init container.
    pub init_restarts: u64,
    /// The `pullcheck` init container's terminations ([`pullcheck_terminations`]).
    pub terms: Vec<(i64, String)>,
    /// Effective CPU requests (millicores) of the namespace's live pods on the node.
    pub ns_cpu_m: f64,
    /// Effective memory requests (MiB, floored) of the namespace's live pods on the node.
    pub ns_mem_mi: u64,
    /// The same for every live pod on the node.
    pub node_cpu_m: f64,
    /// The same for every live pod on the node (MiB, floored).
    pub node_mem_mi: u64,
}

/// A CPU quantity in millicores: `250m` → 250, `1` → 1000, `0.5` → 500; absent → 0.
pub fn cpu_m(q: &Value) -> f64 {
    let s = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return 0.0,
    };
    match s.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0.0),
        None => s.parse::<f64>().map(|c| c * 1000.0).unwrap_or(0.0),
    }
}

/// A memory quantity in MiB (not rounded): `2Gi` → 2048, `256Mi` → 256, `1G` → 953.67…;
/// a bare number is bytes; absent → 0.
pub fn mem_mi(q: &Value) -> f64 {
    let s = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return 0.0,
    };
    let num = |t: &str| t.parse::<f64>().unwrap_or(0.0);
    const MIB: f64 = 1_048_576.0;
    if let Some(v) = s.strip_suffix("Gi") {
        num(v) * 1024.0
    } else if let Some(v) = s.strip_suffix("Mi") {
        num(v)
    } else if let Some(v) = s.strip_suffix("Ki") {
        num(v) / 1024.0
    } else if let Some(v) = s.strip_suffix('G') {
        num(v) * 1e9 / MIB
    } else if let Some(v) = s.strip_suffix('M') {
        num(v) * 1e6 / MIB
    } else {
        num(&s) / MIB
    }
}

/// The effective request of a pod for one resource: the larger of the app containers' sum
/// and the largest init container that is not a sidecar (`restartPolicy: Always`), as
/// Kubernetes' resource helpers (k8s.io/component-helpers/resource, PodRequests) count it
/// for pods without sidecars.
fn effective(pod: &Value, read: fn(&Value) -> f64, resource: &str) -> f64 {
    let list = |key: &str| pod["spec"][key].as_array().cloned().unwrap_or_default();
    let app: f64 = list("containers")
        .iter()
        .map(|c| read(&c["resources"]["requests"][resource]))
        .sum();
    let init = list("initContainers")
        .iter()
        .filter(|c| c["restartPolicy"] != "Always")
        .map(|c| read(&c["resources"]["requests"][resource]))
        .fold(0.0, f64::max);
    app.max(init)
}

/// A pod bound to `node` that is not terminal (its requests still count there).
fn live(pod: &Value, node: &str) -> bool {
    pod["spec"]["nodeName"] == node
        && pod["status"]["phase"] != "Succeeded"
        && pod["status"]["phase"] != "Failed"
}

/// A container status as the doc writes it: `W:Reason`, `Running`, `T:EXIT`, `?`, with
/// ` rN` when it restarted.
fn container_state(cs: &Value) -> String {
    let st = &cs["state"];
    let mut s = if st["waiting"].is_object() {
        format!("W:{}", st["waiting"]["reason"].as_str().unwrap_or("?"))
    } else if st["running"].is_object() {
        "Running".to_string()
    } else if st["terminated"].is_object() {
        format!("T:{}", st["terminated"]["exitCode"])
    } else {
        "?".to_string()
    };
    if let Some(n) = cs["restartCount"].as_u64().filter(|n| *n > 0) {
        s.push_str(&format!(" r{n}"));
    }
    s
}

/// Every init and app container status of a pod.
fn all_statuses(pod: &Value) -> Vec<Value> {
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|k| pod["status"][*k].as_array().cloned().unwrap_or_default())
        .collect()
}

/// One pod as the doc writes it.
fn pod_state(pod: &Value) -> String {
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let suffix = name.rsplit('-').next().unwrap_or(name);
    let statuses = |key: &str| pod["status"][key].as_array().cloned().unwrap_or_default();
    let mut parts: Vec<String> = statuses("initContainerStatuses")
        .iter()
        .map(|c| {
            format!(
                "init {}={}",
                c["name"].as_str().unwrap_or(""),
                container_state(c)
            )
        })
        .collect();
    parts.extend(statuses("containerStatuses").iter().map(|c| {
        format!(
            "{}={}",
            c["name"].as_str().unwrap_or(""),
            container_state(c)
        )
    }));
    let mut s = format!(
        "{suffix}:{}({})",
        pod["status"]["phase"].as_str().unwrap_or(""),
        parts.join(" ")
    );
    let marked = pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "pullcheck.io/ImagePullFailed" && c["status"] == "True");
    if marked {
        s.push_str(" marked");
    }
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        s.push_str(" deleting");
    }
    s
}

/// The controller's counts (`.status.active` …, or the sums of a PyTorchJob's
/// `replicaStatuses`) and its True conditions.
fn job_state(job: Option<&Value>) -> (String, Vec<String>) {
    let Some(j) = job else {
        return ("job=none".to_string(), Vec::new());
    };
    let conds: Vec<String> = j["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "True")
        .filter_map(|c| c["type"].as_str().map(str::to_string))
        .collect();
    let count = |key: &str| {
        j["status"][key].as_u64().unwrap_or_else(|| {
            j["status"]["replicaStatuses"]
                .as_object()
                .map(|rs| rs.values().filter_map(|r| r[key].as_u64()).sum())
                .unwrap_or(0)
        })
    };
    let mut s = format!(
        "active={} failed={} succeeded={}",
        count("active"),
        count("failed"),
        count("succeeded")
    );
    if !conds.is_empty() {
        s.push_str(&format!(" [{}]", conds.join(",")));
    }
    (s, conds)
}

/// The sample of `list` (a `kubectl get pods,KIND -A -o json` List) for `target` on `node`
/// at `t` seconds.
pub fn sample(list: &Value, target: &Target, node: &str, t: f64) -> Sample {
    let items: Vec<&Value> = list["items"].as_array().into_iter().flatten().collect();
    let pods: Vec<&Value> = items
        .iter()
        .copied()
        .filter(|i| i["kind"] == "Pod")
        .collect();
    let job = items.iter().copied().find(|i| {
        i["kind"] == target.kind
            && i["metadata"]["namespace"] == target.ns.as_str()
            && i["metadata"]["name"] == target.name.as_str()
    });
    let mut mine: Vec<&Value> = pods
        .iter()
        .copied()
        .filter(|p| {
            p["metadata"]["namespace"] == target.ns.as_str()
                && p["metadata"]["labels"][target.label] == target.name.as_str()
        })
        .collect();
    let key = |p: &Value| {
        (
            p["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            p["metadata"]["name"].as_str().unwrap_or("").to_string(),
        )
    };
    mine.sort_by_key(|p| key(p));
    let (job_s, conds) = job_state(job);
    let has = |c: &str| conds.iter().any(|x| x == c);
    let finished = if has("Failed") {
        Finished::Failed
    } else if has("Complete") {
        Finished::Complete
    } else if has("Succeeded") {
        Finished::Succeeded
    } else {
        Finished::Running
    };
    let states: Vec<String> = mine.iter().map(|p| pod_state(p)).collect();
    let live_pods: Vec<&Value> = pods.iter().copied().filter(|p| live(p, node)).collect();
    let in_ns: Vec<&Value> = live_pods
        .iter()
        .copied()
        .filter(|p| p["metadata"]["namespace"] == target.ns.as_str())
        .collect();
    let sum = |ps: &[&Value], read: fn(&Value) -> f64, r: &str| {
        // + 0.0: the sum of no pods is -0.0, which would print as "-0"
        ps.iter().map(|p| effective(p, read, r)).sum::<f64>() + 0.0
    };
    Sample {
        t: (t * 10.0).round() / 10.0,
        finished,
        failed_pods: mine
            .iter()
            .filter(|p| p["status"]["phase"] == "Failed")
            .count(),
        job: job_s,
        pods: if states.is_empty() {
            "no pods".to_string()
        } else {
            states.join("; ")
        },
        pod_names: mine
            .iter()
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
            .collect(),
        restarts: mine
            .iter()
            .flat_map(|p| all_statuses(p))
            .filter_map(|c| c["restartCount"].as_u64())
            .max()
            .unwrap_or(0),
        init_restarts: mine
            .iter()
            .flat_map(|p| {
                p["status"]["initContainerStatuses"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|c| c["name"] == "pullcheck")
            .filter_map(|c| c["restartCount"].as_u64())
            .max()
            .unwrap_or(0),
        terms: pullcheck_terminations(list, target),
        waiting: mine
            .iter()
            .flat_map(|p| {
                ["initContainerStatuses", "containerStatuses"]
                    .iter()
                    .flat_map(|k| p["status"][*k].as_array().cloned().unwrap_or_default())
                    .collect::<Vec<_>>()
            })
            .filter_map(|c| c["state"]["waiting"]["reason"].as_str().map(str::to_string))
            .collect(),
        ns_cpu_m: sum(&in_ns, cpu_m, "cpu"),
        ns_mem_mi: sum(&in_ns, mem_mi, "memory").floor() as u64,
        node_cpu_m: sum(&live_pods, cpu_m, "cpu"),
        node_mem_mi: sum(&live_pods, mem_mi, "memory").floor() as u64,
    }
}

/// The `pullcheck` init container's termination of each of the target's pods:
/// (exit code, message with newlines as spaces, at most 300 characters), from
/// `state.terminated` or else `lastState.terminated`; sorted, duplicates once.
pub fn pullcheck_terminations(list: &Value, target: &Target) -> Vec<(i64, String)> {
    let mut out: Vec<(i64, String)> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| {
            p["kind"] == "Pod"
                && p["metadata"]["namespace"] == target.ns.as_str()
                && p["metadata"]["labels"][target.label] == target.name.as_str()
        })
        .flat_map(|p| {
            p["status"]["initContainerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|c| c["name"] == "pullcheck")
        .filter_map(|c| {
            let t = if c["state"]["terminated"].is_object() {
                &c["state"]["terminated"]
            } else {
                &c["lastState"]["terminated"]
            };
            let code = t["exitCode"].as_i64()?;
            let msg: String = t["message"]
                .as_str()
                .unwrap_or("")
                .replace('\n', " ")
                .chars()
                .take(300)
                .collect();
            Some((code, msg))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// [`pullcheck_terminations`] as the doc prints them: `exit N: MESSAGE`, ` / `-joined.
pub fn termination_text(terms: &[(i64, String)]) -> String {
    terms
        .iter()
        .map(|(c, m)| format!("exit {c}: {m}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// A number as the doc prints it: integers without a fraction, zero as `0` (an empty f64
/// sum is -0.0 in Rust).
pub fn num(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities() {
        assert_eq!(cpu_m(&json!("250m")), 250.0);
        assert_eq!(cpu_m(&json!("1")), 1000.0);
        assert_eq!(cpu_m(&json!(2)), 2000.0);
        assert_eq!(cpu_m(&json!("0.5")), 500.0);
        assert_eq!(cpu_m(&Value::Null), 0.0);
        assert_eq!(mem_mi(&json!("2Gi")), 2048.0);
        assert_eq!(mem_mi(&json!("256Mi")), 256.0);
        assert_eq!(mem_mi(&json!("512Ki")), 0.5);
        assert_eq!(mem_mi(&json!("1048576")), 1.0);
        assert_eq!(mem_mi(&json!("1G")).floor(), 953.0);
    }

    fn pod(name: &str, ns: &str, phase: &str, created: &str) -> Value {
        json!({"kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created,
                         "labels": {"job-name": "injected"}},
            "spec": {"nodeName": "node-1",
                "initContainers": [{"name": "pullcheck", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]},
            "status": {"phase": phase}})
    }

    #[test]
    fn a_sample_of_an_injected_job() {
        let mut first = pod("injected-abcde", "ff-s2", "Failed", "2026-12-01T00:00:01Z");
        first["status"]["initContainerStatuses"] = json!([{"name": "pullcheck", "restartCount": 0,
            "state": {"terminated": {"exitCode": 11, "message": "line one\nline two"}}}]);
        first["status"]["containerStatuses"] =
            json!([{"name": "main", "state": {"waiting": {"reason": "PodInitializing"}}}]);
        let mut second = pod("injected-fghij", "ff-s2", "Pending", "2026-12-01T00:00:02Z");
        second["status"]["initContainerStatuses"] =
            json!([{"name": "pullcheck", "restartCount": 2, "state": {"running": {}}}]);
        second["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:03Z");
        second["status"]["conditions"] =
            json!([{"type": "pullcheck.io/ImagePullFailed", "status": "True"}]);
        // another namespace's live pod counts for the node only; a sidecar init container
        // (restartPolicy Always) is not an init container's maximum
        let mut other = pod("web-1", "other", "Running", "2026-12-01T00:00:00Z");
        other["metadata"]["labels"] = json!({});
        other["spec"]["initContainers"][0]["restartPolicy"] = json!("Always");
        other["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = json!("4");
        let job = json!({"kind": "Job", "metadata": {"name": "injected", "namespace": "ff-s2"},
            "status": {"failed": 1, "conditions": [
                {"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"},
                {"type": "Suspended", "status": "False"}]}});
        let list = json!({"items": [second, other, first, job]});
        let s = sample(&list, &Target::job("ff-s2", "injected"), "node-1", 3.449);
        assert_eq!(
            s,
            Sample {
                t: 3.4,
                finished: Finished::Failed,
                failed_pods: 1,
                job: "active=0 failed=1 succeeded=0 [FailureTarget,Failed]".into(),
                pods: "abcde:Failed(init pullcheck=T:11 main=W:PodInitializing); \
                       fghij:Pending(init pullcheck=Running r2) marked deleting"
                    .into(),
                pod_names: vec!["injected-abcde".into(), "injected-fghij".into()],
                waiting: vec!["PodInitializing".into()],
                restarts: 2,
                init_restarts: 2,
                terms: vec![(11, "line one line two".to_string())],
                ns_cpu_m: 1000.0,
                ns_mem_mi: 2048,
                node_cpu_m: 2000.0,
                node_mem_mi: 4096,
            }
        );
        assert_eq!(
            pullcheck_terminations(&list, &Target::job("ff-s2", "injected")),
            vec![(11, "line one line two".to_string())]
        );
    }

    #[test]
    fn no_job_and_no_pods() {
        let s = sample(
            &json!({"items": []}),
            &Target::job("ns", "j"),
            "node-1",
            0.0,
        );
        assert_eq!(
            (s.job.as_str(), s.pods.as_str(), s.finished),
            ("job=none", "no pods", Finished::Running)
        );
        assert_eq!(
            (num(s.ns_cpu_m), num(-0.0)),
            ("0".to_string(), "0".to_string())
        );
        assert!(s.ns_cpu_m.is_sign_positive());
    }

    #[test]
    fn pytorchjob_counts_come_from_replica_statuses() {
        let ptj = json!({"kind": "PyTorchJob", "metadata": {"name": "t", "namespace": "n"},
            "status": {"replicaStatuses": {"Master": {"active": 1}, "Worker": {"failed": 2}},
                       "conditions": [{"type": "Succeeded", "status": "True"}]}});
        let target = Target {
            kind: "PyTorchJob",
            ns: "n".into(),
            name: "t".into(),
            label: "training.kubeflow.org/job-name",
        };
        let s = sample(&json!({"items": [ptj]}), &target, "node-1", 1.0);
        assert_eq!(s.job, "active=1 failed=2 succeeded=0 [Succeeded]");
        assert_eq!(s.finished, Finished::Succeeded);
    }
}
