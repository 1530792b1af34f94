//! The collections the audit lists: every kind of the template table
//! ([`crate::k8s::templates::Table`], the long-running workloads included), as API paths,
//! and the list calls with their limits. A kind whose collection the server doesn't serve
//! (a 404, or a group discovery doesn't know: no such CRD) is left out and named once in the
//! report; one the user may not list (a 403) is said with the RBAC rule it lacks, and the run
//! goes on without it (the exit code says the result is incomplete, [`super::exit_code`]).

use std::time::Duration;

use serde_json::Value;
use url::Url;

use crate::apiserver::ApiClient;
use crate::apiserver::ApiError;
use crate::apiserver::client::Limits;
use crate::k8s::templates::Table;

/// Objects per page of a list (what kubectl asks for with `--chunk-size`'s default).
const PAGE: u32 = 500;
/// Bounds of one page: 500 Pods are a few MiB.
const LIST: Limits = Limits::new(Duration::from_secs(30), 64 * 1024 * 1024);
/// Bounds of a discovery document.
const DISCOVERY: Limits = Limits::new(Duration::from_secs(10), 1024 * 1024);

/// One collection, e.g. `apps/v1` `deployments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Collection {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version; `None` for a table row naming only the group (every version), asked of
    /// discovery.
    pub version: Option<String>,
    /// The kind, as the table names it.
    pub kind: String,
    /// The resource name in paths.
    pub plural: String,
}

impl Collection {
    /// `group/version`, or `version` for the core group (`v1`).
    pub(crate) fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// What messages call it: `jobsets.jobset.x-k8s.io`, `pods`.
    pub(crate) fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// The template table the audit reads: the built-in kinds, the long-running workloads, and
/// Kueue's Workload (`kueue.x-k8s.io`, every version: v0.19.2's CRD serves `v1beta2`, its
/// storage version, and `v1beta1`, with `spec.podSets[*].template` in both). The Workload
/// row is the audit's only: the webhook and `inject` never change a Workload, Kueue makes it
/// from its job.
pub(crate) fn audit_table() -> Table {
    let mut table = Table::builtin().with_workloads();
    table.extend(vec![crate::k8s::templates::KindEntry {
        api_version: "kueue.x-k8s.io".into(),
        kind: "Workload".into(),
        pod_template_paths: vec!["spec.podSets[*].template".into()],
        job_spec_path: None,
        run_policy_path: None,
    }]);
    table
}

/// The collections of `table`'s kinds, in the order they are listed: the table's, one per
/// (group, version, kind).
///
/// The resource name is the kind in lower case plus `s`, which is what every kind the
/// built-in table knows is called (`cronjobs`, `pytorchjobs`, `jobsets`): the built-ins are
/// checked against the real names by a test, so a kind that broke the rule would fail it.
pub(crate) fn collections(table: &Table) -> Vec<Collection> {
    let mut out: Vec<Collection> = Vec::new();
    for e in &table.entries {
        let (group, version) = match e.api_version.rsplit_once('/') {
            Some((g, v)) => (g.to_string(), Some(v.to_string())),
            // A bare word with no '/' is the core version `v1` or a bare group.
            None if e.api_version.starts_with('v') && !e.api_version.contains('.') => {
                (String::new(), Some(e.api_version.clone()))
            }
            None => (e.api_version.clone(), None),
        };
        let c = Collection {
            group,
            version,
            plural: format!("{}s", e.kind.to_lowercase()),
            kind: e.kind.clone(),
        };
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// What listing one collection gave.
#[derive(Debug)]
pub(crate) enum Listed {
    /// The objects, each with its `apiVersion` and `kind` set (list items carry neither).
    Objects(Vec<Value>),
    /// The server doesn't serve it (404): the CRD isn't installed.
    NotServed,
    /// The user may not list it (403).
    Forbidden,
}

/// List `c` in `namespace` (`None`: every namespace), every page.
pub(crate) async fn list(
    client: &ApiClient,
    c: &Collection,
    namespace: Option<&str>,
) -> Result<Listed, ApiError> {
    let version = match &c.version {
        Some(v) => v.clone(),
        None => match preferred_version(client, &c.group).await? {
            Some(v) => v,
            None => return Ok(Listed::NotServed),
        },
    };
    let mut segments: Vec<&str> = if c.group.is_empty() {
        vec!["api", &version]
    } else {
        vec!["apis", &c.group, &version]
    };
    if let Some(ns) = namespace {
        segments.extend(["namespaces", ns]);
    }
    segments.push(&c.plural);
    let url: Url = client.url(&segments);
    match client.list(&url, PAGE, LIST).await {
        Ok(list) => {
            let api_version = c.api_version(&version);
            Ok(Listed::Objects(
                list.items
                    .into_iter()
                    .map(|mut o| {
                        if let Some(m) = o.as_object_mut() {
                            m.insert("apiVersion".into(), api_version.clone().into());
                            m.insert("kind".into(), c.kind.clone().into());
                        }
                        o
                    })
                    .collect(),
            ))
        }
        Err(e) if e.status() == Some(404) => Ok(Listed::NotServed),
        Err(e) if e.status() == Some(403) => Ok(Listed::Forbidden),
        Err(e) => Err(e),
    }
}

/// The group's preferred version from discovery (`GET /apis/GROUP`); `None` when the
/// group isn't served.
async fn preferred_version(client: &ApiClient, group: &str) -> Result<Option<String>, ApiError> {
    let url = client.url(&["apis", group]);
    Ok(client.get(&url, DISCOVERY).await?.and_then(|g| {
        g.pointer("/preferredVersion/version")
            .and_then(Value::as_str)
            .map(str::to_string)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_kind_and_workload_is_one_collection() {
        let got: Vec<String> = collections(&audit_table())
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c.api_version(c.version.as_deref().unwrap_or("*")),
                    c.resource()
                )
            })
            .collect();
        // The resource names as the API serves them (k8s.io/api, the training-operator,
        // mpi-operator, JobSet and Kueue CRDs).
        assert_eq!(
            got,
            [
                "batch/v1 jobs.batch",
                "batch/v1 cronjobs.batch",
                "v1 pods",
                "kubeflow.org/v1 pytorchjobs.kubeflow.org",
                "kubeflow.org/v1 tfjobs.kubeflow.org",
                "kubeflow.org/v1 mpijobs.kubeflow.org",
                "kubeflow.org/v1 xgboostjobs.kubeflow.org",
                "kubeflow.org/v1 paddlejobs.kubeflow.org",
                "kubeflow.org/v1 jaxjobs.kubeflow.org",
                "kubeflow.org/v2beta1 mpijobs.kubeflow.org",
                "jobset.x-k8s.io/* jobsets.jobset.x-k8s.io",
                "apps/v1 deployments.apps",
                "apps/v1 statefulsets.apps",
                "apps/v1 daemonsets.apps",
                "apps/v1 replicasets.apps",
                "kueue.x-k8s.io/* workloads.kueue.x-k8s.io",
            ]
        );
    }
}
