//! What the audit prints: the `kubectl get`-like table and the JSON document
//! (`{"schema_version":1,"exit_code":N,"workloads":[…]}`, docs/audit.md). No decisions here.

use std::fmt::Write as _;

use serde::Serialize;

use super::platforms::PlatformSource;
use super::select::SkipReason;
use crate::report::json::{RenderError, SCHEMA_VERSION, render};
use crate::report::{count, printable};
use crate::verdict::Verdict;

/// How an image was checked, when not with every credential its pod would have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum CredentialsNote {
    /// The API refused (403) a pull secret or ServiceAccount the template needs.
    #[serde(rename = "anonymous (secrets not readable)")]
    SecretsNotReadable,
}

/// One image of one workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ImageRow {
    /// The container (or image volume) name.
    pub container: String,
    /// The image as written.
    pub image: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Its exit code alone.
    pub exit_code: u8,
    /// Why: the engine's detail.
    pub reason: String,
    /// Set when the check lacked credentials the pod would have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials: Option<CredentialsNote>,
}

/// When a CronJob makes its next Job ([`super::schedule`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NextRun {
    /// The next scheduled time.
    At(jiff::Timestamp),
    /// `spec.suspend: true`: no run until it is resumed.
    Suspended,
    /// The schedule or zone could not be read: why.
    Unknown(String),
}

impl std::fmt::Display for NextRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // RFC 3339 in UTC, to the second: `2026-12-04T03:00:00Z`.
            NextRun::At(t) => write!(f, "{}", t.strftime("%Y-%m-%dT%H:%M:%SZ")),
            NextRun::Suspended => f.write_str("suspended"),
            NextRun::Unknown(why) => write!(f, "unknown: {why}"),
        }
    }
}

/// In JSON as in the table: one string.
impl Serialize for NextRun {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One audited workload and its images, in template order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct WorkloadRow {
    /// Its namespace (empty for none).
    pub namespace: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// A CronJob's next run; `None` for every other kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run: Option<NextRun>,
    /// Its pulled images.
    pub images: Vec<ImageRow>,
}

/// One object left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SkippedRow {
    /// Its namespace.
    pub namespace: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Why.
    #[serde(flatten)]
    pub reason: SkipReason,
}

/// A list the API refused (403): what RBAC rule would allow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ForbiddenList {
    /// The API group (empty for the core group).
    pub group: String,
    /// The resource, as RBAC rules name it (`jobs`); the verb refused is always `list`.
    #[serde(rename = "resource")]
    pub plural: String,
    /// The namespace listed; `None` for every namespace (`-A`).
    pub namespace: Option<String>,
}

impl ForbiddenList {
    /// `jobs.batch`, `pods`.
    pub(crate) fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `in namespace team-a`, or `cluster-wide`.
    pub(crate) fn scope(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "cluster-wide".to_string(),
        }
    }
}

/// The result of one pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Report {
    /// `scan`'s rule over every image's verdict ([`crate::verdict::combined_exit_code`]).
    pub exit_code: u8,
    /// The platforms checked: `os/arch` strings.
    pub platforms: Vec<String>,
    /// Where they came from.
    pub platform_source: PlatformSource,
    /// The workloads, by namespace, kind and name.
    pub workloads: Vec<WorkloadRow>,
    /// The objects left out.
    pub skipped: Vec<SkippedRow>,
    /// Resources the API server doesn't serve (no such CRD): nothing of theirs exists to
    /// audit. Sorted.
    pub unserved: Vec<String>,
    /// Lists refused (403): their workloads were not read, so the result is incomplete.
    pub forbidden: Vec<ForbiddenList>,
}

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    #[serde(flatten)]
    report: &'a Report,
}

/// The `-o json` document.
pub(crate) fn json(report: &Report) -> Result<String, RenderError> {
    render(&Document {
        schema_version: SCHEMA_VERSION,
        report,
    })
}

/// The columns of the table; the last is not padded.
const COLUMNS: usize = 7;

/// The `-o yaml` document: the JSON document's value, written as YAML by the project's one
/// writer ([`crate::k8s::yaml::to_yaml`]), so both carry the same fields.
pub(crate) fn yaml(report: &Report) -> Result<String, String> {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        report,
    };
    let value = serde_json::to_value(&doc).map_err(|e| e.to_string())?;
    crate::k8s::yaml::to_yaml(&value).map_err(|e| e.to_string())
}

/// The table: one line per image, columns padded to their widest cell as `kubectl get`
/// does (three spaces apart; NEXT RUN is `-` for kinds other than CronJob), then footnotes
/// for `*` rows and for what was not read, and a summary line.
pub(crate) fn text(report: &Report) -> String {
    let mut rows: Vec<[String; COLUMNS]> = vec![[
        "NAMESPACE".into(),
        "KIND/NAME".into(),
        "CONTAINER".into(),
        "IMAGE".into(),
        "NEXT RUN".into(),
        "VERDICT".into(),
        "REASON".into(),
    ]];
    let mut marked = false;
    for w in &report.workloads {
        for i in &w.images {
            let star = if i.credentials.is_some() {
                marked = true;
                "*"
            } else {
                ""
            };
            let reason = if i.verdict == Verdict::Pullable {
                "-".to_string()
            } else {
                printable(&i.reason).into_owned()
            };
            rows.push([
                printable(&w.namespace).into_owned(),
                printable(&format!("{}/{}", w.kind, w.name)).into_owned(),
                printable(&i.container).into_owned(),
                printable(&i.image).into_owned(),
                w.next_run.as_ref().map_or_else(
                    || "-".to_string(),
                    |n| printable(&n.to_string()).into_owned(),
                ),
                format!("{}{star}", i.verdict),
                reason,
            ]);
        }
    }
    let mut out = String::new();
    if rows.len() > 1 {
        let widths: Vec<usize> = (0..COLUMNS - 1)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for r in &rows {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                if c < COLUMNS - 1 {
                    let _ = write!(line, "{cell:<w$}   ", w = widths[c]);
                } else {
                    line.push_str(cell);
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    if marked {
        out.push_str("* checked anonymously: the pull secrets of its pods may not be read (403)\n");
    }
    if !report.forbidden.is_empty() {
        let names: Vec<String> = report
            .forbidden
            .iter()
            .map(ForbiddenList::resource)
            .collect();
        let _ = writeln!(
            out,
            "not read, listing refused (403): {} (the result is incomplete)",
            names.join(", ")
        );
    }
    if !report.unserved.is_empty() {
        let _ = writeln!(
            out,
            "not served by this API server, skipped: {}",
            report.unserved.join(", ")
        );
    }
    let images: Vec<&ImageRow> = report.workloads.iter().flat_map(|w| &w.images).collect();
    let failing = images
        .iter()
        .filter(|i| i.verdict != Verdict::Pullable)
        .count();
    let _ = writeln!(
        out,
        "audited {}, {}: {} pullable, {failing} not; {} skipped (exit {})",
        count(report.workloads.len(), "workload"),
        count(images.len(), "image"),
        images.len() - failing,
        report.skipped.len(),
        report.exit_code
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(container: &str, image: &str, verdict: Verdict, reason: &str) -> ImageRow {
        ImageRow {
            container: container.into(),
            image: image.into(),
            verdict,
            exit_code: verdict.exit_code(),
            reason: reason.into(),
            credentials: None,
        }
    }

    fn report() -> Report {
        let mut anon = row(
            "app",
            "r.example/private:v1",
            Verdict::Unauthenticated,
            "401",
        );
        anon.credentials = Some(CredentialsNote::SecretsNotReadable);
        Report {
            exit_code: 11,
            platforms: vec!["linux/amd64".into()],
            platform_source: PlatformSource::Nodes,
            workloads: vec![
                WorkloadRow {
                    namespace: "team-a".into(),
                    kind: "CronJob".into(),
                    name: "nightly".into(),
                    next_run: Some(NextRun::At("2026-12-04T03:00:00Z".parse().unwrap())),
                    images: vec![row(
                        "main",
                        "r.example/gone:v1",
                        Verdict::NotFound,
                        "manifest unknown",
                    )],
                },
                WorkloadRow {
                    namespace: "team-a".into(),
                    kind: "Deployment".into(),
                    name: "web".into(),
                    next_run: None,
                    images: vec![
                        row("web", "r.example/web:v2", Verdict::Pullable, "ok"),
                        anon,
                    ],
                },
            ],
            skipped: vec![SkippedRow {
                namespace: "team-a".into(),
                kind: "Job".into(),
                name: "nightly-1".into(),
                reason: SkipReason::Mirror,
            }],
            unserved: vec![
                "jobsets.jobset.x-k8s.io".into(),
                "tfjobs.kubeflow.org".into(),
            ],
            forbidden: vec![ForbiddenList {
                group: "batch".into(),
                plural: "jobs".into(),
                namespace: Some("team-a".into()),
            }],
        }
    }

    #[test]
    fn the_table_is_aligned_like_kubectl_get_with_a_note_for_anonymous_rows() {
        assert_eq!(
            text(&report()),
            "\
NAMESPACE   KIND/NAME         CONTAINER   IMAGE                  NEXT RUN               VERDICT            REASON
team-a      CronJob/nightly   main        r.example/gone:v1      2026-12-04T03:00:00Z   not_found          manifest unknown
team-a      Deployment/web    web         r.example/web:v2       -                      pullable           -
team-a      Deployment/web    app         r.example/private:v1   -                      unauthenticated*   401
* checked anonymously: the pull secrets of its pods may not be read (403)
not read, listing refused (403): jobs.batch (the result is incomplete)
not served by this API server, skipped: jobsets.jobset.x-k8s.io, tfjobs.kubeflow.org
audited 2 workloads, 3 images: 1 pullable, 2 not; 1 skipped (exit 11)
"
        );
    }

    #[test]
    fn an_empty_audit_is_one_summary_line() {
        let r = Report {
            exit_code: 0,
            platforms: vec![],
            platform_source: PlatformSource::DefaultNoNodes,
            workloads: vec![],
            skipped: vec![],
            unserved: vec![],
            forbidden: vec![],
        };
        assert_eq!(
            text(&r),
            "audited 0 workloads, 0 images: 0 pullable, 0 not; 0 skipped (exit 0)\n"
        );
    }

    #[test]
    fn the_yaml_document_is_the_json_document() {
        let r = report();
        let from_yaml: serde_json::Value = serde_saphyr::from_str(&yaml(&r).unwrap()).unwrap();
        let from_json: serde_json::Value = serde_json::from_str(&json(&r).unwrap()).unwrap();
        assert_eq!(from_yaml, from_json);
        assert!(
            yaml(&r)
                .unwrap()
                .starts_with("schema_version: 1\nexit_code: 11\n")
        );
    }

    #[test]
    fn the_json_document_names_the_schema_and_marks_anonymous_rows() {
        let v: serde_json::Value = serde_json::from_str(&json(&report()).unwrap()).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["exit_code"], 11);
        assert_eq!(v["platform_source"], "nodes");
        assert_eq!(v["workloads"][0]["next_run"], "2026-12-04T03:00:00Z");
        // Only CronJobs have the field.
        assert_eq!(v["workloads"][1].get("next_run"), None);
        assert_eq!(NextRun::Suspended.to_string(), "suspended");
        assert_eq!(
            serde_json::to_value(NextRun::Unknown("no time matches within five years".into()))
                .unwrap(),
            "unknown: no time matches within five years"
        );
        assert_eq!(
            v["workloads"][1]["images"][1],
            serde_json::json!({"container": "app", "image": "r.example/private:v1",
                "verdict": "unauthenticated", "exit_code": 14, "reason": "401",
                "credentials": "anonymous (secrets not readable)"})
        );
        assert_eq!(
            v["skipped"],
            serde_json::json!([{"namespace": "team-a", "kind": "Job", "name": "nightly-1", "reason": "mirror"}])
        );
        assert_eq!(
            v["unserved"],
            serde_json::json!(["jobsets.jobset.x-k8s.io", "tfjobs.kubeflow.org"])
        );
        assert_eq!(
            v["forbidden"],
            serde_json::json!([{"group": "batch", "resource": "jobs", "namespace": "team-a"}])
        );
    }
}
