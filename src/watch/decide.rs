//! The written decision table: what the watch does about one classified pull failure.
//!
//! docs/watch.md shows the same table; the tests below walk every row. The rules, in the
//! order [`decide`] applies them:
//!
//! 1. not a pull failure, or nothing to report → [`Decision::Ignore`];
//! 2. unknown (no verdict from the message) → an Event only, never an action;
//! 3. a registry answer (`not_found`, `denied`, `unauthenticated`) where the pod's registry
//!    has mirrors → an Event only. containerd keeps the highest-priority error across hosts
//!    (`core/remotes/docker/resolver.go`, `Resolve`: a 404 outranks a transport error, any
//!    other 4xx/5xx outranks a 404, and of the transport errors the first host's is kept),
//!    so a mirror's 404 or 401 next to an unreachable upstream reads as the mirror's answer,
//!    and says nothing about the upstream;
//! 4. any other permanent verdict → act at once. The kubelet's own not-found is definitive
//!    even where pullcheck holds no credential (node credentials, credential providers);
//! 5. transient → an Event only while `--transient-grace` is off; else wait for the grace
//!    since the first failure, then act;
//! 6. last, the owner: only a `batch/v1` Job's pod is acted on. Any other owner turns "act"
//!    into an Event (deleting a Deployment's or a Kubeflow v1 operator's pod only makes its
//!    controller recreate it).

use std::time::{Duration, SystemTime};

use super::classify::Classification;
use crate::verdict::Verdict;

/// The pod's controller, as its `ownerReferences` entry with `controller: true` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// `batch/v1` Job, which includes the Jobs of CronJobs, JobSets and Kubeflow Trainer v2.
    Job,
    /// `kubeflow.org/v1` (the training-operator's PyTorchJob, TFJob, MPIJob…): it creates
    /// Pods itself and recreates a deleted one.
    KubeflowV1,
    /// `apps/v1` ReplicaSet: a Deployment's pods are owned by one.
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    /// No controller.
    BarePod,
    /// Any other controller.
    Other,
}

impl Owner {
    /// From the controller reference's `apiVersion` and `kind` (`None`: no controller).
    pub(crate) fn from_controller(reference: Option<(&str, &str)>) -> Owner {
        match reference {
            None => Owner::BarePod,
            Some(("batch/v1", "Job")) => Owner::Job,
            Some(("kubeflow.org/v1", _)) => Owner::KubeflowV1,
            Some(("apps/v1", "ReplicaSet")) => Owner::ReplicaSet,
            Some(("apps/v1", "StatefulSet")) => Owner::StatefulSet,
            Some(("apps/v1", "DaemonSet")) => Owner::DaemonSet,
            Some(_) => Owner::Other,
        }
    }

    /// The controller in words, for Event messages (`the pod's controller is …`).
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Owner::Job => "a batch/v1 Job",
            Owner::KubeflowV1 => "a kubeflow.org/v1 operator's job",
            Owner::ReplicaSet => "a ReplicaSet (a Deployment's)",
            Owner::StatefulSet => "a StatefulSet",
            Owner::DaemonSet => "a DaemonSet",
            Owner::BarePod => "none (a bare Pod)",
            Owner::Other => "another kind",
        }
    }
}

/// Everything [`decide`] looks at. No I/O happened to build it except the controller's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inputs {
    pub(crate) classification: Classification,
    /// The hosts dir the watch was given has mirrors for the pod's registry.
    pub(crate) mirrors: bool,
    /// When the kubelet first reported the failure, and now (both wall clock: the first one
    /// comes from pod statuses or Events).
    pub(crate) first_failure: SystemTime,
    pub(crate) now: SystemTime,
    /// `--transient-grace`; `None`: off, transient failures are never acted on.
    pub(crate) transient_grace: Option<Duration>,
    pub(crate) owner: Owner,
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Mark the pod (condition, reason = verdict) and delete it.
    Act { verdict: Verdict },
    /// Decide again at `until`, if the pod is still failing.
    Wait { until: SystemTime },
    /// Report (Event, metric), never act.
    EventOnly { why: Why },
    /// Nothing to report.
    Ignore,
}

/// Why a failure is only reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// No verdict from the kubelet's message.
    Unknown,
    /// A registry answer (`not_found`, `denied`, `unauthenticated`) through registry
    /// mirrors, which may be a mirror's answer and not the upstream's.
    BehindMirrors { kubelet: Verdict },
    /// Transient, and `--transient-grace` is off.
    TransientGraceOff,
    /// The verdict would be acted on, but the pod's controller is not a Job.
    NotAJob { owner: Owner, verdict: Verdict },
}

/// Applies the decision table (see the module documentation) to one failure.
pub(crate) fn decide(inputs: &Inputs) -> Decision {
    let by_verdict = by_verdict(inputs);
    match (by_verdict, inputs.owner) {
        (Decision::Act { .. }, Owner::Job) => by_verdict,
        (Decision::Act { verdict }, owner) => Decision::EventOnly {
            why: Why::NotAJob { owner, verdict },
        },
        (other, _) => other,
    }
}

/// Rules 1 to 5: the decision for a Job's pod.
fn by_verdict(inputs: &Inputs) -> Decision {
    let c = inputs.classification;
    if c.reason.is_none() {
        return Decision::Ignore;
    }
    let Some(kubelet) = c.verdict else {
        return Decision::EventOnly { why: Why::Unknown };
    };
    match kubelet {
        // The kubelet never reports a pullable image as failing; nothing to do.
        Verdict::Pullable => Decision::Ignore,
        Verdict::NotFound | Verdict::Denied | Verdict::Unauthenticated if inputs.mirrors => {
            Decision::EventOnly {
                why: Why::BehindMirrors { kubelet },
            }
        }
        Verdict::InvalidReference
        | Verdict::NotFound
        | Verdict::PlatformMissing
        | Verdict::Denied
        | Verdict::Unauthenticated
        // Never classified from a kubelet message (containerd's pull of an artifact
        // succeeds: engine::artifact), but permanent like the others if it were.
        | Verdict::UnusableArtifact => Decision::Act { verdict: kubelet },
        Verdict::Transient => match inputs.transient_grace {
            None => Decision::EventOnly {
                why: Why::TransientGraceOff,
            },
            Some(grace) => {
                let until = inputs.first_failure + grace;
                if inputs.now >= until {
                    Decision::Act { verdict: kubelet }
                } else {
                    Decision::Wait { until }
                }
            }
        },
    }
}

#[cfg(test)]
mod tests;
