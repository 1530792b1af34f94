//! The platforms the cluster's pods can land on: the distinct `kubernetes.io/os` and
//! `kubernetes.io/arch` labels of its Node objects (the kubelet sets both on every node it
//! registers), else the webhook's default cluster platforms. Each template is then narrowed
//! by its own nodeSelector and affinity ([`crate::webhook::platforms::template_platforms`]).
//!
//! Node objects miss node groups scaled to zero (GPU and arm64 pools often have no Node
//! until a pod needs one), so which list was used is said on stderr.

use serde::Serialize;
use serde_json::Value;

use crate::platform::Platform;
use crate::webhook::config::DEFAULT_CLUSTER_PLATFORMS;

/// Where the platforms came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PlatformSource {
    /// The labels of the Node objects.
    Nodes,
    /// No Node carries both labels: the webhook's defaults.
    DefaultNoNodes,
    /// Nodes may not be listed (403): the webhook's defaults.
    DefaultNodesForbidden,
}

/// The platforms chosen, and from where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterPlatforms {
    /// Distinct, in `os/arch` order.
    pub platforms: Vec<Platform>,
    /// Where they came from.
    pub source: PlatformSource,
    /// How many Node objects were read.
    pub nodes: usize,
}

impl ClusterPlatforms {
    /// The platforms of `nodes` (Node objects; `None` when listing them was refused).
    pub(crate) fn choose(nodes: Option<&[Value]>) -> ClusterPlatforms {
        let found = nodes.map(node_platforms).unwrap_or_default();
        if !found.is_empty() {
            return ClusterPlatforms {
                platforms: found,
                source: PlatformSource::Nodes,
                nodes: nodes.map_or(0, <[Value]>::len),
            };
        }
        ClusterPlatforms {
            platforms: DEFAULT_CLUSTER_PLATFORMS
                .iter()
                .filter_map(|p| Platform::parse(p).ok())
                .collect(),
            source: if nodes.is_some() {
                PlatformSource::DefaultNoNodes
            } else {
                PlatformSource::DefaultNodesForbidden
            },
            nodes: nodes.map_or(0, <[Value]>::len),
        }
    }

    /// The line for stderr saying which platforms are checked and why.
    pub(crate) fn announce(&self) -> String {
        let list: Vec<String> = self.platforms.iter().map(Platform::to_string).collect();
        let list = list.join(", ");
        match self.source {
            PlatformSource::Nodes => format!(
                "platforms from {}: {list}",
                crate::report::count(self.nodes, "Node object")
            ),
            PlatformSource::DefaultNoNodes => format!(
                "no Node object gives kubernetes.io/os and kubernetes.io/arch ({} read): checking the default cluster platforms {list}",
                self.nodes
            ),
            PlatformSource::DefaultNodesForbidden => format!(
                "nodes may not be listed (403): checking the default cluster platforms {list}"
            ),
        }
    }
}

/// The distinct platforms of Node objects, sorted; a node without both labels, or with
/// values that aren't a platform, adds nothing.
pub(crate) fn node_platforms(nodes: &[Value]) -> Vec<Platform> {
    let mut out: Vec<Platform> = Vec::new();
    for n in nodes {
        let label = |k: &str| {
            n.pointer("/metadata/labels")
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
        };
        let (Some(os), Some(arch)) = (label("kubernetes.io/os"), label("kubernetes.io/arch"))
        else {
            continue;
        };
        if let Ok(p) = Platform::parse(&format!("{os}/{arch}"))
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    out.sort_by_key(Platform::to_string);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: Value) -> Value {
        json!({"metadata": {"name": "n", "labels": labels}})
    }

    fn names(c: &ClusterPlatforms) -> Vec<String> {
        c.platforms.iter().map(Platform::to_string).collect()
    }

    #[test]
    fn nodes_give_their_distinct_platforms() {
        let nodes = [
            node(json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"})),
            node(json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"})),
            node(json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"})),
            // No os label: nothing to add.
            node(json!({"kubernetes.io/arch": "s390x"})),
            node(json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "no such arch!"})),
        ];
        let c = ClusterPlatforms::choose(Some(&nodes));
        assert_eq!(names(&c), ["linux/amd64", "linux/arm64"]);
        assert_eq!(c.source, PlatformSource::Nodes);
        assert_eq!(
            c.announce(),
            "platforms from 5 Node objects: linux/amd64, linux/arm64"
        );
    }

    #[test]
    fn without_nodes_the_webhook_defaults_are_used_and_said() {
        let none = ClusterPlatforms::choose(Some(&[]));
        assert_eq!(names(&none), DEFAULT_CLUSTER_PLATFORMS);
        assert_eq!(none.source, PlatformSource::DefaultNoNodes);
        assert_eq!(
            none.announce(),
            "no Node object gives kubernetes.io/os and kubernetes.io/arch (0 read): checking the default cluster platforms linux/amd64, linux/arm64"
        );
        let unlabeled = ClusterPlatforms::choose(Some(&[node(json!({}))]));
        assert_eq!(unlabeled.source, PlatformSource::DefaultNoNodes);
        let refused = ClusterPlatforms::choose(None);
        assert_eq!(refused.source, PlatformSource::DefaultNodesForbidden);
        assert_eq!(
            refused.announce(),
            "nodes may not be listed (403): checking the default cluster platforms linux/amd64, linux/arm64"
        );
    }
}
