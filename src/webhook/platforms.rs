//! Which platforms an index must offer for one pod template: the node is unknown at
//! admission, so the cluster's platforms, narrowed by what the template pins.

use serde_json::Value;

use crate::platform::Platform;

/// The platforms a pod template can land on: the cluster's, narrowed by a pinned
/// `kubernetes.io/arch` / `kubernetes.io/os` (nodeSelector, or required node affinity where
/// every term pins the arch) or `spec.os.name`. A pinned arch the cluster list lacks is
/// checked as pinned.
pub fn template_platforms(template: &Value, cluster: &[Platform]) -> Vec<Platform> {
    let spec = template.get("spec");
    let selector = |key: &str| {
        spec.and_then(|s| s.pointer(&format!("/nodeSelector/{}", key.replace('/', "~1"))))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut arches: Vec<String> = selector("kubernetes.io/arch").into_iter().collect();
    if arches.is_empty() {
        arches = affinity_values(spec, "kubernetes.io/arch");
    }
    let os = selector("kubernetes.io/os").or_else(|| {
        spec.and_then(|s| s.pointer("/os/name"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let narrowed: Vec<Platform> = cluster
        .iter()
        .filter(|p| arches.is_empty() || arches.contains(&p.architecture))
        .filter(|p| os.as_ref().is_none_or(|o| *o == p.os))
        .cloned()
        .collect();
    if !narrowed.is_empty() || (arches.is_empty() && os.is_none()) {
        return narrowed;
    }
    let os = os.unwrap_or_else(|| "linux".into());
    let arches = if arches.is_empty() {
        cluster.iter().map(|p| p.architecture.clone()).collect()
    } else {
        arches
    };
    arches
        .iter()
        .filter_map(|a| Platform::parse(&format!("{os}/{a}")).ok())
        .collect()
}

/// Values of `key In [...]` when every required node-affinity term constrains `key`.
fn affinity_values(spec: Option<&Value>, key: &str) -> Vec<String> {
    let terms = spec
        .and_then(|s| {
            s.pointer(
                "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
            )
        })
        .and_then(Value::as_array);
    let Some(terms) = terms.filter(|t| !t.is_empty()) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for term in terms {
        let values: Vec<String> = term
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|e| {
                e.get("key").and_then(Value::as_str) == Some(key)
                    && e.get("operator").and_then(Value::as_str) == Some("In")
            })
            .flat_map(|e| {
                e.get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        if values.is_empty() {
            return Vec::new();
        }
        for v in values {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Platform {
        Platform::parse(s).unwrap()
    }

    #[test]
    fn platforms_narrow_by_selector_affinity_and_os() {
        let cluster = vec![p("linux/amd64"), p("linux/arm64")];
        let names = |v: Vec<Platform>| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(template_platforms(&json!({"spec": {}}), &cluster)),
            vec!["linux/amd64", "linux/arm64"]
        );
        let arm = json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}}});
        assert_eq!(
            names(template_platforms(&arm, &cluster)),
            vec!["linux/arm64"]
        );
        let s390 = json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "s390x"}}});
        assert_eq!(
            names(template_platforms(&s390, &cluster)),
            vec!["linux/s390x"]
        );
        let affinity = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}}}});
        assert_eq!(
            names(template_platforms(&affinity, &cluster)),
            vec!["linux/amd64"]
        );
        let windows = json!({"spec": {"os": {"name": "windows"}}});
        assert_eq!(
            names(template_platforms(&windows, &cluster)),
            vec!["windows/amd64", "windows/arm64"]
        );
    }
}
