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
use crate::support::process::{Run, check};
use crate::support::registry::LoggedRequest;
use crate::support::{Mode, Registry, fixture, relay, start_dedicated};
use crate::webhook::{Webhook, review};

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
        let mut args = vec![
            "--metered-registry",
            self.host(),
            "--platform",
            "linux/amd64",
        ];
        args.extend_from_slice(extra);
        args.push(image);
        check(&args)
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
