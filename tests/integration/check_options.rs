//! Options that change how a check runs: proxies from the environment, metered registries
//! (Docker Hub's GET-counts-as-pull rule), deduplication and concurrency.

use crate::support::process::{check, run};
use crate::support::scripted_server::Scripted;
use crate::support::{Mode, fixture, start_dedicated};

#[test]
fn https_proxy_from_the_environment_is_used() {
    // The scripted server plays a proxy that refuses every CONNECT: the request must arrive
    // there, as a CONNECT to the registry.
    let proxy = Scripted::start(|_, _| (502, vec![], String::new()));
    let r = run(
        &[
            "check",
            "--output",
            "json",
            "--timeout",
            "5",
            "127.0.0.1:9/app:v1",
        ],
        &[("HTTPS_PROXY", &format!("http://{}", proxy.host))],
    );
    r.assert_code(20);
    let seen = proxy.requests();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|l| l == "CONNECT 127.0.0.1:9"), "{seen:?}");
}

#[test]
fn metered_registries_never_get_skips_the_platform_check_and_uses_head_only() {
    let reg = start_dedicated(Mode::Anon);
    let img = &fixture().images.arm_only;
    let mark = reg.mark();
    // arm-only index on a registry declared metered, GETs refused: HEAD only, platform not
    // verified.
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--metered-registry",
        &reg.host,
        "--metered-get",
        "never",
        "--platform",
        "linux/amd64",
        &img.reference(&reg),
    ]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["platform"]["result"], "not_checked");
    assert_eq!(
        o["platform"]["note"],
        format!(
            "platform not verified: {} counts every manifest GET as a pull; pass --verify-platform-on-metered to check",
            reg.host
        )
    );
    reg.wait_quiet();
    let methods: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.uri))
        .collect();
    assert_eq!(
        methods,
        vec!["HEAD /v2/armonly/app/manifests/v1".to_string()]
    );
    // Asked for explicitly, the check runs and finds the platform missing.
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--metered-registry",
        &reg.host,
        "--verify-platform-on-metered",
        "--platform",
        "linux/amd64",
        &img.reference(&reg),
    ]);
    r.assert_code(12);
}

#[test]
fn metered_registries_without_quota_headers_get_the_index_after_a_free_head() {
    // A registry that states no limit (Debian's docker-registry sends no ratelimit-*
    // headers) is not limited: after the HEAD, the index is fetched by digest and the
    // platform verified.
    let reg = start_dedicated(Mode::Anon);
    let img = &fixture().images.arm_only;
    let mark = reg.mark();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--metered-registry",
        &reg.host,
        "--platform",
        "linux/amd64",
        &img.reference(&reg),
    ]);
    r.assert_code(12);
    let o = r.image(0);
    assert_eq!(o["platform"]["result"], "missing");
    assert!(o.get("quota").is_none(), "{o}");
    let digest = o["digest"].as_str().unwrap().to_string();
    reg.wait_quiet();
    let methods: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.uri))
        .collect();
    assert_eq!(
        methods,
        vec![
            "HEAD /v2/armonly/app/manifests/v1".to_string(),
            format!("GET /v2/armonly/app/manifests/{digest}"),
        ]
    );
}

#[test]
fn duplicate_images_are_checked_once_and_reported_per_argument() {
    let reg = start_dedicated(Mode::Anon);
    let img = fixture().images.oci_manifest.reference(&reg);
    let mark = reg.mark();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--platform",
        "any",
        &img,
        &img,
        &img,
    ]);
    r.assert_code(0);
    assert_eq!(r.json()["images"].as_array().unwrap().len(), 3);
    reg.wait_quiet();
    assert_eq!(reg.requests_since_matching(mark, "/manifests/").len(), 1);
}

#[test]
fn many_images_with_concurrency_one_still_finish() {
    let f = fixture();
    let host = f.anon.host.clone();
    let imgs: Vec<String> = (0..20)
        .map(|i| format!("{host}/oci/app:missing-{i}"))
        .collect();
    let mut args = vec![
        "--insecure-registry",
        host.as_str(),
        "--concurrency",
        "1",
        "--platform",
        "any",
    ];
    args.extend(imgs.iter().map(String::as_str));
    let r = check(&args);
    r.assert_code(11);
    assert_eq!(r.json()["images"].as_array().unwrap().len(), 20);
}
