//! Metered registries (Docker Hub counts every manifest GET as a pull; HEAD is free):
//! the index is fetched by digest only when the HEAD's quota affords it.
//!
//! The registry is a real one (a dedicated distribution 2.8 holding the harness's single-
//! and multi-platform images); in front of it stands [`DockerHub`], a scripted Docker Hub
//! stand-in that adds `ratelimit-limit` / `ratelimit-remaining` to every answer, in Docker
//! Hub's form (`100;w=21600`), and spends one pull per manifest GET as Docker Hub does.
//! GETs are counted in the real registry's own access log.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use crate::support::hostile_server::{Out, Seen, Server};
use crate::support::process::{Run, check_env};
use crate::support::registry::LoggedRequest;
use crate::support::{Mode, Registry, fixture, relay, start_dedicated};
use crate::webhook::{Webhook, patch_of, review};

/// Docker Hub's anonymous limit: 100 pulls per 6 h.
const LIMIT: u64 = 100;
const WINDOW: u64 = 21_600;

/// A scripted Docker Hub stand-in: a recording relay (support/relay.rs) in front of a real
/// registry that adds Docker Hub's quota headers to every answer (HEAD and GET alike) and
/// takes one pull off the quota per manifest GET. `quota: None` sends no headers (a
/// Pro/Team/Business account: not limited).
struct DockerHub {
    front: Server,
    registry: Registry,
    remaining: Arc<AtomicU64>,
}

impl DockerHub {
    fn start(quota: Option<u64>) -> DockerHub {
        let registry = start_dedicated(Mode::Anon);
        let remaining = Arc::new(AtomicU64::new(quota.unwrap_or(0)));
        let front = {
            let (base, ca) = (registry.url(), fixture().ca_file.clone());
            let remaining = remaining.clone();
            Server::start(relay::loopback_tls(), move |seen: &Seen, out: &mut Out| {
                let mut resp = relay::forward(&base, &ca, seen)?;
                if quota.is_some() {
                    let left = if seen.method == "GET" && seen.path().contains("/manifests/") {
                        remaining
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| {
                                Some(r.saturating_sub(1))
                            })
                            .unwrap()
                            .saturating_sub(1)
                    } else {
                        remaining.load(Ordering::SeqCst)
                    };
                    resp.headers
                        .push(("ratelimit-limit".into(), format!("{LIMIT};w={WINDOW}")));
                    resp.headers
                        .push(("ratelimit-remaining".into(), format!("{left};w={WINDOW}")));
                }
                relay::pass_back(out, &resp)
            })
        };
        DockerHub {
            front,
            registry,
            remaining,
        }
    }

    /// `127.0.0.1:PORT`, the stand-in's address (what the checks are pointed at).
    fn host(&self) -> &str {
        &self.front.host
    }

    /// `host/repo:tag` of a seeded image, through the stand-in.
    fn image(&self, repo: &str) -> String {
        format!("{}/{repo}:v1", self.host())
    }

    /// `pullcheck check` of `image` for linux/amd64 with the stand-in declared metered.
    fn check(&self, extra: &[&str], image: &str) -> Run {
        self.check_with_env(extra, image, &[])
    }

    /// [`DockerHub::check`] with these environment variables.
    fn check_with_env(&self, extra: &[&str], image: &str, env: &[(&str, &str)]) -> Run {
        let mut args = vec![
            "--metered-registry",
            self.host(),
            "--platform",
            "linux/amd64",
        ];
        args.extend_from_slice(extra);
        args.push(image);
        check_env(&args, env)
    }

    /// The requests the real registry logged since `mark`, as `METHOD URI`.
    fn requests_since(&self, mark: usize) -> Vec<String> {
        self.registry
            .requests_since(mark)
            .into_iter()
            .map(|r: LoggedRequest| format!("{} {}", r.method, r.uri))
            .collect()
    }

    fn gets_since(&self, mark: usize) -> usize {
        self.requests_since(mark)
            .iter()
            .filter(|r| r.starts_with("GET ") && r.contains("/manifests/"))
            .count()
    }
}

/// The JSON `quota` of an answer stating `remaining` pulls left.
fn quota(remaining: u64) -> serde_json::Value {
    json!({"limit": LIMIT, "remaining": remaining, "window_seconds": WINDOW})
}

#[test]
fn quota_plenty_gets_the_index_and_verifies_the_platform() {
    let hub = DockerHub::start(Some(76));
    let f = fixture();
    for (img, code, result) in [
        (&f.images.multi_index, 0, "exact"),
        (&f.images.arm_only, 12, "missing"),
    ] {
        let mark = hub.registry.mark();
        let r = hub.check(&[], &hub.image(img.repo));
        r.assert_code(code);
        let o = r.image(0);
        assert_eq!(o["platform"]["result"], result, "{o}");
        assert_eq!(o["quota"], quota(hub.remaining.load(Ordering::SeqCst) + 1));
        let requests = hub.requests_since(mark);
        let manifests: Vec<&String> = requests
            .iter()
            .filter(|r| r.contains(&format!("/v2/{}/manifests/", img.repo)))
            .collect();
        assert_eq!(manifests[0], &format!("HEAD /v2/{}/manifests/v1", img.repo));
        assert_eq!(
            manifests[1],
            &format!("GET /v2/{}/manifests/{}", img.repo, img.digest)
        );
        assert_eq!(hub.gets_since(mark), 1, "{requests:?}");
    }
    // Each check spent exactly one pull: the index GET.
    assert_eq!(hub.remaining.load(Ordering::SeqCst), 74);
}

#[test]
fn quota_low_skips_the_get_and_says_why() {
    let hub = DockerHub::start(Some(10));
    let mark = hub.registry.mark();
    // arm-only index, amd64 node: would be a platform miss, but the margin (10) is not
    // exceeded, so nothing is spent and the check passes, saying the platform is unknown.
    let r = hub.check(&[], &hub.image("armonly/app"));
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable", "{o}");
    assert_eq!(o["platform"]["result"], "not_checked");
    assert_eq!(
        o["platform"]["note"],
        format!(
            "platform not verified: {} states 10 of 100 pulls left per 6 h, not more than the margin of 10 (--metered-quota-margin); pass --verify-platform-on-metered to check anyway",
            hub.host()
        )
    );
    assert_eq!(o["quota"], quota(10));
    assert_eq!(
        hub.requests_since(mark),
        vec!["HEAD /v2/armonly/app/manifests/v1".to_string()]
    );
    assert_eq!(hub.remaining.load(Ordering::SeqCst), 10);

    // One pull above the margin is enough; a lower margin likewise.
    hub.remaining.store(11, Ordering::SeqCst);
    let mark = hub.registry.mark();
    hub.check(&[], &hub.image("armonly/app")).assert_code(12);
    assert_eq!(hub.gets_since(mark), 1);
    let mark = hub.registry.mark();
    hub.check(&["--metered-quota-margin", "3"], &hub.image("armonly/app"))
        .assert_code(12);
    assert_eq!(hub.gets_since(mark), 1);
    assert_eq!(hub.remaining.load(Ordering::SeqCst), 9);
}

#[test]
fn no_quota_headers_means_not_limited_and_the_index_is_fetched() {
    let hub = DockerHub::start(None);
    let mark = hub.registry.mark();
    let r = hub.check(&[], &hub.image("armonly/app"));
    r.assert_code(12);
    let o = r.image(0);
    assert_eq!(o["platform"]["result"], "missing");
    assert!(o.get("quota").is_none(), "{o}");
    assert_eq!(hub.gets_since(mark), 1);
}

#[test]
fn a_single_platform_manifest_needs_no_get_even_with_quota_to_spare() {
    // HEAD's Content-Type already says it is not an index: containerd does not filter a
    // single manifest by platform, so there is nothing to fetch.
    let hub = DockerHub::start(Some(99));
    for repo in ["oci/app", "docker/app"] {
        let mark = hub.registry.mark();
        let r = hub.check(&[], &hub.image(repo));
        r.assert_code(0);
        let o = r.image(0);
        assert_eq!(o["platform"]["result"], "single_manifest", "{o}");
        assert_eq!(o["quota"], quota(99));
        assert_eq!(
            hub.requests_since(mark),
            vec![format!("HEAD /v2/{repo}/manifests/v1")]
        );
    }
    assert_eq!(hub.remaining.load(Ordering::SeqCst), 99);
}

#[test]
fn metered_get_never_and_always_override_the_quota() {
    let hub = DockerHub::start(Some(90));
    let mark = hub.registry.mark();
    let r = hub.check(&["--metered-get", "never"], &hub.image("armonly/app"));
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["platform"]["result"], "not_checked");
    assert_eq!(
        o["platform"]["note"],
        format!(
            "platform not verified: {} counts every manifest GET as a pull; pass --verify-platform-on-metered to check",
            hub.host()
        )
    );
    assert_eq!(hub.gets_since(mark), 0);

    hub.remaining.store(0, Ordering::SeqCst);
    for always in [
        &["--metered-get", "always"][..],
        &["--verify-platform-on-metered"],
    ] {
        let mark = hub.registry.mark();
        let r = hub.check(always, &hub.image("armonly/app"));
        r.assert_code(12);
        assert_eq!(r.image(0)["platform"]["result"], "missing");
        assert_eq!(hub.gets_since(mark), 1, "{always:?}");
    }
}

#[test]
fn the_webhook_gets_each_index_digest_once_and_exports_the_quota() {
    let hub = DockerHub::start(Some(50));
    // Verdicts expire at once, so the second admission asks the registry again: its HEAD
    // (free) finds the same index digest, whose body the webhook already holds.
    let wh = Webhook::start(&[
        "--metered-registry",
        hub.host(),
        "--cache-positive-ttl",
        "0.001",
    ]);
    let rev = review("job-create.json", hub.host());
    let mark = hub.registry.mark();
    for _ in 0..2 {
        let resp = wh.validate(&rev);
        assert_eq!(resp["allowed"], true, "{resp}\n{}", wh.log());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let requests = hub.requests_since(mark);
    let multi = &fixture().images.multi_index;
    let heads = |repo: &str| {
        requests
            .iter()
            .filter(|r| **r == format!("HEAD /v2/{repo}/manifests/v1"))
            .count()
    };
    assert_eq!(heads("multi/app"), 2, "{requests:?}");
    assert_eq!(heads("oci/app"), 2, "{requests:?}");
    let gets: Vec<&String> = requests
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/manifests/"))
        .collect();
    assert_eq!(
        gets,
        vec![&format!("GET /v2/multi/app/manifests/{}", multi.digest)],
        "{requests:?}"
    );
    // 50 stated before the one GET, 49 after it.
    assert_eq!(hub.remaining.load(Ordering::SeqCst), 49);
    let m = wh.metrics();
    let line = format!(
        "pullcheck_registry_quota_remaining{{registry=\"{}\"}} 49",
        hub.host()
    );
    assert!(m.lines().any(|l| l == line), "{line} missing from\n{m}");
}

/// The init container's `--index-bodies` file from a `/mutate` answer: the template's
/// `pullcheck.io/index-bodies` annotation, written to `dir`. Also checks the injected
/// container reads it from the downward-API volume.
fn handed_over(
    wh: &Webhook,
    rev: &serde_json::Value,
    dir: &std::path::Path,
) -> (serde_json::Value, std::path::PathBuf) {
    let resp = wh.mutate(rev);
    let patch = patch_of(&resp).expect("a patch");
    let mut obj = rev["request"]["object"].clone();
    json_patch::patch(&mut obj, &patch).unwrap();
    let t = &obj["spec"]["template"];
    let c = &t["spec"]["initContainers"][0];
    // The file is named by an environment variable, which an older checker ignores; the
    // webhook's registry settings (its --ca-file, the insecure stand-in) come beside it.
    assert_eq!(
        c["env"],
        json!([
            {"name": "PULLCHECK_INDEX_BODIES", "value": "/var/run/pullcheck/index-bodies/bodies.json"},
            {"name": "PULLCHECK_REGISTRY_CONFIG", "value": "/var/run/pullcheck/registry-config/config.json"},
        ]),
        "{c}"
    );
    let volume = t["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "pullcheck-index-bodies")
        .unwrap_or_else(|| panic!("no index-bodies volume: {t}"));
    assert_eq!(
        volume["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"],
        "metadata.annotations['pullcheck.io/index-bodies']"
    );
    let text = t["metadata"]["annotations"]["pullcheck.io/index-bodies"]
        .as_str()
        .unwrap_or_else(|| panic!("no annotation: {t}"))
        .to_string();
    let file = dir.join("bodies.json");
    std::fs::write(&file, &text).unwrap();
    (serde_json::from_str(&text).unwrap(), file)
}

/// The webhook records the index bodies it read on a metered registry in the template it
/// injects; the node's check, given that file, verifies the platform with HEADs alone, even
/// with the quota too low for a GET, and finds a missing platform the same way.
#[test]
fn the_webhook_hands_its_index_bodies_to_the_node_which_then_needs_only_heads() {
    use sha2::Digest as _;
    let hub = DockerHub::start(Some(50));
    let wh = Webhook::start(&["--metered-registry", hub.host()]);
    let dir = tempfile::tempdir().unwrap();
    let f = fixture();
    // (image, its indexes the webhook reads, exit code, platform result)
    for (img, indexes, code, result) in [
        (
            &f.images.multi_index,
            vec![&f.images.multi_index],
            0,
            "exact",
        ),
        (&f.images.arm_only, vec![&f.images.arm_only], 12, "missing"),
        // Its linux/amd64 entry is an index itself: both bodies are handed over.
        (
            &f.images.nested,
            vec![&f.images.nested, &f.images.nested_inner],
            0,
            "exact",
        ),
    ] {
        hub.remaining.store(50, Ordering::SeqCst);
        // The captured review's multi-platform image, replaced by the one under test.
        let rev: serde_json::Value = serde_json::from_str(
            &review("job-create.json", hub.host())
                .to_string()
                .replace("/multi/app:v1", &format!("/{}:v1", img.repo)),
        )
        .unwrap();
        let mark = hub.registry.mark();
        let (bodies, file) = handed_over(&wh, &rev, dir.path());
        // One GET per index, paid by the webhook (the cluster's platforms include arm64).
        assert_eq!(
            hub.gets_since(mark),
            indexes.len(),
            "{:?}",
            hub.requests_since(mark)
        );
        let map = bodies.as_object().unwrap();
        let digests: Vec<&String> = indexes.iter().map(|i| &i.digest).collect();
        assert_eq!(map.keys().collect::<Vec<_>>(), digests, "{bodies}");
        for (digest, body) in map {
            let sum = format!(
                "sha256:{:x}",
                sha2::Sha256::digest(body.as_str().unwrap().as_bytes())
            );
            assert_eq!(&sum, digest);
        }

        // On the node: 5 pulls left, below the margin of 10; no GET, the platform decided.
        hub.remaining.store(5, Ordering::SeqCst);
        let mark = hub.registry.mark();
        // Named the way the injected container names it: PULLCHECK_INDEX_BODIES.
        let r = hub.check_with_env(
            &[],
            &hub.image(img.repo),
            &[("PULLCHECK_INDEX_BODIES", file.to_str().unwrap())],
        );
        r.assert_code(code);
        assert_eq!(r.image(0)["platform"]["result"], result, "{}", r.stdout);
        assert_eq!(r.stderr, "", "{}", r.stderr);
        let requests = hub.requests_since(mark);
        assert_eq!(hub.gets_since(mark), 0, "{requests:?}");
        assert_eq!(requests[0], format!("HEAD /v2/{}/manifests/v1", img.repo));
        if code == 0 {
            // The chosen child exists: HEAD by digest, free too.
            let child = r.image(0)["platform"]["child_digest"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(
                requests[1..],
                [format!("HEAD /v2/{}/manifests/{child}", img.repo)]
            );
        }
        assert_eq!(hub.remaining.load(Ordering::SeqCst), 5);
    }
}

/// A body that doesn't hash to its digest is refused with one warning, a body for another
/// digest (a moved tag) is never looked up, and an empty file (no annotation) is nothing:
/// each time the check runs as without the file.
#[test]
fn index_bodies_that_do_not_match_are_not_used() {
    let hub = DockerHub::start(Some(5));
    let f = fixture();
    let multi = &f.images.multi_index;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bodies.json");
    let image = hub.image(multi.repo);
    let not_verified = |r: &Run| {
        r.assert_code(0);
        assert_eq!(
            r.image(0)["platform"]["result"],
            "not_checked",
            "{}",
            r.stdout
        );
    };
    // What stderr says after any warning: the quota is too low for the GET.
    let note = format!(
        "note: {image}: platform not verified: {} states 5 of 100 pulls left per 6 h, not more than the margin of 10 (--metered-quota-margin); pass --verify-platform-on-metered to check anyway\n",
        hub.host()
    );

    let forged = json!({&multi.digest: r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#});
    std::fs::write(&file, forged.to_string()).unwrap();
    let mark = hub.registry.mark();
    let r = hub.check(&["--index-bodies", file.to_str().unwrap()], &image);
    not_verified(&r);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: warning: --index-bodies {}: the body for {} does not hash to that digest: not used\n{note}",
            file.display(),
            multi.digest
        )
    );
    assert_eq!(hub.gets_since(mark), 0);

    // The arm-only index's true body, under its own digest: valid, but not this tag's.
    let wh = Webhook::start(&["--metered-registry", hub.host()]);
    hub.remaining.store(50, Ordering::SeqCst);
    let rev: serde_json::Value = serde_json::from_str(
        &review("job-create.json", hub.host())
            .to_string()
            .replace("/multi/app:v1", "/armonly/app:v1"),
    )
    .unwrap();
    let (_, other) = handed_over(&wh, &rev, dir.path());
    hub.remaining.store(5, Ordering::SeqCst);
    let mark = hub.registry.mark();
    let r = hub.check(&["--index-bodies", other.to_str().unwrap()], &image);
    not_verified(&r);
    assert_eq!(r.stderr, note);
    assert_eq!(hub.gets_since(mark), 0);

    for (text, warning) in [
        ("", String::new()),
        (
            "[]",
            format!(
                "pullcheck: warning: --index-bodies {}: not a JSON object of digest to index body (another JSON value); checking without it\n",
                file.display()
            ),
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let r = hub.check(&["--index-bodies", file.to_str().unwrap()], &image);
        not_verified(&r);
        assert_eq!(r.stderr, format!("{warning}{note}"));
    }
    let missing = dir.path().join("absent.json");
    let r = hub.check(&["--index-bodies", missing.to_str().unwrap()], &image);
    not_verified(&r);
    assert_eq!(
        r.stderr,
        format!(
            "pullcheck: warning: --index-bodies {}: No such file or directory (os error 2); checking without it\n{note}",
            missing.display()
        )
    );
}

/// A nested index whose body the file lacks is not fetched on a quota below the margin (the
/// top index's rule holds one level down too): platform not verified, no GET.
#[test]
fn a_nested_index_is_fetched_only_when_affordable() {
    let hub = DockerHub::start(Some(50));
    let f = fixture();
    let (top, inner) = (&f.images.nested, &f.images.nested_inner);
    let wh = Webhook::start(&["--metered-registry", hub.host()]);
    let dir = tempfile::tempdir().unwrap();
    let rev: serde_json::Value = serde_json::from_str(
        &review("job-create.json", hub.host())
            .to_string()
            .replace("/multi/app:v1", &format!("/{}:v1", top.repo)),
    )
    .unwrap();
    let (bodies, file) = handed_over(&wh, &rev, dir.path());
    let only_top = json!({&top.digest: bodies[&top.digest]});
    std::fs::write(&file, only_top.to_string()).unwrap();
    hub.remaining.store(5, Ordering::SeqCst);
    let mark = hub.registry.mark();
    let r = hub.check(
        &["--index-bodies", file.to_str().unwrap()],
        &hub.image(top.repo),
    );
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["platform"]["result"], "not_checked", "{o}");
    assert_eq!(
        o["platform"]["note"],
        format!(
            "platform not verified: {} states 5 of 100 pulls left per 6 h, not more than the margin of 10 (--metered-quota-margin); pass --verify-platform-on-metered to check anyway",
            hub.host()
        )
    );
    assert_eq!(hub.gets_since(mark), 0, "{:?}", hub.requests_since(mark));
    // With pulls to spare the inner index is fetched, once, and the platform decided.
    hub.remaining.store(50, Ordering::SeqCst);
    let mark = hub.registry.mark();
    let r = hub.check(
        &["--index-bodies", file.to_str().unwrap()],
        &hub.image(top.repo),
    );
    r.assert_code(0);
    assert_eq!(r.image(0)["platform"]["result"], "exact");
    let gets: Vec<String> = hub
        .requests_since(mark)
        .into_iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/manifests/"))
        .collect();
    assert_eq!(
        gets,
        [format!("GET /v2/{}/manifests/{}", top.repo, inner.digest)]
    );
}

/// Many refused entries make one line per kind, and a FIFO is refused rather than read (it
/// would block past every deadline).
#[test]
fn refused_index_bodies_are_summed_up_and_a_fifo_is_not_read() {
    let hub = DockerHub::start(Some(5));
    let image = hub.image(fixture().images.multi_index.repo);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bodies.json");
    let d = |c: char| format!("sha256:{}", c.to_string().repeat(64));
    let text = json!({d('a'): "{}", d('b'): "{}", d('c'): "{}", "SHA256:ABC": "{}"});
    std::fs::write(&file, text.to_string()).unwrap();
    let r = hub.check(&["--index-bodies", file.to_str().unwrap()], &image);
    r.assert_code(0);
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(
        warnings,
        [
            format!(
                "pullcheck: warning: --index-bodies {}: SHA256:ABC is not a digest: not used",
                file.display()
            ),
            format!(
                "pullcheck: warning: --index-bodies {}: 3 bodies do not hash to their digests (the first: {}): not used",
                file.display(),
                d('a')
            ),
        ]
    );
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let r = hub.check(&["--index-bodies", fifo.to_str().unwrap()], &image);
    r.assert_code(0);
    assert!(
        r.stderr.starts_with(&format!(
            "pullcheck: warning: --index-bodies {}: a named pipe (FIFO), not a regular file; checking without it\n",
            fifo.display()
        )),
        "{}",
        r.stderr
    );
}
