//! The scenario table: each scenario's id, the doc parts it owns, and its runner (the
//! objects it creates, what it waits for, what it measures and the outcome it must have).
//!
//! PARTIAL PORT: the runners of 2, 3, 5, 6a, 10b (jobs.rs), 7 (admission.rs), 9a, 9b, 9e
//! (watch.rs) and 11 (dockerhub.rs) exist; every other row of scripts/fail-fast-scenarios.sh is in the
//! table with no runner, and a run asking for one fails naming the shell script (which
//! stays until this table reproduces all of it).

use std::process::Child;

use crate::doc::Results;
use crate::node::{Node, NodeError};

/// What a runner needs running beside the node before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing.
    Node,
    /// `pullcheck watch` as a host process (scenarios 9).
    Watch,
}

/// A runner: runs the scenario and writes its parts into the results.
pub type Runner = fn(&mut Ctx) -> Result<(), NodeError>;

/// One row of the table.
pub struct Scenario {
    /// The id FF_SCENARIOS names (`2`, `9a`, `4`).
    pub id: &'static str,
    /// Its summary/detail/chart ids (doc::PART_ORDER).
    pub parts: &'static [&'static str],
    /// Its table row ids (doc::ROW_ORDER).
    pub rows: &'static [&'static str],
    /// The runner; None: not ported yet (scripts/fail-fast-scenarios.sh runs it).
    pub runner: Option<Runner>,
    /// What it needs beside the node.
    pub needs: Needs,
}

/// Every scenario of scripts/fail-fast-scenarios.sh, in its run order.
pub const TABLE: &[Scenario] = &[
    Scenario {
        id: "1",
        parts: &["1"],
        rows: &["1"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "2",
        parts: &["2"],
        rows: &["2"],
        runner: Some(crate::jobs::s2),
        needs: Needs::Node,
    },
    Scenario {
        id: "3",
        parts: &["3"],
        rows: &["3"],
        runner: Some(crate::jobs::s3),
        needs: Needs::Node,
    },
    Scenario {
        id: "4",
        parts: &["4count", "4ignore"],
        rows: &["4a", "4b"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "5",
        parts: &["5"],
        rows: &["5"],
        runner: Some(crate::jobs::s5),
        needs: Needs::Node,
    },
    Scenario {
        id: "6a",
        parts: &["6a"],
        rows: &["6a"],
        runner: Some(crate::jobs::s6a),
        needs: Needs::Node,
    },
    Scenario {
        id: "6b",
        parts: &["6b"],
        rows: &["6b"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "7",
        parts: &["7"],
        rows: &["7"],
        runner: Some(crate::admission::s7),
        needs: Needs::Node,
    },
    Scenario {
        id: "8",
        parts: &["8a", "8b"],
        rows: &["8", "8a", "8b"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "9a",
        parts: &["9a"],
        rows: &["9a"],
        runner: Some(crate::watch::s9a),
        needs: Needs::Watch,
    },
    Scenario {
        id: "9b",
        parts: &["9b"],
        rows: &["9b"],
        runner: Some(crate::watch::s9b),
        needs: Needs::Watch,
    },
    Scenario {
        id: "9c",
        parts: &["9c"],
        rows: &["9c"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9d",
        parts: &["9d"],
        rows: &["9d"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9e",
        parts: &["9e"],
        rows: &["9e"],
        runner: Some(crate::watch::s9e),
        needs: Needs::Watch,
    },
    Scenario {
        id: "9f",
        parts: &["9f"],
        rows: &["9f"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9g",
        parts: &["9g"],
        rows: &["9g"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9h",
        parts: &["9h"],
        rows: &["9h"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9h-pytorch",
        parts: &["9h-pytorch"],
        rows: &["9h-pytorch"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9i",
        parts: &["9i", "9i-sidecar-term", "9i-sidecar-ignore"],
        rows: &["9i", "9i-sidecar-term", "9i-sidecar-ignore"],
        runner: None,
        needs: Needs::Watch,
    },
    Scenario {
        id: "10a",
        parts: &["10a"],
        rows: &["10a"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "10b",
        parts: &["10b"],
        rows: &["10b"],
        runner: Some(crate::jobs::s10b),
        needs: Needs::Node,
    },
    Scenario {
        id: "10c",
        parts: &["10c"],
        rows: &["10c"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "10d",
        parts: &["10d"],
        rows: &["10d"],
        runner: None,
        needs: Needs::Node,
    },
    Scenario {
        id: "11",
        parts: &["11a", "11b"],
        rows: &["11a", "11b"],
        runner: Some(crate::dockerhub::s11),
        needs: Needs::Node,
    },
];

/// The state of one run: the node, this run's parts, and the watch process if started.
pub struct Ctx {
    /// The cluster.
    pub node: Node,
    /// This run's parts.
    pub out: Results,
    /// `pullcheck watch` (scenarios 9), killed on drop.
    pub watch: Option<Proc>,
}

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::{PART_ORDER, ROW_ORDER};
    use crate::run::job_yaml;

    #[test]
    fn the_table_covers_every_part_of_the_doc_once() {
        let mut parts: Vec<&str> = TABLE.iter().flat_map(|s| s.parts.iter().copied()).collect();
        let mut rows: Vec<&str> = TABLE.iter().flat_map(|s| s.rows.iter().copied()).collect();
        parts.sort();
        rows.sort();
        let mut want_parts = PART_ORDER.to_vec();
        let mut want_rows = ROW_ORDER.to_vec();
        want_parts.sort();
        want_rows.sort();
        assert_eq!(parts, want_parts);
        assert_eq!(rows, want_rows);
    }

    #[test]
    fn the_ported_runners() {
        let ported: Vec<&str> = TABLE
            .iter()
            .filter(|s| s.runner.is_some())
            .map(|s| s.id)
            .collect();
        assert_eq!(
            ported,
            ["2", "3", "5", "6a", "7", "9a", "9b", "9e", "10b", "11"]
        );
    }

    #[test]
    fn job_manifest_is_the_shell_harness_text() {
        let y = job_yaml("ff-s2", "injected", "r/app:x", "Never", 0, "1", "2Gi", "");
        assert_eq!(
            y,
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: injected\n  namespace: ff-s2\nspec:\n  backoffLimit: 0\n\n  template:\n    spec:\n      restartPolicy: Never\n      hostNetwork: true\n      automountServiceAccountToken: false\n      terminationGracePeriodSeconds: 1\n      containers:\n        - name: main\n          image: r/app:x\n          resources:\n            requests: {cpu: \"1\", memory: 2Gi}\n            limits: {cpu: \"1\", memory: 2Gi}\n"
        );
        let docs = pullcheck::k8s::yaml::parse_documents(&y).unwrap();
        assert_eq!(
            docs[0].value["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }
}
