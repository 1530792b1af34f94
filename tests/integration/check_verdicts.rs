//! `pullcheck check` end to end against the real anonymous registry (Debian's
//! docker-registry, plain HTTP): every verdict the registry content can produce, asserted
//! through the binary's exit code and JSON.

use crate::support::process::{Run, check};
use crate::support::{Registry, fixture};

fn anon() -> &'static Registry {
    &fixture().anon
}

/// `check --insecure-registry <anon> <args…>`.
fn run(args: &[&str]) -> Run {
    let host = anon().host.clone();
    let mut all = vec!["--insecure-registry", host.as_str()];
    all.extend_from_slice(args);
    check(&all)
}

#[test]
fn oci_manifest_is_pullable_with_its_digest() {
    let img = &fixture().images.oci_manifest;
    let r = run(&["--platform", "linux/amd64", &img.reference(anon())]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["exit_code"], 0);
    assert_eq!(o["digest"], img.digest.as_str());
    assert_eq!(
        o["media_type"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(o["platform"]["result"], "single_manifest");
    assert_eq!(o["registry"], anon().host.as_str());
    assert_eq!(o["reference"], img.reference(anon()).as_str());
    assert_eq!(r.json()["schema_version"], 1);
    assert_eq!(r.json()["exit_code"], 0);
}

#[test]
fn docker_schema2_and_deep_path_are_pullable() {
    let f = fixture();
    let r = run(&[
        &f.images.docker_schema2.reference(anon()),
        &f.images.deep.reference(anon()),
    ]);
    r.assert_code(0);
    assert_eq!(
        r.image(0)["digest"],
        f.images.docker_schema2.digest.as_str()
    );
    assert_eq!(
        r.image(0)["media_type"],
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    assert_eq!(r.image(1)["digest"], f.images.deep.digest.as_str());
    assert_eq!(
        r.image(1)["reference"],
        format!("{}/org/sub/project/img:v1", anon().host)
    );
}

#[test]
fn index_with_the_platform_is_pullable_and_names_the_child() {
    let img = &fixture().images.multi_index;
    for (platform, arch, matched) in [
        ("linux/amd64", "amd64", "linux/amd64"),
        ("linux/arm64", "arm64", "linux/arm64/v8"),
    ] {
        let r = run(&["--platform", platform, &img.reference(anon())]);
        r.assert_code(0);
        let o = r.image(0);
        assert_eq!(
            o["digest"],
            img.digest.as_str(),
            "the index digest, never a child's"
        );
        assert_eq!(o["platform"]["result"], "exact");
        assert_eq!(o["platform"]["matched"], matched);
        assert_eq!(o["platform"]["child_digest"], img.child_digest(arch));
    }
}

#[test]
fn docker_manifest_list_is_checked_like_an_index() {
    let img = &fixture().images.docker_list;
    let r = run(&["--platform", "linux/arm64", &img.reference(anon())]);
    r.assert_code(0);
    assert_eq!(
        r.image(0)["media_type"],
        "application/vnd.docker.distribution.manifest.list.v2+json"
    );
    assert_eq!(
        r.image(0)["platform"]["child_digest"],
        img.child_digest("arm64")
    );
}

#[test]
fn index_without_the_platform_is_platform_missing() {
    let img = &fixture().images.arm_only;
    let r = run(&["--platform", "linux/amd64", &img.reference(anon())]);
    r.assert_code(12);
    let o = r.image(0);
    assert_eq!(o["verdict"], "platform_missing");
    assert_eq!(o["platform"]["result"], "missing");
    assert_eq!(
        o["detail"],
        "index has no entry for linux/amd64 (available: linux/arm64)"
    );
}

#[test]
fn platform_any_skips_the_check() {
    let img = &fixture().images.arm_only;
    let r = run(&["--platform", "any", &img.reference(anon())]);
    r.assert_code(0);
    assert_eq!(r.image(0)["platform"]["result"], "not_checked");
    assert_eq!(
        r.image(0)["platform"]["note"],
        "platform not verified: --platform any"
    );
}

#[test]
fn index_whose_child_is_gone_is_not_found_for_that_platform_only() {
    let img = &fixture().images.index_missing_child;
    let r = run(&["--platform", "linux/amd64", &img.reference(anon())]);
    r.assert_code(11);
    let detail = r.image(0)["detail"].as_str().unwrap().to_string();
    assert!(
        detail.starts_with(&format!(
            "index entry for linux/amd64 ({})",
            img.child_digest("amd64")
        )),
        "{detail}"
    );
    run(&["--platform", "linux/arm64", &img.reference(anon())]).assert_code(0);
}

#[test]
fn digest_only_image_resolves_by_digest_and_not_by_tag() {
    let img = &fixture().images.digest_only;
    let by_digest = img.digest_reference(anon());
    let r = run(&[&by_digest]);
    r.assert_code(0);
    assert_eq!(r.image(0)["digest"], img.digest.as_str());
    let r = run(&[&format!("{}/{}:latest", anon().host, img.repo)]);
    r.assert_code(11);
    assert_eq!(r.image(0)["verdict"], "not_found");
}

#[test]
fn missing_tag_and_missing_repository_are_not_found() {
    let host = &anon().host;
    let r = run(&[
        &format!("{host}/oci/app:no-such-tag"),
        &format!("{host}/no/such/repo:v1"),
    ]);
    r.assert_code(11);
    for i in 0..2 {
        assert_eq!(r.image(i)["verdict"], "not_found");
        assert_eq!(r.image(i)["exit_code"], 11);
    }
    // distribution 2.8 answers MANIFEST_UNKNOWN for both (the harness self-test shows it).
    assert!(
        r.image(0)["detail"]
            .as_str()
            .unwrap()
            .starts_with("manifest unknown (")
    );
}

#[test]
fn invalid_reference_is_exit_10_without_any_request() {
    // A dedicated registry: the shared one sees other tests' requests.
    let reg = crate::support::start_dedicated(crate::support::Mode::Anon);
    let mark = reg.mark();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "Busybox",
        &format!("{}/oci/app@sha256:abc", reg.host),
    ]);
    r.assert_code(10);
    assert_eq!(r.image(0)["verdict"], "invalid_reference");
    assert_eq!(
        r.image(0)["detail"],
        "invalid reference \"Busybox\": repository name must be lowercase"
    );
    assert_eq!(r.image(1)["verdict"], "invalid_reference");
    assert_eq!(r.image(0)["reference"], serde_json::Value::Null);
    reg.wait_quiet();
    assert_eq!(reg.requests_since(mark).len(), 0);
}

#[test]
fn several_images_exit_with_the_lowest_permanent_code() {
    let f = fixture();
    let host = &anon().host;
    let r = run(&[
        "--platform",
        "linux/amd64",
        &f.images.oci_manifest.reference(anon()),
        &f.images.arm_only.reference(anon()),
        &format!("{host}/oci/app:missing"),
    ]);
    r.assert_code(11);
    let verdicts: Vec<String> = (0..3)
        .map(|i| r.image(i)["verdict"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(verdicts, ["pullable", "platform_missing", "not_found"]);
    assert_eq!(r.json()["exit_code"], 11);
}

#[test]
/// Results on stdout, diagnostics on stderr, as for every other command.
fn text_output_is_one_line_per_image_on_stdout() {
    let f = fixture();
    let host = anon().host.clone();
    let ca = f.ca_file.to_string_lossy().into_owned();
    let r = crate::support::process::run(
        &[
            "check",
            "--ca-file",
            &ca,
            "--insecure-registry",
            &host,
            &f.images.oci_manifest.reference(anon()),
            &format!("{host}/oci/app:missing"),
        ],
        &[],
    );
    r.assert_code(11);
    assert_eq!(r.stderr, "");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    // The whole digest, the one to pin.
    assert!(
        lines[0].starts_with(&format!(
            "pullable          {host}/oci/app:v1 {} platform ",
            f.images.oci_manifest.digest
        )),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(&format!("not_found         {host}/oci/app:missing ")),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains(": manifest unknown ("), "{}", lines[1]);
}

#[test]
fn json_output_carries_no_text_lines_and_quiet_prints_nothing() {
    let host = anon().host.clone();
    let image = fixture().images.oci_manifest.reference(anon());
    let missing = format!("{host}/oci/app:missing");
    let base = ["check", "--insecure-registry", host.as_str()];
    let with = |extra: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        args.extend([image.as_str(), missing.as_str()]);
        crate::support::process::run(&args, &[])
    };
    let r = with(&["--output", "json"]);
    r.assert_code(11);
    assert_eq!(r.json()["exit_code"], 11);
    assert_eq!(r.stderr, "", "no human lines beside the JSON");
    let r = with(&["--quiet"]);
    r.assert_code(11);
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("", ""));
}

#[test]
fn termination_log_summarises_failures() {
    let dir = crate::support::temp_dir();
    let path = dir.path().join("termination-log");
    let host = anon().host.clone();
    let r = run(&[
        "--termination-log",
        path.to_str().unwrap(),
        &fixture().images.oci_manifest.reference(anon()),
        &format!("{host}/oci/app:gone"),
    ]);
    r.assert_code(11);
    let text = std::fs::read_to_string(&path).unwrap();
    let detail = r.image(1)["detail"].as_str().unwrap().to_string();
    assert_eq!(
        text,
        format!(
            "pullcheck: exit 11: 1 of 2 images not pullable\nnot_found {host}/oci/app:gone: {detail}\n"
        )
    );
}

#[test]
fn nested_index_is_walked_down_to_the_innermost_manifest() {
    let f = fixture();
    let reg = crate::support::start_dedicated(crate::support::Mode::Anon);
    let (outer, inner) = (&f.images.nested, &f.images.nested_inner);
    let leaf = inner.child_digest("amd64");
    let mark = reg.mark();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--platform",
        "linux/amd64",
        &outer.reference(&reg),
    ]);
    r.assert_code(0);
    let o = r.image(0);
    assert_eq!(o["verdict"], "pullable");
    assert_eq!(o["digest"], outer.digest.as_str(), "the tag's digest");
    assert_eq!(o["platform"]["result"], "exact");
    assert_eq!(o["platform"]["matched"], "linux/amd64");
    assert_eq!(o["platform"]["child_digest"], leaf);
    assert_ne!(leaf, inner.digest);
    let lines: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {} {}", r.method, r.uri, r.status))
        .collect();
    assert_eq!(
        lines,
        vec![
            "GET /v2/nested/app/manifests/v1 200".to_string(),
            format!("GET /v2/nested/app/manifests/{} 200", inner.digest),
            format!("HEAD /v2/nested/app/manifests/{leaf} 200"),
        ]
    );
}

#[test]
fn nested_index_without_the_platform_is_platform_missing() {
    let f = fixture();
    let reg = crate::support::start_dedicated(crate::support::Mode::Anon);
    let (outer, inner) = (&f.images.nested_arm, &f.images.nested_arm_inner);
    let mark = reg.mark();
    let r = check(&[
        "--insecure-registry",
        &reg.host,
        "--platform",
        "linux/amd64",
        &outer.reference(&reg),
    ]);
    r.assert_code(12);
    let o = r.image(0);
    assert_eq!(o["verdict"], "platform_missing");
    assert_eq!(o["digest"], outer.digest.as_str());
    assert_eq!(
        o["detail"],
        format!(
            "nested index {} has no entry for linux/amd64 (available: linux/arm64)",
            inner.digest
        )
    );
    let lines: Vec<String> = reg
        .requests_since(mark)
        .into_iter()
        .map(|r| format!("{} {} {}", r.method, r.uri, r.status))
        .collect();
    assert_eq!(
        lines,
        vec![
            "GET /v2/nestedarm/app/manifests/v1 200".to_string(),
            format!("GET /v2/nestedarm/app/manifests/{} 200", inner.digest),
        ]
    );
}

#[test]
fn text_line_says_the_platform_step_in_words() {
    let f = fixture();
    let host = anon().host.clone();
    let text = |platform: &str, image: &str| {
        let r = crate::support::process::run(
            &[
                "check",
                "--insecure-registry",
                &host,
                "--platform",
                platform,
                image,
            ],
            &[],
        );
        r.assert_code(0);
        r
    };
    let single = f.images.oci_manifest.reference(anon());
    let index = f.images.multi_index.reference(anon());
    for (platform, image, words) in [
        (
            "linux/amd64",
            &single,
            " platform linux/amd64 (single-platform image) ",
        ),
        (
            "linux/amd64",
            &index,
            " platform linux/amd64 (exact match in the index) ",
        ),
        (
            "linux/arm64",
            &index,
            " platform linux/arm64 (exact match in the index: linux/arm64/v8) ",
        ),
        ("any", &single, " platform not verified "),
    ] {
        let r = text(platform, image);
        assert!(r.stdout.contains(words), "{platform} {image}: {}", r.stdout);
        assert!(!r.stdout.contains("platform="), "{}", r.stdout);
    }
    let r = text("any", &single);
    assert_eq!(
        r.stderr.trim_end(),
        format!("note: {single}: platform not verified: --platform any")
    );
}

#[test]
fn invalid_references_name_the_character_or_the_digest_length() {
    let short = "busybox@sha256:0123456789ab";
    let long_digest = format!("busybox@sha512:{}", "a".repeat(64));
    let cases = [
        (
            "Busy box",
            "a space at column 5 is not allowed in an image reference",
        ),
        (
            " ",
            "a space at column 1 is not allowed in an image reference",
        ),
        (
            "ghcr.io/org/app:v1\t",
            "'\\t' at column 19 is not allowed in an image reference",
        ),
        (short, "sha256 digest has 12 hex characters; it needs 64"),
        (
            long_digest.as_str(),
            "sha512 digest has 64 hex characters; it needs 128",
        ),
    ];
    let images: Vec<&str> = cases.iter().map(|(i, _)| *i).collect();
    let mut args = vec!["check", "--output", "json"];
    args.extend(&images);
    let r = crate::support::process::run(&args, &[]);
    r.assert_code(10);
    for (i, (image, why)) in cases.iter().enumerate() {
        assert_eq!(
            r.image(i)["detail"],
            format!("invalid reference {image:?}: {why}"),
        );
    }
}
