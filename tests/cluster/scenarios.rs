//! The scenario table: each scenario's id, the doc parts it owns, and its runner (the
//! objects it creates, what it waits for, what it measures and the outcome it must have).
//!
//! Runners by theme: 1, 4 and 6b in baseline.rs; 2, 3, 5 and 6a in jobs.rs; 7 in
//! admission.rs; 8, 9h-pytorch and 10d (Kubeflow PyTorchJobs) in kubeflow.rs; 9a, 9b and 9e
//! in watch.rs; 9d, 9f, 9g and 9h in watch_more.rs; 9c and 9i (retries under the watch) in
//! watch_retry.rs; 10a, 10b and 10c in restart.rs; 11 in dockerhub.rs. The table is in run
//! order: the scenarios that stop the workload registry (4, 10a, 9f) run before the ones
//! that retry for minutes in the background (9c, 9i, 10c, 10d), whose missing tag a stopped
//! registry would turn into a transient failure; 6b, started first, lives with that (as
//! the shell harness's did). 9h-pytorch runs before 10d: both PyTorchJob pods are on the
//! host network and ask for the operator's default port (23456), so while 10d's pod holds
//! it, 9h-pytorch's is not scheduled.

use std::process::Child;
use std::thread::JoinHandle;

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
    /// The runner.
    pub runner: Runner,
    /// What it needs beside the node.
    pub needs: Needs,
}

/// Every scenario, in run order (see the module's doc).
pub const TABLE: &[Scenario] = &[
    Scenario {
        id: "6b",
        parts: &["6b"],
        rows: &["6b"],
        runner: crate::baseline::s6b,
        needs: Needs::Node,
    },
    Scenario {
        id: "1",
        parts: &["1"],
        rows: &["1"],
        runner: crate::baseline::s1,
        needs: Needs::Node,
    },
    Scenario {
        id: "2",
        parts: &["2"],
        rows: &["2"],
        runner: crate::jobs::s2,
        needs: Needs::Node,
    },
    Scenario {
        id: "3",
        parts: &["3"],
        rows: &["3"],
        runner: crate::jobs::s3,
        needs: Needs::Node,
    },
    Scenario {
        id: "4",
        parts: &["4count", "4ignore"],
        rows: &["4a", "4b"],
        runner: crate::baseline::s4,
        needs: Needs::Node,
    },
    Scenario {
        id: "5",
        parts: &["5"],
        rows: &["5"],
        runner: crate::jobs::s5,
        needs: Needs::Node,
    },
    Scenario {
        id: "6a",
        parts: &["6a"],
        rows: &["6a"],
        runner: crate::jobs::s6a,
        needs: Needs::Node,
    },
    Scenario {
        id: "7",
        parts: &["7"],
        rows: &["7"],
        runner: crate::admission::s7,
        needs: Needs::Node,
    },
    Scenario {
        id: "8",
        parts: &["8a", "8b"],
        rows: &["8", "8a", "8b"],
        runner: crate::kubeflow::s8,
        needs: Needs::Node,
    },
    Scenario {
        id: "10a",
        parts: &["10a"],
        rows: &["10a"],
        runner: crate::restart::s10a,
        needs: Needs::Node,
    },
    Scenario {
        id: "9f",
        parts: &["9f"],
        rows: &["9f"],
        runner: crate::watch_more::s9f,
        needs: Needs::Watch,
    },
    Scenario {
        id: "11",
        parts: &["11a", "11b"],
        rows: &["11a", "11b"],
        runner: crate::dockerhub::s11,
        needs: Needs::Node,
    },
    Scenario {
        id: "9h-pytorch",
        parts: &["9h-pytorch"],
        rows: &["9h-pytorch"],
        runner: crate::kubeflow::s9h_pytorch,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9c",
        parts: &["9c"],
        rows: &["9c"],
        runner: crate::watch_retry::s9c,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9i",
        parts: &["9i", "9i-sidecar-term", "9i-sidecar-ignore"],
        rows: &["9i", "9i-sidecar-term", "9i-sidecar-ignore"],
        runner: crate::watch_retry::s9i,
        needs: Needs::Watch,
    },
    Scenario {
        id: "10c",
        parts: &["10c"],
        rows: &["10c"],
        runner: crate::restart::s10c,
        needs: Needs::Node,
    },
    Scenario {
        id: "10d",
        parts: &["10d"],
        rows: &["10d"],
        runner: crate::kubeflow::s10d,
        needs: Needs::Node,
    },
    Scenario {
        id: "10b",
        parts: &["10b"],
        rows: &["10b"],
        runner: crate::restart::s10b,
        needs: Needs::Node,
    },
    Scenario {
        id: "9a",
        parts: &["9a"],
        rows: &["9a"],
        runner: crate::watch::s9a,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9b",
        parts: &["9b"],
        rows: &["9b"],
        runner: crate::watch::s9b,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9d",
        parts: &["9d"],
        rows: &["9d"],
        runner: crate::watch_more::s9d,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9e",
        parts: &["9e"],
        rows: &["9e"],
        runner: crate::watch::s9e,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9g",
        parts: &["9g"],
        rows: &["9g"],
        runner: crate::watch_more::s9g,
        needs: Needs::Watch,
    },
    Scenario {
        id: "9h",
        parts: &["9h"],
        rows: &["9h"],
        runner: crate::watch_more::s9h,
        needs: Needs::Watch,
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
    /// Scenarios running beside the others (6b, 9c, 9i, 10c, 10d): joined at the end of
    /// the run, their parts merged into `out`.
    pub background: Vec<Background>,
    /// The Kubeflow training operator (scenarios 8, 9h-pytorch, 10d), stopped on drop.
    pub kubeflow: Option<crate::kubeflow::Operator>,
}

/// A scenario running in a thread of its own, with a [`Ctx`] of its own.
pub struct Background {
    /// The scenario's id (for the log and errors).
    pub id: &'static str,
    /// Its parts, or why it failed.
    pub handle: JoinHandle<Result<Results, NodeError>>,
}

impl Ctx {
    /// A run on `node` with nothing started yet.
    pub fn new(node: Node) -> Ctx {
        Ctx {
            node,
            out: Results::default(),
            watch: None,
            background: Vec::new(),
            kubeflow: None,
        }
    }

    /// Run `body` in a thread beside the scenarios that follow; its parts are merged when
    /// [`Ctx::join_background`] collects it.
    pub fn in_background(&mut self, id: &'static str, body: Runner) {
        let node = self.node.clone();
        let handle = std::thread::spawn(move || {
            let mut own = Ctx::new(node);
            body(&mut own).map(|()| std::mem::take(&mut own.out))
        });
        self.background.push(Background { id, handle });
    }

    /// Wait for every background scenario and merge the parts of those that passed; the
    /// others are returned with their errors.
    pub fn join_background(&mut self) -> Vec<(&'static str, NodeError)> {
        let mut failed = Vec::new();
        for b in std::mem::take(&mut self.background) {
            eprintln!("[fail-fast] waiting for scenario {}", b.id);
            let got = b.handle.join().unwrap_or_else(|_| {
                Err(NodeError::Setup(format!(
                    "scenario {}: its thread panicked",
                    b.id
                )))
            });
            match got {
                Ok(part) => {
                    self.out.rows.extend(part.rows);
                    self.out.summaries.extend(part.summaries);
                    self.out.details.extend(part.details);
                    self.out.timelines.extend(part.timelines);
                }
                Err(e) => {
                    eprintln!("[fail-fast] scenario {} FAILED: {e}", b.id);
                    failed.push((b.id, e));
                }
            }
        }
        failed
    }
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
    fn the_run_order() {
        let ids: Vec<&str> = TABLE.iter().map(|s| s.id).collect();
        assert_eq!(
            ids,
            [
                "6b",
                "1",
                "2",
                "3",
                "4",
                "5",
                "6a",
                "7",
                "8",
                "10a",
                "9f",
                "11",
                "9h-pytorch",
                "9c",
                "9i",
                "10c",
                "10d",
                "10b",
                "9a",
                "9b",
                "9d",
                "9e",
                "9g",
                "9h"
            ]
        );
        let watched: Vec<&str> = TABLE
            .iter()
            .filter(|s| s.needs == Needs::Watch)
            .map(|s| s.id)
            .collect();
        assert_eq!(
            watched,
            [
                "9f",
                "9h-pytorch",
                "9c",
                "9i",
                "9a",
                "9b",
                "9d",
                "9e",
                "9g",
                "9h"
            ]
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
