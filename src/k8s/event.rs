//! The core/v1 Events pullcheck writes (the watch about pods and their owners, the Kueue
//! admission check about Workloads and their jobs), built in one place so they read alike
//! in `kubectl describe` and `kubectl get events`.
//!
//! Fields as k8s.io/api `core/v1/types.go` `Event`: `involvedObject` is an object reference
//! (`apiVersion`, `kind`, `name`, `namespace`, `uid`), `type` is `Normal` or `Warning`, the
//! message is cut to 1024 characters (the API server's limit is larger; a readable line is
//! the point).

use serde_json::{Value, json};

/// An Event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    /// Something the user may want to know.
    Normal,
    /// Something that needs the user: a workload that can't run as written.
    Warning,
}

impl EventType {
    /// The API's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Who writes an Event: `source.component` and `reportingComponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reporter {
    /// `source.component`, as `kubectl describe` shows it (`pullcheck-watch`).
    pub component: &'static str,
    /// `reportingComponent` (`pullcheck.io/watch`).
    pub reporting: &'static str,
}

/// The Event body about `object` (an object reference; its `namespace` is where the Event
/// is created, `default` when it has none), written by `by` from `instance` (the pod's
/// `HOSTNAME`) at `now` (RFC 3339).
pub(crate) fn event(
    object: &Value,
    event_type: EventType,
    reason: &str,
    message: &str,
    by: Reporter,
    instance: &str,
    now: &str,
) -> Value {
    let namespace = namespace_of(object);
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("object");
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{name}.pullcheck-"), "namespace": namespace},
        "involvedObject": object,
        "type": event_type.as_str(),
        "reason": reason,
        "message": super::cut_chars(message, 1024),
        "source": {"component": by.component},
        "reportingComponent": by.reporting,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    })
}

/// The namespace an Event about `object` goes to.
pub(crate) fn namespace_of(object: &Value) -> &str {
    object
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
}

/// The object reference of `object` (a full object with `apiVersion`, `kind`, `metadata`).
pub(crate) fn reference_to(object: &Value) -> Value {
    let meta = object.get("metadata");
    let field = |k: &str| meta.and_then(|m| m.get(k)).cloned().unwrap_or(Value::Null);
    json!({
        "apiVersion": object.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": object.get("kind").cloned().unwrap_or(Value::Null),
        "name": field("name"),
        "namespace": field("namespace"),
        "uid": field("uid"),
    })
}

/// The reference to `object`'s controller (its `ownerReferences` entry with
/// `controller: true`), in `object`'s namespace; `None` without one.
pub(crate) fn controller_of(object: &Value) -> Option<Value> {
    let owner = object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))?;
    Some(json!({
        "apiVersion": owner.get("apiVersion")?,
        "kind": owner.get("kind")?,
        "name": owner.get("name")?,
        "namespace": object.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
        "uid": owner.get("uid").cloned().unwrap_or(Value::Null),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BY: Reporter = Reporter {
        component: "pullcheck-admission-check",
        reporting: "pullcheck.io/image-check",
    };

    #[test]
    fn an_event_names_its_object_reporter_and_cut_message() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "name": "train", "namespace": "ml", "uid": "u1"});
        let long = "x".repeat(2000);
        let e = event(
            &job,
            EventType::Warning,
            "ImageCheckRejected",
            &long,
            BY,
            "pod-0",
            "2026-12-03T08:00:00Z",
        );
        assert_eq!(
            e["metadata"],
            json!({"generateName": "train.pullcheck-", "namespace": "ml"})
        );
        assert_eq!(e["involvedObject"], job);
        assert_eq!(e["type"], "Warning");
        assert_eq!(e["reason"], "ImageCheckRejected");
        assert_eq!(e["message"].as_str().unwrap().chars().count(), 1024);
        assert_eq!(
            e["source"],
            json!({"component": "pullcheck-admission-check"})
        );
        assert_eq!(e["reportingComponent"], "pullcheck.io/image-check");
        assert_eq!(e["reportingInstance"], "pod-0");
        assert_eq!(
            (e["firstTimestamp"].clone(), e["count"].clone()),
            (json!("2026-12-03T08:00:00Z"), json!(1))
        );
    }

    #[test]
    fn references_to_an_object_and_its_controller() {
        let wl = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-train-1a2b", "namespace": "ml", "uid": "w1",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "o1"},
                    {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j1", "controller": true}]}});
        assert_eq!(
            reference_to(&wl),
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "job-train-1a2b", "namespace": "ml", "uid": "w1"})
        );
        assert_eq!(
            controller_of(&wl),
            Some(
                json!({"apiVersion": "batch/v1", "kind": "Job", "name": "train", "namespace": "ml", "uid": "j1"})
            )
        );
        assert_eq!(controller_of(&json!({"metadata": {"name": "bare"}})), None);
    }
}
