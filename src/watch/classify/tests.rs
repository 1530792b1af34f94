use super::*;
use crate::watch::recorded::{KUBELET_1_35_CONTAINERD_2_2, recording};

const NF: Option<Verdict> = Some(Verdict::NotFound);
const PM: Option<Verdict> = Some(Verdict::PlatformMissing);
const DEN: Option<Verdict> = Some(Verdict::Denied);
const UNA: Option<Verdict> = Some(Verdict::Unauthenticated);
const TR: Option<Verdict> = Some(Verdict::Transient);
const INV: Option<Verdict> = Some(Verdict::InvalidReference);

/// Recorded (tests/data/watch/kubelet-1.35.4-containerd-2.2.9): scenario, verdict, phrase.
const RECORDED: &[(&str, Option<Verdict>, &str)] = &[
    ("missing-tag", NF, "failed to resolve …: not found"),
    ("missing-repository", NF, "failed to resolve …: not found"),
    ("auth-missing-tag", NF, "failed to resolve …: not found"),
    // The caveat decide.rs handles: a mirror's 404 next to an unreachable upstream.
    (
        "mirror-404-upstream-down",
        NF,
        "failed to resolve …: not found",
    ),
    ("platform-missing", PM, "no match for platform in manifest"),
    ("auth-no-secret", UNA, "no basic auth credentials"),
    ("mirror-401-upstream-down", UNA, "no basic auth credentials"),
    ("auth-wrong-password", DEN, "unexpected status 401"),
    ("registry-down", TR, "connection refused"),
    ("dns", TR, "no such host"),
    ("x509", TR, "x509: "),
    ("status-429", TR, "unexpected status 429"),
    ("status-503", TR, "unexpected status 5xx"),
    ("invalid-name", INV, "InvalidImageName"),
    ("never-pull", None, "ErrImageNeverPull"),
];

#[test]
fn every_recording_is_classified() {
    let listed: Vec<&str> = RECORDED.iter().map(|r| r.0).collect();
    for (name, _) in KUBELET_1_35_CONTAINERD_2_2 {
        assert!(listed.contains(name), "{name} has no expectation");
    }
    for &(name, verdict, phrase) in RECORDED {
        let rec = recording(name);
        assert!(!rec.waiting.is_empty(), "{name}: no waiting state recorded");
        for (reason, message) in &rec.waiting {
            let c = classify(reason, message);
            assert_eq!(c.reason, Reason::parse(reason), "{name} {reason}");
            assert_eq!(
                (c.verdict, c.matched.phrase()),
                (verdict, Some(phrase)),
                "{name} {reason}: {message}"
            );
        }
    }
}

/// The pull errors come in both states, and ImagePullBackOff carries the same error
/// (kubelet ≥ 1.32), so the watch does not depend on catching ErrImagePull.
#[test]
fn recorded_back_off_carries_the_pull_error() {
    for &(name, verdict, _) in RECORDED {
        let rec = recording(name);
        let reasons: Vec<&str> = rec.waiting.iter().map(|(r, _)| r.as_str()).collect();
        if matches!(name, "invalid-name" | "never-pull") {
            assert_eq!(reasons.len(), 1, "{name}: {reasons:?}");
            continue;
        }
        assert!(reasons.contains(&"ErrImagePull"), "{name}: {reasons:?}");
        assert!(reasons.contains(&"ImagePullBackOff"), "{name}: {reasons:?}");
        let back_off = rec
            .waiting
            .iter()
            .find(|(r, _)| r == "ImagePullBackOff")
            .unwrap();
        assert!(
            back_off.1.contains(": ErrImagePull: "),
            "{name}: {}",
            back_off.1
        );
        assert_eq!(classify("ImagePullBackOff", &back_off.1).verdict, verdict);
    }
}

/// Older kubelets' back-off says nothing; their `Failed` Event does, read as ErrImagePull.
#[test]
fn recorded_failed_events_give_the_same_verdict() {
    for &(name, verdict, phrase) in RECORDED {
        let rec = recording(name);
        if matches!(name, "invalid-name" | "never-pull") {
            // No pull happened, so no "Failed to pull image" Event.
            assert!(rec.failed_events.is_empty(), "{name}");
            continue;
        }
        assert!(!rec.failed_events.is_empty(), "{name}");
        for m in &rec.failed_events {
            let c = classify("ErrImagePull", m);
            assert_eq!(
                (c.verdict, c.matched.phrase()),
                (verdict, Some(phrase)),
                "{name}: {m}"
            );
        }
    }
}

/// Not recorded: shapes from the sources (containerd 1.7 `pull.go`, `remotes/docker/`;
/// containerd 2.2 `core/remotes/docker/` token paths, Go net errors, a missing blob) and
/// CRI-O's reasons. Each message is assembled from the format strings the file cites.
const FROM_SOURCES: &[(&str, &str, Option<Verdict>, Option<&str>)] = &[
    // containerd 1.7: client pull.go `failed to resolve reference %q`, resolver.go `%s: not found`
    (
        "ErrImagePull",
        "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/busybox:nope\": failed to resolve reference \"docker.io/library/busybox:nope\": docker.io/library/busybox:nope: not found",
        NF,
        Some("failed to resolve …: not found"),
    ),
    // containerd 1.7: pull.go `failed to unpack image on snapshotter`, images/handlers.go
    (
        "ErrImagePull",
        "rpc error: code = NotFound desc = failed to pull and unpack image \"r.example/app:v1\": failed to unpack image on snapshotter overlayfs: no match for platform in manifest: not found",
        PM,
        Some("no match for platform in manifest"),
    ),
    // Docker Hub, missing or private repository: authorizer.go `server message: %s`
    (
        "ErrImagePull",
        "rpc error: code = Unknown desc = failed to pull and unpack image \"docker.io/library/nosuch:v1\": failed to resolve reference \"docker.io/library/nosuch:v1\": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed",
        UNA,
        Some("pull access denied"),
    ),
    // authorizer.go `failed to fetch anonymous token`, auth/fetch.go ErrUnexpectedStatus
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to authorize: failed to fetch anonymous token: unexpected status from GET request to https://auth.r.example/token?scope=repository%3Aapp%3Apull&service=r.example: 401 Unauthorized",
        UNA,
        Some("anonymous token refused (401/403)"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to authorize: failed to fetch anonymous token: unexpected status from GET request to https://auth.r.example/token?scope=repository%3Aapp%3Apull&service=r.example: 503 Service Unavailable",
        TR,
        Some("unexpected status 5xx"),
    ),
    // authorizer.go `failed to fetch oauth token` (credentials sent)
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to authorize: failed to fetch oauth token: unexpected status from POST request to https://auth.r.example/token: 403 Forbidden",
        DEN,
        Some("credentials refused by the token endpoint (401/403)"),
    ),
    // the token endpoint unreachable: transport, not an auth answer
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to authorize: failed to fetch anonymous token: Get \"https://auth.r.example/token?scope=repository%3Aapp%3Apull\": dial tcp 192.0.2.1:443: connect: connection refused",
        TR,
        Some("connection refused"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: unexpected status from HEAD request to https://r.example/v2/app/manifests/v1: 403 Forbidden",
        DEN,
        Some("unexpected status 403"),
    ),
    // Docker Hub's rate limit on GET: errcode.go joins the status and the decoded body
    (
        "ErrImagePull",
        "failed to pull and unpack image \"docker.io/library/busybox:1\": failed to copy: httpReadSeeker: failed open: unexpected status from GET request to https://registry-1.docker.io/v2/library/busybox/manifests/sha256:0123: 429 Too Many Requests\ntoomanyrequests: You have reached your unauthenticated pull rate limit.",
        TR,
        Some("unexpected status 429"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: unexpected status from HEAD request to https://r.example/v2/app/manifests/v1: 408 Request Timeout",
        TR,
        Some("unexpected status 408"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: unexpected status from HEAD request to https://r.example/v2/app/manifests/v1: 400 Bad Request",
        Some(Verdict::NotFound),
        Some("unexpected status 4xx"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: unexpected status from GET request to https://r.example/v2/app/manifests/v1: 405 Method Not Allowed",
        TR,
        Some("unexpected status 405"),
    ),
    // Go net and net/http transport errors
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": dial tcp 192.0.2.1:443: i/o timeout",
        TR,
        Some("i/o timeout"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": net/http: TLS handshake timeout",
        TR,
        Some("TLS handshake timeout"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)",
        TR,
        Some("Client.Timeout exceeded"),
    ),
    (
        "ErrImagePull",
        "rpc error: code = DeadlineExceeded desc = failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": context deadline exceeded",
        TR,
        Some("context deadline exceeded"),
    ),
    (
        "ErrImagePull",
        "rpc error: code = Canceled desc = failed to pull and unpack image \"r.example/app:v1\": failed to copy: httpReadSeeker: failed open: failed to do request: Get \"https://r.example/v2/app/blobs/sha256:0123\": context canceled",
        TR,
        Some("context canceled"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": dial tcp: lookup r.example on 10.96.0.10:53: server misbehaving",
        TR,
        Some("server misbehaving"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": read tcp 10.0.0.2:40000->192.0.2.1:443: read: connection reset by peer",
        TR,
        Some("connection reset by peer"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": dial tcp 192.0.2.1:443: connect: no route to host",
        TR,
        Some("no route to host"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": dial tcp 192.0.2.1:443: connect: network is unreachable",
        TR,
        Some("network is unreachable"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example/v2/app/manifests/v1\": remote error: tls: handshake failure",
        TR,
        Some("tls: "),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example:5000/app:v1\": failed to resolve image: failed to do request: Head \"https://r.example:5000/v2/app/manifests/v1\": http: server gave HTTP response to HTTPS client",
        TR,
        Some("server gave HTTP response to HTTPS client"),
    ),
    (
        "ErrImagePull",
        "failed to pull and unpack image \"r.example/app:v1\": failed to copy: httpReadSeeker: failed open: failed to do request: Get \"https://r.example/v2/app/blobs/sha256:0123\": unexpected EOF",
        TR,
        Some("unexpected EOF"),
    ),
    // a blob missing: fetcher.go and resolver.go withErrorCheck, also ": not found"
    (
        "ErrImagePull",
        "rpc error: code = NotFound desc = failed to pull and unpack image \"r.example/app:v1\": failed to copy: httpReadSeeker: failed open: content at https://r.example/v2/app/blobs/sha256:0123 not found: not found",
        None,
        Some("content at "),
    ),
    (
        "ErrImagePull",
        "rpc error: code = NotFound desc = failed to pull and unpack image \"r.example/app:v1\": failed to copy: could not fetch content descriptor sha256:0123 (application/vnd.oci.image.layer.v1.tar+gzip) from remote: not found",
        None,
        Some("could not fetch content"),
    ),
    (
        "ErrImagePull",
        "rpc error: code = NotFound desc = failed to pull and unpack image \"r.example/app:v1\": failed to resolve image: no resolve hosts: not found",
        None,
        Some("no resolve hosts"),
    ),
    // gRPC NotFound that is no registry answer: internal/cri/server/images/image_pull.go
    (
        "ErrImagePull",
        "rpc error: code = NotFound desc = failed to get image \"r.example/app:v1\" from containerd image store: image \"r.example/app:v1\": not found",
        None,
        Some("code = NotFound"),
    ),
    (
        "ErrImagePull",
        "rpc error: code = InvalidArgument desc = failed to pull and unpack image \"r.example/App:v1\": failed to parse image reference \"r.example/App:v1\": invalid reference format: repository name (App) must be lowercase",
        INV,
        Some("invalid reference format"),
    ),
    // nothing known
    (
        "ErrImagePull",
        "rpc error: code = Unimplemented desc = failed to pull and unpack image \"r.example/app:v1\": not implemented: media type \"application/vnd.docker.distribution.manifest.v1+prettyjws\" is no longer supported since containerd v2.0",
        None,
        None,
    ),
    // kubelet < 1.32: the back-off alone
    (
        "ImagePullBackOff",
        "Back-off pulling image \"r.example/app:v1\"",
        None,
        Some(NO_UNDERLYING_MESSAGE),
    ),
    // CRI-O: evalCRIPullErr's two reasons, also as the back-off's stored reason
    (
        "RegistryUnavailable",
        "image pull failed for r.example/app:v1 because the registry is unavailable: pinging container registry r.example: Get \"https://r.example/v2/\": dial tcp 192.0.2.1:443: connect: connection refused",
        TR,
        Some("RegistryUnavailable"),
    ),
    (
        "ImagePullBackOff",
        "Back-off pulling image \"r.example/app:v1\": RegistryUnavailable: image pull failed for r.example/app:v1 because the registry is unavailable",
        TR,
        Some("RegistryUnavailable"),
    ),
    (
        "SignatureValidationFailed",
        "image pull failed for r.example/app:v1 because the signature validation failed: Source image rejected: A signature was required, but no signature exists",
        None,
        Some("SignatureValidationFailed"),
    ),
    (
        "ImageInspectError",
        "Failed to inspect image \"r.example/app:v1\": rpc error: code = Unavailable desc = connection error",
        None,
        Some("ImageInspectError"),
    ),
];

#[test]
fn source_shapes() {
    for &(reason, message, verdict, matched) in FROM_SOURCES {
        let c = classify(reason, message);
        assert_eq!(c.reason, Reason::parse(reason), "{message}");
        assert_eq!(
            (c.verdict, c.matched.phrase()),
            (verdict, matched),
            "{message}"
        );
    }
}

/// The order of [`RULES`] shadows no rule: each is the first match for some message here.
#[test]
fn every_rule_decides_somewhere() {
    let mut messages: Vec<String> = FROM_SOURCES.iter().map(|s| s.1.to_string()).collect();
    for (name, _) in KUBELET_1_35_CONTAINERD_2_2 {
        messages.extend(recording(name).waiting.into_iter().map(|w| w.1));
    }
    for r in RULES {
        assert!(
            messages
                .iter()
                .any(|m| from_message(m).1 == Matched::Phrase(r.phrase)),
            "rule {:?} is never the first match",
            r.phrase
        );
    }
    let mut phrases: Vec<&str> = RULES.iter().map(|r| r.phrase).collect();
    phrases.sort_unstable();
    phrases.dedup();
    assert_eq!(phrases.len(), RULES.len(), "two rules share a phrase");
}

#[test]
fn other_reasons_are_not_pull_failures() {
    for reason in [
        "ContainerCreating",
        "CrashLoopBackOff",
        "PodInitializing",
        "",
        "errimagepull",
    ] {
        let c = classify(reason, "rpc error: code = NotFound desc = x: not found");
        assert_eq!(
            c,
            Classification {
                reason: None,
                verdict: None,
                matched: Matched::Nothing
            },
            "{reason}"
        );
    }
    for r in Reason::ALL {
        assert_eq!(Reason::parse(r.as_str()), Some(r));
    }
}

#[test]
fn back_off_parsing_edges() {
    // An image name is never quoted inside; a message without the kubelet's prefix is
    // classified as it stands.
    assert_eq!(
        classify(
            "ImagePullBackOff",
            "dial tcp 192.0.2.1:443: connect: connection refused"
        )
        .verdict,
        TR
    );
    // The stored reason is a back-off itself only by a bug; classify the text, don't recurse.
    assert_eq!(
        classify(
            "ImagePullBackOff",
            "Back-off pulling image \"a\": ImagePullBackOff: x"
        )
        .verdict,
        None
    );
    assert_eq!(
        unexpected_status("unexpected status from HEAD request to u: 4x4 Odd"),
        None
    );
    assert_eq!(
        unexpected_status("unexpected status from HEAD request to u: 40"),
        None
    );
    assert_eq!(
        unexpected_status("unexpected status from HEAD request to u: 404 Not Found"),
        Some(404)
    );
}

/// docs/watch.md's classification table names every rule.
#[test]
fn docs_list_every_rule() {
    let docs = include_str!("../../../docs/watch.md");
    for r in RULES {
        let cell = format!("`{}`", r.phrase.replace('\n', " "));
        assert!(docs.contains(&cell), "docs/watch.md lacks {cell}");
    }
    for r in Reason::ALL {
        assert!(
            docs.contains(&format!("`{}`", r.as_str())),
            "docs/watch.md lacks {r:?}"
        );
    }
}
