//! `pullcheck audit`: which workloads of a live cluster would fail to pull an image in
//! their next pod, and why (issue 25).
//!
//! One pass: list the Node objects (the platforms, [`platforms`]) and every collection the
//! template table knows ([`collections`]), leave out the objects whose template is checked
//! elsewhere or makes no more pods ([`select`]), and resolve each workload's pod templates
//! as the webhook and the Kueue check resolve them
//! ([`crate::webhook::handler::resolve_pod_templates`]: the one engine, the verdict cache
//! keyed by credential, the template's pull secrets and ServiceAccount read under the
//! caller's RBAC), so each distinct image and credential is asked of its registry once. The
//! result is a [`report::Report`]; what should be said on stderr comes back as [`Note`]s.
//!
//! It sits above `webhook`, as `kueue` does: the resolver is the webhook's.

pub(crate) mod collections;
pub(crate) mod platforms;
pub(crate) mod report;
pub(crate) mod schedule;
pub(crate) mod select;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use crate::apiserver::{ApiClient, ApiError};
use crate::k8s::templates::{Table, namespace_and_name, pod_templates, template_images};
use crate::platform::Platform;
use crate::verdict::{Verdict, combined_exit_code};
use crate::webhook::handler::{WebhookState, resolve_pod_templates};
use crate::webhook::platforms::template_platforms;
use crate::webhook::review::{Checked, ImageCheck, SecretAccess};
use collections::{Collection, Listed};
use platforms::ClusterPlatforms;
use report::{CredentialsNote, ForbiddenList, ImageRow, NextRun, Report, SkippedRow, WorkloadRow};

/// Workloads resolved at once (each resolves its own images `--concurrency` at a time,
/// and the verdict cache coalesces the same image asked twice).
const WORKLOADS_AT_ONCE: usize = 8;

/// A list the pass can't do without, and the API's answer.
#[derive(Debug, thiserror::Error)]
#[error("listing {resource}: {source}")]
pub(crate) struct AuditError {
    /// `nodes`, `deployments.apps`, …
    pub resource: String,
    /// The failure.
    pub source: ApiError,
}

/// Something to say on stderr, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    /// Which platforms are checked, and from where.
    Platforms(ClusterPlatforms),
    /// A collection the caller may not list (403): its workloads are not audited.
    Forbidden(ForbiddenList),
    /// `-A` and some list was refused: a namespaced Role can't grant a cluster-wide list.
    AllNamespacesForbidden,
    /// Pull secrets the caller may not read (403) in these namespaces: the images of their
    /// templates were checked without them, marked.
    SecretsRefused(Vec<String>),
    /// Another credential problem (a secret that doesn't decode, a read that timed out):
    /// the failing images of its template are reported transient with it.
    Credentials(String),
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::Platforms(p) => f.write_str(&p.announce()),
            Note::Forbidden(l) => write!(
                f,
                "{} may not be listed {} (403): not audited; RBAC needs verb \"list\" on resource \"{}\" in API group \"{}\"{}",
                l.resource(),
                l.scope(),
                l.plural,
                l.group,
                if l.group.is_empty() { " (core)" } else { "" }
            ),
            Note::AllNamespacesForbidden => f.write_str(
                "-A lists every namespace at once, which only a ClusterRole (bound by a ClusterRoleBinding) grants; a namespaced Role doesn't: audit one namespace with -n NAMESPACE",
            ),
            Note::SecretsRefused(ns) => write!(
                f,
                "pull secrets may not be read (403) in namespace {}: their workloads' images were checked anonymously, marked *",
                ns.join(", ")
            ),
            Note::Credentials(line) => f.write_str(line),
        }
    }
}

/// How far the pass is, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Everything is listed: the workloads, their pod templates and their distinct images.
    Found {
        /// Workloads to audit.
        workloads: usize,
        /// Their pod templates.
        templates: usize,
        /// Distinct image references among them.
        images: usize,
    },
    /// Images with a verdict, of all the image uses.
    Checked {
        /// Done so far.
        done: usize,
        /// All.
        total: usize,
    },
}

/// What one pass looks at.
pub(crate) struct Pass<'a> {
    /// The resolver: the webhook's state, built for the audit.
    pub state: Arc<WebhookState>,
    /// The API client for the lists.
    pub client: &'a ApiClient,
    /// The namespace (`None`: every one).
    pub namespace: Option<&'a str>,
    /// The time one workload's images may take.
    pub budget: Duration,
    /// Now, for CronJobs' next runs.
    pub now: jiff::Timestamp,
}

/// One workload to audit.
struct Workload {
    namespace: String,
    kind: String,
    name: String,
    object: Value,
}

/// Run one pass; `progress` is told how far it is.
pub(crate) async fn run(
    pass: Pass<'_>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Report, Vec<Note>), AuditError> {
    let mut notes = Vec::new();
    let cluster = ClusterPlatforms::choose(nodes(pass.client).await?.as_deref());
    notes.push(Note::Platforms(cluster.clone()));
    let table = collections::audit_table();
    let mut objects = Vec::new();
    let mut unread = Unread::default();
    for c in collections::collections(&table) {
        let listed = collections::list(pass.client, &c, pass.namespace)
            .await
            .map_err(|source| AuditError {
                resource: c.resource(),
                source,
            })?;
        unread.add(&c, &listed, pass.namespace);
        if let Listed::Objects(o) = listed {
            objects.extend(o);
        }
    }
    let (unserved, forbidden) = unread.finish();
    notes.extend(forbidden.iter().cloned().map(Note::Forbidden));
    if pass.namespace.is_none() && !forbidden.is_empty() {
        notes.push(Note::AllNamespacesForbidden);
    }
    let (workloads, mut skipped) = select_all(dedupe(objects));
    let (templates, images) = census(&workloads, &table);
    progress(Progress::Found {
        workloads: workloads.len(),
        templates,
        images,
    });
    let total: usize = workloads
        .iter()
        .map(|w| pulled_images(&w.object, &table))
        .sum();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let table = &table;
    let cluster_platforms = &cluster.platforms;
    let state = &pass.state;
    let mut rows: Vec<(WorkloadRow, Vec<String>)> = futures_util::stream::iter(workloads)
        .map(|w| {
            let done = &done;
            async move {
                let (checks, problems) =
                    resolve(state, &w, table, cluster_platforms, pass.budget).await;
                let n = done.fetch_add(checks.len(), std::sync::atomic::Ordering::Relaxed)
                    + checks.len();
                progress(Progress::Checked { done: n, total });
                (
                    WorkloadRow {
                        next_run: (w.kind == "CronJob").then(|| next_run(&w.object, pass.now)),
                        namespace: w.namespace,
                        kind: w.kind,
                        name: w.name,
                        images: checks.into_iter().map(image_row).collect(),
                    },
                    problems,
                )
            }
        })
        .buffer_unordered(WORKLOADS_AT_ONCE)
        .collect()
        .await;
    rows.sort_by(|(a, _), (b, _)| {
        (&a.namespace, &a.kind, &a.name).cmp(&(&b.namespace, &b.kind, &b.name))
    });
    let mut refused: Vec<String> = Vec::new();
    for (w, problems) in &rows {
        for p in problems {
            let note = Note::Credentials(p.clone());
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        if w.images.iter().any(|i| i.credentials.is_some()) && !refused.contains(&w.namespace) {
            refused.push(w.namespace.clone());
        }
    }
    if !refused.is_empty() {
        refused.sort();
        notes.push(Note::SecretsRefused(refused));
    }
    skipped.sort_by(|a, b| (&a.namespace, &a.kind, &a.name).cmp(&(&b.namespace, &b.kind, &b.name)));
    let workloads: Vec<WorkloadRow> = rows.into_iter().map(|(w, _)| w).collect();
    let exit_code = exit_code(
        workloads.iter().flat_map(|w| &w.images).map(|i| i.verdict),
        !forbidden.is_empty(),
    );
    Ok((
        Report {
            exit_code,
            platforms: cluster.platforms.iter().map(Platform::to_string).collect(),
            platform_source: cluster.source,
            workloads,
            skipped,
            unserved,
            forbidden,
        },
        notes,
    ))
}

/// A CronJob's next run: `suspended`, else its schedule's next time after `now` in its
/// `spec.timeZone` ([`schedule::Schedule`]).
fn next_run(cron_job: &Value, now: jiff::Timestamp) -> NextRun {
    if cron_job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        return NextRun::Suspended;
    }
    let text = |p: &str| cron_job.pointer(p).and_then(Value::as_str);
    let last = text("/status/lastScheduleTime")
        .or_else(|| text("/metadata/creationTimestamp"))
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let Some(spec) = text("/spec/schedule") else {
        return NextRun::Unknown("no spec.schedule".into());
    };
    match schedule::Schedule::parse(spec, text("/spec/timeZone")).and_then(|s| s.next(now, last)) {
        Ok(t) => NextRun::At(t),
        Err(e) => NextRun::Unknown(e.to_string()),
    }
}

/// The Node objects; `None` when they may not be listed (403).
async fn nodes(client: &ApiClient) -> Result<Option<Vec<Value>>, AuditError> {
    let c = Collection {
        group: String::new(),
        version: Some("v1".into()),
        kind: "Node".into(),
        plural: "nodes".into(),
    };
    match collections::list(client, &c, None).await {
        Ok(Listed::Objects(n)) => Ok(Some(n)),
        Ok(Listed::Forbidden) => Ok(None),
        Ok(Listed::NotServed) => Ok(Some(Vec::new())),
        Err(source) => Err(AuditError {
            resource: c.resource(),
            source,
        }),
    }
}

/// The exit code of a pass: `scan`'s rule over the images read
/// ([`combined_exit_code`]), except that a pass that could not list some kind (403) is never
/// 0 nor 20: its silence about those workloads proves nothing, and asking again won't help.
/// A permanent failure among the images read (10–14) still wins, being a finding about a
/// real workload; otherwise it is 2, "the caller's to fix", as `watch --once` exits when
/// the API refuses it.
pub(crate) fn exit_code(verdicts: impl IntoIterator<Item = Verdict>, incomplete: bool) -> u8 {
    let code = combined_exit_code(verdicts);
    if incomplete && !(10..20).contains(&code) {
        crate::verdict::code::USAGE
    } else {
        code
    }
}

/// The collections that could not be read, gathered while listing.
#[derive(Default)]
struct Unread {
    /// Resources (`jobsets.jobset.x-k8s.io`) with a version not served, in table order.
    missing: Vec<String>,
    /// Resources with a version that was served.
    served: std::collections::HashSet<String>,
    /// Lists refused (403), each resource once.
    forbidden: Vec<ForbiddenList>,
}

impl Unread {
    fn add(&mut self, c: &Collection, listed: &Listed, namespace: Option<&str>) {
        let resource = c.resource();
        match listed {
            Listed::Objects(_) => {
                self.served.insert(resource);
            }
            Listed::NotServed => {
                if !self.missing.contains(&resource) {
                    self.missing.push(resource);
                }
            }
            Listed::Forbidden => {
                // Served (the API knows what it refuses), and said once per resource.
                self.served.insert(resource);
                let f = ForbiddenList {
                    group: c.group.clone(),
                    plural: c.plural.clone(),
                    namespace: namespace.map(str::to_string),
                };
                if !self.forbidden.contains(&f) {
                    self.forbidden.push(f);
                }
            }
        }
    }

    /// The resources no version of which is served (an MPIJob served as `kubeflow.org/v1`
    /// but not `v2beta1` was read), sorted; and the refused lists.
    fn finish(self) -> (Vec<String>, Vec<ForbiddenList>) {
        let mut unserved: Vec<String> = self
            .missing
            .into_iter()
            .filter(|r| !self.served.contains(r))
            .collect();
        unserved.sort();
        (unserved, self.forbidden)
    }
}

/// Each object once: a CRD served in two versions (an MPIJob as `kubeflow.org/v1` and
/// `v2beta1`) lists the same object under both; the first listed (the table's order) wins.
fn dedupe(objects: Vec<Value>) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    objects
        .into_iter()
        .filter(
            |o| match o.pointer("/metadata/uid").and_then(Value::as_str) {
                Some(uid) => seen.insert(uid.to_string()),
                None => true,
            },
        )
        .collect()
}

/// The objects to audit, and the ones left out with why ([`select::skip_reason`]; a
/// Workload whose owner was read is that owner's copy, [`select::owned_workload`]).
fn select_all(objects: Vec<Value>) -> (Vec<Workload>, Vec<SkippedRow>) {
    let mut audit = Vec::new();
    let mut skipped = Vec::new();
    let uids: std::collections::HashSet<String> = objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/uid").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    for object in objects {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let (namespace, name) = namespace_and_name(&object);
        let reason = select::skip_reason(&kind, &object).or_else(|| {
            (kind == "Workload")
                .then(|| select::owned_workload(&object, &uids))
                .flatten()
        });
        match reason {
            Some(reason) => skipped.push(SkippedRow {
                namespace,
                kind,
                name,
                reason,
            }),
            None => audit.push(Workload {
                namespace,
                kind,
                name,
                object,
            }),
        }
    }
    (audit, skipped)
}

/// The pod templates of `obj`, with their JSON pointers.
fn templates_of<'a>(obj: &'a Value, table: &Table) -> Vec<(&'a Value, String)> {
    pod_templates(obj, table)
        .into_iter()
        .filter_map(|t| Some((obj.pointer(&t.pointer)?, t.pointer)))
        .collect()
}

/// How many images of `obj` the kubelet would pull.
fn pulled_images(obj: &Value, table: &Table) -> usize {
    templates_of(obj, table)
        .iter()
        .flat_map(|(t, p)| template_images(t, p))
        .filter(|u| u.is_pulled())
        .count()
}

/// The pod templates of the workloads, and their distinct pulled image references.
fn census(workloads: &[Workload], table: &Table) -> (usize, usize) {
    let mut templates = 0;
    let mut images = std::collections::HashSet::new();
    for w in workloads {
        for (t, p) in templates_of(&w.object, table) {
            templates += 1;
            for u in template_images(t, &p) {
                if u.is_pulled() {
                    images.insert(u.image);
                }
            }
        }
    }
    (templates, images.len())
}

/// One workload's images, each template for the cluster's platforms narrowed by its own
/// selectors, as the webhook resolves them.
async fn resolve(
    state: &WebhookState,
    w: &Workload,
    table: &Table,
    cluster: &[Platform],
    budget: Duration,
) -> (Vec<ImageCheck>, Vec<String>) {
    let found = templates_of(&w.object, table);
    let templates: Vec<(&Value, &str)> = found.iter().map(|(t, p)| (*t, p.as_str())).collect();
    let platforms: Vec<Vec<Platform>> = templates
        .iter()
        .map(|(t, _)| template_platforms(t, cluster))
        .collect();
    resolve_pod_templates(state, &w.namespace, &templates, &platforms, budget).await
}

/// A check as a row: no verdict (no time, a credential problem) is transient, as the
/// webhook's warning says it.
fn image_row(c: ImageCheck) -> ImageRow {
    let (verdict, reason) = match c.result {
        Checked::Done(o) => (o.verdict, o.detail),
        Checked::NotVerified(_, why) => (Verdict::Transient, why),
    };
    ImageRow {
        container: c.container,
        image: c.image,
        verdict,
        exit_code: verdict.exit_code(),
        reason,
        credentials: match c.secrets {
            SecretAccess::Refused => Some(CredentialsNote::SecretsNotReadable),
            SecretAccess::Read => None,
        },
    }
}

#[cfg(test)]
mod tests;
