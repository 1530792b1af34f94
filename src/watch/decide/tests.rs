use super::*;
use crate::watch::classify::{Reason, classify};
use crate::watch::recorded::recording;

const T0: SystemTime = SystemTime::UNIX_EPOCH;
const GRACE: Duration = Duration::from_secs(120);

fn failure(verdict: Option<Verdict>) -> Classification {
    Classification {
        reason: Some(Reason::ErrImagePull),
        verdict,
        matched: crate::watch::classify::Matched::Phrase("test"),
    }
}

fn job(classification: Classification) -> Inputs {
    Inputs {
        classification,
        mirrors: false,
        first_failure: T0,
        now: T0 + Duration::from_secs(2),
        transient_grace: None,
        owner: Owner::Job,
    }
}

fn act(verdict: Verdict) -> Decision {
    Decision::Act { verdict }
}

fn event(why: Why) -> Decision {
    Decision::EventOnly { why }
}

const PERMANENT: [Verdict; 5] = [
    Verdict::InvalidReference,
    Verdict::NotFound,
    Verdict::PlatformMissing,
    Verdict::Denied,
    Verdict::Unauthenticated,
];

#[test]
fn not_a_pull_failure_is_ignored() {
    let i = job(classify(
        "CrashLoopBackOff",
        "back-off 10s restarting failed container",
    ));
    assert_eq!(decide(&i), Decision::Ignore);
    // whatever else is known
    let i = Inputs {
        mirrors: true,
        transient_grace: Some(GRACE),
        ..i
    };
    assert_eq!(decide(&i), Decision::Ignore);
}

#[test]
fn unknown_is_an_event_whatever_else_is_known() {
    for mirrors in [false, true] {
        for transient_grace in [None, Some(Duration::ZERO)] {
            let i = Inputs {
                mirrors,
                transient_grace,
                ..job(failure(None))
            };
            assert_eq!(
                decide(&i),
                event(Why::Unknown),
                "{mirrors} {transient_grace:?}"
            );
        }
    }
}

#[test]
fn permanent_acts_at_once_without_mirrors() {
    for v in PERMANENT {
        for transient_grace in [None, Some(GRACE)] {
            let i = Inputs {
                transient_grace,
                now: T0,
                ..job(failure(Some(v)))
            };
            // At once: the grace is for transient failures only.
            assert_eq!(decide(&i), act(v), "{v} {transient_grace:?}");
        }
    }
}

/// A registry answer through mirrors may be a mirror's and not the upstream's: reported,
/// never acted on.
#[test]
fn registry_answers_through_mirrors_are_only_reported() {
    for v in [Verdict::NotFound, Verdict::Denied, Verdict::Unauthenticated] {
        let i = Inputs {
            mirrors: true,
            ..job(failure(Some(v)))
        };
        assert_eq!(decide(&i), event(Why::BehindMirrors { kubelet: v }), "{v}");
    }
}

/// A platform-missing answer means a host served the index; an invalid reference never
/// reached a registry. Mirrors change neither.
#[test]
fn mirrors_do_not_matter_for_platform_and_reference() {
    for v in [Verdict::PlatformMissing, Verdict::InvalidReference] {
        let i = Inputs {
            mirrors: true,
            ..job(failure(Some(v)))
        };
        assert_eq!(decide(&i), act(v));
    }
}

#[test]
fn transient_waits_for_the_grace() {
    let t = failure(Some(Verdict::Transient));
    assert_eq!(decide(&job(t)), event(Why::TransientGraceOff));
    let with = |now: SystemTime| Inputs {
        transient_grace: Some(GRACE),
        now,
        ..job(t)
    };
    let until = T0 + GRACE;
    assert_eq!(decide(&with(T0)), Decision::Wait { until });
    assert_eq!(
        decide(&with(until - Duration::from_millis(1))),
        Decision::Wait { until }
    );
    assert_eq!(decide(&with(until)), act(Verdict::Transient));
    assert_eq!(decide(&with(until + GRACE)), act(Verdict::Transient));
    // a clock behind the first failure waits, never acts early
    let skewed = Inputs {
        first_failure: T0 + Duration::from_secs(60),
        ..with(T0)
    };
    assert_eq!(
        decide(&skewed),
        Decision::Wait {
            until: T0 + Duration::from_secs(60) + GRACE
        }
    );
    // mirrors change nothing for a transient failure
    let mirrored = Inputs {
        mirrors: true,
        ..with(T0)
    };
    assert_eq!(decide(&mirrored), Decision::Wait { until });
}

#[test]
fn only_a_job_is_acted_on() {
    let owners = [
        Owner::KubeflowV1,
        Owner::ReplicaSet,
        Owner::StatefulSet,
        Owner::DaemonSet,
        Owner::BarePod,
        Owner::Other,
    ];
    for owner in owners {
        for v in PERMANENT {
            let i = Inputs {
                owner,
                ..job(failure(Some(v)))
            };
            assert_eq!(
                decide(&i),
                event(Why::NotAJob { owner, verdict: v }),
                "{owner:?} {v}"
            );
        }
        // the rest of the table is the same as for a Job
        let unknown = Inputs {
            owner,
            ..job(failure(None))
        };
        assert_eq!(decide(&unknown), event(Why::Unknown));
        let waiting = Inputs {
            owner,
            transient_grace: Some(GRACE),
            ..job(failure(Some(Verdict::Transient)))
        };
        assert_eq!(decide(&waiting), Decision::Wait { until: T0 + GRACE });
        let after = Inputs {
            now: T0 + GRACE,
            ..waiting
        };
        assert_eq!(
            decide(&after),
            event(Why::NotAJob {
                owner,
                verdict: Verdict::Transient
            })
        );
        let mirrored = Inputs {
            owner,
            mirrors: true,
            ..job(failure(Some(Verdict::NotFound)))
        };
        assert_eq!(
            decide(&mirrored),
            event(Why::BehindMirrors {
                kubelet: Verdict::NotFound
            })
        );
    }
}

#[test]
fn owner_from_the_controller_reference() {
    let cases = [
        (None, Owner::BarePod),
        (Some(("batch/v1", "Job")), Owner::Job),
        (Some(("batch/v1", "CronJob")), Owner::Other),
        (Some(("batch/v1beta1", "Job")), Owner::Other),
        (Some(("kubeflow.org/v1", "PyTorchJob")), Owner::KubeflowV1),
        (Some(("kubeflow.org/v1", "TFJob")), Owner::KubeflowV1),
        (Some(("apps/v1", "ReplicaSet")), Owner::ReplicaSet),
        (Some(("apps/v1", "StatefulSet")), Owner::StatefulSet),
        (Some(("apps/v1", "DaemonSet")), Owner::DaemonSet),
        (Some(("jobset.x-k8s.io/v1alpha2", "JobSet")), Owner::Other),
    ];
    for (reference, owner) in cases {
        assert_eq!(Owner::from_controller(reference), owner, "{reference:?}");
    }
}

/// The recorded failures through both steps, for a Job's pod, as the watch would meet
/// them: the first ErrImagePull and the ImagePullBackOff after it decide alike.
#[test]
fn recorded_failures_end_to_end() {
    let grace = Some(GRACE);
    let cases: &[(&str, bool, Decision)] = &[
        ("missing-tag", false, act(Verdict::NotFound)),
        ("missing-repository", false, act(Verdict::NotFound)),
        // pullcheck holds no credential for it: the kubelet's not-found is enough
        ("auth-missing-tag", false, act(Verdict::NotFound)),
        ("platform-missing", false, act(Verdict::PlatformMissing)),
        ("platform-missing", true, act(Verdict::PlatformMissing)),
        ("auth-no-secret", false, act(Verdict::Unauthenticated)),
        ("auth-wrong-password", false, act(Verdict::Denied)),
        ("invalid-name", false, act(Verdict::InvalidReference)),
        (
            "mirror-404-upstream-down",
            true,
            event(Why::BehindMirrors {
                kubelet: Verdict::NotFound,
            }),
        ),
        (
            "mirror-401-upstream-down",
            true,
            event(Why::BehindMirrors {
                kubelet: Verdict::Unauthenticated,
            }),
        ),
        ("never-pull", false, event(Why::Unknown)),
    ];
    for &(name, mirrors, expected) in cases {
        for (reason, message) in recording(name).waiting {
            let i = Inputs {
                mirrors,
                transient_grace: grace,
                ..job(classify(&reason, &message))
            };
            assert_eq!(decide(&i), expected, "{name} {reason}");
        }
    }
    for name in ["registry-down", "dns", "x509", "status-429", "status-503"] {
        for (reason, message) in recording(name).waiting {
            let c = classify(&reason, &message);
            assert_eq!(decide(&job(c)), event(Why::TransientGraceOff), "{name}");
            let i = Inputs {
                transient_grace: grace,
                ..job(c)
            };
            assert_eq!(decide(&i), Decision::Wait { until: T0 + GRACE }, "{name}");
        }
    }
}
