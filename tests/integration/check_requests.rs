//! Every registry request a check makes, counted from the real registry's access log and
//! the harness token server: HEAD first, GET only when needed, never after 404, one ping
//! per endpoint, one token per (registry, repository, credential). Each test uses its own
//! dedicated token-mode registry so the counts are exact.

use crate::support::process::check;
use crate::support::{Mode, Registry, fixture, start_dedicated};

/// `(method, path, status)` of every request since `mark`, sorted (concurrent checks may
/// interleave).
fn requests(reg: &Registry, mark: usize) -> Vec<(String, String, u16)> {
    reg.wait_quiet();
    let mut v: Vec<(String, String, u16)> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| (r.method, r.uri, r.status))
        .collect();
    v.sort();
    v
}

fn req(m: &str, uri: String, status: u16) -> (String, String, u16) {
    (m.to_string(), uri, status)
}

#[test]
fn single_arch_tag_costs_one_request_once_the_token_is_known() {
    let reg = start_dedicated(Mode::Token);
    let img = &fixture().images.oci_manifest;
    let mark = reg.mark();
    // Two references in one repository: the first manifest request goes out without
    // credentials and learns the challenge (401), then one token and one GET each.
    let r = check(&[
        "--platform",
        "linux/amd64",
        &img.reference(&reg),
        &img.digest_reference(&reg),
    ]);
    r.assert_code(0);
    let seen = requests(&reg, mark);
    let by_digest = format!("/v2/oci/app/manifests/{}", img.digest);
    let by_tag = "/v2/oci/app/manifests/v1".to_string();
    let (probes, rest): (Vec<_>, Vec<_>) = seen.into_iter().partition(|r| r.2 == 401);
    assert_eq!(probes.len(), 1, "{probes:?}");
    assert!(
        probes[0].1 == by_digest || probes[0].1 == by_tag,
        "{probes:?}"
    );
    assert_eq!(
        rest,
        vec![req("GET", by_digest, 200), req("GET", by_tag, 200)]
    );
    assert_eq!(
        reg.token_requests(),
        1,
        "one token per (registry, repository, credential)"
    );
}

#[test]
fn head_only_when_the_platform_is_not_checked() {
    let reg = start_dedicated(Mode::Token);
    let img = &fixture().images.multi_index;
    let mark = reg.mark();
    check(&["--platform", "any", &img.reference(&reg)]).assert_code(0);
    assert_eq!(
        requests(&reg, mark),
        vec![
            req("HEAD", "/v2/multi/app/manifests/v1".into(), 200),
            req("HEAD", "/v2/multi/app/manifests/v1".into(), 401),
        ]
    );
}

#[test]
fn index_with_platform_check_costs_get_index_and_head_child() {
    let reg = start_dedicated(Mode::Token);
    let img = &fixture().images.multi_index;
    let mark = reg.mark();
    check(&["--platform", "linux/arm64", &img.reference(&reg)]).assert_code(0);
    assert_eq!(
        requests(&reg, mark),
        vec![
            req("GET", "/v2/multi/app/manifests/v1".into(), 200),
            req("GET", "/v2/multi/app/manifests/v1".into(), 401),
            req(
                "HEAD",
                format!("/v2/multi/app/manifests/{}", img.child_digest("arm64")),
                200
            ),
        ]
    );
    assert_eq!(reg.token_requests(), 1);
}

#[test]
fn a_miss_is_one_head_and_never_a_get_after_404() {
    let reg = start_dedicated(Mode::Token);
    let mark = reg.mark();
    check(&[
        "--platform",
        "any",
        &format!("{}/oci/app:missing", reg.host),
    ])
    .assert_code(11);
    assert_eq!(
        requests(&reg, mark),
        vec![
            req("HEAD", "/v2/oci/app/manifests/missing".into(), 401),
            req("HEAD", "/v2/oci/app/manifests/missing".into(), 404),
        ]
    );
}

#[test]
fn tokens_are_per_repository_and_per_credential() {
    let reg = start_dedicated(Mode::Token);
    let f = fixture();
    let dir = crate::support::temp_dir();
    let alice =
        crate::support::pull_secret(dir.path(), "a.json", &[(&reg.host, "alice", "alice-pw")]);
    let r = check(&[
        "--platform",
        "any",
        "--pull-secrets",
        &alice,
        &f.images.oci_manifest.reference(&reg),
        &f.images.docker_schema2.reference(&reg),
        &f.images.private.reference(&reg),
    ]);
    r.assert_code(0);
    // Three repositories → three tokens, all with alice's credential.
    assert_eq!(reg.token_requests(), 3);
    let users: Vec<Option<String>> = f
        .token_log()
        .into_iter()
        .filter(|t| t.service == reg.service)
        .map(|t| t.user)
        .collect();
    assert_eq!(users, vec![Some("alice".to_string()); 3]);
}
